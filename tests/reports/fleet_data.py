"""Audit reports of any size built from real probe outputs captured on lab hosts.

The three captures in tests/audit/data are audited by the real rules; a fleet of N hosts reuses
their host entries under fleet-like names (dots included) with a few stacks varied the way
fleets drift (another driver on a few hosts, another kernel), then the real summary code groups
stacks and finds outliers. Some hosts are unreachable.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from gpuhost.audit.host import AuditSettings, audit_host, unreachable_host
from gpuhost.audit.report import json_report
from gpuhost.facts.build import host_facts_from_text
from gpuhost.matrix import load_matrix, load_profiles

DATA = Path(__file__).resolve().parents[1] / "audit" / "data"


@cache
def _entries() -> tuple[dict[str, Any], ...]:
    settings = AuditSettings(matrix=load_matrix(), profiles=load_profiles(None))
    entries = []
    for path in sorted(DATA.glob("*.probe")):
        facts = host_facts_from_text(path.read_text(encoding="utf-8"))
        entries.append(audit_host(path.stem, facts, {}, settings).to_dict())
    return tuple(entries)


def host_name(index: int) -> str:
    return f"gpu-{index:04d}.rack{index % 40:02d}.dc1.example.org"


def fleet_report(hosts: int, unreachable_every: int = 97) -> dict[str, Any]:
    """A schema-1 report of ``hosts`` hosts."""
    base = _entries()
    entries = []
    for index in range(hosts):
        name = host_name(index)
        if hosts > 1 and index % unreachable_every == unreachable_every - 1:
            entries.append(unreachable_host(name, "connect timed out after 10s").to_dict())
            continue
        # Most hosts share the second capture's stack (driver held, module not loaded).
        pick = 1 if index % 10 else index // 10 % len(base)
        # Shared parts stay shared (the report is only read): copy what changes.
        facts = dict(base[pick]["facts"], hostname=name.split(".")[0])
        if index % 50 == 7:  # a few hosts boot another kernel
            facts["kernel"] = dict(facts["kernel"], running="6.1.0-58-amd64")
        entries.append(dict(base[pick], name=name, facts=facts))
    entries.sort(key=lambda e: e["name"])
    return json_report.report_from_entries(
        entries, {"inventory": "inventories/fleet.py"}, load_matrix().updated
    )
