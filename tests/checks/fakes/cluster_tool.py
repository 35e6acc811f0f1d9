#!/usr/bin/env python3
"""Stand-in ``scontrol`` and ``kubectl`` for offline tests of the health tier (test equipment).

Called by the name of its link (``scontrol`` or ``kubectl``, on PATH in the test). Every call's
argv is appended to ``$FAKE_CLUSTER_DIR/argv.log`` (one JSON list per line). State:
``slurm.json`` ({name, state, reason}) and ``node.json`` (a Kubernetes Node object, the fields the
Node API reference documents; hand-made, not a capture). ``$FAKE_CLUSTER_FAIL=1`` makes every
call but ``show``/``get`` fail as the real tools do (exit 1, a message on stderr).

``scontrol show node N`` prints the layout of Debian 12's slurm-client 22.05.8
(tests/fixtures/slurm/); ``scontrol update nodename=N state=drain reason=R`` / ``state=resume``
change it. ``kubectl get node N -o json``, ``kubectl taint node N key=value:effect
[--overwrite]`` / ``key:effect-`` and ``kubectl patch node N --subresource=status
--type=strategic -p PATCH`` (conditions merged by type, ``$patch: delete``) act on node.json.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

DIR = Path(os.environ["FAKE_CLUSTER_DIR"])


def _load(name: str, default: dict) -> dict:  # type: ignore[type-arg]
    path = DIR / name
    return json.loads(path.read_text()) if path.exists() else default


def _save(name: str, data: dict) -> None:  # type: ignore[type-arg]
    (DIR / name).write_text(json.dumps(data, indent=1))


def scontrol(args: list[str]) -> int:
    node = _load("slurm.json", {"name": "h1", "state": "IDLE", "reason": None})
    if args[:2] == ["show", "node"]:
        lines = [
            f"NodeName={node['name']} Arch=x86_64 CoresPerSocket=1 ",
            "   CPUAlloc=0 CPUEfctv=1 CPUTot=1 CPULoad=0.10",
            f"   State={node['state']} ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A",
            "   Partitions=all ",
        ]
        if node["reason"]:
            lines.append(f"   Reason={node['reason']} [root@2026-11-26T17:21:22]")
        print("\n".join(lines) + "\n")
        return 0
    if os.environ.get("FAKE_CLUSTER_FAIL"):
        print("slurm_update error: Invalid user id", file=sys.stderr)
        return 1
    fields = dict(a.split("=", 1) for a in args[1:])
    if fields.get("state") == "drain":
        node.update(state="IDLE+DRAIN", reason=fields["reason"])
    elif fields.get("state") == "resume":
        node.update(state="IDLE", reason=None)
    _save("slurm.json", node)
    return 0


def _node() -> dict:  # type: ignore[type-arg]
    return _load(
        "node.json",
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "h1", "labels": {}},
            "spec": {"podCIDR": "10.244.1.0/24"},
            "status": {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "kubelet is posting ready status",
                        "lastHeartbeatTime": "2026-11-26T17:00:00Z",
                        "lastTransitionTime": "2026-11-26T09:00:00Z",
                    }
                ]
            },
        },
    )


def kubectl(args: list[str]) -> int:
    node = _node()
    if args[:2] == ["get", "node"]:
        print(json.dumps(node, indent=4))
        return 0
    if os.environ.get("FAKE_CLUSTER_FAIL"):
        print('Error from server (Forbidden): nodes "h1" is forbidden', file=sys.stderr)
        return 1
    if args[:2] == ["taint", "node"]:
        spec = args[3]
        taints = node["spec"].setdefault("taints", [])
        if spec.endswith("-"):
            key, effect = spec[:-1].split(":")
            kept = [t for t in taints if (t["key"], t["effect"]) != (key, effect)]
            if len(kept) == len(taints):
                print(f'error: taint "{spec[:-1]}" not found', file=sys.stderr)
                return 1
            node["spec"]["taints"] = kept
        else:
            pair, effect = spec.rsplit(":", 1)
            key, value = pair.split("=", 1)
            if any(t["key"] == key for t in taints) and "--overwrite" not in args:
                print(
                    f"error: node {args[2]} already has {key} taint(s) with same effect(s) "
                    "and --overwrite is false",
                    file=sys.stderr,
                )
                return 1
            taints[:] = [t for t in taints if t["key"] != key]
            taints.append({"key": key, "value": value, "effect": effect})
    elif args[:2] == ["patch", "node"] and "--subresource=status" in args:
        patch = json.loads(args[args.index("-p") + 1])
        conditions = node["status"]["conditions"]
        for change in patch["status"]["conditions"]:
            conditions[:] = [c for c in conditions if c["type"] != change["type"]]
            if change.get("$patch") != "delete":
                conditions.append(change)
    else:
        print(f"fake kubectl: unexpected {args}", file=sys.stderr)
        return 1
    _save("node.json", node)
    return 0


def main() -> int:
    name = Path(sys.argv[0]).name
    with open(DIR / "argv.log", "a") as log:
        log.write(json.dumps([name, *sys.argv[1:]]) + "\n")
    return scontrol(sys.argv[1:]) if name == "scontrol" else kubectl(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
