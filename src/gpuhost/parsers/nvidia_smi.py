"""nvidia-smi outputs → :class:`SmiReport` (one module to import for every nvidia-smi format).

- ``parse_xml``: ``nvidia-smi -q -x``
- ``parse_query_text``: ``nvidia-smi -q`` (also partial ``-q -d CLOCK`` / ``-q -d POWER``)
- ``parse_table``: the default ``nvidia-smi`` table
- ``parse_query_csv``: ``--query-gpu=... --format=csv[,noheader][,nounits]``
- ``classify_error``: error message → state
- ``parse_output``: any of the above, recognised by content (what the audit probe should use)
"""

from __future__ import annotations

from gpuhost.errors import ParseError
from gpuhost.parsers._common import first_line
from gpuhost.parsers.smi_csv import parse_query_csv
from gpuhost.parsers.smi_errors import absent_or_error, classify_error
from gpuhost.parsers.smi_model import (
    ERROR_STATES,
    STATE_ABSENT,
    STATE_OK,
    ClockEvents,
    Clocks,
    Ecc,
    Fabric,
    GpuInfo,
    MigMode,
    PcieLink,
    PowerLimits,
    RemappedRows,
    RetiredPages,
    SmiReport,
)
from gpuhost.parsers.smi_table import looks_like_table, parse_table
from gpuhost.parsers.smi_text import looks_like_query_text, parse_query_text
from gpuhost.parsers.smi_xml import parse_xml

__all__ = [
    "ERROR_STATES",
    "STATE_ABSENT",
    "STATE_OK",
    "ClockEvents",
    "Clocks",
    "Ecc",
    "Fabric",
    "GpuInfo",
    "MigMode",
    "PcieLink",
    "PowerLimits",
    "RemappedRows",
    "RetiredPages",
    "SmiReport",
    "classify_error",
    "parse_output",
    "parse_query_csv",
    "parse_query_text",
    "parse_table",
    "parse_xml",
]


def parse_output(text: str) -> SmiReport:
    """Parse whatever nvidia-smi printed: XML, ``-q`` text, the table or an error message.

    Empty output → state "absent". Unrecognised text → ParseError.
    """
    text, early = absent_or_error(text, "nvidia-smi output")
    if early is not None:
        return early
    stripped = text.lstrip()
    if stripped.startswith("<"):
        return parse_xml(text)
    if looks_like_query_text(text):
        return parse_query_text(text)
    if looks_like_table(text):
        return parse_table(text)
    raise ParseError(
        "expected nvidia-smi output (XML, -q text, table or an error message), "
        f"found: {first_line(text)!r}"
    )
