"""Verdicts of the compatibility matrix's findings.

The Finding type is gpuhost's one finding (``gpuhost.findings``): a stable rule id, a severity
(``error``, ``warning``, ``info``), a message, and ``source``, the URL or document the rule rests
on.
"""

from __future__ import annotations

from typing import Literal

from gpuhost.findings import Finding

Severity = Literal["info", "warning", "error"]
Verdict = Literal["ok", "warning", "error"]

_RANK = {"info": 0, "warning": 1, "error": 2}

__all__ = ["Finding", "Severity", "Verdict", "exit_code", "verdict"]


def verdict(findings: list[Finding]) -> Verdict:
    """ "error" if any finding is an error, else "warning" if any warns, else "ok"."""
    worst = max((_RANK[f.severity] for f in findings), default=0)
    return "error" if worst == 2 else "warning" if worst == 1 else "ok"


def exit_code(findings: list[Finding]) -> int:
    """CLI exit code for findings: 1 when the stack is incompatible, else 0."""
    return 1 if verdict(findings) == "error" else 0
