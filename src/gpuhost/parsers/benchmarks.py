"""Parse the plain output of two bandwidth tools the acceptance run uses (pure).

``parse_nvbandwidth(text)``: NVIDIA nvbandwidth's text output (``Running TESTCASE.``, a matrix
in GB/s, ``SUM TESTCASE VALUE``; ``Waived:`` lines for testcases the system cannot run) →
``{testcase: NvbandwidthCase(sum, cells)}``. Latency testcases (ns) are left out.

``parse_perftest_bw(text)``: one side of a perftest ``ib_write_bw`` run (the ``#bytes
#iterations BW peak[UNIT] BW average[UNIT] MsgRate[Mpps]`` table) → ``PerftestResult`` with the
average and peak in Gb/s whatever unit the header says (MB/sec: perftest's 2^20 bytes, as its
``--report_gbits`` option converts).

Captured outputs these were written against: tests/lab/accept/captures/ (SOURCES.json).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuhost.errors import ParseError
from gpuhost.parsers._common import first_line, require_text

_RUNNING_RE = re.compile(r"^Running (\S+)\.\s*$")
_SUM_RE = re.compile(r"^SUM (\S+) (\d+(?:\.\d+)?)\s*$")
_ROW_RE = re.compile(r"^\s*\d+((?:\s+(?:\d+\.\d+|N/A))+)\s*$")
_HEADER_RE = re.compile(r"bandwidth \(GB/s\)\s*$")
_PERF_HEADER_RE = re.compile(
    r"^\s*#bytes\s+#iterations\s+BW peak\[(?P<unit>[A-Za-z/]+)\]\s+BW average\[[A-Za-z/]+\]"
)
_PERF_ROW_RE = re.compile(
    r"^\s*(?P<bytes>\d+)\s+(?P<iters>\d+)\s+(?P<peak>\d+(?:\.\d+)?)\s+(?P<avg>\d+(?:\.\d+)?)"
)
#: perftest's MB/sec is 2^20 bytes per second (its --report_gbits: * 8 * 2^20 / 10^9)
_TO_GBITS = {"Gb/sec": 1.0, "MB/sec": 8 * 1048576 / 1e9}


@dataclass(frozen=True)
class NvbandwidthCase:
    name: str
    sum_gbs: float | None
    cells: tuple[float, ...]

    @property
    def min_gbs(self) -> float | None:
        return min(self.cells) if self.cells else None


def parse_nvbandwidth(text: str) -> dict[str, NvbandwidthCase]:
    """See the module docstring; ParseError for text with no testcase."""
    text = require_text(text, "nvbandwidth output")
    cases: dict[str, NvbandwidthCase] = {}
    name: str | None = None
    bandwidth = False
    cells: list[float] = []
    for line in text.split("\n"):
        running = _RUNNING_RE.match(line)
        if running:
            name, bandwidth, cells = running.group(1), False, []
            continue
        if name and _HEADER_RE.search(line):
            bandwidth = True
            continue
        row = _ROW_RE.match(line)
        if name and bandwidth and row:
            cells += [float(v) for v in row.group(1).split() if v != "N/A"]
            continue
        total = _SUM_RE.match(line)
        if total and name is not None and name == total.group(1) and bandwidth:
            cases[name] = NvbandwidthCase(name, float(total.group(2)), tuple(cells))
            name = None
    if not cases:
        raise ParseError(
            f"expected nvbandwidth output (Running ... / SUM ...), found {first_line(text)!r}"
        )
    return cases


@dataclass(frozen=True)
class PerftestResult:
    message_bytes: int
    iterations: int
    peak_gbits: float
    average_gbits: float


def parse_perftest_bw(text: str) -> PerftestResult:
    """The first result row after perftest's bandwidth header; ParseError when there is none."""
    text = require_text(text, "ib_write_bw output")
    unit: str | None = None
    for line in text.split("\n"):
        header = _PERF_HEADER_RE.match(line)
        if header:
            unit = header.group("unit")
            if unit not in _TO_GBITS:
                raise ParseError(f"ib_write_bw: unknown bandwidth unit {unit!r}")
            continue
        row = _PERF_ROW_RE.match(line)
        if unit and row:
            factor = _TO_GBITS[unit]
            return PerftestResult(
                int(row.group("bytes")),
                int(row.group("iters")),
                round(float(row.group("peak")) * factor, 2),
                round(float(row.group("avg")) * factor, 2),
            )
    raise ParseError(
        f"expected ib_write_bw output with a '#bytes #iterations BW peak' table, "
        f"found {first_line(text)!r}"
    )
