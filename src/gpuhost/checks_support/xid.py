"""Xid events in the kernel log (``parsers.xid``), judged by the fault catalog
(``data/faults.yaml``, ``gpuhost.faults.judge.xid_findings``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuhost.parsers.xid import XidEvent, xid_events

__all__ = ["KERNEL_LOG_COMMAND", "KernelLog", "XidEvent", "parse_kernel_log", "xid_events"]

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
class KernelLog:
    """What the kernel log command printed: ``error`` set when the log could not be read."""

    source: str
    nvrm_lines: str
    error: str | None = None


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
