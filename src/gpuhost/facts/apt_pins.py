"""Facts about apt pinning and holds: what ``apt-mark`` holds and what apt would install."""

from __future__ import annotations

import re

from pyinfra.api import FactBase
from typing_extensions import override

_POLICY_PACKAGE_RE = re.compile(r"^(\S+):$")
_POLICY_CANDIDATE_RE = re.compile(r"^\s+Candidate:\s+(\S+)$")
_POLICY_INSTALLED_RE = re.compile(r"^\s+Installed:\s+(\S+)$")


def parse_policy(lines: list[str]) -> dict[str, dict[str, str | None]]:
    """``apt-cache policy PKG...`` → {package: {"installed": v|None, "candidate": v|None}}."""
    result: dict[str, dict[str, str | None]] = {}
    current: dict[str, str | None] | None = None
    for line in lines:
        match = _POLICY_PACKAGE_RE.match(line)
        if match:
            current = result.setdefault(match.group(1), {"installed": None, "candidate": None})
            continue
        if current is None:
            continue
        for key, regex in (
            ("installed", _POLICY_INSTALLED_RE),
            ("candidate", _POLICY_CANDIDATE_RE),
        ):
            match = regex.match(line)
            if match:
                value = match.group(1)
                current[key] = None if value == "(none)" else value
    return result


class AptHolds(FactBase[list[str]]):
    """Packages marked held (``apt-mark showhold``), sorted: ``["libnvidia-ml1", "nvidia-smi"]``."""

    @staticmethod
    @override
    def default() -> list:
        return []

    @override
    def requires_command(self) -> str:
        return "apt-mark"

    @override
    def command(self) -> str:
        return "LC_ALL=C apt-mark showhold"

    @override
    def process(self, output: list[str]) -> list[str]:
        return sorted({line.strip() for line in output if line.strip()})


class AptPolicy(FactBase[dict[str, dict[str, str | None]]]):
    """Installed and candidate version of each package, as apt's pins resolve them:

    .. code:: python

        {"nvidia-smi": {"installed": "535.261.03-1", "candidate": "535.261.03-1"}}
    """

    @staticmethod
    @override
    def default() -> dict:
        return {}

    @override
    def requires_command(self, packages: list[str]) -> str:
        return "apt-cache"

    @override
    def command(self, packages: list[str]) -> str:
        return "LC_ALL=C apt-cache policy " + " ".join(sorted(packages))

    @override
    def process(self, output: list[str]) -> dict[str, dict[str, str | None]]:
        return parse_policy(output)


class DnfVersionLocks(FactBase[list[str]]):
    """Entries of ``dnf versionlock list`` (``name-epoch:version-release.*``)."""

    @staticmethod
    @override
    def default() -> list:
        return []

    @override
    def requires_command(self) -> str:
        return "dnf"

    @override
    def command(self) -> str:
        return "LC_ALL=C dnf -q versionlock list 2>/dev/null || true"

    @override
    def process(self, output: list[str]) -> list[str]:
        return sorted(
            line.strip()
            for line in output
            if line.strip() and not line.startswith(("Last metadata", "Updating"))
        )
