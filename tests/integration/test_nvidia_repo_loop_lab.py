"""The closed loop for the BUILT-IN NVIDIA-repository profiles on GPU-shaped lab hosts: h1 = an
HGX H100 8-GPU board (NVSwitches: ``gpuhost_fabric_manager: true``, as its operator's inventory
says), h2 = 1x T4, both installed from the lab's stand-in NVIDIA repository (tests/lab/aptrepo:
packages of NVIDIA's names and versions, small; the GPU emulator answers as their nvidia-smi).

1. ``nvidia-repo-580-cuda12.9``: ``provision --reboot`` converges (the module loads at boot), a
   re-run changes nothing, ``audit --json`` has no error and no warning, ``check --tier static``
   from gpuhost installed as a wheel outside the checkout passes every check, fabric manager
   running on the HGX board included.
2. ``gpuhost upgrade --to nvidia-repo-580-cuda13.0`` (canary h1, then h2) upgrades both: the 12.9
   profile's libcudnn9-cuda-12 stays installed beside the new libcudnn9-cuda-13 (legal side by
   side), and the validation judges the profile's cuDNN package.
3. ``nvidia-repo-580-cuda13.0`` on the same hosts re-created: the same loop (CUDA 13.0 and 12.9
   side by side, /usr/local/cuda at 13.0, the open kernel module), and ``--tier functional``
   fails nothing: the smoke test is skipped with its reason (python3 has no framework and the
   profile pins none; a framework's COULD-NOT-RUN on an emulated GPU would need PyTorch, GBs,
   on the host).

The two hosts are shared by the tests of this module; each profile's hosts are a module fixture
(``on_cuda12``, ``on_cuda13``) the tests that need them ask for, so each test also passes alone
(selected by its node id), at no cost to the module's run in order. About 7 minutes.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from provision_support import ssh_data
from wheel_support import build_wheel_venv

from gpuhost.upgrade.journal import Journal

pytestmark = [pytest.mark.lab, pytest.mark.slow]

GPUHOST = [sys.executable, "-m", "gpuhost"]
CUDA12, CUDA13 = "nvidia-repo-580-cuda12.9", "nvidia-repo-580-cuda13.0"
SHAPES = {1: ("h100-sxm", 8), 2: ("t4", 1)}


class Loop:
    def __init__(self, view: Any, workdir: Path) -> None:
        self.view, self.workdir = view, workdir
        self.h1, self.h2 = view.hosts[0], view.hosts[1]
        self.wheel: Path | None = None

    def inventory(self, profile: str) -> Path:
        key = self.view.repo_key_path

        hosts = []
        for index, host in ((1, self.h1), (2, self.h2)):
            data = {**ssh_data(self.view, host), "gpuhost_profile": profile,
                    "gpuhost_cuda_repo_url": self.view.repo_url,
                    "gpuhost_cuda_repo_key": str(key),
                    "gpuhost_cuda_repo_key_sha256": hashlib.sha256(key.read_bytes()).hexdigest()}
            if index == 1:
                data["gpuhost_fabric_manager"] = True
            hosts.append((host.name, data))
        path = self.workdir / f"{profile}.py"
        path.write_text(f'"""GPU-shaped lab hosts on {profile}."""\n\nhosts = {hosts!r}\n')
        return path

    def gpuhost(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        """gpuhost's CLI from a folder outside the checkout; ``check`` from the installed wheel."""
        cli = GPUHOST
        if args and args[0] == "check":
            if self.wheel is None:
                self.wheel = build_wheel_venv(self.workdir / "wheel") / "bin" / "gpuhost"
            cli = [str(self.wheel)]
        return subprocess.run([*cli, *args], capture_output=True, text=True, timeout=timeout,
                              cwd=self.workdir, check=False, stdin=subprocess.DEVNULL)

    def audit(self, profile: str) -> list[dict[str, Any]]:
        out = self.workdir / "audit.json"
        proc = self.gpuhost("audit", str(self.inventory(profile)), "--json", str(out))
        assert proc.returncode in (0, 1), proc.stdout + proc.stderr
        report = json.loads(out.read_text())
        assert all(h["reachable"] for h in report["hosts"]), proc.stdout
        return [{"host": h["name"], **f} for h in report["hosts"] for f in h.get("findings", [])]

    def failed_checks(self, profile: str, tier: str) -> tuple[list[str], str]:
        proc = self.gpuhost("check", str(self.inventory(profile)), "--tier", tier)
        failed = [line for line in proc.stdout.splitlines() if line.startswith("FAILED ")]
        # pytest adds " - <message>" to a FAILED line when the terminal is wide enough
        names = [line.split(" - ", 1)[0].split("::")[-1] for line in failed]
        assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-2000:]
        return names, proc.stdout


@pytest.fixture(scope="module")
def loop(lab: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loop]:
    view = lab(max(2, lab.count))
    for index, gpu in SHAPES.items():
        view.hosts[index - 1].record = view.manager.set_shape(index, gpu, None)
    try:
        yield Loop(view, tmp_path_factory.mktemp("repo-loop"))
    finally:
        for index in SHAPES:
            view.manager.set_shape(index, None, None)


def _converges(loop: Loop, profile: str, *first: str) -> None:
    inventory = str(loop.inventory(profile))
    proc = loop.gpuhost("provision", inventory, *first)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # the run after the first boot with a GPU starts the persistence daemon and applies the
    # clocks, which need the loaded module; the next one changes nothing
    loop.gpuhost("provision", inventory)
    again = loop.gpuhost("provision", inventory)
    out = again.stdout + again.stderr
    assert again.returncode == 0 and "h1: ok, 0 changed" in out and "h2: ok, 0 changed" in out, \
        out[-3000:]


def _audit_has_no_finding(loop: Loop, profile: str) -> None:
    findings = loop.audit(profile)
    assert not [f for f in findings if f["severity"] in ("error", "warning")], findings


def _static_checks_pass(loop: Loop, profile: str) -> None:
    failed, out = loop.failed_checks(profile, "static")
    assert not failed, out[-4000:]
    assert " passed" in out, out[-2000:]


@pytest.fixture(scope="module")
def on_cuda12(loop: Loop) -> Loop:
    """The hosts provisioned with the CUDA 12.9 profile (they are, as the loop makes them)."""
    _converges(loop, CUDA12, "--reboot")
    return loop


@pytest.fixture(scope="module")
def on_cuda13(loop: Loop) -> Loop:
    """The hosts re-created (whatever an upgrade left) and provisioned with the CUDA 13.0
    profile."""
    for index, gpu in SHAPES.items():
        loop.view.hosts[index - 1].record = loop.view.manager.set_shape(index, gpu, None)
    _converges(loop, CUDA13, "--reboot")
    return loop


def test_cuda12_9_converges_audits_clean_and_checks_pass(on_cuda12: Loop) -> None:
    loop = on_cuda12
    listing = loop.h1.run("nvidia-smi -L").stdout.splitlines()
    assert len(listing) == 8 and all("H100" in line for line in listing), listing
    smi = loop.h2.run("nvidia-smi --query-gpu=name,driver_version --format=csv,noheader").stdout
    assert smi.strip() == "Tesla T4, 580.178.04", smi
    assert "cuda-12.9" in loop.h2.run("readlink -f /usr/local/cuda").stdout
    fabric = loop.h1.run("systemctl is-enabled nvidia-fabricmanager; "
                         "systemctl is-active nvidia-fabricmanager").stdout.split()
    assert fabric == ["enabled", "active"], fabric
    _audit_has_no_finding(loop, CUDA12)
    _static_checks_pass(loop, CUDA12)


def test_upgrade_from_cuda12_9_to_cuda13_0(on_cuda12: Loop) -> None:
    loop = on_cuda12
    state_dir = loop.workdir / "state"
    proc = loop.gpuhost("upgrade", str(loop.inventory(CUDA12)), "--to", CUDA13, "--canary", "1",
                        "--batch", "1", "--state-dir", str(state_dir), timeout=1500)
    (journal,) = (state_dir / "runs").glob("*.jsonl")
    progress = Journal.open(journal).progress()
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert {h: p.outcome for h, p in progress.items()} == {"h1": "upgraded", "h2": "upgraded"}


def test_cuda13_0_on_fresh_hosts_converges_audits_clean_and_checks_pass(on_cuda13: Loop) -> None:
    loop = on_cuda13
    for host in (loop.h1, loop.h2):
        marker = json.loads(host.run("cat /etc/gpuhost/profile").stdout)
        assert marker["profile"] == CUDA13, marker
        assert "cuda-13.0" in host.run("readlink -f /usr/local/cuda").stdout
        both = host.run("ls -d /usr/local/cuda-12.9 /usr/local/cuda-13.0")
        assert both.returncode == 0, both.stderr  # both toolkits the profile lists
        assert "Open Kernel Module" in host.run("cat /proc/driver/nvidia/version").stdout
    _audit_has_no_finding(loop, CUDA13)
    _static_checks_pass(loop, CUDA13)


def test_functional_tier_fails_nothing_and_says_why_the_smoke_test_did_not_run(
    on_cuda13: Loop,
) -> None:
    failed, out = on_cuda13.failed_checks(CUDA13, "functional")
    assert not failed, out[-4000:]
    for name in ("h1", "h2"):
        assert (f"ssh://{name}: smoke test COULD-NOT-RUN: python3 has neither torch nor "
                "tensorflow and none is expected"
                in out), out[-4000:]
