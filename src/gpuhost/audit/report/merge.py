"""Reading audit reports a user hands over, and merging shard reports into one.

Each input must be a schema-1 audit report (``gpuhost audit --json``). Hosts are concatenated
(a host present in two inputs is an error: the shards overlapped) and the summary (verdicts,
stack groups, outliers) is computed again over all of them, exactly as one run would.
"""

from __future__ import annotations

from typing import Any

from gpuhost.audit.report import json_report
from gpuhost.audit.summary import with_security
from gpuhost.errors import ConfigError

HOST_KEYS = ("name", "reachable", "facts", "findings", "verdict")


def read_report(path: str) -> dict[str, Any]:
    """One input report, checked by shape against its JSON Schema (field path in the message)."""
    from gpuhost.readers import check_shape, read_json

    what = "a gpuhost audit --json report"
    data = read_json(path, what)
    if not isinstance(data, dict) or data.get("schema") != json_report.SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise ConfigError(
            f"{path}: expected a gpuhost audit report with schema {json_report.SCHEMA}, "
            f"found schema {found!r}"
        )
    check_shape(data, "merged-report" if "merged_from" in data else "audit-report", path)
    hosts = data.get("hosts")
    if not isinstance(hosts, list):
        raise ConfigError(f"{path}: 'hosts' must be a list, found {type(hosts).__name__}")
    if not hosts:  # merge said 'verdict ok' and html 'unreachable' for such a report
        raise ConfigError(f"{path}: the report lists no hosts (gpuhost audit always lists some)")
    for index, host in enumerate(hosts):
        if not isinstance(host, dict) or any(key not in host for key in HOST_KEYS):
            raise ConfigError(f"{path}: hosts[{index}] must have the keys {', '.join(HOST_KEYS)}")
    return data


def merge_reports(paths: list[str]) -> dict[str, Any]:
    """One schema-1 report from several; ConfigError on bad input or overlapping hosts."""
    seen: dict[str, str] = {}
    hosts: list[dict[str, Any]] = []
    shards: list[str] = []
    dates: list[str] = []
    judged_with: list[dict[str, Any]] = []
    for path in paths:
        data = read_report(path)
        if isinstance(data.get("matrix_date"), str):
            dates.append(data["matrix_date"])
        if isinstance(data.get("data"), dict):
            judged_with.append(data["data"])
        summary = data.get("summary")
        if isinstance(summary, dict) and summary.get("shard"):
            shards.append(str(summary["shard"]))
        for host in data["hosts"]:
            name = str(host["name"])
            if name in seen:
                raise ConfigError(
                    f"{path}: host {name!r} is also in {seen[name]}; the inputs overlap (each "
                    "host must come from exactly one shard)"
                )
            seen[name] = path
            hosts.append(with_security(host))  # a report written before the split: apart now
    hosts.sort(key=lambda h: str(h["name"]))
    # Shards judged against different matrix data: the merged report names the oldest (of the
    # data each names, the oldest too; one without a date first: not known to be newer).
    oldest = min(judged_with, key=lambda d: str(d.get("date") or ""), default=None)
    return json_report.report_from_entries(
        hosts, {"merged_from": list(paths), "shards": shards}, min(dates, default=None), oldest
    )
