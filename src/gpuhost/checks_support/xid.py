"""Xid events in the kernel log, judged with the codes in ``xid_codes.yaml``."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

from gpuhost.datafiles import load_yaml
from gpuhost.errors import ConfigError
from gpuhost.parsers.driver import parse_nvrm_log

XID_FILE = "xid_codes.yaml"
# "Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus." (also without "PCI:")
XID_RE = re.compile(r"Xid\s+\((?:PCI:)?(?P<bus>[0-9A-Fa-f:.]+)\):\s*(?P<code>\d+)\b")

# The kernel log since boot: the journal when there is one, else the ring buffer. The first line
# says which source was read and its exit status, so an unreadable log is never taken as clean.
KERNEL_LOG_COMMAND = (
    "if command -v journalctl >/dev/null 2>&1; then src=journal; "
    "out=$(LC_ALL=C journalctl -k -b -q --no-pager 2>&1); rc=$?; "
    "else src=dmesg; out=$(LC_ALL=C dmesg 2>&1); rc=$?; fi; "
    'echo "#gpuhost-kernel-log source=$src rc=$rc"; '
    'if [ "$rc" -ne 0 ]; then printf "%s\\n" "$out" | tail -n 3; '
    'else printf "%s\\n" "$out" | grep -F "NVRM:" | tail -n 5000; fi; true'
)
HEADER_RE = re.compile(r"^#gpuhost-kernel-log source=(?P<source>\S+) rc=(?P<rc>\d+)$")


@dataclass(frozen=True)
class XidTable:
    application: dict[int, str]
    trouble: dict[int, str]
    sources: dict[str, str]

    def name(self, code: int) -> str:
        return self.trouble.get(code) or self.application.get(code) or "see the Xid catalog"

    def is_trouble(self, code: int) -> bool:
        return code not in self.application


@dataclass(frozen=True)
class XidEvent:
    code: int
    bus_id: str
    text: str


@dataclass(frozen=True)
class KernelLog:
    """What the kernel log command printed: ``error`` set when the log could not be read."""

    source: str
    nvrm_lines: str
    error: str | None = None


def _codes(data: Any, key: str) -> dict[int, str]:
    raw = data.get(key)
    if not isinstance(raw, dict) or not all(isinstance(k, int) for k in raw):
        raise ConfigError(f"{XID_FILE}: {key}: expected a mapping of Xid number -> name")
    return {int(k): str(v) for k, v in raw.items()}


@functools.lru_cache(maxsize=1)
def load_xid_table() -> XidTable:
    text = resources.files("gpuhost.checks_support").joinpath(XID_FILE).read_text()
    data = load_yaml(text)
    if not isinstance(data, dict) or data.get("schema") != 1:
        raise ConfigError(f"{XID_FILE}: expected 'schema: 1'")
    sources = data.get("sources")
    if not isinstance(sources, dict) or not sources:
        raise ConfigError(f"{XID_FILE}: sources: expected where the codes come from")
    return XidTable(_codes(data, "application"), _codes(data, "trouble"), dict(sources))


def parse_kernel_log(text: str) -> KernelLog:
    """Output of ``KERNEL_LOG_COMMAND`` → :class:`KernelLog`."""
    lines = text.splitlines()
    header = HEADER_RE.match(lines[0].strip()) if lines else None
    if header is None:
        first = lines[0][:120] if lines else ""
        return KernelLog("unknown", "", f"unexpected output of the kernel log command: {first!r}")
    body = "\n".join(lines[1:])
    if header.group("rc") != "0":
        detail = " ".join(line.strip() for line in lines[1:] if line.strip()) or "no message"
        return KernelLog(header.group("source"), "", f"{header.group('source')} failed: {detail}")
    return KernelLog(header.group("source"), body)


def xid_events(nvrm_lines: str) -> list[XidEvent]:
    """Xid events among kernel log lines (lines without "NVRM:" are ignored)."""
    if not nvrm_lines.strip():
        return []
    events = []
    for entry in parse_nvrm_log(nvrm_lines):
        match = XID_RE.search(entry["message"] or "")
        if match:
            events.append(
                XidEvent(int(match.group("code")), match.group("bus"), entry["message"] or "")
            )
    return events


def troubling(events: list[XidEvent], table: XidTable) -> list[XidEvent]:
    return [event for event in events if table.is_trouble(event.code)]


def describe(events: list[XidEvent], table: XidTable, limit: int = 10) -> str:
    """``Xid 79 (GPU has fallen off the bus) on 0000:3b:00 x2; ...``"""
    counts: dict[tuple[int, str], int] = {}
    for event in events:
        counts[(event.code, event.bus_id)] = counts.get((event.code, event.bus_id), 0) + 1
    parts = [
        f"Xid {code} ({table.name(code)}) on {bus}" + (f" x{n}" if n > 1 else "")
        for (code, bus), n in sorted(counts.items())
    ]
    more = f"; and {len(parts) - limit} more" if len(parts) > limit else ""
    return "; ".join(parts[:limit]) + more
