"""The node classes (``data/node_classes.yaml``): the boards gpuhost knows, one table for the GPU
fault judgement (:mod:`gpuhost.faults.node_class`), the RDMA fabric (:mod:`gpuhost.fabric.expected`)
and the collective test's floors (:mod:`gpuhost.collective.floors`).

A class refers to GPU SKUs (PCI IDs of the GPU catalog, or names nvidia-smi prints, matched by
:func:`gpuhost.gpus.names.same_sku`); :func:`class_of` finds a GPU's. :func:`node_override` is the
inventory's one override of a class: ``gpuhost_node``, with the older spellings
``gpuhost_expect`` (the node's fields) and ``gpuhost_fabric`` (the fabric's) read beneath it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from gpuhost.datadir import data_path
from gpuhost.datafiles import load_yaml, read_file_text, yaml_problem
from gpuhost.errors import ConfigError
from gpuhost.gpus.catalog import name_part, pci_id_in, pci_id_of
from gpuhost.gpus.names import same_sku

CLASSES_FILE = "node_classes.yaml"
NODE_KEY = "gpuhost_node"
OLD_KEYS = ("gpuhost_expect", "gpuhost_fabric")
# the node's fields (gpuhost_expect's) and the fabric's (gpuhost_fabric's)
INT_FIELDS = ("gpus", "memory_mib", "nvlinks_per_gpu", "pcie_gen", "pcie_width")
BOOL_FIELDS = ("fabric_manager",)
FABRIC_FIELDS = ("ports", "rate_gbps", "link_layer", "peermem")
LINK_LAYERS = ("InfiniBand", "Ethernet")
# a pinned firmware baseline (a class's `firmware`, gpuhost_node's `firmware`): each field one
# version or a list of the versions allowed (docs/audit-report.md, "Firmware")
FIRMWARE_KEY = "firmware"
FIRMWARE_FIELDS = ("vbios", "gsp", "hca", "bios")


@dataclass(frozen=True)
class FabricSpec:
    ports: int
    rate_gbps: float
    link_layer: str
    peermem: bool
    source: str  # the source's title and URL


@dataclass(frozen=True)
class CollectiveRef:
    reference_busbw_gbs: float
    source: str  # key of sources
    url: str
    confidence: str
    how: str


@dataclass(frozen=True)
class NodeClass:
    name: str
    board: str
    pci_ids: tuple[str, ...]
    gpu_names: tuple[str, ...]
    values: Mapping[str, Any]  # the node's fields this class gives (INT_FIELDS, BOOL_FIELDS)
    sources: tuple[str, ...]
    fabric: FabricSpec | None = None
    collective: CollectiveRef | None = None
    firmware: Mapping[str, tuple[str, ...]] | None = None  # a pinned baseline (none shipped)

    def has(self, gpu: str) -> bool:
        """Whether ``gpu`` (a name, a PCI ID, or a name with its PCI ID: catalog.labelled) is one
        of this class's SKUs."""
        pci_id = pci_id_in(gpu)
        if pci_id is not None and pci_id in self.pci_ids:
            return True
        return not pci_id_of(gpu) and any(same_sku(name_part(gpu), n) for n in self.gpu_names)


def _source(sources: Mapping[str, Any], key: Any, where: str) -> Mapping[str, Any]:
    row = sources.get(key) if isinstance(key, str) else None
    if not isinstance(row, dict) or not row.get("url") or not row.get("title"):
        raise ConfigError(f"{where}: expected a key of sources (with url and title), found {key!r}")
    return row


def _fabric(raw: Any, sources: Mapping[str, Any], where: str) -> FabricSpec | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping of {', '.join(FABRIC_FIELDS)}, source")
    for key in FABRIC_FIELDS:
        if key not in raw:
            raise ConfigError(f"{where}: missing field {key!r}")
        problem = _fabric_item_problem(key, raw[key])
        if problem or (key == "ports" and raw[key] < 1):
            raise ConfigError(f"{where}.{problem or 'ports: expected at least 1'}")
    row = _source(sources, raw.get("source"), f"{where}.source")
    return FabricSpec(
        raw["ports"],
        float(raw["rate_gbps"]),
        raw["link_layer"],
        raw["peermem"],
        f"{row['title']}, {row['url']}",
    )


#: above any collective bus bandwidth a node reaches (GB/s); a reference past it is a damaged table
MAX_BUSBW_GBS = 10_000.0


def _collective(raw: Any, sources: Mapping[str, Any], where: str) -> CollectiveRef | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping of reference_busbw_gbs, source, "
                          "confidence, how")
    row = _source(sources, raw.get("source"), f"{where}.source")
    busbw: Any = raw.get("reference_busbw_gbs")
    if not _number_in(busbw, 0.0, MAX_BUSBW_GBS):
        raise ConfigError(
            f"{where}.reference_busbw_gbs: expected a number of GB/s above 0 and at most "
            f"{MAX_BUSBW_GBS:,.0f}, found {busbw!r}"
        )
    for key in ("confidence", "how"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise ConfigError(f"{where}.{key}: expected words, found {raw.get(key)!r}")
    return CollectiveRef(
        float(busbw), str(raw["source"]), str(row["url"]), raw["confidence"], raw["how"]
    )


def _number_in(item: Any, low: float, high: float) -> bool:
    """Whether ``item`` is a YAML number (not a boolean, not NaN) with low < item <= high."""
    number = isinstance(item, (int, float)) and not isinstance(item, bool)
    return number and low < item <= high


def _class(raw: Any, index: int, sources: Mapping[str, Any]) -> NodeClass:
    where = f"{CLASSES_FILE}: classes[{index}]"
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise ConfigError(f"{where}: expected a mapping with a name")
    names = raw.get("gpu_names", [])
    listed = raw.get("pci_ids", [])
    pci_ids = [pci_id_of(str(p)) for p in listed] if isinstance(listed, list) else [None]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names) or None in pci_ids:
        raise ConfigError(f"{where}: gpu_names and pci_ids: expected lists of names, 10de:XXXX IDs")
    if not names and not pci_ids:
        raise ConfigError(f"{where}: expected gpu_names or pci_ids")
    if not isinstance(raw.get("board", ""), str):
        raise ConfigError(f"{where}.board: expected a name, found {raw['board']!r}")
    cited = raw.get("sources")
    if not isinstance(cited, list) or not cited:
        raise ConfigError(f"{where}: sources: expected names from sources: {', '.join(sources)}")
    for key in cited:
        _source(sources, key, f"{where}.sources")
    values = {k: raw[k] for k in INT_FIELDS + BOOL_FIELDS if k in raw}
    problem = node_problem(values)
    if problem:
        raise ConfigError(f"{where}: {problem}")
    firmware = raw.get(FIRMWARE_KEY)
    problem = firmware_problem(firmware) if firmware is not None else None
    if problem:
        raise ConfigError(f"{where}.{FIRMWARE_KEY}: {problem}")
    return NodeClass(
        raw["name"],
        str(raw.get("board", raw["name"])),
        tuple(p for p in pci_ids if p),
        tuple(names),
        values,
        tuple(map(str, cited)),
        _fabric(raw.get("fabric"), sources, f"{where}.fabric"),
        _collective(raw.get("collective"), sources, f"{where}.collective"),
        firmware_versions(firmware) if firmware is not None else None,
    )


def parse_classes(data: Any) -> tuple[NodeClass, ...]:
    if not isinstance(data, dict) or data.get("schema") != 2:
        raise ConfigError(f"{CLASSES_FILE}: expected 'schema: 2' at the top of a mapping")
    sources = data.get("sources")
    classes = data.get("classes")
    if not isinstance(sources, dict) or not isinstance(classes, list):
        raise ConfigError(f"{CLASSES_FILE}: expected sources (mapping) and classes (list)")
    parsed = tuple(_class(raw, i, sources) for i, raw in enumerate(classes))
    names = [c.name for c in parsed]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"{CLASSES_FILE}: class {twice[0]!r} is defined more than once")
    return parsed


@functools.lru_cache(maxsize=1)
def load_classes() -> tuple[NodeClass, ...]:
    path = data_path(CLASSES_FILE)
    try:
        return parse_classes(load_yaml(read_file_text(path, "the node classes")))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: {yaml_problem(exc)}") from exc


def class_of(gpu: str | None) -> NodeClass | None:
    """The node class whose SKUs include ``gpu`` (a name nvidia-smi prints, or a PCI ID)."""
    if not gpu:
        return None
    return next((c for c in load_classes() if c.has(gpu)), None)


INT_MAX = 10**9  # above any node's GPUs, links, PCIe lanes or GPU memory in MiB


def _shown(item: Any) -> str:
    if isinstance(item, int) and item.bit_length() > 64:
        return "a number too long to print"
    return repr(item)


def node_problem(value: Any) -> str | None:
    """Why ``value`` is not a valid mapping of the node's fields (one line, naming the field and
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


def _fabric_item_problem(key: str, item: Any) -> str | None:
    whole = isinstance(item, int) and not isinstance(item, bool)
    if key == "ports" and not (whole and 0 <= item <= 4096):
        return f"ports: expected a whole number from 0 to 4096, found {_shown(item)}"
    if key == "rate_gbps" and not _number_in(item, 0.0, 1e6):
        return f"rate_gbps: expected a number of Gb/s above 0, found {item!r}"
    if key == "link_layer" and item not in LINK_LAYERS:
        return f"link_layer: expected {' or '.join(LINK_LAYERS)}, found {item!r}"
    if key == "peermem" and not isinstance(item, bool):
        return f"peermem: expected true or false, found {item!r}"
    return None


def firmware_problem(value: Any) -> str | None:
    """Why ``value`` is not a valid firmware baseline (a mapping of ``FIRMWARE_FIELDS``, each a
    version or a list of versions), or None when it is."""
    if not isinstance(value, dict) or not value:
        return f"expected a mapping of {', '.join(FIRMWARE_FIELDS)}, found {value!r}"
    for key, item in value.items():
        if key not in FIRMWARE_FIELDS:
            return f"unknown key {key!r}, expected one of {', '.join(FIRMWARE_FIELDS)}"
        items = item if isinstance(item, list) else [item]
        if not items or not all(isinstance(i, str) and i.strip() for i in items):
            return f"{key}: expected a version or a list of versions, found {item!r}"
    return None


def firmware_versions(value: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """A checked baseline (``firmware_problem`` None) as {field: allowed versions}."""
    return {
        key: tuple(str(i).strip() for i in (item if isinstance(item, list) else [item]))
        for key, item in value.items()
    }


def override_problem(value: Any) -> str | None:
    """Why ``value`` is not a valid ``gpuhost_node`` mapping (the node's and the fabric's
    fields, the firmware baseline), or None when it is."""
    every = INT_FIELDS + BOOL_FIELDS + FABRIC_FIELDS + (FIRMWARE_KEY,)
    if not isinstance(value, dict):
        return f"expected a mapping of {', '.join(every)}, found {value!r}"
    for key, item in value.items():
        if key not in every:
            return f"unknown key {key!r}, expected one of {', '.join(every)}"
        if key == FIRMWARE_KEY:
            problem = firmware_problem(item)
            if problem:
                return f"{FIRMWARE_KEY}: {problem}"
            continue
        problem = _fabric_item_problem(key, item) if key in FABRIC_FIELDS else None
        problem = problem or (node_problem({key: item}) if key not in FABRIC_FIELDS else None)
        if problem:
            return problem
    return None


def node_override(host_data: Mapping[str, Any]) -> dict[str, Any]:
    """The inventory's override of the node class: ``gpuhost_expect`` and ``gpuhost_fabric`` (the
    older spellings) with ``gpuhost_node`` over them; {} when none is set. The inventory
    contract refuses a field two of them set differently."""
    merged: dict[str, Any] = {}
    for key in (*OLD_KEYS, NODE_KEY):
        value = host_data.get(key)
        if isinstance(value, Mapping):
            merged.update(value)
    return merged


def override_conflict(host_data: Mapping[str, Any]) -> str | None:
    """One line when two of the override keys set one field to different values."""
    seen: dict[str, tuple[str, Any]] = {}
    for key in (*OLD_KEYS, NODE_KEY):
        value = host_data.get(key)
        for field, item in (value.items() if isinstance(value, Mapping) else ()):
            if field in seen and seen[field][1] != item:
                first, was = seen[field]
                return (
                    f"{key}.{field} is {item!r} but {first}.{field} is {was!r}: set it once, "
                    f"in {NODE_KEY}"
                )
            seen[field] = (key, item)
    return None


@dataclass(frozen=True)
class FirmwareBaseline:
    """The firmware versions a node is pinned to; ``name``: where they come from (a class, the
    inventory, or both)."""

    name: str
    versions: Mapping[str, tuple[str, ...]]


def firmware_baseline(gpu: str | None, host_data: Mapping[str, Any]) -> FirmwareBaseline | None:
    """The firmware baseline of a node whose first GPU is ``gpu``: its node class's ``firmware``
    with the inventory's ``gpuhost_node.firmware`` over it, field by field (checked by the
    inventory contract); None when neither pins anything."""
    found = class_of(gpu)
    base = dict(found.firmware or {}) if found else {}
    override = node_override(host_data).get(FIRMWARE_KEY)
    pinned = firmware_versions(override) if isinstance(override, Mapping) else {}
    if not base and not pinned:
        return None
    names = [found.name] if found and base else []
    names += ["inventory"] if pinned else []
    return FirmwareBaseline(" + ".join(names), {**base, **pinned})
