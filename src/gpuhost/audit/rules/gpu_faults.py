"""GPU faults the probe reads beside nvidia-smi -q, judged by the fault catalog
(``gpuhost.faults.judge``): Xid events in the kernel log since boot (``gpu.xid``: findings
``gpu.xid.<code>``), NVLink links down or fewer than the node class expects and NVLink error
counters (``gpu.nvlink``), each GPU's PCIe AER counters (``gpu.pcie-aer``)."""

from __future__ import annotations

from gpuhost.audit.rules.context import AuditContext, result_with, skip_result, visible_gpus
from gpuhost.faults.judge import (
    aer_findings,
    nvlink_error_findings,
    nvlink_findings,
    xid_findings,
)
from gpuhost.findings import RuleResult


def check_xid(ctx: AuditContext) -> RuleResult:
    events = ctx.facts.gpu_faults.xid
    if events is None:
        return skip_result("gpu.xid", "the kernel log was not read")
    return result_with("gpu.xid", xid_findings(events, visible_gpus(ctx.facts) or []))


def check_nvlink(ctx: AuditContext) -> RuleResult:
    faults = ctx.facts.gpu_faults
    if faults.nvlink is None and faults.nvlink_errors is None:
        return skip_result("gpu.nvlink", "nvidia-smi nvlink was not read (no nvidia-smi or GPU)")
    found = nvlink_findings(faults.nvlink or [], ctx.node)
    found += nvlink_error_findings(faults.nvlink_errors or [])
    return result_with("gpu.nvlink", found)


def check_pcie_aer(ctx: AuditContext) -> RuleResult:
    counters = ctx.facts.gpu_faults.aer
    if not counters:
        return skip_result("gpu.pcie-aer", "no AER counters in sysfs for the host's NVIDIA GPUs")
    return result_with("gpu.pcie-aer", aer_findings(counters))
