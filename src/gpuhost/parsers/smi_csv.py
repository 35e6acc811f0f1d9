"""Parse ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`` (also compute-apps).

Returns one dict per row keyed by the queried field names (as written in the query, e.g.
``"memory.used"``); values are strings with "[N/A]"-like values turned into None and the unit of
the header ("23028 MiB" under "memory.total [MiB]") removed.
"""

from __future__ import annotations

import csv
import re

from gpuhost.errors import ParseError
from gpuhost.parsers._common import clean, first_line, is_blank, require_text
from gpuhost.parsers.smi_errors import classify_error

EXPECTED = "nvidia-smi --query-* --format=csv output"
QUERY_OPTION_RE = re.compile(r"--query-[a-z-]+[= ]\s*['\"]?([^'\"\s]+)['\"]?")
FORMAT_OPTION_RE = re.compile(r"--format[= ]\s*['\"]?([^'\"\s]+)['\"]?")
HEADER_FIELD_RE = re.compile(r"^\s*(?P<name>[^\[]+?)\s*(?:\[(?P<unit>[^\]]*)\])?\s*$")
FIELD_NAME_RE = re.compile(r"^[A-Za-z_][\w.]*$")


def query_fields(query: str) -> tuple[list[str], bool]:
    """(fields, has_header) from a query: a full command line or a bare "a,b,c" field list."""
    option = QUERY_OPTION_RE.search(query)
    spec = option.group(1) if option else query.strip().strip("'\"")
    fields = [f.strip() for f in spec.split(",") if f.strip()]
    fmt = FORMAT_OPTION_RE.search(query)
    has_header = not (fmt and "noheader" in fmt.group(1).split(","))
    return fields, has_header


def _header(row: list[str]) -> tuple[list[str], list[str | None]] | None:
    names: list[str] = []
    units: list[str | None] = []
    for cell in row:
        match = HEADER_FIELD_RE.match(cell)
        if not match or not FIELD_NAME_RE.match(match.group("name")):
            return None
        names.append(match.group("name"))
        units.append(match.group("unit"))
    return names, units


def _value(cell: str, unit: str | None) -> str | None:
    value = clean(cell)
    if value is not None and unit and unit != "%" and value.endswith(f" {unit}"):
        value = value[: -len(unit) - 1].strip()
    elif value is not None and unit == "%" and value.endswith("%"):
        value = value[:-1].strip()
    return value


def parse_query_csv(text: str, query: str | None = None) -> list[dict[str, str | None]]:
    """Parse query CSV. ``query`` is the ``--query-gpu`` value or the whole command line; without
    it the field names come from the header row. Empty output → []. A row with the wrong number
    of values, or a header that does not match the query, raises ParseError."""
    text = require_text(text, EXPECTED)
    if is_blank(text):
        return []
    if classify_error(text) is not None:
        raise ParseError(f"expected {EXPECTED}, found an nvidia-smi error: {first_line(text)!r}")
    fields, has_header = query_fields(query) if query else ([], True)
    rows = [row for row in csv.reader(text.strip("\n").split("\n"), skipinitialspace=True) if row]
    units: list[str | None] = [None] * len(fields)
    if has_header:
        header = _header(rows[0]) if rows else None
        if header is None:
            raise ParseError(f"expected {EXPECTED} with a header row, found: {first_line(text)!r}")
        names, units = header
        if fields and len(names) != len(fields):
            raise ParseError(
                f"expected {EXPECTED} with {len(fields)} columns ({','.join(fields[:3])}...), "
                f"found a header of {len(names)}: {first_line(text)!r}"
            )
        fields = fields or names
        rows = rows[1:]
    if not fields:
        raise ParseError(f"expected {EXPECTED}: no query given and no header row")
    result: list[dict[str, str | None]] = []
    for number, row in enumerate(rows, start=2 if has_header else 1):
        if len(row) != len(fields):
            raise ParseError(
                f"expected {EXPECTED} rows of {len(fields)} values, found {len(row)} on line "
                f"{number}: {', '.join(row)[:80]!r}"
            )
        result.append(
            {name: _value(cell, unit) for name, cell, unit in zip(fields, row, units, strict=True)}
        )
    return result
