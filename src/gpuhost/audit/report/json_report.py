"""The JSON report, schema 1 (docs/audit-report.md):
``{"schema": 1, "hosts": [{"name", "reachable", "facts", "findings", "verdict"}], "summary"}``."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from gpuhost.audit.host import HostReport
from gpuhost.audit.summary import summarize

SCHEMA = 1


def build_report(
    hosts: Iterable[HostReport], extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    entries = sorted((h.to_dict() for h in hosts), key=lambda h: str(h["name"]))
    return report_from_entries(entries, extra)


def report_from_entries(
    entries: list[dict[str, Any]], extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    return {"schema": SCHEMA, "hosts": entries, "summary": summarize(entries, extra)}


def dumps(report: Mapping[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=False) + "\n"
