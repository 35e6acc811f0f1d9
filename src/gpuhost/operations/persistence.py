"""Persistence mode: keep the driver initialised while no process uses the GPU.

NVIDIA's persistence daemon (``nvidia-persistenced``) is the supported way and survives reboots;
``nvidia-smi -pm 1`` is the legacy per-boot switch, used only where the daemon is not installed.
"""

from __future__ import annotations

from collections.abc import Generator

from pyinfra import host
from pyinfra.api import operation

from gpuhost.facts.nvidia_smi import SmiQuery
from gpuhost.operations._daemons import daemon_commands
from gpuhost.operations._facts import fact
from gpuhost.parsers.nvidia_smi import SmiReport

DAEMON_UNIT = "nvidia-persistenced.service"


@operation()
def enabled(report: SmiReport | None = None) -> Generator:
    """nvidia-persistenced enabled and running; ``nvidia-smi -pm 1`` where it is unavailable.

    The daemon is started only when the driver is loaded (``report.ok``); on a host whose module is
    not loaded yet (fresh install, no GPU) it is enabled and starts at the next boot.

    + report: the host's ``SmiQuery`` fact

    **Example:**

    .. code:: python

        persistence.enabled(name="Persistence mode", report=host.get_fact(SmiQuery))
    """
    if report is None:
        report = fact(SmiQuery)
    changes = daemon_commands(DAEMON_UNIT, report)
    if changes is not None:
        yield from changes
        return
    if not report.ok:
        host.noop(f"no persistence daemon and no GPU visible (nvidia-smi state {report.state})")
        return
    off = [
        gpu.index if gpu.index is not None else position
        for position, gpu in enumerate(report.gpus)
        if gpu.persistence_mode is not True
    ]
    if not off:
        host.noop("persistence mode already enabled on every GPU")
        return
    for index in off:
        yield f"nvidia-smi -i {index} -pm 1"
