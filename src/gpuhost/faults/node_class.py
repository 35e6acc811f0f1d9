"""What a node should have: its GPUs' node class (``data/node_classes.yaml``, read by
:mod:`gpuhost.gpus.node_classes`) with the inventory's override (``gpuhost_node``, older
``gpuhost_expect``) over it: GPU count, memory, NVLink links per GPU, PCIe link, fabric manager.
``expectation_for(gpu_name, override, gpu_count)`` gives the :class:`NodeExpectation` the
judgement compares the node with (fields left None are not checked).

A GPU model's name does not say which board it sits on: an H100 SXM is in an 8-GPU HGX board, a
4-GPU board (no NVSwitch) or a cloud VM given 1, 2 or 4 of a board's GPUs. So the board-wide fields
of a class (``BOARD_FIELDS``: GPU count, NVLink links per GPU, fabric manager) are applied only to a
node that shows more than half the class's GPUs (an 8-GPU board that lost some); a node with half
or fewer is judged on the per-GPU fields alone unless the inventory's override sets them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from gpuhost.gpus.node_classes import class_of

# what belongs to the board, not the GPU model (see the module's docstring)
BOARD_FIELDS = ("gpus", "nvlinks_per_gpu", "fabric_manager")


@dataclass(frozen=True)
class NodeExpectation:
    """What the node should have; ``name``: the class (or "inventory") it comes from."""

    name: str = "inventory"
    gpus: int | None = None
    memory_mib: int | None = None
    nvlinks_per_gpu: int | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    fabric_manager: bool | None = None


_KNOWN = {f.name for f in fields(NodeExpectation)} - {"name"}


def _board_applies(base: NodeExpectation, gpu_count: int | None) -> bool:
    """Whether a node showing ``gpu_count`` GPUs is taken for the class's board (more than half of
    its GPUs seen; None: the count is unknown, the board is assumed)."""
    return gpu_count is None or base.gpus is None or gpu_count * 2 > base.gpus


def expectation_for(
    gpu_name: str | None,
    override: Mapping[str, Any] | None = None,
    gpu_count: int | None = None,
) -> NodeExpectation | None:
    """The node class of ``gpu_name`` with the inventory's ``override`` (``node_classes.
    node_override``, already checked by the inventory contract; its fabric fields are not the
    node's) on top; None when neither says anything. ``gpu_count``: the GPUs the node shows;
    with half or fewer of the class's, the class's board-wide fields are left out (a smaller
    board or a VM, not a board that lost GPUs)."""
    found = class_of(gpu_name)
    base = NodeExpectation(name=found.name, **found.values) if found and found.values else None
    if base is not None and not _board_applies(base, gpu_count):
        base = replace(
            base,
            name=f"{base.name} (per-GPU values only: {gpu_count} of its {base.gpus} GPUs seen)",
            **dict.fromkeys(BOARD_FIELDS),
        )
    values = {k: v for k, v in (override or {}).items() if k in _KNOWN}
    if not values:
        return base
    if base is None:
        return NodeExpectation(**values)
    return replace(base, name=f"{base.name} + inventory", **values)
