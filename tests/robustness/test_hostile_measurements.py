"""A hostile or broken host cannot fool a judgement into a pass with numbers that compare false
with everything: nccl-tests rows whose bus bandwidth reads nan or inf passed any floor ('bus
bandwidth nan GB/s (floor 331.2 GB/s)' was a PASS)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuhost.collective.judge import judge
from gpuhost.errors import ParseError
from gpuhost.parsers._common import to_int, to_number
from gpuhost.parsers.fabric import parse_ib_sysfs, parse_ibstat, parse_ibv_devinfo
from gpuhost.parsers.nccl_tests import parse_nccl_tests

# real capture (tests/fixtures/nccl-tests/SOURCE.md); the variants below change its numbers
CAPTURE = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-tests" / (
    "all_reduce__h100x8__2-nodes__gcp-a3mega.txt"
)
ROW = re.compile(r"^\s+\d+\s+\d+\s+\w+\s+\w+\s")


def _with_busbw(word: str) -> str:
    """The capture with every row's out-of-place and in-place busbw (columns 8, 12) = word."""
    out = []
    for line in CAPTURE.read_text(encoding="utf-8").splitlines():
        if ROW.match(line):
            tokens = line.split()
            tokens[7] = tokens[11] = word
            line = "  " + "  ".join(tokens)
        out.append(line)
    return "\n".join(out) + "\n"


def test_the_capture_passes_its_floor() -> None:  # the variants differ only in the numbers
    result = judge("all_reduce_perf", ("a", "b"), "all", 0, CAPTURE.read_text("utf-8"), 331.2)
    assert result.verdict == "PASS"


@pytest.mark.parametrize("word", ["nan", "NaN", "inf", "-inf", "Infinity", "1e999"])
def test_non_finite_bandwidth_is_never_a_pass(word: str) -> None:
    result = judge("all_reduce_perf", ("a", "b"), "all", 0, _with_busbw(word), 331.2)
    assert result.verdict != "PASS", result.reason
    assert result.verdict == "COULD-NOT-RUN"


def test_a_non_finite_average_is_a_parse_error() -> None:
    average = "# Avg bus bandwidth    : "
    text = CAPTURE.read_text("utf-8").replace(f"{average}70.742", f"{average}nan")
    assert f"{average}nan" in text
    with pytest.raises(ParseError, match="where a number belongs"):
        parse_nccl_tests(text)


FABRIC = Path(__file__).resolve().parents[1] / "fixtures" / "fabric"  # real (SOURCES.md)
HUGE = "9" * 400  # a float of it is inf: at least any expected rate


def test_a_port_rate_beyond_a_float_is_unknown_not_infinite() -> None:
    text = (FABRIC / "ibstat-gpud-752.txt").read_text("utf-8").replace("Rate: 200", f"Rate: {HUGE}")
    ports = parse_ibstat(text)
    assert ports and all(port.rate_gbps is None for port in ports)
    sysfs = (FABRIC / "sysfs-h100-8x-cx7.txt").read_text("utf-8")
    ports = parse_ib_sysfs(re.sub(r"rate:\d+ Gb/sec", f"rate:{HUGE} Gb/sec", sysfs))
    assert ports and all(port.rate_gbps is None for port in ports)


@pytest.mark.parametrize("text", [f"{HUGE} W", f"{HUGE}.5 MHz", f"-{HUGE} C"])
def test_numbers_beyond_a_float_read_as_unknown(text: str) -> None:
    assert to_number(text) is None and to_int(text) is None


@pytest.mark.parametrize(
    ("parse", "capture"),
    [(parse_ibstat, "ibstat-gpud-752.txt"), (parse_ibv_devinfo, "ibv-devinfo-deepep-55.txt")],
)
def test_a_port_listed_twice_is_not_two_ports(parse, capture) -> None:
    """Output repeated (by a wrapper, or made up) counted each port twice towards the expected
    number of ports (the sysfs reader keys ports by device/port already)."""
    text = (FABRIC / capture).read_text("utf-8")
    assert len(parse(text)) == 1
    with pytest.raises(ParseError, match="listing each port once, found .*/1 twice"):
        parse(text + text)
