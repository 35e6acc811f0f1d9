"""The one Finding type and the one verdict: what rules say about a host or a version set.

Used by the audit (``gpuhost.audit.rules``) and the compatibility matrix
(``gpuhost.matrix.check_stack`` / ``verify_profile``). A finding has a stable rule id, a severity
(``error``, ``warning`` or ``info``, worst first) and one readable ``message``; beside it the
structured fields a tool can rely on (a rule writes its fix once: in ``fix``, and the finding
ends its ``message`` with ``; fix: FIX``, the one line every renderer shows; a message written
with its ``; fix: FIX`` tail and no ``fix`` gives the field that tail):

- ``found``: what the host (or the checked set) has, e.g. ``"driver 550.54.15"``
- ``expected``: what it should have, e.g. ``"driver 535.216.01 (profile debian12-nonfree-535)"``
- ``fix``: the command or action that repairs it
- ``source``: what the expectation rests on: a URL (matrix rows), a profile, or the rule's
  documentation (``docs/audit-report.md#<rule>``)
- ``action``: what an operator (or the health tier) should do, one of ``ACTIONS``; set on the GPU
  health findings from the fault catalog (``gpuhost.faults``), None where the catalog has no row

Each is ``None`` only where it does not apply (an ``info`` finding may need no fix).

An audit rule check's outcome is a ``RuleResult`` (its findings, or why it did not apply). A
verdict (``verdict``) is the worst severity among findings that warn or fail ("ok" when none
does), or "unreachable" for a host that could not be read; ``worst_verdict`` is the fleet's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

ERROR = "error"
WARNING = "warning"
INFO = "info"
# Worst first.
SEVERITIES = (ERROR, WARNING, INFO)
Severity = Literal["error", "warning", "info"]

VERDICT_OK = "ok"
VERDICT_WARNING = "warning"
VERDICT_ERROR = "error"
VERDICT_UNREACHABLE = "unreachable"
# Worst first; an overall verdict is the worst host verdict.
VERDICTS = (VERDICT_UNREACHABLE, VERDICT_ERROR, VERDICT_WARNING, VERDICT_OK)

RULE_DOC = "docs/audit-report.md"

# What a fault calls for, least disruptive first (the fault catalog, data/faults.yaml, gives one
# per fault): nothing; keep an eye on it; reset the GPU; reboot the node; take the node out of
# service (drain) and find out; inspect or return the hardware.
ACTIONS = ("none", "watch", "reset-gpu", "reboot", "drain", "inspect-hardware")


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
    action: str | None = None

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(
                f"finding {self.rule}: severity {self.severity!r}, expected one of "
                f"{', '.join(SEVERITIES)}"
            )
        if self.action is not None and self.action not in ACTIONS:
            raise ValueError(
                f"finding {self.rule}: action {self.action!r}, expected one of {', '.join(ACTIONS)}"
            )
        said, fix = split_fix(self.message)
        if fix is None and self.fix:
            object.__setattr__(self, "message", f"{said}; fix: {self.fix}")
        elif self.fix is None and fix is not None:
            object.__setattr__(self, "fix", fix)

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
            "action": self.action,
        }

    to_json = to_dict


def split_fix(message: str) -> tuple[str, str | None]:
    """A one-line message ``SAID; fix: FIX`` → (SAID, FIX); (message, None) without a fix."""
    said, sep, fix = message.partition("; fix: ")
    return (said, fix.strip() or None) if sep else (message, None)


def severity_rank(severity: str) -> int:
    """0 for the worst severity; unknown severities sort last."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES)


def worst_severity(findings: Iterable[Finding]) -> str | None:
    """The worst severity among ``findings``, None when there is none."""
    ranks = [severity_rank(f.severity) for f in findings]
    return SEVERITIES[min(ranks)] if ranks else None


# Two answers, never mixed: a ``security.*`` finding (a known NVIDIA security bulletin affects a
# version) is the security exposure; every other finding answers "does this stack work?" (the
# compatibility and health verdict). Verdicts, exit codes and every report keep them apart.
SECURITY_PREFIX = "security."
# ``--fail-on``: what makes a command exit 1. "compatibility" (the default): an error in the
# compatibility/health verdict; "security": that, or an error in the security exposure.
FAIL_ON = ("compatibility", "security")


def is_security(finding: Finding) -> bool:
    """Whether ``finding`` is part of the security exposure (rule ``security.*``)."""
    return finding.rule.startswith(SECURITY_PREFIX)


def split_security(findings: Iterable[Finding]) -> tuple[list[Finding], list[Finding]]:
    """(the compatibility/health findings, the security findings), order kept."""
    rest: list[Finding] = []
    security: list[Finding] = []
    for finding in findings:
        (security if is_security(finding) else rest).append(finding)
    return rest, security


def fails(verdict: str, security_verdict: str, fail_on: str = "compatibility") -> bool:
    """Whether a judgement makes its command exit 1: an error (or an unreachable host) in the
    compatibility/health verdict; with ``fail_on="security"`` also an error in the exposure."""
    if verdict in ("error", "unreachable"):
        return True
    return fail_on == "security" and security_verdict == "error"


@dataclass(frozen=True)
class RuleResult:
    """What one rule check said about one host: findings, or why it did not apply."""

    rule: str
    findings: tuple[Finding, ...] = ()
    skipped: str | None = None


def verdict(findings: Iterable[Finding], reachable: bool = True) -> str:
    """The verdict of findings: error if one is an error, else warning if one warns, else ok;
    unreachable when the host could not be read."""
    if not reachable:
        return VERDICT_UNREACHABLE
    severities = {finding.severity for finding in findings}
    if ERROR in severities:
        return VERDICT_ERROR
    if WARNING in severities:
        return VERDICT_WARNING
    return VERDICT_OK


def worst_verdict(verdicts: Iterable[str]) -> str:
    """The worst of host verdicts (``VERDICTS`` order); "ok" for none."""
    present = set(verdicts)
    for name in VERDICTS:
        if name in present:
            return name
    return VERDICT_OK
