"""Driver daemons (nvidia-persistenced, nvidia-fabricmanager): enabled, and started once the
driver is loaded. One rule for every such unit, shared by the operations that own them."""

from __future__ import annotations

from pyinfra import host
from pyinfra.facts.systemd import SystemdStatus

from gpuhost.facts.systemd_units import UnitFiles
from gpuhost.parsers.nvidia_smi import SmiReport

#: unit-file states systemd starts at boot (or that need no enabling)
ENABLED_STATES = ("enabled", "static", "enabled-runtime")


def daemon_commands(unit: str, report: SmiReport) -> list[str] | None:
    """The commands that leave ``unit`` enabled, and running when the driver is loaded
    (``report.ok``); ``None`` when the unit is not installed. A host whose module is not loaded
    yet (fresh install, before the reboot) gets the unit enabled: it starts at the next boot.
    Says on the host why nothing changes when nothing does."""
    units = host.get_fact(UnitFiles, units=[unit])
    if unit not in units:
        return None
    changes = []
    if units[unit] not in ENABLED_STATES:
        changes.append(f"systemctl enable {unit}")
    if report.ok and not host.get_fact(SystemdStatus, services=[unit]).get(unit):
        changes.append(f"systemctl start {unit}")
    if not changes:
        where = "running" if report.ok else f"starts at boot; nvidia-smi state {report.state}"
        host.noop(f"{unit} enabled ({where})")
    return changes
