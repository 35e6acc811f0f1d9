"""Findings: what a check says about a stack, with a stable rule id and the source it rests on."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

Severity = Literal["info", "warn", "error"]
Verdict = Literal["ok", "warn", "error"]

_RANK = {"info": 0, "warn": 1, "error": 2}


@dataclass(frozen=True)
class Finding:
    """One judgement about a stack.

    ``rule`` is a stable id (e.g. ``cuda_driver_floor``); ``message`` names what was found, what
    is expected and the fix; ``source`` is the URL or document the rule rests on.
    """

    rule: str
    severity: Severity
    message: str
    source: str

    def to_json(self) -> dict[str, str]:
        return asdict(self)


def verdict(findings: list[Finding]) -> Verdict:
    """ "error" if any finding is an error, else "warn" if any warns, else "ok"."""
    worst = max((_RANK[f.severity] for f in findings), default=0)
    return "error" if worst == 2 else "warn" if worst == 1 else "ok"


def exit_code(findings: list[Finding]) -> int:
    """CLI exit code for findings: 1 when the stack is incompatible, else 0."""
    return 1 if verdict(findings) == "error" else 0
