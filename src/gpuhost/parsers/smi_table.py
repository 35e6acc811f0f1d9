"""Parse the default ``nvidia-smi`` table (work in progress: header only)."""

from __future__ import annotations

import re

from gpuhost.errors import ParseError
from gpuhost.parsers._common import first_line, is_blank, require_text
from gpuhost.parsers.smi_errors import classify_error
from gpuhost.parsers.smi_model import STATE_ABSENT, SmiReport
from gpuhost.parsers.smi_xml import error_report

EXPECTED = "the nvidia-smi table"
TABLE_HEADER_RE = re.compile(
    r"NVIDIA-SMI\s+(\S+)\s+Driver Version:\s*(\S+)(?:\s+CUDA Version:\s*(\S+))?"
)


def looks_like_table(text: str) -> bool:
    return bool(TABLE_HEADER_RE.search(text))


def parse_table(text: str) -> SmiReport:
    text = require_text(text, EXPECTED)
    if is_blank(text):
        return SmiReport(state=STATE_ABSENT, source="empty")
    state = classify_error(text)
    if state is not None:
        return error_report(text, state)
    header = TABLE_HEADER_RE.search(text)
    if header is None:
        raise ParseError(f"expected {EXPECTED}, found: {first_line(text)!r}")
    return SmiReport(source="table", driver_version=header.group(2), cuda_version=header.group(3))
