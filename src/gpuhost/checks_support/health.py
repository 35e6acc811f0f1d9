"""``gpuhost check @local --tier health``: the fast node health check (Slurm HealthCheckProgram).

A subset of the static checks that needs no GPU work and no network and answers in well under
5 s on a healthy host: nvidia-smi answers (within ``SMI_TIMEOUT``) and lists GPUs, and none has
a fault the fault catalog (``gpuhost.faults``) calls an error or drains for (uncorrectable ECC
errors, pending page retirement or row remapping, clocks held down by the hardware, an
unregistered NVSwitch fabric, a recovery action the driver asks for, ...), and the loaded driver
is the one the provision marker (/etc/gpuhost/profile) records. The judgement is ``judge``
(pure, on the captured texts): findings with their catalog action (``faults.catalog
.drain_policy`` says when each drains); the driver's is the audit's profile.driver finding. The
RDMA ports in /sys/class/infiniband must be ACTIVE/LinkUp at the node class's rate
(``checks_support.fabric.port_problems``; no port, nothing judged).

.. code:: python

    problems = judge(gather())     # [] healthy; else findings, finding_line() is each one's line
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from gpuhost import toolrun
from gpuhost.checks_support.fabric import gpu_names, port_problems, read_sysfs_ports
from gpuhost.checks_support.gpu import (
    NOT_FOUND,
    profile_driver_findings,
    unavailable_reason,
)
from gpuhost.desired import DesiredState
from gpuhost.errors import ParseError
from gpuhost.faults.catalog import drain_policy, with_action
from gpuhost.faults.judge import finding_line, gpu_findings
from gpuhost.findings import ERROR, Finding
from gpuhost.parsers.driver import KernelModule, parse_proc_version
from gpuhost.parsers.nvidia_smi import SmiReport, parse_output
from gpuhost.parsers.profile_marker import MARKER_PATH, ProfileMarker, parse_profile_marker

SMI_TIMEOUT = 4.0
SMI_ARGV = ("nvidia-smi", "-q", "-x")
MODULE_PATH = "/proc/driver/nvidia/version"


NVLINK_ARGV = ("nvidia-smi", "nvlink", "-s")
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class HealthInputs:
    """What the health check reads: nvidia-smi's output (``NOT_FOUND`` when it is not
    installed, None when it did not answer in time), the kernel module's version file and the
    provision marker (None when absent); ``nvidia-smi nvlink -s`` and the kernel log since boot
    (``xid.KERNEL_LOG_COMMAND``), None when not read or not in time (not judged then)."""

    smi_output: str | None
    module_text: str | None
    marker_text: str | None
    rdma_ports: str = ""  # /sys/class/infiniband's port files as FILE:VALUE lines ("" none)
    nvlink_output: str | None = None
    kernel_log: str | None = None


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _output(
    run: Callable[..., subprocess.CompletedProcess[str]], argv: Sequence[str]
) -> str | None:
    """stdout + stderr of ``argv`` (``NOT_FOUND``: not installed; None: no answer in time)."""
    try:
        proc = run(
            list(argv),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=SMI_TIMEOUT,
            check=False,
            env={"LC_ALL": "C", "PATH": PATH},
        )
    except FileNotFoundError:
        return NOT_FOUND
    except subprocess.TimeoutExpired:
        return None
    return proc.stdout + proc.stderr


def gather(
    run: Callable[..., subprocess.CompletedProcess[str]] = toolrun.completed,
    root: str = "",
) -> HealthInputs:
    """Read this machine (``root`` prefixes the file paths, for tests): nvidia-smi's report, its
    NVLink status and the kernel log at the same time, each bounded by ``SMI_TIMEOUT``."""
    from gpuhost.checks_support.xid import KERNEL_LOG_COMMAND

    commands = (SMI_ARGV, NVLINK_ARGV, ("sh", "-c", KERNEL_LOG_COMMAND))
    with ThreadPoolExecutor(max_workers=len(commands)) as pool:
        smi, nvlink, log = pool.map(lambda argv: _output(run, argv), commands)
    return HealthInputs(
        smi,
        _read(root + MODULE_PATH),
        _read(root + MARKER_PATH),
        read_sysfs_ports(root),
        None if nvlink == NOT_FOUND else nvlink,
        None if log == NOT_FOUND else log,
    )


def _finding(rule: str, message: str) -> Finding:
    """A health problem outside the GPU fault judgement (nvidia-smi unusable, a damaged file)."""
    return with_action(Finding(rule, ERROR, message))


UNAVAILABLE = "gpu.unavailable"  # nvidia-smi cannot vouch for the GPUs (the health tier's id)


def _smi_report(inputs: HealthInputs, module: KernelModule | None) -> SmiReport | Finding:
    """nvidia-smi's report, or the one finding saying why it cannot vouch for the GPUs
    (``gpu.lost`` when it reports a GPU lost, else ``gpu.unavailable``)."""
    assert inputs.smi_output is not None
    report: SmiReport | None
    try:
        report = parse_output(inputs.smi_output) if inputs.smi_output != NOT_FOUND else None
    except ParseError:
        report = None
    reason = unavailable_reason(inputs.smi_output, report, module)
    if reason is None and report is not None:
        return report
    lost = report is not None and report.state == "gpu-lost"
    return _finding("gpu.lost" if lost else UNAVAILABLE, reason or "nvidia-smi gave no report")


def _drains(finding: Finding) -> bool:
    """Whether a GPU finding makes the node unhealthy: an error, or a fault the catalog drains
    for (a warning such as some retired pages never does)."""
    return finding.severity == ERROR or drain_policy(finding) != "never"


def judge(inputs: HealthInputs) -> list[Finding]:
    """The node's health problems as findings, each with its catalog action where the catalog
    has one (``faults``); [] when the node is healthy. ``finding_line`` gives each one's line."""
    if inputs.smi_output is None:
        return [
            _finding(
                UNAVAILABLE,
                f"nvidia-smi did not answer within {SMI_TIMEOUT:g} s (a GPU or the driver hangs)",
            )
        ]
    module: KernelModule | None = None
    if inputs.module_text and inputs.module_text.strip():
        try:
            module = parse_proc_version(inputs.module_text)
        except ParseError as exc:
            return [_finding(UNAVAILABLE, f"{MODULE_PATH}: {exc}")]
    report = _smi_report(inputs, module)
    if isinstance(report, Finding):
        return [report]
    problems = [f for gpu in report.gpus for f in gpu_findings(gpu) if _drains(f)]
    problems += [f for f in _node_findings(inputs, report) if _drains(f)]
    # RDMA ports, from sysfs only: the fabric's own findings, with their actions
    problems += port_problems(gpu_names(report), inputs.rdma_ports)
    if inputs.marker_text and inputs.marker_text.strip():
        try:
            marker = parse_profile_marker(inputs.marker_text)
        except ParseError as exc:
            return problems + [_finding(UNAVAILABLE, f"{MARKER_PATH}: {exc}")]
        if marker and marker.driver_version:
            problems += profile_driver_findings(
                report, module, recorded_driver(marker), ids=("profile.driver",)
            )
    return problems


def _node_findings(inputs: HealthInputs, report: SmiReport) -> list[Finding]:
    """What the node class of its GPU model expects (a GPU or NVLink link gone), NVLink links
    down and Xids since boot: the fault judgement of the audit and the static checks on what
    ``gather`` read (an unreadable NVLink status or kernel log is not judged)."""
    from gpuhost.checks_support.xid import parse_kernel_log, xid_events
    from gpuhost.faults.judge import expectation_findings, nvlink_findings, xid_findings
    from gpuhost.faults.node_class import expectation_for
    from gpuhost.gpus.catalog import labelled
    from gpuhost.parsers.smi_misc import parse_nvlink_status

    first = report.gpus[0] if report.gpus else None
    name = labelled(first.name, first.pci_device_id) if first and first.name else None
    expect = expectation_for(name, None, len(report.gpus))
    found = expectation_findings(report, expect) if expect is not None else []
    if inputs.nvlink_output is not None:
        with contextlib.suppress(ParseError):  # an error text: nothing judged from it
            found += nvlink_findings(parse_nvlink_status(inputs.nvlink_output), expect)
    if inputs.kernel_log is not None:
        log = parse_kernel_log(inputs.kernel_log)
        if log.error is None:
            found += xid_findings(xid_events(log.nvrm_lines), report.gpus)
    return found


def recorded_driver(marker: ProfileMarker) -> DesiredState:
    """What the marker records, for the driver judgement: its full desired state, or (an older
    or partial marker) its profile and driver version alone (kernel module not compared)."""
    state = DesiredState.from_marker(marker)
    if state is not None:
        return state
    return DesiredState(
        marker.profile, marker.source or "", marker.os, marker.driver_version or "", "", "auto"
    )


def reason_line(problems: Sequence[Finding | str], limit: int = 200) -> str:
    """The one line Slurm shows (and the drain reason): the first problem (a finding's line names
    its id and action), with a count of the others, shortened to ``limit`` characters."""
    lines = [p if isinstance(p, str) else finding_line(p) for p in problems]
    first = " ".join((lines[0] if lines else "healthy").split())
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    room = limit - len(more)
    if len(first) > room:  # the count of the others stays visible
        first = first[: room - 3] + "..."
    return first + more
