"""``gpuhost check @local --tier health``: the fast node health check (Slurm HealthCheckProgram).

A subset of the static checks that needs no GPU work and no network and answers in well under
5 s on a healthy host: nvidia-smi answers (within ``SMI_TIMEOUT``) and lists GPUs, none has
uncorrectable ECC errors since the driver loaded, pending page retirement or row remapping
(pending or failed), the loaded driver is the one the provision marker
(/etc/gpuhost/profile) records, and the RDMA ports in /sys/class/infiniband are ACTIVE/LinkUp at
the node class's rate (``checks_support.fabric.port_problems``; no port, nothing judged). The
judgement is ``judge`` (pure, on the captured texts); the GPU and driver judgements are the
audit's rules through ``checks_support.gpu`` (their errors only; the driver's is the audit's
profile.driver finding).

.. code:: python

    problems = judge(gather())     # [] healthy; else one line per problem
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpuhost.checks_support.fabric import gpu_names, port_problems, read_sysfs_ports
from gpuhost.checks_support.gpu import (
    NOT_FOUND,
    ecc_problems,
    profile_driver_problems,
    remapped_row_problems,
    retired_page_problems,
    unavailable_reason,
)
from gpuhost.desired import DesiredState
from gpuhost.errors import ParseError
from gpuhost.findings import ERROR
from gpuhost.parsers.driver import KernelModule, parse_proc_version
from gpuhost.parsers.nvidia_smi import SmiReport, parse_output
from gpuhost.parsers.profile_marker import MARKER_PATH, ProfileMarker, parse_profile_marker

SMI_TIMEOUT = 4.0
SMI_ARGV = ("nvidia-smi", "-q", "-x")
MODULE_PATH = "/proc/driver/nvidia/version"


@dataclass(frozen=True)
class HealthInputs:
    """What the health check reads: nvidia-smi's output (``NOT_FOUND`` when it is not
    installed, None when it did not answer in time), the kernel module's version file and the
    provision marker (None when absent)."""

    smi_output: str | None
    module_text: str | None
    marker_text: str | None
    rdma_ports: str = ""  # /sys/class/infiniband's port files as FILE:VALUE lines ("" none)


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def gather(
    run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run,
    root: str = "",
) -> HealthInputs:
    """Read this machine (``root`` prefixes the file paths, for tests)."""
    try:
        proc = run(
            list(SMI_ARGV),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=SMI_TIMEOUT,
            check=False,
            env={
                "LC_ALL": "C",
                "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            },
        )
        smi: str | None = proc.stdout + proc.stderr
    except FileNotFoundError:
        smi = NOT_FOUND
    except subprocess.TimeoutExpired:
        smi = None
    return HealthInputs(
        smi, _read(root + MODULE_PATH), _read(root + MARKER_PATH), read_sysfs_ports(root)
    )


def judge(inputs: HealthInputs) -> list[str]:
    """One line per health problem; [] when the node is healthy."""
    if inputs.smi_output is None:
        return [f"nvidia-smi did not answer within {SMI_TIMEOUT:g} s (a GPU or the driver hangs)"]
    module: KernelModule | None = None
    if inputs.module_text and inputs.module_text.strip():
        try:
            module = parse_proc_version(inputs.module_text)
        except ParseError as exc:
            return [f"{MODULE_PATH}: {exc}"]
    report: SmiReport | None
    try:
        report = parse_output(inputs.smi_output) if inputs.smi_output != NOT_FOUND else None
    except ParseError:
        report = None
    reason = unavailable_reason(inputs.smi_output, report, module)
    if reason is not None or report is None:
        return [reason or "nvidia-smi gave no report"]
    problems = (  # the audit's error findings (a warning, e.g. some retired pages, never drains)
        ecc_problems(report, (ERROR,))
        + retired_page_problems(report, (ERROR,))
        + remapped_row_problems(report, (ERROR,))
        + port_problems(gpu_names(report), inputs.rdma_ports)  # RDMA ports: sysfs only
    )
    if inputs.marker_text and inputs.marker_text.strip():
        try:
            marker = parse_profile_marker(inputs.marker_text)
        except ParseError as exc:
            return problems + [f"{MARKER_PATH}: {exc}"]
        if marker and marker.driver_version:
            problems += profile_driver_problems(
                report, module, recorded_driver(marker), ids=("profile.driver",)
            )
    return problems


def recorded_driver(marker: ProfileMarker) -> DesiredState:
    """What the marker records, for the driver judgement: its full desired state, or (an older
    or partial marker) its profile and driver version alone (kernel module not compared)."""
    state = DesiredState.from_marker(marker)
    if state is not None:
        return state
    return DesiredState(
        marker.profile, marker.source or "", marker.os, marker.driver_version or "", "", "auto"
    )


def reason_line(problems: list[str], limit: int = 200) -> str:
    """The one line Slurm shows (and the drain reason): the first problem, with a count of the
    others, shortened to ``limit`` characters."""
    first = " ".join((problems[0] if problems else "healthy").split())
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    room = limit - len(more)
    if len(first) > room:  # the count of the others stays visible
        first = first[: room - 3] + "..."
    return first + more
