"""Xid events in kernel log lines (``NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off
the bus.``), with the recovery action newer drivers print in Xid 154 (``GPU recovery action
changed from 0x0 (None) to 0x2 (Node Reboot Required)``).

Pure: text in, ``XidEvent`` list out; lines without "NVRM:" or without an Xid are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuhost.parsers.driver import parse_nvrm_log

# "Xid (PCI:0000:3b:00): 79, ..." (also without "PCI:")
XID_RE = re.compile(r"Xid\s+\((?:PCI:)?(?P<bus>[0-9A-Fa-f:.]+)\):\s*(?P<code>\d+)\b")
# Xid 154's "... changed from 0x0 (None) to 0x2 (Node Reboot Required)"
RECOVERY_RE = re.compile(
    r"recovery action changed from\s+0x[0-9A-Fa-f]+(?:\s*\([^)]*\))?\s+to\s+"
    r"0x(?P<code>[0-9A-Fa-f]+)(?:\s*\((?P<text>[^)]*)\))?",
    re.I,
)


@dataclass(frozen=True)
class XidEvent:
    """One Xid line: the code, the GPU's bus id as printed (``0000:3b:00``), the message, and
    for a recovery-action line the NVML action code and its words."""

    code: int
    bus_id: str
    text: str
    recovery_code: int | None = None
    recovery_text: str | None = None


def xid_events(nvrm_lines: str) -> list[XidEvent]:
    """The Xid events among kernel log lines, in log order."""
    if not nvrm_lines.strip():
        return []
    events = []
    for entry in parse_nvrm_log(nvrm_lines):
        message = entry["message"] or ""
        match = XID_RE.search(message)
        if not match:
            continue
        recovery = RECOVERY_RE.search(message)
        events.append(
            XidEvent(
                int(match.group("code")),
                match.group("bus"),
                message,
                int(recovery.group("code"), 16) if recovery else None,
                (recovery.group("text") or "").strip() or None if recovery else None,
            )
        )
    return events


def short_bus_id(bus_id: str | None) -> str | None:
    """A PCI address as the kernel log and nvidia-smi both can be compared by: domain (4 hex
    digits), bus and device, lower case, no function (``00000000:3B:00.0`` → ``0000:3b:00``)."""
    if not bus_id:
        return None
    parts = bus_id.strip().lower().split(":")
    if len(parts) == 2:
        parts = ["0000", *parts]
    if len(parts) != 3:
        return bus_id.strip().lower()
    domain, bus, device = parts
    return f"{domain[-4:].rjust(4, '0')}:{bus}:{device.split('.')[0]}"
