"""The PCI ID database (``pci.ids`` as pciutils ships it): NVIDIA's devices.

``parse_nvidia(text)`` reads the vendor 10de block: one :class:`PciDevice` per device line
(``\\t2330  GH100 [H100 SXM5 80GB]``): its 4-hex-digit ID, the chip (the words before the
brackets, ``GH100``) and the marketing names in the brackets (``a / b`` alternatives split).
The header's ``Version:`` and ``Date:`` lines say which edition it is. A text without an NVIDIA
block, or whose NVIDIA block has a line that is not a device, subsystem or comment line, is a
ParseError: a damaged file never replaces a good catalog.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuhost.errors import ParseError

VENDOR = "10de"
_DEVICE_RE = re.compile(r"^\t([0-9a-f]{4})  (.+)$")
_SUBSYSTEM_RE = re.compile(r"^\t\t[0-9a-f]{4} [0-9a-f]{4}  .+$")
_VENDOR_RE = re.compile(r"^[0-9a-f]{4}  ")
_HEADER_RE = re.compile(r"^#\s*(Version|Date):\s*(.+?)\s*$")
_CHIP_SUFFIX_RE = re.compile(r"(GLM|GL|M)$")
_REVISION_RE = re.compile(r"(?<=[A-Z]{2}\d{3})B$")
_CODE_RE = re.compile(r"[A-Z]{1,3}\d{1,3}[A-Z]{0,4}(-[A-Z0-9]+)*")


@dataclass(frozen=True)
class PciDevice:
    device_id: str  # 4 lower-case hex digits
    chip: str  # "GH100", "AD104GLM"; "" when the line names no chip
    names: tuple[str, ...]  # the bracketed names; the whole text when there are no brackets
    text: str  # the line as the database writes it

    @property
    def is_gpu(self) -> bool:
        """A GPU, not one of the chip's other functions: the text before the brackets names only
        chips ("GH100", "AD103M / GN21-X11"), not "High Definition Audio Controller", "USB 3.1
        Host Controller" or "PCI bridge"; an NVSwitch (named so in the brackets) is no GPU."""
        head = self.text.split("[", 1)[0].split()
        return (
            bool(self.chip)
            and all(word == "/" or _CODE_RE.fullmatch(word) for word in head)
            and not any("NVSWITCH" in name.upper() for name in self.names)
        )

    @property
    def base_chip(self) -> str:
        return base_chip(self.chip)


def base_chip(chip: str) -> str:
    """The chip without its workstation/mobile suffix and its revision letter: AD104GLM, AD104GL,
    AD104M -> AD104; GP104BM, GK110BGL -> GP104, GK110 (a B revision of a three-digit chip is the
    same design; GB10B and GB20B, two-digit Blackwell SoCs, are chips of their own)."""
    return _REVISION_RE.sub("", _CHIP_SUFFIX_RE.sub("", chip))


@dataclass(frozen=True)
class PciIds:
    version: str | None
    date: str | None
    devices: tuple[PciDevice, ...]


def _device(device_id: str, text: str) -> PciDevice:
    bracket = re.search(r"\[([^\]]+)\]\s*$", text)
    head = text[: bracket.start()].strip() if bracket else text.strip()
    chip_word = head.split()[0] if head.split() else ""
    chip = chip_word if re.fullmatch(r"[A-Z]{1,3}\d{1,3}[A-Z]{0,4}", chip_word) else ""
    if bracket:
        names = tuple(n.strip() for n in bracket.group(1).split(" / ") if n.strip())
    else:
        names = (text.strip(),)
    return PciDevice(device_id, chip, names, text)


def parse_nvidia(text: str, where: str = "pci.ids") -> PciIds:
    """NVIDIA's devices of a ``pci.ids`` text (see the module docstring)."""
    header: dict[str, str] = {}
    devices: list[PciDevice] = []
    inside = found = False
    for number, line in enumerate(text.splitlines(), 1):
        if not found and (match := _HEADER_RE.match(line)):
            header.setdefault(match.group(1), match.group(2))
        if line.startswith(f"{VENDOR}  "):
            inside = found = True
            continue
        if not inside:
            continue
        if _VENDOR_RE.match(line) or line.startswith("C "):
            break
        if not line.strip() or line.startswith("#") or _SUBSYSTEM_RE.match(line):
            continue
        match = _DEVICE_RE.match(line)
        if match is None:
            raise ParseError(
                f"{where}: line {number} in NVIDIA's block is not a device line "
                f"(found {line[:60]!r}, expected a tab, 4 hex digits, two spaces and a name)"
            )
        devices.append(_device(match.group(1), match.group(2)))
    if not devices:
        raise ParseError(f"{where}: no NVIDIA (vendor {VENDOR}) devices found: not a pci.ids file")
    return PciIds(header.get("Version"), header.get("Date"), tuple(devices))
