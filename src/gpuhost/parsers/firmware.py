"""Firmware versions a host shows in sysfs (pure): its BIOS and each RDMA adapter's (HCA's).

``parse_firmware_files(text)`` reads ``grep -H . FILE...`` over

* ``/sys/class/dmi/id/bios_version`` and ``bios_date``: the SMBIOS BIOS information the kernel
  exports, readable by every user (drivers/firmware/dmi-id.c: mode 0444; the serials beside them
  are root's alone), one line each (the date as SMBIOS writes it, ``MM/DD/YYYY``);
* ``/sys/class/infiniband/DEVICE/fw_ver``: the adapter's firmware version, one line
  (Documentation/ABI/stable/sysfs-class-infiniband: "fw_ver: (RO) Display firmware version";
  a ConnectX-7 shows ``28.39.2048``, the value ``ibv_devinfo`` prints as ``fw_ver``).

``grep -H .`` prints ``FILE:VALUE`` for a file with a value and nothing for a missing or empty
one (a VM or container without DMI tables, a host without RDMA adapters): those stay None or
absent, never guessed. ``sysfs_value(text)``: one such file's content on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuhost.errors import ParseError
from gpuhost.parsers._common import first_line, require_text
from gpuhost.parsers.fabric import SYSFS_ROOT
from gpuhost.parsers.smi_model import _ToDict

DMI_ROOT = "/sys/class/dmi/id"
DMI_FILES = ("bios_version", "bios_date")
EXPECTED = f"{DMI_ROOT}/FILE:VALUE or {SYSFS_ROOT}/DEVICE/fw_ver:VALUE lines"
_LINE_RE = re.compile(
    rf"^(?:{re.escape(DMI_ROOT)}/(?P<dmi>{'|'.join(DMI_FILES)})"
    rf"|{re.escape(SYSFS_ROOT)}/(?P<dev>[^/\s:]+)/fw_ver):(?P<value>.*)$"
)


@dataclass(frozen=True)
class SysfsFirmware(_ToDict):
    bios_version: str | None = None
    bios_date: str | None = None
    hca: dict[str, str] = field(default_factory=dict)  # RDMA device -> fw_ver


def sysfs_value(text: str) -> str | None:
    """One sysfs attribute file's content: its one line without the newline and padding; None
    when empty. More than one line is not a sysfs attribute: ParseError."""
    text = require_text(text, "a one-line sysfs attribute file")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > 1:
        raise ParseError(
            f"expected a one-line sysfs attribute file, found {len(lines)} lines "
            f"starting {first_line(text)!r}"
        )
    return lines[0] if lines else None


def parse_firmware_files(text: str) -> SysfsFirmware:
    """See the module docstring; empty output (no such files) → an empty ``SysfsFirmware``."""
    text = require_text(text, EXPECTED)
    dmi: dict[str, str] = {}
    hca: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        match = _LINE_RE.match(line)
        if match is None:
            raise ParseError(f"expected {EXPECTED}, found {line[:80]!r}")
        value = match.group("value").strip()
        if not value:
            continue
        if match.group("dmi"):
            dmi[match.group("dmi")] = value
        else:
            hca[match.group("dev")] = value
    return SysfsFirmware(dmi.get("bios_version"), dmi.get("bios_date"), dict(sorted(hca.items())))
