"""The one thing upgrade steps need from a host connection: run a shell command.

``Remote`` is implemented over pyinfra's SSH connector in ``hoststeps``; tests pass fakes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Result:
    rc: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.rc == 0

    def tail(self, lines: int = 5) -> str:
        text = (self.stderr.strip() + "\n" + self.stdout.strip()).strip()
        return " | ".join(text.splitlines()[-lines:])


class Remote(Protocol):
    host: str

    def run(self, command: str, timeout: float | None = None) -> Result:
        """Run ``command`` with /bin/sh as root; never raises for a non-zero exit."""
