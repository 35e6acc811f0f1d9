"""GPU health, judged per GPU by the fault judgement (``gpuhost.faults``): ECC errors, retired
pages, remapped rows, the PCIe link (``gpu.ecc``, ``gpu.retired-pages``, ``gpu.remapped-rows``,
``gpu.pcie-link``), clocks held down (``gpu.clock-events``), the NVSwitch fabric
(``gpu.fabric``), the driver's recovery action (``gpu.recovery-action``) and what the node
should have (``gpu.node-class``: GPU count, memory, PCIe width)."""

from __future__ import annotations

from gpuhost.audit.rules.context import (
    AuditContext,
    per_gpu,
    result_with,
    skip_result,
    visible_gpus,
)
from gpuhost.faults.gpu import (
    clock_event_findings,
    ecc_findings,
    fabric_findings,
    pcie_findings,
    recovery_findings,
    remapped_rows_findings,
    retired_pages_findings,
)
from gpuhost.faults.judge import expectation_findings, fabric_manager_findings
from gpuhost.findings import Finding, RuleResult
from gpuhost.parsers.nvidia_smi import GpuInfo


def check_ecc(ctx: AuditContext) -> RuleResult:
    return per_gpu(ctx, "gpu.ecc", ecc_findings)


def check_retired_pages(ctx: AuditContext) -> RuleResult:
    return per_gpu(ctx, "gpu.retired-pages", retired_pages_findings)


def check_remapped_rows(ctx: AuditContext) -> RuleResult:
    return per_gpu(ctx, "gpu.remapped-rows", remapped_rows_findings)


def check_pcie(ctx: AuditContext) -> RuleResult:
    def judge(gpu: GpuInfo) -> list[Finding]:
        return pcie_findings(gpu, gpu.index is not None and gpu.index in ctx.busy_gpus)

    return per_gpu(ctx, "gpu.pcie-link", judge)


def check_clock_events(ctx: AuditContext) -> RuleResult:
    return per_gpu(ctx, "gpu.clock-events", clock_event_findings)


def check_fabric(ctx: AuditContext) -> RuleResult:
    return per_gpu(ctx, "gpu.fabric", fabric_findings)


def check_recovery_action(ctx: AuditContext) -> RuleResult:
    return per_gpu(ctx, "gpu.recovery-action", recovery_findings)


def check_node_class(ctx: AuditContext) -> RuleResult:
    rule = "gpu.node-class"
    if ctx.node is None:
        return skip_result(rule, "no node class for this GPU model and no gpuhost_node")
    if visible_gpus(ctx.facts) is None:
        return skip_result(rule, "no GPU reported by nvidia-smi on this host")
    found = expectation_findings(ctx.facts.driver.smi, ctx.node)
    found += fabric_manager_findings(
        ctx.facts.fabric_manager.installed, ctx.node, ctx.facts.driver.smi
    )
    return result_with(rule, found)
