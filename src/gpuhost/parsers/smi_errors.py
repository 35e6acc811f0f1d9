"""Recognise nvidia-smi's error outputs and turn them into states.

``classify_error(text)`` returns one of ``smi_model.ERROR_STATES`` or None when the text is not an
nvidia-smi error message (for example a normal report). ``absent_or_error`` is the common start
of every nvidia-smi report parser: empty output → "absent", an error message → its error state.
"""

from __future__ import annotations

import re

from gpuhost.parsers._common import first_line, is_blank, require_text
from gpuhost.parsers.smi_model import STATE_ABSENT, SmiReport

# (state, pattern) in priority order; patterns are matched case-insensitively per line.
ERROR_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("driver-library-mismatch", re.compile(r"driver/library version mismatch", re.I)),
    (
        "driver-not-loaded",
        re.compile(
            r"couldn't communicate with the nvidia driver"
            r"|nvidia kernel module (?:is )?not loaded"
            r"|driver not loaded",
            re.I,
        ),
    ),
    ("gpu-lost", re.compile(r"gpu is lost|gpu has fallen off the bus", re.I)),
    ("no-devices", re.compile(r"^\s*no devices were found\s*$", re.I | re.M)),
    (
        "nvml-missing",
        re.compile(
            r"couldn't find libnvidia-ml\.so|libnvidia-ml\.so[.\d]*: cannot open shared object"
            r"|nvml shared library not found|nvidia-smi: (?:command )?not found",
            re.I,
        ),
    ),
    (
        "unknown-error",
        re.compile(
            r"failed to initialize nvml|nvidia-smi has failed|unable to determine the device handle"
            r"|^\s*(?:nvml: )?unknown error\s*$",
            re.I | re.M,
        ),
    ),
)
REPORT_HEADER_RE = re.compile(r"NVIDIA-SMI\s+\d")
NVML_VERSION_RE = re.compile(r"^\s*NVML library version:\s*([0-9][0-9.]*)\s*$", re.M)
# An error output is short; a long text mentioning these words is a log or report, not an error.
MAX_ERROR_LINES = 12


def classify_error(text: str) -> str | None:
    """The error state an nvidia-smi error output stands for, or None if it is not one."""
    text = require_text(text, "nvidia-smi output")
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or len(lines) > MAX_ERROR_LINES:
        return None
    stripped = text.lstrip()
    if stripped.startswith("<") or "NVSMI LOG" in text or REPORT_HEADER_RE.search(text):
        return None
    for state, pattern in ERROR_PATTERNS:
        if pattern.search(text):
            return state
    return None


def nvml_version_in_error(text: str) -> str | None:
    """The "NVML library version: X" that newer drivers print under a mismatch error."""
    match = NVML_VERSION_RE.search(text)
    return match.group(1) if match else None


def error_message(text: str) -> str:
    return first_line(text, limit=200)


def error_report(text: str, state: str, source: str = "error") -> SmiReport:
    return SmiReport(
        state=state,
        source=source,
        nvml_version=nvml_version_in_error(text),
        message=error_message(text),
    )


def absent_or_error(text: object, expected: str) -> tuple[str, SmiReport | None]:
    """Check ``text`` (ParseError when it is not text) and return it with the report that empty
    output (state "absent") or an nvidia-smi error message (its error state) stands for; None
    when the text is something to parse."""
    checked = require_text(text, expected)
    if is_blank(checked):
        return checked, SmiReport(state=STATE_ABSENT, source="empty")
    state = classify_error(checked)
    if state is not None:
        return checked, error_report(checked, state)
    return checked, None
