"""Stopping what uses the GPU before the driver changes under it.

gpuhost stops the services it knows (persistence daemon, fabric manager, DCGM, exporters) and
records which it stopped, so an abort can start them again (a reboot starts the enabled ones).
Any other process holding ``/dev/nvidia*`` is listed; it is stopped only when the operator said
so (``--stop-gpu-processes``), otherwise the step fails before anything changed.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from gpuhost.errors import HostError
from gpuhost.upgrade.remote import Remote

KNOWN_GPU_UNITS = (
    "nvidia-persistenced.service",
    "nvidia-fabricmanager.service",
    "nv-fabricmanager.service",
    "nvidia-dcgm.service",
    "dcgm.service",
    "dcgm-exporter.service",
    "nvidia-dcgm-exporter.service",
    "nvidia_gpu_exporter.service",
    "prometheus-nvidia-gpu-exporter.service",
)

ACTIVE_UNITS_COMMAND = (
    "for u in "
    + " ".join(KNOWN_GPU_UNITS)
    + '; do [ "$(systemctl is-active "$u" 2>/dev/null)" = active ] && echo "$u"; done; true'
)

# pid and command name of every process with an open /dev/nvidia* file
HOLDERS_COMMAND = (
    "for p in /proc/[0-9]*; do for fd in $p/fd/*; do "
    'case "$(readlink "$fd" 2>/dev/null)" in /dev/nvidia*) '
    'echo "${p#/proc/} $(cat $p/comm 2>/dev/null)"; break;; esac; done; done 2>/dev/null; true'
)


@dataclass(frozen=True)
class Holder:
    pid: int
    name: str

    def __str__(self) -> str:
        return f"{self.name}[{self.pid}]"


def parse_holders(output: str) -> list[Holder]:
    holders = []
    for line in output.splitlines():
        pid, _, name = line.strip().partition(" ")
        if pid.isdigit():
            holders.append(Holder(int(pid), name.strip() or "?"))
    return holders


def parse_units(output: str) -> list[str]:
    return [u.strip() for u in output.splitlines() if u.strip() in KNOWN_GPU_UNITS]


def active_gpu_units(remote: Remote) -> list[str]:
    return parse_units(remote.run(ACTIVE_UNITS_COMMAND).stdout)


def gpu_holders(remote: Remote) -> list[Holder]:
    return parse_holders(remote.run(HOLDERS_COMMAND).stdout)


def stop_gpu_users(remote: Remote, stop_processes: bool) -> dict[str, object]:
    """Stop known GPU services, then deal with remaining /dev/nvidia* holders."""
    units = active_gpu_units(remote)
    if units:
        result = remote.run("systemctl stop " + " ".join(shlex.quote(u) for u in units))
        if not result.ok:
            raise HostError(remote.host, f"stopping {', '.join(units)} failed: {result.tail()}")
    holders = gpu_holders(remote)
    if holders and not stop_processes:
        start_units(remote, units)
        raise HostError(
            remote.host,
            "processes hold /dev/nvidia*: "
            + ", ".join(str(h) for h in holders)
            + " (stop them, or pass --stop-gpu-processes to have gpuhost stop them)",
        )
    if holders:
        pids = " ".join(str(h.pid) for h in holders)
        remote.run(
            f"kill -TERM {pids} 2>/dev/null; for i in $(seq 20); do kill -0 {pids} 2>/dev/null"
            f" || break; sleep 0.5; done; kill -KILL {pids} 2>/dev/null; true"
        )
        left = gpu_holders(remote)
        if left:
            raise HostError(
                remote.host, "processes still hold /dev/nvidia*: " + ", ".join(map(str, left))
            )
    return {
        "stopped_units": units,
        "stopped_processes": [str(h) for h in holders],
        "summary": f"stopped {len(units)} unit(s), {len(holders)} process(es)",
    }


def start_units(remote: Remote, units: list[str]) -> None:
    if not units:
        return
    result = remote.run("systemctl start " + " ".join(shlex.quote(u) for u in units))
    if not result.ok:
        raise HostError(remote.host, f"starting {', '.join(units)} again failed: {result.tail()}")
