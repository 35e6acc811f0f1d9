"""Typed data read from nvidia-smi outputs (XML, ``-q`` text, default table, query CSV).

Every field that the output did not show, or showed as "N/A"/"Not Supported"/deprecated, is None.
``to_dict()`` gives plain JSON-ready data (the shape of ``gpuhost parse --json``).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

# SmiReport.state values
STATE_OK = "ok"
STATE_ABSENT = "absent"  # empty output: nvidia-smi missing or printed nothing
ERROR_STATES = (
    "driver-library-mismatch",
    "driver-not-loaded",
    "no-devices",
    "gpu-lost",
    "nvml-missing",
    "unknown-error",
)


class _ToDict:
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]


@dataclass(frozen=True)
class MigMode(_ToDict):
    current: bool | None = None
    pending: bool | None = None
    devices: int = 0  # MIG devices listed under the GPU


@dataclass(frozen=True)
class Ecc(_ToDict):
    """ECC mode and error totals (SRAM + DRAM, or single-bit / double-bit on older schemas)."""

    mode_current: bool | None = None
    mode_pending: bool | None = None
    volatile_correctable: int | None = None
    volatile_uncorrectable: int | None = None
    aggregate_correctable: int | None = None
    aggregate_uncorrectable: int | None = None


@dataclass(frozen=True)
class RetiredPages(_ToDict):
    single_bit: int | None = None
    double_bit: int | None = None
    pending: bool | None = None


@dataclass(frozen=True)
class RemappedRows(_ToDict):
    correctable: int | None = None
    uncorrectable: int | None = None
    pending: bool | None = None
    failure: bool | None = None


@dataclass(frozen=True)
class Clocks(_ToDict):
    """Clocks in MHz. ``applications_clocks_supported`` is False when the driver reports
    application clocks as "Not Supported" or "Requested functionality has been deprecated"."""

    graphics: int | None = None
    sm: int | None = None
    mem: int | None = None
    applications_graphics: int | None = None
    applications_mem: int | None = None
    default_applications_graphics: int | None = None
    default_applications_mem: int | None = None
    max_graphics: int | None = None
    max_sm: int | None = None
    max_mem: int | None = None
    auto_boost: bool | None = None
    auto_boost_default: bool | None = None
    applications_clocks_supported: bool | None = None


@dataclass(frozen=True)
class PowerLimits(_ToDict):
    """Board power limits in watts."""

    current: float | None = None
    default: float | None = None
    min: float | None = None
    max: float | None = None
    draw: float | None = None


@dataclass(frozen=True)
class PcieLink(_ToDict):
    gen_current: int | None = None
    gen_max: int | None = None
    width_current: int | None = None
    width_max: int | None = None


@dataclass(frozen=True)
class ClockEvents(_ToDict):
    """Why the clocks are held down ("Clocks Event Reasons", older "Clocks Throttle Reasons"):
    True active, False not active, None not shown or N/A."""

    idle: bool | None = None
    sw_power_cap: bool | None = None
    hw_slowdown: bool | None = None
    hw_thermal: bool | None = None
    power_brake: bool | None = None
    sw_thermal: bool | None = None


@dataclass(frozen=True)
class Fabric(_ToDict):
    """The GPU's NVSwitch fabric registration (Hopper and newer): state "Not Started",
    "In Progress" or "Completed", status (meaningful once completed), clique id; None where
    nvidia-smi shows N/A (no fabric)."""

    state: str | None = None
    status: str | None = None
    clique_id: str | None = None


@dataclass(frozen=True)
class GpuInfo(_ToDict):
    name: str | None
    index: int | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    pci_device_id: str | None = None  # "10de:2330": nvidia-smi -q's "0x233010DE", as lspci -n
    vbios: str | None = None
    product_architecture: str | None = None
    compute_capability: str | None = None
    persistence_mode: bool | None = None
    memory_total_mib: int | None = None
    mig: MigMode = field(default_factory=MigMode)
    ecc: Ecc = field(default_factory=Ecc)
    retired_pages: RetiredPages = field(default_factory=RetiredPages)
    remapped_rows: RemappedRows = field(default_factory=RemappedRows)
    clocks: Clocks = field(default_factory=Clocks)
    power: PowerLimits = field(default_factory=PowerLimits)
    pcie: PcieLink = field(default_factory=PcieLink)
    clock_events: ClockEvents = field(default_factory=ClockEvents)
    fabric: Fabric = field(default_factory=Fabric)
    recovery_action: str | None = None  # "GPU Recovery Action" (None/N/A: not shown)


#: the longest GPU name gpuhost keeps (NVIDIA's are under 60 characters)
MAX_NAME_CHARS = 96
# "(PCI 10de:2330)" as gpuhost labels a GPU by its ID (gpus.catalog.labelled), in any spelling
_PCI_LABEL_RE = re.compile(r"\(\s*pci\b[^)]*\)?", re.IGNORECASE)


def reported_name(raw: str | None) -> str | None:
    """A GPU name as nvidia-smi reported it, made safe to show and to match: without a PCI
    label (the device ID that nvidia-smi reports decides which GPU it is, never a name that
    carries another's), control characters made spaces, at most ``MAX_NAME_CHARS``; None when
    nothing is left."""
    text = "".join(c if c.isprintable() else " " for c in raw or "")
    text = " ".join(_PCI_LABEL_RE.sub(" ", text).split())
    if len(text) > MAX_NAME_CHARS:
        text = text[: MAX_NAME_CHARS - 3] + "..."
    return text or None


def pci_device_id(raw: str | None) -> str | None:
    """``10de:2330`` for nvidia-smi's ``0x233010DE`` (XML: ``233010DE``): device ID, then vendor ID;
    None for anything else."""
    match = re.fullmatch(r"\s*(?:0x)?([0-9a-fA-F]{4})10de\s*", raw or "", re.IGNORECASE)
    return f"10de:{match.group(1).lower()}" if match else None


@dataclass(frozen=True)
class SmiReport(_ToDict):
    """What one nvidia-smi output says.

    ``state`` is "ok", "absent" (empty output) or one of ERROR_STATES; ``source`` names the
    format read ("xml", "query-text", "table", "csv", "error", "empty"); ``message`` keeps the
    first line of an error output.
    """

    state: str = STATE_OK
    source: str = "xml"
    driver_version: str | None = None
    cuda_version: str | None = None
    nvml_version: str | None = None
    attached_gpus: int | None = None
    gpus: list[GpuInfo] = field(default_factory=list)
    message: str | None = None

    @property
    def ok(self) -> bool:
        return self.state == STATE_OK

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        data["gpus"] = [gpu.to_dict() for gpu in self.gpus]
        return data
