"""The one Finding type: what a rule says about a host or a version set.

Used by the audit (``gpuhost.audit.rules``) and the compatibility matrix
(``gpuhost.matrix.check_stack`` / ``verify_profile``). A finding has a stable rule id, a severity
(``error``, ``warning`` or ``info``, worst first) and one readable ``message``; beside it the
structured fields a tool can rely on:

- ``found``: what the host (or the checked set) has, e.g. ``"driver 550.54.15"``
- ``expected``: what it should have, e.g. ``"driver 535.216.01 (profile debian12-nonfree-535)"``
- ``fix``: the command or action that repairs it
- ``source``: what the expectation rests on: a URL (matrix rows), a profile, or the rule's
  documentation (``docs/audit-report.md#<rule>``)

Each is ``None`` only where it does not apply (an ``info`` finding may need no fix).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

ERROR = "error"
WARNING = "warning"
INFO = "info"
# Worst first.
SEVERITIES = (ERROR, WARNING, INFO)

RULE_DOC = "docs/audit-report.md"


def rule_doc(rule: str) -> str:
    """The documentation reference of a rule id (the default ``source`` of audit findings)."""
    return f"{RULE_DOC}#{rule}"


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: str
    message: str
    source: str | None = None
    found: str | None = None
    expected: str | None = None
    fix: str | None = None

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(
                f"finding {self.rule}: severity {self.severity!r}, expected one of "
                f"{', '.join(SEVERITIES)}"
            )

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the ``finding`` definition of the audit report schema)."""
        return {
            "rule": self.rule,
            "severity": self.severity,
            "message": self.message,
            "found": self.found,
            "expected": self.expected,
            "fix": self.fix,
            "source": self.source,
        }

    to_json = to_dict


def fix_in(message: str) -> str | None:
    """The fix a message names after its "; fix: " (the form every gpuhost message uses)."""
    _, sep, fix = message.partition("; fix: ")
    return (fix.strip() or None) if sep else None


def severity_rank(severity: str) -> int:
    """0 for the worst severity; unknown severities sort last."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES)


def worst_severity(findings: Iterable[Finding]) -> str | None:
    """The worst severity among ``findings``, None when there is none."""
    ranks = [severity_rank(f.severity) for f in findings]
    return SEVERITIES[min(ranks)] if ranks else None
