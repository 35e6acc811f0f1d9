"""No pass on a measurement that cannot be (issue 36): a bus bandwidth of 1e308 GB/s, numbers
that contradict each other (algbw is not size over time, busbw more than twice algbw), a
negative one, and an output with a second result table after a good one (which is the run?)
each FAIL with one line and no bandwidth, so no slow-node search starts from them. Each case is
the real H100 capture (tests/fixtures/nccl-tests) edited as the case says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuhost.collective.judge import FAIL, PASS, judge
from gpuhost.parsers.nccl_tests import parse_nccl_tests

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-tests"
H100 = (FIXTURES / "all_reduce__h100x8__2-nodes__gcp-a3mega.txt").read_text()
LAST = re.compile(r"^( +8589934592 .*)$", re.MULTILINE)  # the 8 GiB row
FLOOR = 300.0


def _cells(line: str) -> list[str]:
    return line.split()


def _with_last_row(edit) -> str:  # noqa: ANN001 (a cell editor)
    row = LAST.search(H100)
    assert row is not None
    cells = _cells(row.group(1))
    edit(cells)
    return H100.replace(row.group(1), "  ".join(cells))


def _scaled_table(by: float) -> str:
    """H100's table as a run ``by`` times as fast (times divided, bandwidths from them)."""
    lines = []
    for line in H100.splitlines():
        cells = line.split()
        if cells and cells[0].isdigit() and len(cells) >= 13:
            for start in (5, 9):  # time algbw busbw, all_reduce's factor 2(n-1)/n for n=16
                time_us = float(cells[start]) / by
                algbw = int(cells[0]) / (time_us * 1e3)
                busbw = algbw * 1.875
                cells[start : start + 3] = [f"{time_us:.1f}", f"{algbw:.2f}", f"{busbw:.2f}"]
            line = "  ".join(cells)
        lines.append(line)
    return "\n".join(lines)


def _judged(text: str):  # noqa: ANN202
    return judge("all_reduce_perf", ("a", "b"), "all", 0, text, FLOOR)


def test_the_real_capture_passes():
    assert _judged(H100).verdict == PASS


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda c: c.__setitem__(7, "1e308"), "more than any GPU can move"),
        (lambda c: (c.__setitem__(6, "1e308"), c.__setitem__(7, "1e308")), "more than any GPU"),
        (lambda c: c.__setitem__(11, "9999"), "more than any GPU can move"),
        (lambda c: c.__setitem__(7, "3000"), "more than twice its algbw"),
        (lambda c: c.__setitem__(6, "900"), "is not its size over its time"),
        (lambda c: c.__setitem__(5, "1.0"), "is not its size over its time"),
        (lambda c: c.__setitem__(7, "-5"), "negative"),
    ],
)
def test_an_impossible_number_fails_with_one_line_and_no_bandwidth(edit, named):
    result = _judged(_with_last_row(edit))

    assert result.verdict == FAIL
    assert named in result.reason and "\n" not in result.reason
    assert result.busbw is None and not result.slow


def test_consistent_but_superhuman_numbers_fail():
    fast = _scaled_table(100.0)  # 33,882 GB/s, every row consistent with its time

    result = _judged(fast)

    assert result.verdict == FAIL and "more than any GPU can move" in result.reason


def test_a_second_slow_table_after_a_good_one_fails():
    slow = _scaled_table(0.01)
    assert _judged(slow).verdict == FAIL and _judged(slow).slow  # alone: a slow run

    both = _judged(H100 + "\n" + slow)

    assert both.verdict == FAIL and "2 result tables" in both.reason
    assert both.busbw is None and not both.slow


def test_a_table_begun_again_without_its_header_is_a_second_table():
    rows = [line for line in H100.splitlines() if line.split() and line.split()[0].isdigit()]
    again = H100 + "\n" + "\n".join(rows[:3]) + "\n"

    assert parse_nccl_tests(again).tables == 2
    assert "2 result tables" in _judged(again).reason


def test_one_table_is_one():
    assert parse_nccl_tests(H100).tables == 1
