"""CDI specs kept true: after the driver changes, every NVIDIA Container Device Interface spec
that names another driver version is regenerated with the container toolkit's own generator
(``nvidia-ctk cdi generate``); where the profile asks for CDI and there is none,
``/etc/cdi/nvidia.yaml`` is generated (facts: ``gpuhost.facts.signing.CdiSpecs``)."""

from __future__ import annotations

import shlex
from collections.abc import Generator

from pyinfra import host
from pyinfra.api import operation

from gpuhost.facts.signing import CdiSpecs
from gpuhost.operations._facts import fact
from gpuhost.parsers.cdi import NVIDIA_SPEC, CdiSpec

NO_GENERATOR = (
    "gpuhost: nvidia-ctk not found: regenerating the CDI spec {path} needs the NVIDIA container "
    "toolkit's generator (install nvidia-container-toolkit: the profile's container_toolkit)"
)
LATER = (
    "gpuhost: CDI spec {path} not regenerated now: the loaded kernel module is not driver "
    "{version} yet (nvidia-ctk reads the GPUs through NVML); after the reboot gpuhost upgrade "
    "regenerates it, or run gpuhost provision again"
)


def targets(specs: list[CdiSpec], driver_version: str, wanted: bool) -> list[str]:
    """The spec files to (re)generate: every NVIDIA spec naming a driver version other than
    ``driver_version``, and ``/etc/cdi/nvidia.yaml`` when CDI is wanted and no NVIDIA spec is in
    /etc/cdi (pure)."""
    stale = [
        s.path
        for s in specs
        if s.error is None
        and s.nvidia
        and s.driver_versions != [driver_version]
        and s.driver_versions
    ]
    in_etc = [s for s in specs if s.path.startswith("/etc/cdi/") and s.error is None and s.nvidia]
    if wanted and not in_etc:
        stale.append(NVIDIA_SPEC)
    return sorted(set(stale))


def generate_command(path: str, driver_version: str) -> str:
    """``nvidia-ctk cdi generate --output=PATH``, decided on the host: one line and exit 1 when
    nvidia-ctk is missing; one line and nothing done while another driver's module is loaded
    (the generator would read the old driver through NVML, or fail on the mismatch)."""
    quoted = shlex.quote(path)
    module = f"Kernel Module  *{driver_version.replace('.', '[.]')} "
    return (
        "command -v nvidia-ctk >/dev/null 2>&1 || "
        f"{{ echo {shlex.quote(NO_GENERATOR.format(path=path))} >&2; exit 1; }}; "
        f"if [ -e /proc/driver/nvidia/version ] && ! grep -q {shlex.quote(module)} "
        "/proc/driver/nvidia/version; then "
        f"echo {shlex.quote(LATER.format(path=path, version=driver_version))}; exit 0; fi; "
        f"nvidia-ctk cdi generate --output={quoted}"
    )


@operation()
def spec_current(driver_version: str, wanted: bool = False) -> Generator:
    """Regenerate the NVIDIA CDI specs that name another driver (and create
    ``/etc/cdi/nvidia.yaml`` when ``wanted`` and none is there); nothing when every spec names
    ``driver_version``.

    + driver_version: the driver the profile installs
    + wanted: the profile asks for CDI (profile field ``cdi``)
    """
    paths = targets(fact(CdiSpecs), driver_version, wanted)
    if not paths:
        host.noop(f"CDI specs name driver {driver_version} (or there are none to keep)")
        return
    for path in paths:
        yield generate_command(path, driver_version)
