#!/usr/bin/env python3
"""TEST EQUIPMENT: a stand-in for Slurm's ``scontrol`` with one node, for the acceptance gate's
offline tests. ``show node NAME`` prints the real drained capture
(tests/fixtures/slurm/scontrol-show-node-drained.txt) with the node's name, state and reason from
``$FAKE_SCONTROL_STATE`` (JSON: {"name", "state", "reason"}); ``update nodename=NAME
state=drain|resume [reason=...]`` changes them. Every call goes to ``$FAKE_SCONTROL_STATE.log``."""

import json
import os
import re
import sys
from pathlib import Path

CAPTURE = Path(__file__).resolve().parents[1] / "fixtures/slurm/scontrol-show-node-drained.txt"


def main() -> int:
    state_file = Path(os.environ["FAKE_SCONTROL_STATE"])
    with open(f"{state_file}.log", "a") as log:
        log.write(" ".join(sys.argv[1:]) + "\n")
    node = json.loads(state_file.read_text())
    args = sys.argv[1:]
    if args[:2] == ["show", "node"]:
        text = CAPTURE.read_text().replace("NodeName=h1", f"NodeName={node['name']}")
        text = re.sub(r"State=\S+", f"State={node['state']}", text)
        text = re.sub(r"Reason=.*", f"Reason={node['reason']} [root@2026-11-28T20:00:00]", text)
        sys.stdout.write(text)
        return 0
    if args[:1] == ["update"]:
        fields = dict(a.split("=", 1) for a in args[1:])
        node["state"] = "IDLE+DRAIN" if fields["state"] == "drain" else "IDLE"
        node["reason"] = fields.get("reason", "") if fields["state"] == "drain" else ""
        state_file.write_text(json.dumps(node))
        return 0
    print(f"fake scontrol: unsupported {args}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
