"""The health tier's time budget (issue 26): under 5 s on an 8-GPU node.

Measured on the lab emulator's 8-GPU HGX H100 shape (tests/lab/gpu, the model read from the real
8x H100 SXM capture): its ``nvidia-smi -q -x`` and ``nvidia-smi nvlink -s`` (the emulator's own
start-up included, a Python program) and a kernel log, read at the same time through the health
tier's own reader, then its judgement (the fault catalog, the node class of the GPU model) and
drain decision."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from lab import gpu as emulator

from gpuhost.checks_support import health_run
from gpuhost.checks_support.health import NVLINK_ARGV, SMI_ARGV, gather
from gpuhost.checks_support.health_run import HealthRequest, run_health

BUDGET_S = 5.0
LOG_HEADER = "#gpuhost-kernel-log source=journal rc=0\n"
XID_79 = (
    "Nov 26 17:21:22 h3 kernel: NVRM: Xid (PCI:0000:db:00): 79, pid=0, name=gpuemu, "
    "GPU has fallen off the bus.\n"
)


@pytest.fixture
def node(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """An emulated 8x H100 node; ``node.log`` is what the kernel log read answers; ``node.run()``
    is one health run: (exit code, its line, seconds)."""
    (tmp_path / "etc/gpuhost-lab-gpu").mkdir(parents=True)
    (tmp_path / "etc/gpuhost-lab-gpu/model.json").write_text(
        json.dumps(emulator.host_model("h100-sxm", 8))
    )
    env = {"GPUEMU_ROOT": str(tmp_path), "GPUEMU_INSTALLED": "550.163.01"}

    class Node:
        log = LOG_HEADER
        calls: list[list[str]] = []

        def emulator(self, *args: str) -> None:
            subprocess.run(
                [sys.executable, str(emulator.EMULATOR), *args],
                env={**os.environ, **env},
                check=True,
            )

        def read(self, argv, **kwargs):  # type: ignore[no-untyped-def]
            self.calls.append(argv)
            if argv[0] == "sh":  # the kernel log
                time.sleep(0.2)  # a journal read takes a moment; the others go on meanwhile
                return subprocess.CompletedProcess(argv, 0, self.log, "")
            kwargs["env"] = {**kwargs["env"], **env}
            return subprocess.run([sys.executable, str(emulator.EMULATOR), *argv], **kwargs)

        def run(self) -> tuple[int, str, float]:
            lines: list[str] = []
            start = time.monotonic()
            code = run_health(HealthRequest(), lambda line, **_: lines.append(line))
            return code, lines[0], time.monotonic() - start

    box = Node()
    box.calls = []
    box.emulator("boot")
    monkeypatch.setattr(health_run, "gather", lambda: gather(run=box.read, root=str(tmp_path)))
    return box


def test_health_tier_on_an_8_gpu_node_stays_in_budget(node):  # type: ignore[no-untyped-def]
    code, line, took = node.run()

    assert (code, line) == (0, "healthy")
    assert sorted(c[0] for c in node.calls) == ["nvidia-smi", "nvidia-smi", "sh"]
    assert [c for c in node.calls if c[0] == "nvidia-smi"] in (
        [list(SMI_ARGV), list(NVLINK_ARGV)],
        [list(NVLINK_ARGV), list(SMI_ARGV)],
    )
    assert took < BUDGET_S, f"{took:.2f} s"
    print(f"health tier, 8x H100 (emulated): {took:.2f} s")  # shown with pytest -s


@pytest.mark.parametrize(
    ("knob", "start"),
    [
        (("remap-pending", "gpu=7"), "reset-gpu: [gpu.remap-pending] GPU 7 ("),
        (("nvlink-down=3", "gpu=4"), "reset-gpu: [gpu.nvlink.down] GPU 4 ("),
        (("gpu-missing", "gpu=6"), "reboot: [gpu.missing] nvidia-smi lists 7 GPU(s); expected 8"),
        (("fabric=in-progress",), "drain: [gpu.fabric.state] GPU 0 ("),
    ],
)
def test_each_read_is_judged_within_budget(node, knob, start):  # type: ignore[no-untyped-def]
    node.emulator("inject", *knob)
    code, line, took = node.run()
    assert code == 1 and line.startswith(start), line
    assert took < BUDGET_S, f"{took:.2f} s"


def test_xids_since_boot_are_judged_and_an_unread_log_is_not(node):  # type: ignore[no-untyped-def]
    node.log = LOG_HEADER + XID_79
    code, line, _took = node.run()
    assert code == 1 and line.startswith("reboot: [gpu.xid.79] Xid 79 (GPU has fallen off"), line
    node.log = "#gpuhost-kernel-log source=journal rc=1\nNo journal files were found.\n"
    assert node.run()[:2] == (0, "healthy")  # the log could not be read: nothing judged from it
