"""NVIDIA fabric manager: the daemon that sets up NVSwitch fabrics (HGX boards). NVIDIA's package
installs ``nvidia-fabricmanager.service`` but neither enables nor starts it; without it the GPUs
of an NVSwitch board cannot run CUDA work."""

from __future__ import annotations

from collections.abc import Generator

from pyinfra import host
from pyinfra.api import operation

from gpuhost.facts.nvidia_smi import SmiQuery
from gpuhost.operations._daemons import daemon_commands
from gpuhost.operations._facts import fact
from gpuhost.parsers.nvidia_smi import SmiReport

UNIT = "nvidia-fabricmanager.service"


@operation()
def running(report: SmiReport | None = None) -> Generator:
    """nvidia-fabricmanager enabled, and started when the driver is loaded (else at next boot).

    + report: the host's ``SmiQuery`` fact

    **Example:**

    .. code:: python

        fabric_manager.running(name="NVIDIA fabric manager")
    """
    if report is None:
        report = fact(SmiQuery)
    changes = daemon_commands(UNIT, report)
    if changes is None:
        # a dry run on a fresh host: the install operation before this one has not run
        host.noop(f"{UNIT} not installed: nothing to enable")
        return
    yield from changes
