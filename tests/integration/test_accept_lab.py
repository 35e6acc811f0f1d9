"""``gpuhost accept`` on two GPU-shaped lab hosts (8x H100 SXM each, tests/lab/gpu), provisioned
with the built-in profile debian12-nonfree-535-security (Debian's real driver packages, no CUDA
toolkit), as a user runs it:

- one 60 s acceptance run of both hosts in parallel; 20 s into the soak, h2's GPU 3 gets
  ``clock-event=hw-thermal`` (``lab gpu h2 inject clock-event=hw-thermal gpu=3``);
- h1 passes every stage but the multi-node collective (``--skip collective``: it needs a Slurm or
  MPI launcher, tests/integration/test_collective_lab.py runs that tier); h2 fails, its record
  naming GPU 3, the event's fault id and its action; both records validate against ``gpuhost
  schema acceptance`` and are kept in the state folder's history.

The tools on the hosts are test equipment (tests/lab/accept: dcgmi, nvbandwidth, nccl-tests,
ib_write_bw replaying real captures; a PyTorch stand-in on gpuhost-lab-python3's path whose GEMMs
load the emulated GPUs, whose telemetry then follows a real nvidia-smi dmon series). About 3
minutes once the lab cache has the driver packages (provision with --reboot, then the run).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from provision_support import ssh_data
from schema_check import assert_valid

pytestmark = [pytest.mark.lab, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
GPUHOST = [sys.executable, "-m", "gpuhost"]
PROFILE = "debian12-nonfree-535-security"
LAB_PYTHON = "/usr/local/bin/gpuhost-lab-python3"
INJECT_AT_S = 20


def _gpuhost(workdir: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GPUHOST, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=workdir, check=False)  # fmt: skip


@pytest.fixture(scope="module")
def rack(lab: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    view = lab(max(2, lab.count))
    for index in (1, 2):
        view.manager.set_shape(index, ("h100-sxm", 8), PROFILE)
    hosts = [
        (host.name, {**ssh_data(view, host), "gpuhost_profile": PROFILE,
                     "gpuhost_install_cuda": False, "gpuhost_pythons": [LAB_PYTHON]})
        for host in view.hosts[:2]
    ]  # fmt: skip
    workdir = tmp_path_factory.mktemp("accept")
    inventory = workdir / "inventory.py"
    inventory.write_text(f'"""Two new GPU servers."""\n\nhosts = {hosts!r}\n')
    done = _gpuhost(workdir, "provision", str(inventory), "--reboot")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    try:
        yield view, inventory, workdir
    finally:
        for index in (1, 2):
            view.manager.set_shape(index, None, None)


def _inject_when_soaking(view: Any, proc: subprocess.Popen[str], lines: list[str]) -> None:
    """Follow the run's output; INJECT_AT_S seconds after h2's soak started, inject."""
    assert proc.stdout is not None
    started = None
    for line in proc.stdout:
        lines.append(line)
        if started is None and line.startswith("h2: soak started"):
            started = time.monotonic()
            timer = threading.Timer(
                INJECT_AT_S, view.manager.gpu_inject, (2, "clock-event=hw-thermal", 3)
            )
            timer.start()


def test_accept_passes_the_clean_host_and_fails_the_one_that_overheated(rack: Any) -> None:
    view, inventory, workdir = rack
    out, state = workdir / "accept.json", workdir / "state"
    argv = [*GPUHOST, "accept", str(inventory), "--duration", "60s", "--json", str(out),
            "--skip", "collective", "--state-dir", str(state)]  # fmt: skip
    proc = subprocess.Popen(argv, cwd=workdir, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    lines: list[str] = []
    _inject_when_soaking(view, proc, lines)
    assert proc.wait(timeout=600) == 1, "".join(lines)
    text = "".join(lines)
    assert out.exists(), text
    document = json.loads(out.read_text())
    assert_valid(document, "acceptance")
    records = {r["host"]: r for r in document["hosts"]}
    clean, hot = records["h1"], records["h2"]
    assert clean["verdict"] == "pass", text
    verdicts = {s["stage"]: s["verdict"] for s in clean["stages"]}
    assert verdicts == {"inventory": "pass", "dcgm": "pass", "soak": "pass", "telemetry": "pass",
                        "nvbandwidth": "pass", "nccl": "pass", "ib": "pass",
                        "collective": "skipped"}, text  # fmt: skip
    assert hot["verdict"] == "fail", text
    telemetry = next(s for s in hot["stages"] if s["stage"] == "telemetry")
    (finding,) = telemetry["findings"]
    assert (finding["rule"], finding["action"]) == ("gpu.clocks.hw-thermal", "inspect-hardware")
    assert finding["message"].startswith("GPU 3 (00000000:5D:00.0): HW thermal slowdown active")
    first_at = float(finding["message"].split("first at ")[1].split(" s")[0])
    assert INJECT_AT_S - 2 <= first_at <= INJECT_AT_S + 10, finding["message"]
    assert "h2: FAIL" in text and "[gpu.clocks.hw-thermal, action: inspect-hardware] GPU 3" in text
    # every other stage of h2 passed: the fault is named where it is, not everywhere
    assert {s["stage"] for s in hot["stages"] if s["verdict"] == "fail"} == {"telemetry"}
    # serials and firmware are in the record; each host's history holds this run
    assert len(clean["serials"]["gpus"]) == 8 and clean["firmware"]["vbios"] == ["96.00.74.00.01"]
    history = (state / "acceptance" / "h2.jsonl").read_text().splitlines()
    assert json.loads(history[-1])["verdict"] == "fail"
    # the load stopped with the run: no GEMM stand-in left on either host
    for host in view.hosts[:2]:
        assert host.run("pgrep -f 'agent.py --worker'").returncode == 1
    print(text)  # the run's report (docs/acceptance.md shows one): pytest -s
