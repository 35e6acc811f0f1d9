"""What a node should have (``data/node_classes.yaml``, per GPU model, overridden by the
inventory's ``gpuhost_expect``): GPU count, memory, NVLink links per GPU, PCIe link, fabric
manager. ``expectation_for(gpu_name, override, gpu_count)`` gives the :class:`NodeExpectation` the
judgement compares the node with (fields left None are not checked).

A GPU model's name does not say which board it sits on: an H100 SXM is in an 8-GPU HGX board, a
4-GPU board (no NVSwitch) or a cloud VM given 1, 2 or 4 of a board's GPUs. So the board-wide fields
of a class (``BOARD_FIELDS``: GPU count, NVLink links per GPU, fabric manager) are applied only to a
node that shows more than half the class's GPUs (an 8-GPU board that lost some); a node with half
or fewer is judged on the per-GPU fields alone unless the inventory's ``gpuhost_expect`` sets them.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

import yaml

from gpuhost.datadir import data_path
from gpuhost.datafiles import load_yaml, read_file_text, yaml_problem
from gpuhost.errors import ConfigError

CLASSES_FILE = "node_classes.yaml"
# the fields an inventory may override (gpuhost_expect) and the node classes give
INT_FIELDS = ("gpus", "memory_mib", "nvlinks_per_gpu", "pcie_gen", "pcie_width")
BOOL_FIELDS = ("fabric_manager",)
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


@dataclass(frozen=True)
class NodeClass:
    expectation: NodeExpectation
    gpu_names: tuple[str, ...]
    sources: tuple[str, ...]


INT_MAX = 10**9  # above any node's GPUs, links, PCIe lanes or GPU memory in MiB


def _shown(item: Any) -> str:
    if isinstance(item, int) and item.bit_length() > 64:
        return "a number too long to print"
    return repr(item)


def expect_problem(value: Any) -> str | None:
    """Why ``value`` is not a valid ``gpuhost_expect`` mapping (one line, naming the field and
    what was found), or None when it is."""
    if not isinstance(value, dict):
        return f"expected a mapping of {', '.join(INT_FIELDS + BOOL_FIELDS)}, found {value!r}"
    for key, item in value.items():
        if key in INT_FIELDS:
            if not isinstance(item, int) or isinstance(item, bool) or not 0 <= item <= INT_MAX:
                return f"{key}: expected a whole number from 0 to {INT_MAX:,}, found {_shown(item)}"
        elif key in BOOL_FIELDS:
            if not isinstance(item, bool):
                return f"{key}: expected true or false, found {item!r}"
        else:
            return f"unknown key {key!r}, expected one of {', '.join(INT_FIELDS + BOOL_FIELDS)}"
    return None


def _class(raw: Any, index: int, sources: Mapping[str, Any]) -> NodeClass:
    where = f"{CLASSES_FILE}: classes[{index}]"
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise ConfigError(f"{where}: expected a mapping with a name")
    names = raw.get("gpu_names")
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"{where}: gpu_names: expected a list of GPU names")
    cited = raw.get("sources")
    if not isinstance(cited, list) or not cited or any(s not in sources for s in cited):
        raise ConfigError(f"{where}: sources: expected names from sources: {', '.join(sources)}")
    values = {k: v for k, v in raw.items() if k not in ("name", "gpu_names", "sources")}
    problem = expect_problem(values)
    if problem:
        raise ConfigError(f"{where}: {problem}")
    return NodeClass(
        NodeExpectation(name=raw["name"], **values), tuple(names), tuple(map(str, cited))
    )


def parse_classes(data: Any) -> tuple[NodeClass, ...]:
    if not isinstance(data, dict) or data.get("schema") != 1:
        raise ConfigError(f"{CLASSES_FILE}: expected 'schema: 1' at the top of a mapping")
    sources = data.get("sources")
    classes = data.get("classes")
    if not isinstance(sources, dict) or not isinstance(classes, list):
        raise ConfigError(f"{CLASSES_FILE}: expected sources (mapping) and classes (list)")
    return tuple(_class(raw, i, sources) for i, raw in enumerate(classes))


@functools.lru_cache(maxsize=1)
def load_classes() -> tuple[NodeClass, ...]:
    path = data_path(CLASSES_FILE)
    try:
        return parse_classes(load_yaml(read_file_text(path, "the node classes")))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: {yaml_problem(exc)}") from exc


def _same_name(a: str, b: str) -> bool:
    return " ".join(a.lower().split()) == " ".join(b.lower().split())


def _board_applies(base: NodeExpectation, gpu_count: int | None) -> bool:
    """Whether a node showing ``gpu_count`` GPUs is taken for the class's board (more than half of
    its GPUs seen; None: the count is unknown, the board is assumed)."""
    return gpu_count is None or base.gpus is None or gpu_count * 2 > base.gpus


def expectation_for(
    gpu_name: str | None,
    override: Mapping[str, Any] | None = None,
    gpu_count: int | None = None,
) -> NodeExpectation | None:
    """The node class of ``gpu_name`` with the inventory's ``override`` (``gpuhost_expect``,
    already checked by the inventory contract) on top; None when neither says anything.
    ``gpu_count``: the GPUs the node shows; with half or fewer of the class's, the class's
    board-wide fields are left out (a smaller board or a VM, not a board that lost GPUs)."""
    base: NodeExpectation | None = None
    if gpu_name:
        for node_class in load_classes():
            if any(_same_name(gpu_name, name) for name in node_class.gpu_names):
                base = node_class.expectation
                break
    if base is not None and not _board_applies(base, gpu_count):
        base = replace(
            base,
            name=f"{base.name} (per-GPU values only: {gpu_count} of its {base.gpus} GPUs seen)",
            **dict.fromkeys(BOARD_FIELDS),
        )
    if not override:
        return base
    known = {f.name for f in fields(NodeExpectation)} - {"name"}
    values = {k: v for k, v in override.items() if k in known}
    if base is None:
        return NodeExpectation(**values)
    return replace(base, name=f"{base.name} + inventory", **values)
