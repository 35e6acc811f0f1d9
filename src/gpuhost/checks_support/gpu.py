"""Judging an nvidia-smi report: each function returns one line per problem (empty: healthy).

The report comes from ``nvidia-smi -q -x`` parsed by ``gpuhost.parsers.nvidia_smi``; a field the
GPU does not report (None) is never a problem by itself.
"""

from __future__ import annotations

import re

from gpuhost.desired import DesiredState
from gpuhost.operations.clocks import clocks_in_effect, uses_application_clocks
from gpuhost.parsers.driver import KernelModule
from gpuhost.parsers.nvidia_smi import GpuInfo, SmiReport

SMI_COMMAND = (
    "if command -v nvidia-smi >/dev/null 2>&1; then LC_ALL=C nvidia-smi -q -x 2>&1; "
    'else echo "#gpuhost: nvidia-smi: command not found"; fi; true'
)
PSTATE_COMMAND = (
    "LC_ALL=C nvidia-smi --query-gpu=index,pstate --format=csv,noheader 2>/dev/null || true"
)
MODULE_COMMAND = "cat /proc/driver/nvidia/version 2>/dev/null || true"
NOT_FOUND = "#gpuhost: nvidia-smi: command not found"
PSTATE_RE = re.compile(r"^\s*(\d+)\s*,\s*(P\d+)\s*$")


def _label(position: int, gpu: GpuInfo) -> str:
    index = gpu.index if gpu.index is not None else position
    bus = f" {gpu.pci_bus_id}" if gpu.pci_bus_id else ""
    return f"GPU {index} ({gpu.name or 'unknown model'}{bus})"


def unavailable_reason(
    smi_output: str, report: SmiReport | None, module: KernelModule | None
) -> str | None:
    """Why nvidia-smi cannot vouch for the GPUs, in the host's own words; None when it can."""
    loaded = (
        f"the NVIDIA kernel module {module.version} is loaded"
        if module
        else "the NVIDIA kernel module is not loaded (/proc/driver/nvidia/version is absent)"
    )
    if smi_output.strip() == NOT_FOUND:
        return f"nvidia-smi is not installed; {loaded}"
    if report is None:
        return f"nvidia-smi printed output gpuhost cannot read: {smi_output.strip()[:200]!r}"
    if not report.ok:
        said = report.message or report.state
        return f"nvidia-smi reports {report.state}: {said!r}; {loaded}"
    if not report.gpus:
        return f"nvidia-smi lists no GPU; {loaded}"
    return None


def persistence_problems(report: SmiReport) -> list[str]:
    return [
        f"{_label(i, g)}: persistence mode is off"
        for i, g in enumerate(report.gpus)
        if g.persistence_mode is False
    ]


def clock_problems(report: SmiReport, spec: DesiredState) -> list[str]:
    """GPUs on application clocks must show the profile's clocks (or their own max); GPUs on
    locked clocks cannot be read back (the clocks service result vouches for them)."""
    problems = []
    for i, gpu in enumerate(report.gpus):
        single = SmiReport(gpus=[gpu])
        try:
            application = uses_application_clocks(gpu, spec.clocks_mode)
            in_effect = clocks_in_effect(
                single, spec.clocks_mode, spec.graphics_mhz, spec.memory_mhz
            )
        except Exception as exc:  # OperationValueError: the GPU reports no max clocks
            problems.append(f"{_label(i, gpu)}: {exc}")
            continue
        if application and not in_effect:
            want_gr = spec.graphics_mhz or gpu.clocks.max_graphics
            want_mem = spec.memory_mhz or gpu.clocks.max_mem
            problems.append(
                f"{_label(i, gpu)}: application clocks are {gpu.clocks.applications_mem},"
                f"{gpu.clocks.applications_graphics} MHz (memory,graphics), the profile wants "
                f"{want_mem},{want_gr}"
            )
    return problems


def ecc_problems(report: SmiReport) -> list[str]:
    problems = []
    for i, gpu in enumerate(report.gpus):
        count = gpu.ecc.volatile_uncorrectable
        if count:
            problems.append(
                f"{_label(i, gpu)}: {count} uncorrectable ECC error(s) since the driver loaded "
                f"(lifetime: {gpu.ecc.aggregate_uncorrectable})"
            )
    return problems


def retired_page_problems(report: SmiReport) -> list[str]:
    return [
        f"{_label(i, g)}: page retirement pending ({g.retired_pages.double_bit} double-bit "
        "retired pages); the GPU must be reset or the host rebooted to retire them"
        for i, g in enumerate(report.gpus)
        if g.retired_pages.pending
    ]


def remapped_row_problems(report: SmiReport) -> list[str]:
    problems = []
    for i, gpu in enumerate(report.gpus):
        rows = gpu.remapped_rows
        if rows.failure:
            problems.append(
                f"{_label(i, gpu)}: row remapping FAILED (no spare rows left): the GPU needs "
                "service"
            )
        elif rows.pending:
            problems.append(
                f"{_label(i, gpu)}: remapped rows pending ({rows.uncorrectable} uncorrectable); "
                "reset the GPU or reboot to apply them"
            )
    return problems


def parse_pstates(text: str) -> dict[int, str]:
    """``index, pstate`` CSV lines → {index: "P0"}; other lines are ignored."""
    found = {}
    for line in text.splitlines():
        match = PSTATE_RE.match(line)
        if match:
            found[int(match.group(1))] = match.group(2)
    return found


def pcie_problems(report: SmiReport, pstates: dict[int, str]) -> list[str]:
    """Width below the GPU's max is always a problem (seating, riser, slot). A lower generation
    is judged only in P0: idle GPUs lower their link speed to save power."""
    problems = []
    for i, gpu in enumerate(report.gpus):
        link = gpu.pcie
        label = _label(i, gpu)
        if link.width_current and link.width_max and link.width_current < link.width_max:
            problems.append(
                f"{label}: PCIe link x{link.width_current}, the GPU supports x{link.width_max}"
            )
        index = gpu.index if gpu.index is not None else i
        busy = pstates.get(index) == "P0"
        if link.gen_current and link.gen_max and link.gen_current < link.gen_max and busy:
            problems.append(
                f"{label}: PCIe gen {link.gen_current} while busy (P0), the GPU "
                f"supports gen {link.gen_max}"
            )
    return problems
