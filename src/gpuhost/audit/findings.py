"""Findings and per-host verdicts of an audit.

A finding has a stable rule id (documented in docs/audit-report.md), a severity and one message
that names what was found, what was expected and the fix. Severities, worst first: error,
warning, info. A host's verdict is the worst severity among its findings ("ok" when none is a
warning or error) or "unreachable".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

ERROR = "error"
WARNING = "warning"
INFO = "info"
SEVERITIES = (ERROR, WARNING, INFO)

VERDICT_OK = "ok"
VERDICT_WARNING = "warning"
VERDICT_ERROR = "error"
VERDICT_UNREACHABLE = "unreachable"
# Worst first; an overall verdict is the worst host verdict.
VERDICTS = (VERDICT_UNREACHABLE, VERDICT_ERROR, VERDICT_WARNING, VERDICT_OK)


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"rule": self.rule, "severity": self.severity, "message": self.message}


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


def severity_rank(severity: str) -> int:
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES)
