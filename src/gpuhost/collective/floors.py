"""Bus-bandwidth floors of the collective test: ``fraction`` (``data/collective_floors.yaml``) of
the sourced reference of a node class (``data/node_classes.yaml``, ``collective:``; the board's
GPUs and fabric, gpuhost.gpus.node_classes).

``load_floors()`` validates the fraction file and takes the node classes' references (each
citing a known source and confidence); ``resolve_floor(floors, gpus, fabric, user_floor)`` gives
the floor a run is judged against: the user's own (``--floor`` / ``gpuhost_collective_floor``)
when given, else ``fraction`` x the sourced reference of the nodes' GPU model and fabric (a
``Fabric``: the compute ports, their rate and link layer, as ``gpuhost.fabric.expected`` gives a
node's).
Without either there is no floor: a ConfigError saying what to give (a floor nobody can
source is never invented).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from gpuhost.errors import ConfigError, MatrixError
from gpuhost.gpus.node_classes import NodeClass, load_classes
from gpuhost.matrix.load import CONFIDENCES
from gpuhost.matrix.peaks import read_sources
from gpuhost.matrix.yamlfile import read_mapping

FILE = "collective_floors.yaml"


@dataclass(frozen=True)
class Fabric:
    """A node's compute fabric: ``ports`` RDMA ports of ``link_layer`` at ``rate_gbps`` each."""

    ports: int
    rate_gbps: float
    link_layer: str

    def __str__(self) -> str:
        return f"{self.ports} x {self.rate_gbps:g} Gb/s {self.link_layer}"


@dataclass(frozen=True)
class FloorRow:
    node_class: NodeClass
    fabric: Fabric
    reference_busbw_gbs: float
    source: str
    url: str
    confidence: str
    how: str

    @property
    def gpus(self) -> tuple[str, ...]:
        return self.node_class.gpu_names


@dataclass(frozen=True)
class Floors:
    fraction: float
    rows: tuple[FloorRow, ...]

    def find(self, gpu: str, fabric: Fabric) -> FloorRow | None:
        """The reference of the node class ``gpu`` (a name or a PCI ID) belongs to, over
        ``fabric``."""
        for row in self.rows:
            if row.fabric == fabric and row.node_class.has(gpu):
                return row
        return None


@dataclass(frozen=True)
class Floor:
    """The floor a run is judged against (GB/s) and where it comes from, in words."""

    busbw_gbs: float
    origin: str
    source: str | None = None  # the data row's source URL; None for the user's floor


def default_path() -> str:
    return str(resources.files("gpuhost") / "data" / FILE)


def load_floors(path: str | None = None) -> Floors:
    """The floors file (default: the shipped one, cached); MatrixError lists every bad field."""
    return _default() if path is None else _load(path)


@functools.lru_cache(maxsize=1)
def _default() -> Floors:
    return _load(default_path())


def _positive(value: Any, where: str, problems: list[str]) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        problems.append(f"{where}: found {value!r}, expected a positive number")
        return 0.0
    return float(value)


def _rows(problems: list[str]) -> tuple[FloorRow, ...]:
    """The node classes' collective references (those with a fabric to run over)."""
    rows = []
    for node_class in load_classes():
        ref, spec = node_class.collective, node_class.fabric
        if ref is None or spec is None:
            continue
        if ref.confidence not in CONFIDENCES:
            problems.append(
                f"node class {node_class.name}.collective.confidence: found {ref.confidence!r}, "
                f"expected one of {', '.join(CONFIDENCES)}"
            )
        fabric = Fabric(spec.ports, spec.rate_gbps, spec.link_layer)
        rows.append(
            FloorRow(node_class, fabric, ref.reference_busbw_gbs, ref.source, ref.url,
                     ref.confidence, ref.how)  # fmt: skip
        )
    return tuple(rows)


def _load(path: str) -> Floors:
    data = read_mapping(path, "schema, fraction, fraction_source and sources")
    problems: list[str] = []
    if data.get("schema") != 2:
        problems.append(f"schema: found {data.get('schema')!r}, expected 2")
    fraction = _positive(data.get("fraction"), "fraction", problems)
    if fraction > 1:
        problems.append(f"fraction: found {fraction!r}, expected at most 1")
    sources = read_sources(data, problems)
    if data.get("fraction_source") not in sources:
        problems.append("fraction_source: expected a key of sources")
    rows = _rows(problems)
    if problems:
        raise MatrixError(path, problems)
    return Floors(fraction, rows)


def resolve_floor(
    floors: Floors, gpus: Sequence[str], fabric: Fabric | None, user_floor: float | None
) -> Floor:
    """The floor for nodes with these GPU names on this fabric (see the module docstring)."""
    if user_floor is not None:
        return Floor(user_floor, "the floor given (--floor or gpuhost_collective_floor)")
    models = sorted(set(gpus))
    if fabric and len(models) == 1:
        row = floors.find(models[0], fabric)
        if row is not None:
            value = round(row.reference_busbw_gbs * floors.fraction, 2)
            return Floor(
                value,
                f"{floors.fraction:g} x {row.reference_busbw_gbs:g} GB/s, {models[0]} on "
                f"{fabric} ({row.how})",
                row.url,
            )
    known = sorted({str(row.fabric) for row in floors.rows})
    described = fabric or "unknown (no node class of data/node_classes.yaml, no gpuhost_node)"
    found = f"GPUs {', '.join(models) or 'not given (gpuhost_gpus)'}, fabric {described}"
    raise ConfigError(
        f"collective: no sourced bus-bandwidth floor for {found} (data/node_classes.yaml has "
        f"references for fabrics {'; '.join(known)} with their GPU models): give your own floor "
        "with --floor GB/s or inventory data gpuhost_collective_floor"
    )
