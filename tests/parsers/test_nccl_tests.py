"""nccl-tests output parser on real captures (tests/fixtures/nccl-tests/SOURCE.md)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuhost.errors import ParseError
from gpuhost.parsers.nccl_tests import parse_nccl_tests

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-tests"


def _read(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_two_h100_nodes_all_reduce():
    run = parse_nccl_tests(_read("all_reduce__h100x8__2-nodes__gcp-a3mega.txt"))

    assert len(run.ranks) == 16 and run.hosts == ("ztan-mig-235z", "ztan-mig-gq73")
    assert run.ranks[15].device == 7 and run.ranks[15].name == "NVIDIA H100 80GB HBM3"
    assert len(run.rows) == 31
    last = run.rows[-1]
    assert (last.size, last.count, last.type, last.redop) == (
        8589934592,
        2147483648,
        "float",
        "sum",
    )
    assert (last.out_time, last.out_algbw, last.out_busbw) == (47535, 180.71, 338.82)
    assert (last.in_busbw, last.out_wrong, last.in_wrong) == (337.35, 0, 0)
    assert run.peak_busbw == 338.82 and run.avg_busbw == 70.742
    assert run.out_of_bounds == 0 and run.wrong == 0 and not run.failures


def test_wrong_elements_are_counted():
    run = parse_nccl_tests(_read("all_reduce__h100x8__2-nodes__wrong-elements__HAND-MADE.txt"))

    assert run.wrong == 12 and run.out_of_bounds == 12


def test_all_gather_has_no_reduction():
    run = parse_nccl_tests(_read("all_gather__2-gpus__bfloat16__excerpt.txt"))

    assert [r.redop for r in run.rows] == ["none"] * 7
    assert run.rows[0].type == "bfloat16"
    assert run.peak_busbw == 144.59  # in-place beats out-of-place here
    assert run.avg_busbw is None and run.ranks == ()


def test_old_format_error_column_is_not_a_count():
    run = parse_nccl_tests(_read("all_reduce__h20x8__2-nodes__old-error-column__excerpt.txt"))

    assert len(run.rows) == 8 and run.rows[0].in_wrong is None
    assert not run.counts_wrong and run.wrong == 0
    assert run.to_dict()["wrong"] is None


def test_old_broadcast_format_with_nccl_lines_between():
    run = parse_nccl_tests(_read("broadcast__v100x1__2-nodes__old-format__excerpt.txt"))

    assert run.hosts == ("v100-gpu-1", "v100-gpu-5")
    assert run.nccl_version == "2.9.6+cuda11.2"
    assert len(run.rows) == 1 and run.rows[0].redop is None and run.rows[0].out_time == 45.82


def test_truncated_output_keeps_its_rows():
    run = parse_nccl_tests(_read("all_reduce__h100x1__2-nodes__tree-4-nics__excerpt.txt"))

    assert len(run.rows) == 5 and run.peak_busbw == 41.52 and run.avg_busbw is None


def test_no_cuda_device_is_a_failure_naming_the_host():
    run = parse_nccl_tests(_read("all_reduce__no-cuda-device__t4x8.txt"))

    assert run.rows == () and run.no_device
    assert run.failed_hosts == ("458398",)
    assert "no CUDA-capable device is detected" in run.failures[0]


def test_launcher_prefixes_are_read_through():
    text = _read("all_reduce__h100x8__2-nodes__gcp-a3mega.txt")
    tagged = "\n".join("[1,0]<stdout>:" + line for line in text.splitlines())

    run = parse_nccl_tests(tagged)

    assert len(run.rows) == 31 and run.avg_busbw == 70.742 and len(run.ranks) == 16


@pytest.mark.parametrize(
    "text",
    [
        "srun: error: Unable to allocate resources: Invalid node name specified",
        "bash: /opt/nccl-tests/build/all_reduce_perf: No such file or directory",
        "",
    ],
)
def test_what_is_not_nccl_tests_output_is_one_error(text):
    with pytest.raises(ParseError, match="expected nccl-tests output"):
        parse_nccl_tests(text)


def test_a_row_with_garbage_where_a_number_belongs():
    text = _read("all_gather__2-gpus__bfloat16__excerpt.txt").replace("154.20", "15x.20")

    with pytest.raises(ParseError, match="'15x.20' where a number belongs"):
        parse_nccl_tests(text)


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=0, max_value=5000), st.text(max_size=40))
def test_mutated_output_parses_or_is_one_parse_error(at, noise):
    text = _read("all_reduce__h100x8__2-nodes__gcp-a3mega.txt")
    with contextlib.suppress(ParseError):
        parse_nccl_tests(text[:at] + noise + text[at + len(noise) :])
