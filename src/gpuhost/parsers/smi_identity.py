"""What identifies each GPU in ``nvidia-smi -q -x``, and its slowdown temperature (pure).

``parse_identity(xml)`` → one ``GpuIdentity`` per ``<gpu>``: bus id, serial, UUID, VBIOS, GSP
firmware, board part number, and ``gpu_temp_slow_threshold`` in °C (None where nvidia-smi shows
N/A or nothing: newer drivers give a relative T.Limit instead). The acceptance record keeps the
serials and firmware; the soak's temperatures are judged against the threshold. The XML rules
of ``smi_xml`` apply (a DTD internal subset or an entity is refused).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass
from typing import Any

from gpuhost.errors import ParseError
from gpuhost.parsers._common import first_line, require_text
from gpuhost.parsers.smi_xml import UNSAFE_DTD_RE

EXPECTED = "nvidia-smi -q -x output (<nvidia_smi_log> with <gpu> elements)"
_DEGREES_RE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*C\s*$")


@dataclass(frozen=True)
class GpuIdentity:
    bus_id: str | None
    serial: str | None = None
    uuid: str | None = None
    vbios: str | None = None
    gsp_firmware: str | None = None
    board_part_number: str | None = None
    slowdown_temp_c: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _text(gpu: ET.Element, path: str) -> str | None:
    value = (gpu.findtext(path) or "").strip()
    return None if value in ("", "N/A", "[N/A]") or value.startswith("[") else value


def _degrees(value: str | None) -> float | None:
    match = _DEGREES_RE.match(value or "")
    return float(match.group(1)) if match else None


def parse_identity(text: str) -> list[GpuIdentity]:
    """See the module docstring; empty output → []; anything else that is not the XML raises
    ParseError."""
    text = require_text(text, EXPECTED)
    if not text.strip():
        return []
    if UNSAFE_DTD_RE.search(text):
        raise ParseError(f"expected {EXPECTED}; a DTD internal subset or entity is refused")
    try:
        root = ET.fromstring(text.strip())
    except ET.ParseError as exc:
        raise ParseError(f"expected {EXPECTED}, found {first_line(text)!r} ({exc})") from None
    if root.tag != "nvidia_smi_log":
        raise ParseError(f"expected {EXPECTED}, found <{root.tag}>")
    return [
        GpuIdentity(
            bus_id=gpu.get("id") or _text(gpu, "pci/pci_bus_id"),
            serial=_text(gpu, "serial"),
            uuid=_text(gpu, "uuid"),
            vbios=_text(gpu, "vbios_version"),
            gsp_firmware=_text(gpu, "gsp_firmware_version"),
            board_part_number=_text(gpu, "board_part_number"),
            slowdown_temp_c=_degrees(_text(gpu, "temperature/gpu_temp_slow_threshold")),
        )
        for gpu in root.findall("gpu")
    ]
