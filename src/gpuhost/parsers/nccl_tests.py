"""Parse the output of NCCL's own tests (nccl-tests: ``all_reduce_perf``, ``all_gather_perf``...).

What rank 0 prints (src/common.cu and src/util.cu of NVIDIA/nccl-tests), any version since 2018:

- ``#  Rank  0 Group  0 Pid 1887 on worker-1 device  0 [0x8d] NVIDIA H100 80GB HBM3``: one line
  per rank (``Group`` is missing before nccl-tests 2.10);
- the result table, its column names read from its header line (``size count type redop root
  time algbw busbw #wrong time algbw busbw #wrong``; older releases have no ``root`` column, no
  ``redop`` for all_gather, and ``error``, the largest relative error, where ``#wrong`` now
  counts wrong elements), the first group of time/algbw/busbw/#wrong out-of-place, the second
  in-place; rows may carry a launcher's prefix (``[1,0]<stdout>:`` of ``mpirun --tag-output``,
  ``0:`` of ``srun -l``);
- ``# Out of bounds values : 0 OK`` and ``# Avg bus bandwidth    : 41.6967`` at the end;
- a failure: ``HOST: Test CUDA failure common.cu:730 'no CUDA-capable device is detected'``,
  ``HOST: Test NCCL failure ...``, `` .. HOST pid N: Test failure ...`` or ``Invalid number of
  GPUs: 8 requested but only 1 were found.``.

.. code:: python

    run = parse_nccl_tests(text)     # NcclTestsRun; ParseError for text that is none of this
    run.peak_busbw, run.wrong, run.failures, run.hosts
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from gpuhost.errors import ParseError
from gpuhost.parsers._common import first_line, require_text

EXPECTED = "nccl-tests output (a '# size count type ... busbw' table or a 'Test ... failure' line)"
_PREFIX_RE = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\d+:\s)")
_RANK_RE = re.compile(
    r"^#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+"
    r"\[[^\]]*\]\s+(.*?)\s*$"
)
_FAILURE_RE = re.compile(
    r"(?:^(?P<host>\S+): Test (?:CUDA|NCCL) failure .*"
    r"|^\s*\.\. (?P<host2>\S+) pid \d+: Test failure .*"
    r"|^Invalid number of GPUs: .*)$"
)
_AVG_RE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_BOUNDS_RE = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)")
_STARTING_RE = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_NCCL_VERSION_RE = re.compile(r"^NCCL version (\S+)")
_GROUP = ("time", "algbw", "busbw")
NO_DEVICE = "no CUDA-capable device is detected"


@dataclass(frozen=True)
class RankDevice:
    rank: int
    host: str
    device: int
    name: str


@dataclass(frozen=True)
class NcclRow:
    """One message size: out-of-place and in-place time (us), algbw and busbw (GB/s) and
    wrong-element count (None where the test did not validate: ``N/A``, or an old release's
    ``error`` column, which is a relative error, not a count)."""

    size: int
    count: int
    type: str
    redop: str | None
    out_time: float
    out_algbw: float
    out_busbw: float
    out_wrong: int | None
    in_time: float | None
    in_algbw: float | None
    in_busbw: float | None
    in_wrong: int | None

    @property
    def busbw(self) -> float:
        return max(self.out_busbw, self.in_busbw or 0.0)

    @property
    def wrong(self) -> int:
        return (self.out_wrong or 0) + (self.in_wrong or 0)


@dataclass(frozen=True)
class NcclTestsRun:
    ranks: tuple[RankDevice, ...] = ()
    rows: tuple[NcclRow, ...] = ()
    avg_busbw: float | None = None
    out_of_bounds: int | None = None
    failures: tuple[str, ...] = ()
    failed_hosts: tuple[str, ...] = ()
    program: str | None = None
    nccl_version: str | None = None
    counts_wrong: bool = field(default=True)  # False: an old release's 'error' column
    #: result tables in the output (a header with rows, a size table begun again, an 'Avg bus
    #: bandwidth' line): one for a run; more when tests or processes mixed their output
    tables: int = 1

    @property
    def peak_busbw(self) -> float | None:
        """The highest bus bandwidth of any size, out-of-place or in-place (GB/s)."""
        return max((row.busbw for row in self.rows), default=None)

    @property
    def wrong(self) -> int:
        """Wrong elements over every row (the #wrong columns)."""
        return sum(row.wrong for row in self.rows)

    @property
    def hosts(self) -> tuple[str, ...]:
        """The hosts of the ranks, in rank order, each once."""
        return tuple(dict.fromkeys(r.host for r in sorted(self.ranks, key=lambda r: r.rank)))

    @property
    def no_device(self) -> bool:
        """A rank found no GPU (CUDA's 'no CUDA-capable device', too few GPUs)."""
        return any(NO_DEVICE in f or f.startswith("Invalid number of GPUs") for f in self.failures)

    def to_dict(self) -> dict[str, Any]:
        return {
            "program": self.program,
            "nccl_version": self.nccl_version,
            "hosts": list(self.hosts),
            "ranks": len(self.ranks),
            "rows": len(self.rows),
            "peak_busbw": self.peak_busbw,
            "avg_busbw": self.avg_busbw,
            "wrong": self.wrong if self.counts_wrong else None,
            "out_of_bounds": self.out_of_bounds,
            "failures": list(self.failures),
            "tables": self.tables,
        }


def _number(token: str, line: str) -> float:
    """A measurement: a finite number (nan or inf would pass any floor: nothing is below nan)."""
    try:
        value = float(token)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ParseError(
            f"expected {EXPECTED}, found a table row with {token!r} where a number belongs: "
            f"{line.strip()[:100]!r}"
        )
    return value


def _integer(token: str, line: str) -> int:
    value = _number(token, line)
    if not math.isfinite(value) or value != int(value) or value < 0:
        raise ParseError(
            f"expected {EXPECTED}, found {token!r} where a count belongs: {line.strip()[:100]!r}"
        )
    return int(value)


def _wrong(token: str, counts: bool, line: str) -> int | None:
    if token == "N/A" or not counts:
        return None
    return _integer(token, line)


def _columns(line: str) -> list[str] | None:
    """The table's column names when ``line`` is its header (``# size count type ...``)."""
    names = line.lstrip("#").split()
    if names[:2] == ["size", "count"] and "busbw" in names:
        return names
    return None


def _row(tokens: list[str], columns: list[str], line: str) -> NcclRow:
    first = columns.index("time")  # size count type [redop] [root] then the groups
    wrong_name = "#wrong" if "#wrong" in columns else "error"
    counts = wrong_name == "#wrong"
    if len(tokens) < first + 4:
        raise ParseError(f"expected {EXPECTED}, found a short table row: {line.strip()[:100]!r}")
    out = [_number(t, line) for t in tokens[first : first + 3]]
    rest = tokens[first + 4 : first + 8]
    inside = [_number(t, line) for t in rest[:3]] if len(rest) >= 3 else [None, None, None]
    return NcclRow(
        size=_integer(tokens[0], line),
        count=_integer(tokens[1], line),
        type=tokens[2],
        redop=tokens[3] if "redop" in columns else None,
        out_time=out[0],
        out_algbw=out[1],
        out_busbw=out[2],
        out_wrong=_wrong(tokens[first + 3], counts, line),
        in_time=inside[0],
        in_algbw=inside[1],
        in_busbw=inside[2],
        in_wrong=_wrong(rest[3], counts, line) if len(rest) >= 4 else None,
    )


@dataclass
class _State:
    ranks: list[RankDevice] = field(default_factory=list)
    rows: list[NcclRow] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    failed_hosts: list[str] = field(default_factory=list)
    columns: list[str] | None = None
    avg: float | None = None
    bounds: int | None = None
    program: str | None = None
    version: str | None = None
    tables: int = 0  # result tables begun (a header followed by a row, or a size repeated)
    averages: int = 0  # 'Avg bus bandwidth' lines
    fresh_header: bool = False  # a header line seen since the last row
    sizes: set[tuple[int, str, str | None]] = field(default_factory=set)  # of this table


def _add_row(row: NcclRow, state: _State) -> None:
    key = (row.size, row.type, row.redop)
    if state.fresh_header or key in state.sizes or not state.tables:
        state.tables += 1
        state.sizes = set()
    state.fresh_header = False
    state.sizes.add(key)
    state.rows.append(row)


def _read_line(raw: str, state: _State) -> None:
    line = _PREFIX_RE.sub("", raw)
    failure = _FAILURE_RE.match(raw) or _FAILURE_RE.match(line)
    if failure:
        state.failures.append(failure.string.strip())
        host = failure.group("host") or failure.group("host2")
        if host:
            state.failed_hosts.append(host)
        return
    for regex, apply in (
        (_RANK_RE, lambda m: state.ranks.append(RankDevice(int(m[1]), m[2], int(m[3]), m[4]))),
        (_AVG_RE, lambda m: _average(state, _number(m[1], line))),
        (_BOUNDS_RE, lambda m: setattr(state, "bounds", int(m[1]))),
        (_STARTING_RE, lambda m: setattr(state, "program", m[1])),
        (_NCCL_VERSION_RE, lambda m: setattr(state, "version", m[1])),
    ):
        match = regex.match(line)
        if match:
            apply(match)
            return
    if line.startswith("#"):
        columns = _columns(line)
        if columns:
            state.columns, state.fresh_header = columns, True
        return
    tokens = line.split()
    if state.columns and len(tokens) >= 2 and tokens[0].isdigit() and tokens[1].isdigit():
        _add_row(_row(tokens, state.columns, line), state)


def _average(state: _State, value: float) -> None:
    state.avg = value
    state.averages += 1


def parse_nccl_tests(text: str) -> NcclTestsRun:
    """Parse one test's output (stdout and stderr together are fine: NCCL's INFO/WARN lines
    and a launcher's lines are skipped)."""
    text = require_text(text, EXPECTED)
    state = _State()
    for raw in text.split("\n"):
        _read_line(raw.rstrip(), state)
    if state.columns is None and not state.failures:
        raise ParseError(f"expected {EXPECTED}, found: {first_line(text)!r}")
    return NcclTestsRun(
        ranks=tuple(state.ranks),
        rows=tuple(state.rows),
        avg_busbw=state.avg,
        out_of_bounds=state.bounds,
        failures=tuple(dict.fromkeys(state.failures)),
        failed_hosts=tuple(dict.fromkeys(state.failed_hosts)),
        program=state.program,
        nccl_version=state.version,
        counts_wrong=state.columns is None or "#wrong" in state.columns,
        tables=max(state.tables, state.averages, 1),
    )
