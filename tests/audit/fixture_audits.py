"""The audit of every fixture host, as JSON: a record to compare before and after a data change.

A *fixture host* is the clean Debian probe (tests/audit/probe_text.py) with one real capture of
``nvidia-smi`` (tests/fixtures/captures: the XML, ``-q`` text and table captures, and the health
tier's) in its nvidia-smi section, or one of the lab's recorded probes (tests/audit/data/*.probe).

    .venv/bin/python tests/audit/fixture_audits.py record before.json
    .venv/bin/python tests/audit/fixture_audits.py compare before.json after.json

``compare`` prints each host whose findings or facts changed, the findings added and removed, and
exits 1 when any did (a change is then for a reviewer to judge: a GPU that became known, or not).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from probe_text import CAPTURES, host_with  # noqa: E402

FIXTURES = HERE.parents[0] / "fixtures"
SMI_FOLDERS = ("nvidia-smi-xml", "nvidia-smi-q-text", "nvidia-smi-table")
PROC_DRIVER = (
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.309.01  Thu Jan  1 00:00:00 UTC 2026\n"
)


def fixture_hosts() -> dict[str, str]:
    """Fixture host name -> its probe output."""
    hosts: dict[str, str] = {}
    smi_files = [p for folder in SMI_FOLDERS for p in sorted((CAPTURES / folder).glob("*"))]
    smi_files += sorted((FIXTURES / "health").glob("*.xml"))
    for path in smi_files:
        if path.suffix in (".md", ".json"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        hosts[f"{path.parent.name}/{path.name}"] = host_with(
            nvidia_smi=text, proc_driver=PROC_DRIVER
        )
    for path in sorted((HERE / "data").glob("*.probe")):
        hosts[f"probe/{path.name}"] = path.read_text(encoding="utf-8")
    return hosts


def audits() -> dict[str, Any]:
    from gpuhost.audit.host import AuditSettings, audit_host
    from gpuhost.facts.build import host_facts_from_text
    from gpuhost.matrix import load_matrix

    settings = AuditSettings(matrix=load_matrix(), profiles={})
    return {
        name: audit_host(name, host_facts_from_text(text), {}, settings).to_dict()
        for name, text in fixture_hosts().items()
    }


def _findings(entry: dict[str, Any]) -> set[str]:
    return {f"{f['rule']} [{f['severity']}] {f['message']}" for f in entry.get("findings", [])}


def _without_new_keys(old: Any, new: Any) -> Any:
    """``new`` without the mapping keys ``old`` does not have (fields a change added)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return {k: _without_new_keys(old[k], v) for k, v in new.items() if k in old}
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [_without_new_keys(o, n) for o, n in zip(old, new, strict=True)]
    return new


def compare(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """One line per host whose audit changed (a fact field the change added, on its own, is
    counted in the last line instead)."""
    lines: list[str] = []
    added_fields = 0
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name), after.get(name)
        if old is not None and new is not None and old != new:
            if _without_new_keys(old, new) == old:
                added_fields += 1
                continue
            new = {**new, "facts": _without_new_keys(old.get("facts"), new.get("facts"))}
        if old == new:
            continue
        if old is None or new is None:
            lines.append(f"{name}: {'added' if old is None else 'removed'}")
            continue
        lines.append(f"{name}: changed")
        for finding in sorted(_findings(old) - _findings(new)):
            lines.append(f"  - {finding}")
        for finding in sorted(_findings(new) - _findings(old)):
            lines.append(f"  + {finding}")
        if old.get("facts") != new.get("facts"):
            lines.append("  facts differ")
        if old.get("verdict") != new.get("verdict"):
            lines.append(f"  verdict {old.get('verdict')} -> {new.get('verdict')}")
    if added_fields:
        lines.append(f"{added_fields} more hosts differ only by fact fields the change added")
    return lines


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "record":
        Path(argv[1]).write_text(json.dumps(audits(), indent=1, sort_keys=True) + "\n")
        return 0
    if len(argv) == 3 and argv[0] == "compare":
        before, after = (json.loads(Path(p).read_text()) for p in argv[1:])
        lines = compare(before, after)
        print("\n".join(lines) or f"{len(before)} fixture hosts: no audit changed")
        return 1 if lines else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
