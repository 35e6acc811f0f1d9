"""Parse ``nvidia-smi --query-gpu=... --format=csv`` output (work in progress)."""

from __future__ import annotations

import csv

from gpuhost.parsers._common import is_blank, require_text

EXPECTED = "nvidia-smi --query-gpu CSV"


def parse_query_csv(text: str, query: str) -> list[dict[str, str | None]]:
    text = require_text(text, EXPECTED)
    if is_blank(text):
        return []
    fields = [f.strip() for f in query.split(",") if f.strip()]
    rows = list(csv.reader(text.splitlines(), skipinitialspace=True))
    return [dict(zip(fields, row, strict=False)) for row in rows[1:]]
