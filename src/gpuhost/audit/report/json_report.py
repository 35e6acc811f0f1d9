"""The JSON report, schema 1 (docs/audit-report.md; JSON Schema: ``gpuhost schema audit-report``):
``{"schema": 1, "generated_at", "gpuhost_version", "matrix_date",
"hosts": [{"name", "reachable", "facts", "findings", "verdict"}], "summary"}``."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from gpuhost import __version__
from gpuhost.audit.host import HostReport
from gpuhost.audit.summary import summarize
from gpuhost.datadir import data_info

SCHEMA = 1


def utc_timestamp(now: datetime | None = None) -> str:
    """``2026-11-23T17:20:05Z``: the form of every gpuhost document's time fields."""
    return (
        (now or datetime.now(timezone.utc)).astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    )


def build_report(
    hosts: Iterable[HostReport],
    extra: Mapping[str, Any] | None = None,
    matrix_date: str | None = None,
) -> dict[str, Any]:
    entries = sorted((h.to_dict() for h in hosts), key=lambda h: str(h["name"]))
    # the data judged with: date and origin (gpuhost.datadir)
    return report_from_entries(entries, extra, matrix_date, data_info())


def report_from_entries(
    entries: list[dict[str, Any]],
    extra: Mapping[str, Any] | None = None,
    matrix_date: str | None = None,
    data: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The report document; ``matrix_date`` is the matrix data's ``updated`` date, ``data`` the
    data's ``{date, origin}`` (left out when not known: a merge of reports that predate it)."""
    out: dict[str, Any] = {
        "schema": SCHEMA,
        "generated_at": utc_timestamp(),
        "gpuhost_version": __version__,
        "matrix_date": matrix_date,
    }
    if data is not None:
        out["data"] = dict(data)
    out["hosts"] = entries
    out["summary"] = summarize(entries, extra)
    return out


def dumps(report: Mapping[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=False) + "\n"
