"""Pure parsers: captured tool output (text) in, typed data out.

No I/O happens here. Malformed, truncated or binary input raises gpuhost.errors.ParseError; an
empty output where "tool missing" is a legal state gives a default (None, [] or state "absent").
"""

from __future__ import annotations

from gpuhost.parsers.nvidia_smi import (
    GpuInfo,
    SmiReport,
    classify_error,
    parse_output,
    parse_query_csv,
    parse_query_text,
    parse_table,
    parse_xml,
)

__all__ = [
    "GpuInfo",
    "SmiReport",
    "classify_error",
    "parse_output",
    "parse_query_csv",
    "parse_query_text",
    "parse_table",
    "parse_xml",
]
