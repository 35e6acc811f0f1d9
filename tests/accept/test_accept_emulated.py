"""``gpuhost accept @local`` end to end on this machine, against the lab's GPU emulator and the
acceptance stand-ins run from a folder ($GPUEMU_ROOT; no lab host): the real agent is run, its
GEMM workers import the PyTorch stand-in, nvidia-smi is sampled while the emulated GPUs are under
load, and a fault injected mid-soak is found in the telemetry, named with its GPU, catalog id and
action. The record validates against ``gpuhost schema acceptance``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lab import accept as equipment
from lab import gpu as emulator
from schema_check import assert_valid

REPO = Path(__file__).resolve().parents[2]
DRIVER = "550.163.01"


@pytest.fixture
def rig(tmp_path: Path) -> dict[str, str]:
    """The environment of a run: 8 emulated H100 SXM, the stand-ins on PATH, torch's stand-in
    on PYTHONPATH."""
    root = tmp_path / "root"
    (root / "etc/gpuhost-lab-gpu").mkdir(parents=True)
    (root / "etc/gpuhost-lab-gpu/model.json").write_text(
        json.dumps(emulator.host_model("h100-sxm", 8))
    )
    equipment.install(root)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(
        f'#!/bin/sh\nexec {sys.executable} {emulator.EMULATOR} nvidia-smi "$@"\n'
    )
    (bin_dir / "nvidia-smi").chmod(0o755)
    for tool, path in equipment.TOOLS.items():
        (bin_dir / tool).symlink_to(root / path.lstrip("/"))
    env = dict(
        os.environ,
        GPUEMU_ROOT=str(root),
        GPUEMU_INSTALLED=DRIVER,
        GPUEMU_ROOT_USER="1",
        PATH=f"{bin_dir}:{os.environ['PATH']}",
        PYTHONPATH=str(root / equipment.ON_HOST.lstrip("/") / "python"),
        GPUHOST_STATE_DIR=str(tmp_path / "state"),
    )
    boot = [sys.executable, str(emulator.EMULATOR), "boot"]
    assert subprocess.run(boot, env=env, check=False).returncode == 0
    env["RIG_TMP"] = str(tmp_path)
    return env


def _accept(
    env: dict[str, str],
    inject_after: float | None = None,
    floors: tuple[str, ...] = (),
    extra: tuple[str, ...] = (),
) -> tuple[int, str, dict]:
    out = Path(env["RIG_TMP"]) / "accept.json"
    argv = [sys.executable, "-m", "gpuhost", "accept", "@local", "--duration", "12s",
            "--skip", "ib", "--skip", "collective", "--json", str(out)]  # fmt: skip
    argv += [f"--floor={floor}" for floor in floors] + list(extra)
    proc = subprocess.Popen(argv, env=env, cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    if inject_after is not None:
        time.sleep(inject_after)
        inject = [sys.executable, str(emulator.EMULATOR), "inject", "clock-event=hw-thermal",
                  "gpu=3"]  # fmt: skip
        assert subprocess.run(inject, env=env, check=False).returncode == 0
    text, _ = proc.communicate(timeout=300)
    return proc.returncode, text, json.loads(out.read_text())


def _slurm(env: dict[str, str]) -> tuple[dict[str, str], str, Path]:
    """A fake scontrol (fake_scontrol.py) whose node, this machine's, an operator drained."""
    tmp = Path(env["RIG_TMP"])
    (tmp / "bin" / "scontrol").symlink_to(Path(__file__).with_name("fake_scontrol.py"))
    node = socket.gethostname().split(".")[0]
    state = tmp / "slurm.json"
    state.write_text(json.dumps({"name": node, "state": "IDLE+DRAIN", "reason": "new node"}))
    return dict(env, FAKE_SCONTROL_STATE=str(state)), node, state


def _stage(record: dict, name: str) -> dict:
    return next(s for s in record["stages"] if s["stage"] == name)


def test_a_clean_host_passes_every_stage_it_ran(rig: dict[str, str]) -> None:
    """... and the Slurm gate takes over the operator's drain, then resumes the node."""
    env, node, slurm = _slurm(rig)
    rc, text, document = _accept(env, extra=("--gate", "slurm"))
    assert rc == 0, text
    calls = Path(f"{slurm}.log").read_text().splitlines()
    assert calls[1] == f"update nodename={node} state=drain reason=gpuhost: acceptance running"
    assert calls[-1] == f"update nodename={node} state=resume"
    assert json.loads(slurm.read_text())["state"] == "IDLE"
    assert f"gpuhost: Slurm node {node}: accepted, resumed" in text
    assert_valid(document, "acceptance")
    (record,) = document["hosts"]
    assert record["verdict"] == "pass"
    verdicts = {s["stage"]: s["verdict"] for s in record["stages"]}
    assert verdicts == {"inventory": "pass", "dcgm": "pass", "soak": "pass", "telemetry": "pass",
                        "nvbandwidth": "pass", "nccl": "pass", "ib": "skipped",
                        "collective": "skipped"}  # fmt: skip
    soak = _stage(record, "soak")
    assert len(soak["measured"]["gpus"]) == 8
    floor = soak["floors"]["tflops"]
    assert floor == pytest.approx(247.38)  # 0.25 x the sourced H100 peak (data/gpu_peaks.yaml)
    assert soak["measured"]["floor_source"].startswith("0.25 x NVIDIA H100 SXM5 80GB FP16 tensor")
    assert all(
        g["mismatches"] == 0 and g["tflops_median"] > floor for g in soak["measured"]["gpus"]
    )
    telemetry = _stage(record, "telemetry")["measured"]["gpus"]
    assert {g["temperature_max_c"] for g in telemetry} <= {63, 64, 65}  # the captured series
    assert record["serials"]["gpus"][0]["serial"] and record["firmware"]["gsp"] == [DRIVER]
    assert "@local: PASS (runs 1, failed 0)" in text


def test_hw_thermal_injected_mid_soak_fails_the_host_naming_gpu_event_and_action(
    rig: dict[str, str],
) -> None:
    env, _node, slurm = _slurm(rig)
    rc, text, document = _accept(env, inject_after=7, extra=("--gate", "slurm"))
    assert rc == 1, text
    # the gate keeps the node drained, the first problem as the reason; never resumed
    final = json.loads(slurm.read_text())
    assert final["state"] == "IDLE+DRAIN"
    assert final["reason"].startswith(
        "gpuhost: acceptance failed: telemetry: [gpu.clocks.hw-thermal, action: "
        "inspect-hardware] GPU 3"
    ), final
    assert "state=resume" not in Path(f"{slurm}.log").read_text()
    assert_valid(document, "acceptance")
    (record,) = document["hosts"]
    assert record["verdict"] == "fail"
    telemetry = _stage(record, "telemetry")
    assert telemetry["verdict"] == "fail"
    (finding,) = telemetry["findings"]
    assert finding["rule"] == "gpu.clocks.hw-thermal"
    assert finding["action"] == "inspect-hardware"
    assert finding["message"].startswith("GPU 3 (00000000:5D:00.0): HW thermal slowdown active")
    assert "[gpu.clocks.hw-thermal, action: inspect-hardware] GPU 3" in text
    # the slowed GPU's clocks were halved: its SM clock is named against the others
    clocks = {g["gpu"]: g["sm_clock_min_mhz"] for g in telemetry["measured"]["gpus"]}
    assert clocks[3] == 990 and {clocks[i] for i in clocks if i != 3} == {1980}


def _processes_with(env_marker: str) -> list[int]:
    """Pids of processes whose environment holds ``env_marker`` (this rig's GPUEMU_ROOT)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if env_marker.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_ctrl_c_during_the_soak_stops_the_load_and_records_interrupted(
    rig: dict[str, str],
) -> None:
    out = Path(rig["RIG_TMP"]) / "accept.json"
    env, _node, slurm = _slurm(rig)
    argv = [sys.executable, "-m", "gpuhost", "accept", "@local", "--duration", "60s",
            "--skip", "ib", "--skip", "collective", "--json", str(out),
            "--gate", "slurm"]  # fmt: skip
    proc = subprocess.Popen(argv, env=env, cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    load = Path(rig["GPUEMU_ROOT"]) / "run/gpuhost-lab-gpu/load"
    deadline = time.monotonic() + 60
    while not (load.exists() and len(list(load.iterdir())) == 8):
        assert time.monotonic() < deadline, "the soak did not start"
        time.sleep(0.5)
    proc.send_signal(2)  # SIGINT, as Ctrl-C
    stopped = time.monotonic()
    stdout, stderr = proc.communicate(timeout=120)
    assert time.monotonic() - stopped < 30, "the soak went on after Ctrl-C"
    assert proc.returncode == 130, stdout + stderr
    assert "acceptance stopped by SIGINT" in stderr
    (record,) = json.loads(out.read_text())["hosts"]
    assert record["interrupted"] is True and record["verdict"] == "could-not-run"
    assert _processes_with(f"GPUEMU_ROOT={rig['GPUEMU_ROOT']}\0") == []  # no GEMM left running
    # the gate never resumes an interrupted node
    final = json.loads(slurm.read_text())
    assert (final["state"], final["reason"]) == ("IDLE+DRAIN", "gpuhost: acceptance interrupted")


def test_each_stage_fails_on_its_own_fault(rig: dict[str, str]) -> None:
    """The stand-ins' faults (tests/lab/accept: DCGM result FAIL, bandwidths scaled down, GEMM
    results wrong now and then on GPU 5): each fails its stage, the others pass."""
    faults = Path(rig["GPUEMU_ROOT"]) / "etc/gpuhost-lab/accept-faults.json"
    faults.parent.mkdir(parents=True, exist_ok=True)
    faults.write_text(json.dumps({"dcgm": "fail", "nvbandwidth": 0.1, "nccl": 0.5, "sdc_gpu": 5}))
    rc, text, document = _accept(rig, floors=("nccl=200GB/s",))
    assert rc == 1, text
    (record,) = document["hosts"]
    stages = {s["stage"]: s for s in record["stages"]}
    verdicts = {name: s["verdict"] for name, s in stages.items()}
    assert verdicts == {"inventory": "pass", "dcgm": "fail", "soak": "fail", "telemetry": "pass",
                        "nvbandwidth": "fail", "nccl": "fail", "ib": "skipped",
                        "collective": "skipped"}, text  # fmt: skip
    assert stages["dcgm"]["lines"] == ["Page Retirement/Row Remap: FAIL"]
    (sdc,) = stages["soak"]["lines"]
    assert sdc.startswith("GPU 5: ") and sdc.endswith("(silent data corruption)")
    assert stages["nvbandwidth"]["lines"][0].startswith(
        "host_to_device_memcpy_ce: slowest GPU 26.93 GB/s, below the floor 32 GB/s"
    )
    assert stages["nccl"]["lines"] == ["peak bus bandwidth 117.63 GB/s, below the floor 200 GB/s"]
