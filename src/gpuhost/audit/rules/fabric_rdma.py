"""GPUDirect RDMA (``fabric.gpudirect``), the PCIe path between GPUs and NICs: ACS and the
IOMMU (``fabric.pcie``), and the GPU/NIC affinity of ``nvidia-smi topo -m``
(``fabric.affinity``). Judged by gpuhost.fabric.judge."""

from __future__ import annotations

from gpuhost.audit.rules.context import AuditContext, result_with, skip_result
from gpuhost.audit.rules.fabric_ports import fabric_skip
from gpuhost.fabric import judge
from gpuhost.findings import RuleResult


def check_gpudirect(ctx: AuditContext) -> RuleResult:
    rule = "fabric.gpudirect"
    skipped = fabric_skip(ctx, rule)
    if skipped is not None:
        return skipped
    exp = ctx.fabric_expected
    if exp is None or not exp.peermem:
        return skip_result(rule, "GPUDirect RDMA not required (node class / gpuhost_node)")
    module = ctx.facts.driver.loaded_module
    return result_with(
        rule,
        judge.gpudirect_findings(
            ctx.facts.fabric.peermem,
            exp,
            ctx.facts.kernel.running,
            module.flavor if module else None,
        ),
    )


def check_pcie_path(ctx: AuditContext) -> RuleResult:
    rule = "fabric.pcie"
    skipped = fabric_skip(ctx, rule)
    if skipped is not None:
        return skipped
    fabric = ctx.facts.fabric
    if fabric.pci is None and fabric.iommu is None:
        return skip_result(rule, fabric.pci_problem or "lspci and the IOMMU were not read")
    return result_with(rule, judge.pcie_findings(fabric.pci, fabric.iommu))


def check_affinity(ctx: AuditContext) -> RuleResult:
    rule = "fabric.affinity"
    skipped = fabric_skip(ctx, rule)
    if skipped is not None:
        return skipped
    topology = ctx.facts.fabric.topology
    if topology is None or not topology.nic_names:
        return skip_result(rule, "nvidia-smi topo -m was not read or lists no NIC")
    nics = {p.device for p in judge.fabric_ports(ctx.facts.fabric.ports, ctx.fabric_expected)}
    return result_with(rule, judge.affinity_findings(topology, nics))
