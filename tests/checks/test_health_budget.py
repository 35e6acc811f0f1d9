"""The health tier's time budget (issue 26): under 5 s on an 8-GPU node, one nvidia-smi call.

Measured on the lab emulator's 8-GPU HGX H100 shape (tests/lab/gpu, the model read from the real
8x H100 SXM capture): its ``nvidia-smi -q -x`` (the emulator's own start-up included, a Python
program, slower than the real tool's answer on a persistence-mode node) through the health
tier's own reader, judgement and drain decision."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from lab import gpu as emulator

from gpuhost.checks_support import health_run
from gpuhost.checks_support.health import SMI_ARGV, gather
from gpuhost.checks_support.health_run import HealthRequest, run_health

BUDGET_S = 5.0


def test_health_tier_on_an_8_gpu_node_reads_once_and_stays_in_budget(tmp_path, monkeypatch):
    (tmp_path / "etc/gpuhost-lab-gpu").mkdir(parents=True)
    (tmp_path / "etc/gpuhost-lab-gpu/model.json").write_text(
        json.dumps(emulator.host_model("h100-sxm", 8))
    )
    env = {"GPUEMU_ROOT": str(tmp_path), "GPUEMU_INSTALLED": "550.163.01"}
    calls: list[list[str]] = []

    def smi(argv, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(argv)
        kwargs["env"] = {**kwargs["env"], **env}
        return subprocess.run([sys.executable, str(emulator.EMULATOR), *argv], **kwargs)

    def emulator_cli(*args: str) -> None:
        subprocess.run(
            [sys.executable, str(emulator.EMULATOR), *args],
            env={**os.environ, **env},
            check=True,
        )

    emulator_cli("boot")
    monkeypatch.setattr(health_run, "gather", lambda: gather(run=smi, root=str(tmp_path)))
    lines: list[str] = []

    start = time.monotonic()
    code = run_health(HealthRequest(), lambda line, **_: lines.append(line))
    took = time.monotonic() - start

    assert (code, lines) == (0, ["healthy"])
    assert calls == [list(SMI_ARGV)]
    assert took < BUDGET_S, f"{took:.2f} s"
    print(f"health tier, 8x H100 (emulated): {took:.2f} s")  # shown with pytest -s

    emulator_cli("inject", "remap-pending", "gpu=7")
    lines.clear()
    start = time.monotonic()
    code = run_health(HealthRequest(), lambda line, **_: lines.append(line))
    assert time.monotonic() - start < BUDGET_S
    assert code == 1 and lines[0].startswith("reset-gpu: [gpu.remap-pending] GPU 7 (")
    assert "00000000:DB:00.0" in lines[0]  # the eighth GPU
