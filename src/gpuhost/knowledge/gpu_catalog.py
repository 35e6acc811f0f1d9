"""The GPU catalog (``data/gpu_catalog.yaml``) generated from its two primary sources.

- the PCI ID database (``pci.ids``, :mod:`gpuhost.gpus.pciids`): NVIDIA's device IDs, the chip of
  each and its marketing names;
- NVIDIA's CUDA GPU tables (``data/cuda_gpu_tables.yaml``, each row sourced): which GPU has which
  compute capability.

A chip's compute capability is the one the tables give to the GPUs the database names on it
(``NVIDIA H100`` is ``GH100 [H100 SXM5 80GB]``, so GH100 is 9.0 and every GH100 device inherits
it); the matrix's GPU rows (``matrix.yaml``, each with its source) add chips the tables' readable
part does not reach. Where the sources disagree on a chip (NVIDIA's legacy table puts the GM107
Quadro M620 at 5.2, the other GM107 GPUs at 5.0), the compute capability of most of the chip's
named GPUs wins and the others are kept under the chip as ``disagreeing``; an even split is a
DataUpdateError: no catalog is written. Every table GPU is kept by name too (``gpus``): a name
answers with its table's compute capability, also where the database has no device for it
(Jetson modules) or names it otherwise ("HGX GB200").

Maintainers regenerate the shipped catalog with ``gpuhost matrix catalog PCI_IDS``
(docs/knowledge.md); ``gpuhost data update`` regenerates it from this machine's ``pci.ids`` or
the published database into the data directory (:mod:`gpuhost.knowledge.catalog_update`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpuhost.datadir import shipped_path
from gpuhost.datafiles import load_yaml
from gpuhost.errors import DataUpdateError
from gpuhost.gpus.names import mobile_key, normalise_name
from gpuhost.gpus.pciids import PciDevice, PciIds, parse_nvidia

PCI_IDS_URL = "https://pci-ids.ucw.cz/"
HOST_PCI_IDS = ("/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids")
TABLES_FILE = "cuda_gpu_tables.yaml"
EVIDENCE_SHOWN = 3


@dataclass(frozen=True)
class TableGpu:
    """One GPU of a source table: its name, compute capability, table and source key."""

    name: str
    cc: str
    table: str
    source: str


@dataclass
class _Chip:
    """The compute capabilities the sources give a chip's GPUs: cc -> the GPU names, with where
    each was seen (``evidence``)."""

    votes: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    evidence: dict[str, list[str]] = field(default_factory=dict)

    def add(self, gpu: TableGpu, seen: str) -> None:
        self.votes.setdefault(gpu.cc, set()).add((normalise_name(gpu.name), gpu.table))
        shown = self.evidence.setdefault(gpu.cc, [])
        if seen not in shown:
            shown.append(seen)

    def decided(self) -> str | None:
        """The compute capability most of the chip's named GPUs have (None: a tie)."""
        ranked = sorted(self.votes.items(), key=lambda item: len(item[1]), reverse=True)
        if len(ranked) > 1 and len(ranked[0][1]) == len(ranked[1][1]):
            return None
        return ranked[0][0]

    def only_one_laptop(self, cc: str) -> bool:
        """Whether ``cc`` rests on one laptop GPU alone: a laptop name is sold on more than one
        chip ("GeForce 910M", 5.2 in NVIDIA's legacy table, is a Kepler GK208B in the database),
        so it does not decide a chip by itself."""
        names = {name for name, _ in self.votes[cc]}
        return len(names) == 1 and all(table == "laptop" for _, table in self.votes[cc])


def _one_per_gpu(name: str) -> list[str]:
    """ "Tesla C2050/C2070" (two GPUs on one table line) -> "Tesla C2050", "Tesla C2070"."""
    if "/" not in name or " / " in name:
        return [name]
    first, *rest = name.split("/")
    prefix = first.rsplit(" ", 1)[0] + " " if " " in first else ""
    return [first] + [prefix + other for other in rest]


def table_gpus(tables: Mapping[str, Any]) -> list[TableGpu]:
    """The rows of ``cuda_gpu_tables.yaml``, one per GPU name."""
    found: list[TableGpu] = []
    for block in tables.get("tables", []):
        for row in block["rows"]:
            for line in row["names"]:
                found += [
                    TableGpu(name, str(row["cc"]), row["table"], block["source"])
                    for name in _one_per_gpu(line)
                ]
    return found


def matrix_gpus(matrix: Mapping[str, Any]) -> list[TableGpu]:
    """The matrix's GPU rows as more table GPUs (their names are already model keys)."""
    return [
        TableGpu(name, str(row["compute_capability"]), "matrix", f"matrix:{row['source']}")
        for row in matrix.get("gpus", [])
        for name in row["names"]
    ]


def _index(
    devices: list[PciDevice],
) -> tuple[dict[str, list[PciDevice]], dict[str, list[PciDevice]]]:
    exact: dict[str, list[PciDevice]] = {}
    mobile: dict[str, list[PciDevice]] = {}
    for device in devices:
        for name in device.names:
            exact.setdefault(normalise_name(name), []).append(device)
            mobile.setdefault(mobile_key(name), []).append(device)
    return exact, mobile


def _chips(devices: list[PciDevice], gpus: list[TableGpu]) -> dict[str, _Chip]:
    """Chip -> the compute capabilities the table GPUs the database names on it have."""
    exact, mobile = _index(devices)
    chips: dict[str, _Chip] = {}
    for gpu in gpus:
        matched = exact.get(normalise_name(gpu.name)) or mobile.get(mobile_key(gpu.name)) or []
        for device in matched:
            seen = f"{gpu.source}: {gpu.name} ({gpu.cc}) = 10de:{device.device_id} {device.text}"
            chips.setdefault(device.base_chip, _Chip()).add(gpu, seen)
    return chips


def _chip_row(name: str, chip: _Chip, matrix: Mapping[str, Any]) -> dict[str, Any] | None:
    """The chip's catalog row; None when one laptop GPU alone names it."""
    cc = chip.decided()
    if cc is None:
        counts = "; ".join(
            f"{c}: {', '.join(sorted(n for n, _ in names))}"
            for c, names in sorted(chip.votes.items())
        )
        raise DataUpdateError(f"GPU catalog: chip {name}'s GPUs split evenly ({counts})")
    if chip.only_one_laptop(cc):
        return None
    row: dict[str, Any] = {
        "compute_capability": cc,
        "architecture": _architecture(matrix, cc),
        "evidence": chip.evidence[cc][:EVIDENCE_SHOWN],
    }
    dissent = [
        seen for other, seen_list in chip.evidence.items() if other != cc for seen in seen_list
    ]
    if dissent:
        row["disagreeing"] = dissent
    return row


def _table_rows(gpus: list[TableGpu]) -> list[dict[str, str]]:
    return [
        {"name": g.name, "compute_capability": g.cc, "table": g.table, "source": g.source}
        for g in gpus
    ]


def _architecture(matrix: Mapping[str, Any], cc: str) -> str | None:
    for arch in matrix.get("architectures", []):
        if cc in [str(c) for c in arch["compute_capabilities"]]:
            return str(arch["name"])
    return None


def build(
    pci: PciIds, tables: Mapping[str, Any], matrix: Mapping[str, Any], origin: str
) -> dict[str, Any]:
    """The catalog document (see the module docstring); DataUpdateError on a conflict."""
    devices = [d for d in pci.devices if d.is_gpu]
    gpus = table_gpus(tables)
    chips = _chips(devices, gpus + matrix_gpus(matrix))
    sources = {key: dict(row) for key, row in tables["sources"].items()}
    sources["pci-ids"] = {
        "url": PCI_IDS_URL,
        "title": f"PCI ID database, version {pci.version} ({pci.date}), vendor 10de; read from "
        f"{origin}",
        "confidence": "primary",
    }
    return {
        "schema": 1,
        "pci_ids": {"version": pci.version, "date": pci.date, "origin": origin},
        "sources": sources,
        "chips": {
            name: row
            for name, chip in sorted(chips.items())
            if (row := _chip_row(name, chip, matrix)) is not None
        },
        "devices": {d.device_id: [d.chip, d.text] for d in devices},
        "gpus": _table_rows(gpus),
    }


HEADER = """\
# GENERATED by gpuhost.knowledge.gpu_catalog from the PCI ID database and data/cuda_gpu_tables.yaml
# (and matrix.yaml's GPU rows): do not edit; regenerate (docs/knowledge.md, "The GPU catalog").
# chips: a chip's compute capability, with up to three table GPUs the database names on it;
# devices: PCI device ID (vendor 10de) -> [chip, the database's text]; a device inherits its chip's
# compute capability (the chip without its GL/GLM/M suffix); gpus: the tables' GPUs by name.
"""


def render(document: Mapping[str, Any]) -> str:
    body = dict(document)
    devices = body.pop("devices")
    text = yaml.safe_dump(body, sort_keys=False, allow_unicode=True, width=110)
    lines = [
        f'  "{key}": {yaml.safe_dump(value, default_flow_style=True, width=1000).strip()}'
        for key, value in devices.items()
    ]
    return HEADER + text + "devices:\n" + "\n".join(lines) + "\n"


def generate(pci_text: str, origin: str, tables_text: str, matrix_text: str) -> str:
    """The catalog's text from a ``pci.ids`` text, the tables and the matrix; ParseError for a
    damaged ``pci.ids``, DataUpdateError for a chip its GPUs split evenly."""
    pci = parse_nvidia(pci_text, origin)
    return render(build(pci, load_yaml(tables_text), load_yaml(matrix_text), origin))


def shipped_generate(pci_path: str, origin: str) -> str:
    """``gpuhost matrix catalog``: the catalog from ``pci_path`` and the shipped tables and
    matrix (the maintainers' regeneration of ``data/gpu_catalog.yaml``)."""
    try:
        pci_text = Path(pci_path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataUpdateError(f"{pci_path}: cannot read the PCI ID database ({exc})") from None
    return generate(
        pci_text,
        origin or pci_path,
        Path(shipped_path(TABLES_FILE)).read_text(encoding="utf-8"),
        Path(shipped_path("matrix.yaml")).read_text(encoding="utf-8"),
    )
