"""Rule results and per-host verdicts of an audit.

A finding (``gpuhost.findings.Finding``, the one finding type) has a stable rule id (documented
in docs/audit-report.md), a severity, one message and the structured ``found``, ``expected``,
``fix`` and ``source`` fields. Severities, worst first: error, warning, info. A host's verdict is
the worst severity among its findings ("ok" when none is a warning or error) or "unreachable".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpuhost.findings import ERROR, INFO, SEVERITIES, WARNING, Finding, rule_doc, severity_rank

__all__ = [
    "ERROR",
    "INFO",
    "SEVERITIES",
    "WARNING",
    "Finding",
    "RuleResult",
    "host_verdict",
    "rule_doc",
    "severity_rank",
    "worst_verdict",
]

VERDICT_OK = "ok"
VERDICT_WARNING = "warning"
VERDICT_ERROR = "error"
VERDICT_UNREACHABLE = "unreachable"
# Worst first; an overall verdict is the worst host verdict.
VERDICTS = (VERDICT_UNREACHABLE, VERDICT_ERROR, VERDICT_WARNING, VERDICT_OK)


@dataclass(frozen=True)
class RuleResult:
    """What one rule check said about one host: findings, or why it did not apply."""

    rule: str
    findings: tuple[Finding, ...] = ()
    skipped: str | None = None


def host_verdict(findings: Iterable[Finding], reachable: bool = True) -> str:
    if not reachable:
        return VERDICT_UNREACHABLE
    severities = {finding.severity for finding in findings}
    if ERROR in severities:
        return VERDICT_ERROR
    if WARNING in severities:
        return VERDICT_WARNING
    return VERDICT_OK


def worst_verdict(verdicts: Iterable[str]) -> str:
    present = set(verdicts)
    for verdict in VERDICTS:
        if verdict in present:
            return verdict
    return VERDICT_OK
