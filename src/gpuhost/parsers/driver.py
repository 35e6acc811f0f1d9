"""Parse ``/proc/driver/nvidia/version`` (the loaded NVIDIA kernel module)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuhost.errors import ParseError
from gpuhost.parsers._common import first_line, is_blank, require_text
from gpuhost.parsers.smi_model import _ToDict

EXPECTED = "/proc/driver/nvidia/version (an 'NVRM version:' line)"
# NVRM version: NVIDIA UNIX x86_64 Kernel Module  384.98  Thu Oct 26 15:16:01 PDT 2017
# NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build  (...)  <date>
NVRM_RE = re.compile(
    r"^NVRM version:\s*NVIDIA UNIX\s+(?P<open>Open\s+)?(?:\S+\s+)?Kernel Module"
    r"(?:\s+for\s+(?P<arch>\S+))?\s+(?P<version>\d+(?:\.\d+)+)\b",
    re.M,
)
NVRM_LINE_RE = re.compile(r"^NVRM version:.*$", re.M)
GCC_RE = re.compile(r"^GCC version:\s*(?:gcc version\s+)?(\S+)", re.M)


@dataclass(frozen=True)
class KernelModule(_ToDict):
    """The loaded kernel module: ``flavor`` is "open" (open GPU kernel modules) or
    "proprietary"; ``raw`` is the NVRM line as printed."""

    version: str
    flavor: str
    raw: str
    arch: str | None = None
    gcc_version: str | None = None


def parse_proc_version(text: str) -> KernelModule | None:
    """Parse the file's content. Empty text (module not loaded, file absent) → None."""
    text = require_text(text, EXPECTED)
    if is_blank(text):
        return None
    match = NVRM_RE.search(text)
    if match is None:
        line = NVRM_LINE_RE.search(text)
        found = line.group(0) if line else first_line(text)
        raise ParseError(f"expected {EXPECTED} with a module version, found: {found[:120]!r}")
    raw = NVRM_LINE_RE.search(text)
    gcc = GCC_RE.search(text)
    return KernelModule(
        version=match.group("version"),
        flavor="open" if match.group("open") else "proprietary",
        raw=raw.group(0).strip() if raw else match.group(0),
        arch=match.group("arch"),
        gcc_version=gcc.group(1) if gcc else None,
    )


NVRM_LOG_RE = re.compile(r"NVRM:\s*(?:GPU\s+(?P<bus>[0-9A-Fa-f:.]+):\s*)?(?P<message>.*?)\s*$")


def parse_nvrm_log(text: str) -> list[dict[str, str | None]]:
    """NVRM lines of a kernel log (dmesg/journal): [{"bus_id", "message"}]. Lines without
    "NVRM:" are skipped; a text with none raises ParseError. Empty → []."""
    text = require_text(text, "kernel log lines with 'NVRM:'")
    if is_blank(text):
        return []
    found = [
        {"bus_id": m.group("bus"), "message": m.group("message")}
        for line in text.split("\n")
        if (m := NVRM_LOG_RE.search(line))
    ]
    if not found:
        raise ParseError(f"expected kernel log lines with 'NVRM:', found: {first_line(text)!r}")
    return found
