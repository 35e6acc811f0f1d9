"""Bus-bandwidth floors of the collective test (``data/collective_floors.yaml``).

``load_floors()`` validates the file (every row cites a known source, numbers positive, one row
per GPU name and fabric); ``resolve_floor(floors, gpus, fabric, user_floor)`` gives the floor a
run is judged against: the user's own (``--floor`` / ``gpuhost_collective_floor``) when given,
else ``fraction`` x the sourced reference of the nodes' GPU model and fabric (a ``Fabric``: the
compute ports, their rate and link layer, as ``gpuhost.fabric.expected`` gives a node's).
Without either there is no floor: a ConfigError saying what to give (a floor nobody can
source is never invented).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from gpuhost.errors import ConfigError, MatrixError
from gpuhost.fabric.expected import LINK_LAYERS
from gpuhost.matrix.model import Source
from gpuhost.matrix.peaks import cited, name_key, read_sources, text_field
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
    gpus: tuple[str, ...]
    fabric: Fabric
    reference_busbw_gbs: float
    source: str
    url: str
    confidence: str
    how: str


@dataclass(frozen=True)
class Floors:
    fraction: float
    rows: tuple[FloorRow, ...]

    def find(self, gpu: str, fabric: Fabric) -> FloorRow | None:
        wanted = name_key(gpu)
        for row in self.rows:
            if row.fabric == fabric and wanted in {name_key(n) for n in row.gpus}:
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


def _fabric(raw: Any, where: str, problems: list[str]) -> Fabric:
    if not isinstance(raw, dict) or raw.get("link_layer") not in LINK_LAYERS:
        problems.append(
            f"{where}: found {raw!r}, expected {{ports, rate_gbps, link_layer}} with link_layer "
            f"one of {', '.join(LINK_LAYERS)}"
        )
        return Fabric(0, 0.0, "")
    ports = raw.get("ports")
    if isinstance(ports, bool) or not isinstance(ports, int) or ports < 1:
        problems.append(f"{where}.ports: found {ports!r}, expected a positive integer")
        ports = 0
    rate = _positive(raw.get("rate_gbps"), f"{where}.rate_gbps", problems)
    return Fabric(ports, rate, str(raw["link_layer"]))


def _row(raw: Any, where: str, sources: Mapping[str, Source], problems: list[str]) -> FloorRow:
    if not isinstance(raw, dict):
        problems.append(f"{where}: expected a mapping")
        return FloorRow((), Fabric(0, 0.0, ""), 0.0, "", "", "", "")
    gpus = raw.get("gpus")
    if not isinstance(gpus, list) or not gpus or not all(isinstance(g, str) for g in gpus):
        problems.append(f"{where}.gpus: found {gpus!r}, expected a list of GPU names")
        gpus = []
    source, confidence = cited(raw, where, sources, problems)
    return FloorRow(
        gpus=tuple(gpus),
        fabric=_fabric(raw.get("fabric"), f"{where}.fabric", problems),
        reference_busbw_gbs=_positive(
            raw.get("reference_busbw_gbs"), f"{where}.reference_busbw_gbs", problems
        ),
        source=source,
        url=sources[source].url if source in sources else "",
        confidence=confidence,
        how=text_field(raw, "how", where, problems),
    )


def _load(path: str) -> Floors:
    data = read_mapping(path, "schema, fraction, sources and floors")
    problems: list[str] = []
    if data.get("schema") != 1:
        problems.append(f"schema: found {data.get('schema')!r}, expected 1")
    fraction = _positive(data.get("fraction"), "fraction", problems)
    if fraction > 1:
        problems.append(f"fraction: found {fraction!r}, expected at most 1")
    sources = read_sources(data, problems)
    if data.get("fraction_source") not in sources:
        problems.append("fraction_source: expected a key of sources")
    raw_rows = data.get("floors")
    if not isinstance(raw_rows, list):
        problems.append("floors: expected a list of rows")
        raw_rows = []
    rows = tuple(_row(r, f"floors[{i}]", sources, problems) for i, r in enumerate(raw_rows))
    seen: dict[tuple[str, Fabric], int] = {}
    for index, row in enumerate(rows):
        for gpu in row.gpus:
            key = (name_key(gpu), row.fabric)
            if key in seen:
                problems.append(
                    f"floors[{index}].gpus: {gpu!r} on {row.fabric} is already floors[{seen[key]}]"
                )
            seen[key] = index
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
    described = fabric or "unknown (no node class of data/fabric_classes.yaml, no gpuhost_fabric)"
    found = f"GPUs {', '.join(models) or 'not given (gpuhost_gpus)'}, fabric {described}"
    raise ConfigError(
        f"collective: no sourced bus-bandwidth floor for {found} (data/{FILE} has rows for "
        f"fabrics {'; '.join(known)} with their GPU models): give your own floor with --floor "
        "GB/s or inventory data gpuhost_collective_floor"
    )
