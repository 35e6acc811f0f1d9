"""The collective floors (data/collective_floors.yaml), one run's verdict, and the JUnit and
Prometheus documents."""

from __future__ import annotations

from pathlib import Path

import pytest
import xmlschema
from prometheus_client.parser import text_string_to_metric_families

from gpuhost.collective import report as reports
from gpuhost.collective.floors import Fabric, Floor, load_floors, resolve_floor
from gpuhost.collective.judge import COULD_NOT_RUN, FAIL, PASS, judge
from gpuhost.collective.locate import Located
from gpuhost.collective.plan import Node, Setup, preflight_command, run_command
from gpuhost.collective.run import Report
from gpuhost.errors import ConfigError, MatrixError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-tests"
XSD = xmlschema.XMLSchema(str(Path(__file__).resolve().parents[1] / "reports" / "junit-10.xsd"))
H100 = (FIXTURES / "all_reduce__h100x8__2-nodes__gcp-a3mega.txt").read_text()
NDR8 = Fabric(8, 400.0, "InfiniBand")
HDR8 = Fabric(8, 200.0, "InfiniBand")


def test_every_shipped_floor_cites_a_source_with_its_derivation():
    floors = load_floors()

    assert floors.fraction == 0.9 and len(floors.rows) >= 2
    for row in floors.rows:
        assert row.url.startswith("https://github.com/NVIDIA/") and row.how
        assert row.reference_busbw_gbs > 0 and row.gpus


def test_a_sourced_floor_for_the_gpu_model_and_fabric():
    floors = load_floors()

    h100 = resolve_floor(floors, ["NVIDIA H100 80GB HBM3"] * 4, NDR8, None)
    a100 = resolve_floor(floors, ["nvidia a100-sxm4-80gb"], HDR8, None)

    assert h100.busbw_gbs == 331.2 and "46 GB/s per NDR" in h100.origin
    assert "on 8 x 400 Gb/s InfiniBand" in h100.origin
    assert h100.source == "https://github.com/NVIDIA/nccl-tests/issues/290"
    assert a100.busbw_gbs == 172.8 and "nccl/issues/812" in str(a100.source)


@pytest.mark.parametrize(
    ("gpus", "fabric"),
    [
        (["NVIDIA H100 80GB HBM3"], Fabric(8, 400, "Ethernet")),  # no row for this fabric
        (["NVIDIA H100 80GB HBM3"], Fabric(4, 400, "InfiniBand")),  # nor for 4 ports
        (["Tesla T4"], NDR8),  # no row for this GPU
        (["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"], NDR8),  # mixed nodes
        (["NVIDIA H100 80GB HBM3"], None),
    ],
)
def test_no_floor_is_invented(gpus, fabric):
    with pytest.raises(ConfigError, match="give your own floor with --floor"):
        resolve_floor(load_floors(), gpus, fabric, None)


def test_the_users_floor_comes_first():
    floor = resolve_floor(load_floors(), ["Tesla T4"], None, 12.5)

    assert floor == Floor(12.5, "the floor given (--floor or gpuhost_collective_floor)")


def test_a_damaged_floors_file_lists_every_problem(tmp_path):
    path = tmp_path / "floors.yaml"
    path.write_text(
        "schema: 1\nfraction: 1.5\nfraction_source: nope\n"
        "sources: {s: {url: 'https://x', title: t}}\n"
    )

    with pytest.raises(MatrixError) as caught:
        load_floors(str(path))

    # the references themselves are the node classes' (tests/gpus/test_node_classes.py)
    assert caught.value.problems == [
        "schema: found 1, expected 2",
        "fraction: found 1.5, expected at most 1",
        "fraction_source: expected a key of sources",
    ]


def test_a_run_that_hangs_is_a_failure_not_could_not_run():
    partial = H100[: H100.index("  8589934592")]
    stopped = partial + "gpuhost: the run took longer than 900 s and was stopped\n"

    result = judge("all_reduce_perf", ("a", "b"), "all", 124, stopped, 300.0)
    nothing = judge("all_reduce_perf", ("a", "b"), "all", 124, "gpuhost: the run took", 300.0)

    assert result.verdict == FAIL and "did not finish within the run timeout" in result.reason
    assert nothing.verdict == FAIL and not nothing.slow


def test_all_gather_is_judged_for_correctness_only():
    result = judge("all_gather_perf", ("a", "b"), "all", 0, H100, 10_000.0)

    assert result.verdict == PASS and result.floor is None
    assert result.reason == "bus bandwidth 338.82 GB/s (correctness only: no floor)"


def _setup(launcher: str = "slurm") -> Setup:
    nodes = tuple(Node(n, f"slurm-{n}", f"10.0.0.{i}") for i, n in enumerate(("a", "b", "c")))
    return Setup(launcher, None, nodes, 8, "/opt/nccl tests/build", Floor(300.0, "given"))


def test_command_lines_for_slurm_and_mpi():
    slurm, mpi = _setup(), _setup("mpi")

    assert run_command(slurm, "all_reduce_perf", ("a", "c")) == (
        "srun -N2 --ntasks-per-node=8 --nodelist=slurm-a,slurm-c "
        "'/opt/nccl tests/build/all_reduce_perf' -b 1G -e 8G -f 2 -g 1 2>&1"
    )
    assert run_command(mpi, "all_gather_perf", ("b", "c")).startswith(
        "mpirun -np 16 -H 10.0.0.1:8,10.0.0.2:8 '/opt/nccl tests/build/all_gather_perf' "
    )
    assert "command -v mpirun" in preflight_command(mpi)
    assert "mpirun -np 3 -H 10.0.0.0:1,10.0.0.1:1,10.0.0.2:1 sh -c" in preflight_command(mpi)


def _report() -> Report:
    runs = (
        judge("all_reduce_perf", ("a", "b", "c"), "all", 0, H100, 1000.0),
        judge("all_gather_perf", ("a", "b", "c"), "all", 1, "srun: error: x", 300.0),
        judge("all_reduce_perf", ("a", "b"), "pair", 0, H100, 300.0),
    )
    return Report(_setup(), runs, Located(("c",), note="pairs below the floor: c+a"))


def test_junit_has_a_case_per_run_and_is_valid():
    text = reports.junit(_report())

    XSD.validate(text)
    assert text.count("<testcase ") == 3
    assert 'name="all_reduce_perf over a,b (pair)"' in text
    assert '<failure message="bus bandwidth 338.82 GB/s is below the floor 1000 GB/s"' in text
    assert '<error message="the launcher ran no nccl-tests (exit 1): srun: error: x"' in text


def test_prometheus_textfile_parses_with_the_runs_and_the_slow_node():
    report = _report()
    families = {f.name: f for f in text_string_to_metric_families(reports.prometheus(report, 5))}

    assert report.verdict == FAIL and report.exit_code == 1
    busbw = families["gpuhost_collective_busbw_gbps"].samples
    assert {s.labels["nodes"]: s.value for s in busbw} == {"a,b,c": 338.82, "a,b": 338.82}
    verdicts = families["gpuhost_collective_verdict"].samples
    assert {s.labels["verdict"]: s.value for s in verdicts} == {PASS: 0, FAIL: 1, COULD_NOT_RUN: 0}
    slow = families["gpuhost_collective_slow_node"].samples
    assert [(s.labels["node"], s.value) for s in slow] == [("c", 1.0)]
