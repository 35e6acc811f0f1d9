"""The HTML fleet report: one self-contained file a person reads at a glance.

``render(report)`` takes a schema-1 JSON report (``gpuhost audit --json`` or ``report merge``)
and returns one HTML page with its CSS, script and data inline; its Content-Security-Policy
forbids every network access, so opening it fetches nothing. The page shows the verdict counts,
the identical-stack groups as a bar chart (click a bar for its hosts), the outliers with the
fields that differ highlighted, a findings table filterable by rule, severity and host, and
every host's stack on demand (click a host). The security exposure (``security.*`` findings:
NVIDIA bulletins affecting a driver or container toolkit) is its own section with its own verdict,
never among the findings or in the verdict counts. Sized for 1 to 2,000+ hosts: the data is embedded
once (hosts point at their stack group instead of repeating it) and the table shows the first
rows that match the filter.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from importlib import resources
from typing import Any

from gpuhost.audit.report.table import STACK_LABELS
from gpuhost.audit.summary import STACK_FIELDS, with_security
from gpuhost.findings import worst_verdict

FINDING_KEYS = ("severity", "rule", "message", "found", "expected", "fix", "source", "action")


def page_data(report: Mapping[str, Any]) -> dict[str, Any]:
    """The compact data the page's script renders (also what the browser test checks)."""
    summary = report.get("summary") or {}
    groups = summary.get("stacks") or []
    group_of: dict[str, int] = {}
    for index, group in enumerate(groups):
        for name in group.get("hosts") or []:
            group_of[str(name)] = index
    outlier_hosts = {str(o.get("host")) for o in summary.get("outliers") or []}
    hosts = []
    findings = []
    exposure = []
    for position, raw in enumerate(report.get("hosts") or []):
        host = with_security(raw)  # a report written before the split shows it apart too
        name = str(host.get("name"))
        security = host["security"]
        hosts.append(
            [name, str(host.get("verdict")), group_of.get(name, -1), str(security.get("verdict"))]
        )
        for finding in host.get("findings") or []:
            findings.append([position] + [finding.get(key) for key in FINDING_KEYS])
        for finding in security.get("findings") or []:
            exposure.append([position] + [finding.get(key) for key in FINDING_KEYS])
    return {
        "meta": {
            "generated_at": report.get("generated_at"),
            "gpuhost_version": report.get("gpuhost_version") or summary.get("gpuhost_version"),
            "matrix_date": report.get("matrix_date"),
            "data_origin": (report.get("data") or {}).get("origin"),
            "inventory": summary.get("inventory"),
            "merged_from": summary.get("merged_from"),
        },
        "verdicts": summary.get("verdicts") or {},
        "counts": summary.get("findings") or {},
        "verdict": summary.get("verdict"),
        "fields": [[key, STACK_LABELS.get(key, key)] for key in STACK_FIELDS],
        "stacks": [
            {"stack": group.get("stack") or {}, "count": group.get("count", 0)} for group in groups
        ],
        "outliers": [
            {"host": str(o.get("host")), "differs": o.get("differs") or {}}
            for o in summary.get("outliers") or []
        ],
        "outlier_hosts": sorted(outlier_hosts),
        "hosts": hosts,
        "findings": findings,
        "security": {
            "verdict": (summary.get("security") or {}).get("verdict")
            or worst_verdict(str(h[3]) for h in hosts),
            "findings": exposure,
        },
    }


def _embedded_json(data: Any) -> str:
    """JSON safe inside <script>: no "</" can end the element, no "<!--" opens a comment."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(f"assets/{name}").read_text(encoding="utf-8")


def render(report: Mapping[str, Any], title: str = "gpuhost fleet report") -> str:
    """The whole page."""
    return (
        _asset("fleet.html")
        .replace("{{TITLE}}", html.escape(title))
        .replace("{{STYLE}}", _asset("fleet.css"))
        .replace("{{SCRIPT}}", _asset("fleet.js"))
        .replace("{{DATA}}", _embedded_json(page_data(report)))
    )
