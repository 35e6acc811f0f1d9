"""``gpuhost accept``'s bad input: one line, exit 2, before any host is touched; and this
machine, which has no GPU: one COULD-NOT-RUN line per stage, exit 1, never a pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from schema_check import assert_valid

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"


def _gpuhost(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuhost", *args], capture_output=True,
                          text=True, cwd=REPO, env=env, timeout=300, check=False)  # fmt: skip


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--duration", "abc"],
            "--duration 'abc': expected a positive time such as 60s, 90m or 4h",
        ),
        (["--duration", "-5m"], "--duration '-5m': expected a positive time"),
        (["--duration", "0"], "--duration '0': expected a positive time"),
        (["--duration", "3s"], "--duration '3s': expected at least 10s"),
        (["--skip", "gemm"], "--skip 'gemm': no such stage; expected one of inventory, dcgm"),
        (
            ["--floor", "nccl=300TFLOPS"],
            "--floor 'nccl=300TFLOPS': nccl is measured in GB/s, not TFLOPS",
        ),
        (["--floor", "ib=380"], "--floor 'ib=380': expected STAGE=NUMBER UNIT"),
        (["--floor", "gemm=0TFLOPS"], "--floor 'gemm=0TFLOPS': expected a number above 0"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_any_host(
    tmp_path: Path, args: list[str], line: str
) -> None:
    # an inventory whose host cannot be reached (loopback, a closed port: never an address off
    # this machine): the option is refused before it is tried
    inventory = tmp_path / "inv.py"
    inventory.write_text('hosts = [("gpu1", {"ssh_hostname": "127.0.0.1", "ssh_port": 1})]\n')
    proc = _gpuhost("accept", str(inventory), *args, "--state-dir", str(tmp_path / "s"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith(f"gpuhost: error: {line}"), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stdout == ""


def test_the_gate_refuses_a_node_slurm_has_not_drained(tmp_path: Path) -> None:
    """scontrol answers with a real 'show node' of an IDLE node: exit 2, nothing run."""
    fake = tmp_path / "bin"
    fake.mkdir()
    idle = FIXTURES / "slurm" / "scontrol-show-node-idle.txt"
    (fake / "scontrol").write_text(f"#!/bin/sh\ncat {idle}\n")
    (fake / "scontrol").chmod(0o755)
    inventory = tmp_path / "inv.py"
    inventory.write_text('hosts = [("h1", {"ssh_hostname": "127.0.0.1", "ssh_port": 1})]\n')
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}")
    proc = _gpuhost("accept", str(inventory), "--gate", "slurm", "--state-dir",
                    str(tmp_path / "s"), env=env)  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith(
        "gpuhost: error: --gate slurm: h1 (Slurm node h1: IDLE+NOT_RESPONDING) not drained"
    ), proc.stderr
    assert not (tmp_path / "s" / "acceptance").exists()


def test_this_machine_could_not_run_any_stage(tmp_path: Path) -> None:
    out, junit, prom = tmp_path / "accept.json", tmp_path / "accept.xml", tmp_path / "a.prom"
    env = dict(os.environ, PATH="/usr/bin:/bin")  # no nvidia-smi, dcgmi, nvbandwidth, ...
    proc = _gpuhost("accept", "@local", "--duration", "10s", "--json", str(out),
                    f"--junit={junit}", f"--prom={prom}", "--state-dir", str(tmp_path / "s"),
                    env=env)  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    stage_lines = [line for line in proc.stdout.splitlines() if line.startswith("  ")]
    assert len(stage_lines) == 8
    assert all(line.split()[1] == "COULD-NOT-RUN" for line in stage_lines), proc.stdout
    assert "PASS" not in proc.stdout
    document = json.loads(out.read_text())
    assert_valid(document, "acceptance")
    assert document["hosts"][0]["verdict"] == "could-not-run"
    suites = ET.parse(junit).getroot()
    assert (suites.get("tests"), suites.get("errors"), suites.get("failures")) == ("8", "8", "0")
    text = prom.read_text()
    assert 'gpuhost_accept_verdict{host="@local",verdict="could-not-run"} 1.0' in text
    assert (
        'gpuhost_accept_stage_verdict{host="@local",stage="soak",verdict="could-not-run"}' in text
    )


def test_an_unreachable_host_is_its_own_could_not_run_record(tmp_path: Path) -> None:
    """Nothing listens on port 1 of this machine: the host's record says why, the run ends."""
    inventory = tmp_path / "inv.py"
    inventory.write_text(
        'hosts = [("gpu1", {"ssh_hostname": "127.0.0.1", "ssh_port": 1, '
        '"ssh_connect_timeout": 5})]\n'
    )
    out = tmp_path / "accept.json"
    proc = _gpuhost("accept", str(inventory), "--duration", "10s", "--json", str(out),
                    "--state-dir", str(tmp_path / "s"))  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (record,) = json.loads(out.read_text())["hosts"]
    assert record["verdict"] == "could-not-run" and "refused" in record["error"], record["error"]
    assert {s["verdict"] for s in record["stages"]} == {"could-not-run"}
    assert "Traceback" not in proc.stderr


def test_a_host_another_gpuhost_command_holds_is_refused(tmp_path: Path) -> None:
    from gpuhost.locks import acquire, host_locks

    state = tmp_path / "s"
    state.mkdir(mode=0o700)
    lease = acquire(state, host_locks(["@local"]), "upgrade")
    try:
        proc = _gpuhost("accept", "@local", "--duration", "10s", "--state-dir", str(state))
    finally:
        lease.release()
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith(f"gpuhost: error: accept: @local is in use by pid {os.getpid()}")
    assert len(proc.stderr.strip().splitlines()) == 1
