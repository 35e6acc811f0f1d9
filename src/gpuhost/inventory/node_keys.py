"""Inventory data keys of the node class override (``gpuhost_node``; its older spellings
``gpuhost_expect`` and ``gpuhost_fabric`` keep working beneath it, docs/inventory.md); part of
``contract.KEYS``. The node classes: ``data/node_classes.yaml`` (gpuhost.gpus.node_classes)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, StrictStr

from gpuhost.fabric.expected import FabricOverride
from gpuhost.gpus.node_classes import node_problem, override_problem
from gpuhost.inventory.value_types import Key, key

_USED_BY = "audit, check"


def _checked(problem_of: Any) -> AfterValidator:
    def check(value: dict[str, Any]) -> dict[str, Any]:
        problem = problem_of(value)
        if problem:
            raise ValueError(problem)
        return value

    return AfterValidator(check)


NODE_KEYS: tuple[Key, ...] = (
    key(
        "gpuhost_node",
        Annotated[dict[StrictStr, Any], _checked(override_problem)],
        "a mapping of gpus, memory_mib, nvlinks_per_gpu, pcie_gen, pcie_width (whole numbers), "
        "fabric_manager (true/false), ports (integer), rate_gbps (number), link_layer "
        "('InfiniBand' or 'Ethernet'), peermem (true/false), firmware (a mapping of vbios, gsp, "
        "hca, bios: a version or a list of versions), e.g. {gpus: 4, ports: 4}",
        None,
        "What the node should have, over its GPUs' node class (src/gpuhost/data/"
        "node_classes.yaml: the board): GPUs, GPU memory, NVLink links, PCIe link and fabric "
        "manager (a node with fewer or less is a finding, docs/monitoring.md), and its RDMA "
        "fabric: compute ports of that link layer, the lowest port rate in Gb/s, GPUDirect RDMA "
        "required (docs/fabric.md); the firmware it is pinned to (over the class's baseline, "
        "field by field; docs/audit-report.md, Firmware). gpuhost_expect and gpuhost_fabric are "
        "older spellings of "
        "its two halves, read beneath it; a field set differently in two of them is refused.",
        _USED_BY,
    ),
    key(
        "gpuhost_expect",
        Annotated[dict[StrictStr, Any], _checked(node_problem)],
        "a mapping of gpus, memory_mib, nvlinks_per_gpu, pcie_gen, pcie_width (whole "
        "numbers) and fabric_manager (true/false), e.g. {'gpus': 4}",
        None,
        "Older spelling of gpuhost_node's node fields (kept working).",
        _USED_BY,
    ),
    key(
        "gpuhost_fabric",
        FabricOverride,
        "a mapping of ports (integer), rate_gbps (number), link_layer ('InfiniBand' or "
        "'Ethernet'), peermem (true/false), e.g. {ports: 8, rate_gbps: 400, link_layer: "
        "InfiniBand}",
        None,
        "Older spelling of gpuhost_node's fabric fields (kept working).",
        _USED_BY,
    ),
)
