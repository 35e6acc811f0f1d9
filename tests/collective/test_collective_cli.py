"""``gpuhost check INVENTORY --tier collective`` end to end on this machine: a stand-in ``srun``
and ``mpirun`` (tests/collective/fake_srun.py) start the lab's stand-in nccl-tests
(tests/lab/nccl/fake_nccl_perf.py, replaying the real captures of tests/fixtures/nccl-tests) as
one process per task; one node is made slow by its file, as on the lab cluster
(tests/integration/test_collective_lab.py runs the same through real Slurm)."""

from __future__ import annotations

import json
import os
import socket
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gpuhost.cli import main
from tests.schema_check import assert_valid

REPO = Path(__file__).resolve().parents[2]
FAKE_NCCL = REPO / "tests" / "lab" / "nccl" / "fake_nccl_perf.py"
CAPTURES = {
    "all_reduce_perf": "all_reduce__h100x8__2-nodes__gcp-a3mega.txt",
    "all_gather_perf": "all_gather__2-gpus__bfloat16__excerpt.txt",
}
NODES = ("n1", "n2", "n3", "n4")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def install_fake_nccl(folder: Path) -> Path:
    """The stand-in nccl-tests in ``folder`` (what the lab installs on its hosts)."""
    (folder / "captures").mkdir(parents=True)
    code = FAKE_NCCL.read_text().replace("#!/usr/bin/env python3", f"#!{sys.executable}", 1)
    for test, capture in CAPTURES.items():
        path = folder / test
        path.write_text(code)
        path.chmod(0o755)
        fixture = REPO / "tests" / "fixtures" / "nccl-tests" / capture
        (folder / "captures" / f"{test}.txt").write_text(fixture.read_text())
    return folder


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    root = tmp_path / "slurm"
    for node in NODES:
        (root / node).mkdir(parents=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = REPO / "tests" / "collective" / "fake_srun.py"
    for name, first in (("srun", ""), ("mpirun", " --as-mpirun")):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec {sys.executable} {fake}{first} "$@"\n')
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SLURM_ROOT", str(root))
    monkeypatch.setenv("GPUHOST_LAB_NCCL_PORT", str(_free_port()))
    nccl = install_fake_nccl(tmp_path / "nccl-tests")
    inventory = tmp_path / "inventory.py"
    data = {"gpuhost_gpus": ["NVIDIA H100 80GB HBM3"], "gpuhost_collective_floor": 300}
    inventory.write_text(f"hosts = [(n, {data!r}) for n in {NODES!r}]\n")
    return root, nccl, inventory, tmp_path


def _check(inventory: Path, *args: str) -> int:
    return main(["check", str(inventory), "--tier", "collective", *args])


def test_healthy_nodes_pass_and_every_report_is_written(cluster, capsys):
    root, nccl, inventory, tmp = cluster
    out = {name: tmp / f"collective.{name}" for name in ("json", "xml", "prom")}

    code = _check(
        inventory,
        f"--nccl-tests={nccl}",
        f"--json={out['json']}",
        f"--junit={out['xml']}",
        f"--prom={out['prom']}",
    )

    text = capsys.readouterr().out
    assert code == 0, text
    assert (
        "PASS          all_reduce_perf over n1,n2,n3,n4 (all): bus bandwidth 338.82 GB/s "
        "(floor 300 GB/s)" in text
    )
    assert "collective: PASS" in text
    document = json.loads(out["json"].read_text())
    assert_valid(document, "collective-result")
    assert document["runs"][0]["hosts_seen"] == list(NODES) and document["slow"] is None
    suite = ET.parse(out["xml"]).getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "2" and suite.get("failures") == "0"
    prom = out["prom"].read_text()
    assert (
        'gpuhost_collective_busbw_gbps{nodes="n1,n2,n3,n4",stage="all",'
        'test="all_reduce_perf"} 338.82' in prom
    )
    assert 'gpuhost_collective_verdict{verdict="PASS"} 1.0' in prom
    srun_lines = (root / "srun.log").read_text().splitlines()
    assert srun_lines[1].startswith("-N4 --ntasks-per-node=1 --nodelist=n1,n2,n3,n4 ")
    assert srun_lines[1].endswith("all_reduce_perf -b 1G -e 8G -f 2 -g 1")


def test_a_slow_node_is_found_and_named(cluster, capsys):
    root, nccl, inventory, tmp = cluster
    (root / "n3" / "nccl-slow").write_text("0.5\n")
    report = tmp / "out.json"

    code = _check(inventory, f"--nccl-tests={nccl}", f"--json={report}")

    text = capsys.readouterr().out
    assert code == 1, text
    assert (
        "FAIL          all_reduce_perf over n1,n2,n3,n4 (all): bus bandwidth 169.41 GB/s "
        "is below the floor 300 GB/s" in text
    )
    assert "slow: node n3 (pairs below the floor: n3+n4)" in text
    document = json.loads(report.read_text())
    assert_valid(document, "collective-result")
    assert document["slow"]["nodes"] == ["n3"]
    stages = [(r["stage"], r["nodes"], r["verdict"]) for r in document["runs"]]
    assert stages == [
        ("all", ["n1", "n2", "n3", "n4"], "FAIL"),
        ("all", ["n1", "n2", "n3", "n4"], "PASS"),  # all_gather: correctness only
        ("pair", ["n1", "n2"], "PASS"),
        ("pair", ["n3", "n4"], "FAIL"),
        ("split", ["n3", "n1"], "FAIL"),
        ("split", ["n4", "n1"], "PASS"),
    ]


def test_through_mpirun_the_slow_node_is_named_too(cluster, capsys):
    root, nccl, inventory, _tmp = cluster
    (root / "n2" / "nccl-slow").write_text("0.25\n")

    code = _check(
        inventory, f"--nccl-tests={nccl}", "--launcher=mpi", "--launcher-arg=--allow-run-as-root"
    )

    text = capsys.readouterr().out
    assert code == 1, text
    assert "through mpi on this machine" in text and "slow: node n2 " in text
    runs = (root / "srun.log").read_text().splitlines()
    assert runs[0].startswith("mpirun -np 4 -H n1:1,n2:1,n3:1,n4:1 --allow-run-as-root sh -c ")
    assert runs[1].startswith(
        f"mpirun -np 4 -H n1:1,n2:1,n3:1,n4:1 --allow-run-as-root {nccl}/all_reduce_perf "
    )


def test_missing_nccl_tests_could_not_run(cluster, capsys):
    _root, _nccl, inventory, tmp = cluster
    junit = tmp / "out.xml"

    code = _check(inventory, f"--nccl-tests={tmp / 'nowhere'}", f"--junit={junit}")

    text = capsys.readouterr().out
    assert code == 1, text
    assert (
        "COULD-NOT-RUN all_reduce_perf over n1,n2,n3,n4 (all): not found: "
        f"n1: {tmp}/nowhere/all_reduce_perf" in text
    )
    assert "collective: COULD-NOT-RUN" in text
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("errors") == "2" and suite.get("failures") == "0"


def test_no_srun_could_not_run(cluster, capsys, monkeypatch):
    _root, nccl, inventory, _tmp = cluster
    monkeypatch.setenv("PATH", "/usr/bin:/bin")

    assert _check(inventory, f"--nccl-tests={nccl}") == 1
    assert "not found: launcher: srun" in capsys.readouterr().out


def test_an_unreachable_launch_host_could_not_run(cluster, capsys, tmp_path):
    _root, nccl, _inventory, _tmp = cluster
    port = _free_port()  # nothing listens there
    launcher = {
        "gpuhost_collective_launcher": True,
        "ssh_hostname": "127.0.0.1",
        "ssh_port": port,
        "ssh_connect_timeout": 5,
    }
    node = {"gpuhost_gpus": ["NVIDIA H100 80GB HBM3"], "gpuhost_collective_floor": 300}
    inventory = tmp_path / "remote.py"
    inventory.write_text(f"hosts = [('ctl', {launcher!r}), ('n1', {node!r}), ('n2', {node!r})]\n")

    assert _check(inventory, f"--nccl-tests={nccl}") == 1
    out = capsys.readouterr().out
    assert "through slurm on ctl" in out
    assert "COULD-NOT-RUN all_reduce_perf over n1,n2 (all): launch host unreachable: ctl: " in out
    assert f"127.0.0.1:{port}" in out, out


def test_no_gpu_on_a_node_could_not_run(cluster, capsys):
    _root, nccl, inventory, _tmp = cluster
    capture = REPO / "tests/fixtures/nccl-tests/all_reduce__no-cuda-device__t4x8.txt"
    (nccl / "captures" / "all_reduce_perf.txt").write_text(capture.read_text())

    assert _check(inventory, f"--nccl-tests={nccl}") == 1
    out = capsys.readouterr().out
    assert (
        "COULD-NOT-RUN all_reduce_perf over n1,n2,n3,n4 (all): no GPU for a rank: 458398: "
        "Test CUDA failure common.cu:730 'no CUDA-capable device is detected'" in out
    )


@pytest.mark.parametrize(
    ("args", "inventory_data", "message"),
    [
        ([], {"gpuhost_gpus": ["NVIDIA H100 80GB HBM3"]}, "where is nccl-tests?"),
        (
            ["--nccl-tests=/x"],
            {"gpuhost_gpus": ["Tesla T4"]},
            "no sourced bus-bandwidth floor for GPUs Tesla T4, fabric unknown (no node class",
        ),
        (
            ["--nccl-tests=/x"],
            {
                "gpuhost_gpus": ["Tesla T4"] * 8,
                "gpuhost_fabric": {"ports": 8, "rate_gbps": 400, "link_layer": "InfiniBand"},
            },
            "no sourced bus-bandwidth floor for GPUs Tesla T4, fabric 8 x 400 Gb/s InfiniBand",
        ),
        (["--nccl-tests=/x", "--floor=10"], {}, "GPUs per node unknown"),
        (
            ["--nccl-tests=/x", "--floor=10"],
            {"gpuhost_gpus": ["T4"], "gpuhost_collective_launcher": True},
            "more than one host sets gpuhost_collective_launcher (a, b)",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, args, inventory_data, message):
    inventory = tmp_path / "inv.py"
    inventory.write_text(f"hosts = [(n, {inventory_data!r}) for n in ('a', 'b')]\n")

    assert _check(inventory, *args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


def test_the_floor_of_the_nodes_class_from_the_data(tmp_path, capsys, monkeypatch):
    """Eight H100 in gpuhost_gpus are data/node_classes.yaml's hgx-h100-8gpu (8 x 400 Gb/s
    InfiniBand): the sourced floor, 0.9 x 368 GB/s; the real capture's 338.82 is below it."""
    inventory = tmp_path / "inv.py"
    data = {"gpuhost_gpus": ["NVIDIA H100 80GB HBM3"] * 8}
    inventory.write_text(f"hosts = [(n, {data!r}) for n in ('a', 'b')]\n")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no srun: the floor is read before

    assert _check(inventory, "--nccl-tests=/x") == 1
    out = capsys.readouterr().out
    assert (
        "2 nodes x 8 GPUs through slurm on this machine; floor 331.2 GB/s (0.9 x 368 GB/s, "
        "NVIDIA H100 80GB HBM3 on 8 x 400 Gb/s InfiniBand" in out
    ), out


def test_collective_options_belong_to_the_collective_tier(capsys):
    assert main(["check", "--tier", "static", "--floor", "3"]) == 2
    assert "--floor is an option of --tier collective only" in capsys.readouterr().err
