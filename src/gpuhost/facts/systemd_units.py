"""Which systemd unit files exist on the host, and their enablement state."""

from __future__ import annotations

from pyinfra.api import FactBase
from typing_extensions import override


def parse_unit_files(lines: list[str]) -> dict[str, str]:
    """``systemctl list-unit-files --no-legend --plain`` lines → {unit: state}."""
    units: dict[str, str] = {}
    for line in lines:
        parts = line.split()
        if len(parts) >= 2 and "." in parts[0]:
            units[parts[0]] = parts[1]
    return units


class UnitFiles(FactBase[dict[str, str]]):
    """Installed unit files among ``units`` with their state (absent units are missing):

    .. code:: python

        {"nvidia-persistenced.service": "enabled", "docker.service": "enabled"}
    """

    @staticmethod
    @override
    def default() -> dict:
        return {}

    @override
    def requires_command(self, units: list[str]) -> str:
        return "systemctl"

    @override
    def command(self, units: list[str]) -> str:
        names = " ".join(f"'{unit}'" for unit in sorted(units))
        return f"LC_ALL=C systemctl list-unit-files --no-legend --plain {names} 2>/dev/null || true"

    @override
    def process(self, output: list[str]) -> dict[str, str]:
        return parse_unit_files(output)
