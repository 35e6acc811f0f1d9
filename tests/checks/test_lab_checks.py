"""``gpuhost check`` against real lab hosts (Debian 12, systemd, apt, sshd; no GPU).

h1 is provisioned with the real provision deploy (Debian's driver 535.261.03, pinned and held;
no CUDA toolkit to keep the download small); h2 stays bare. The static checks that apply must pass
on h1 and fail with clear messages on h2 and on a broken h1 (driver unheld, wrong profile); GPU
checks must FAIL with the host's real state; the functional smoke test must report the lab's
python3 (no torch) per the documented policy.
"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from old_profiles import OLD_PROFILES

pytestmark = [pytest.mark.lab, pytest.mark.slow]
PROFILE = "debian12-nonfree-535"


def _inventory(path: Path, lab_inventory: Path, extra: dict[str, Any]) -> Path:
    path.write_text(
        "import runpy\n"
        f"_lab = runpy.run_path({str(lab_inventory)!r})\n"
        f"_extra = {extra!r}\n"
        "gpu_hosts = [(n, {**d, **_extra}) for n, d in _lab['lab_hosts']]\n"
    )
    return path


def _check(inventory: Path, junit: Path, *args: str) -> tuple[int, str, dict[str, str]]:
    exe = Path(sys.executable).with_name("gpuhost")
    proc = subprocess.run(
        [str(exe), "check", str(inventory), "--junit", str(junit), *args],
        capture_output=True,
        text=True,
        timeout=900,
    )
    outcomes = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        state = "passed"
        for tag in ("failure", "error", "skipped"):
            if case.find(tag) is not None:
                state = tag
        outcomes[str(case.get("name"))] = state
    return proc.returncode, proc.stdout + proc.stderr, outcomes


@pytest.fixture(scope="module")
def lab_setup(lab, tmp_path_factory):
    view = lab(2)
    view.reset("h1", "h2")  # the session lab is shared with other modules: start clean
    work = tmp_path_factory.mktemp("checks")
    good = _inventory(
        work / "inv.py",
        view.inventory_path,
        {"gpuhost_profile": PROFILE, "gpuhost_profiles_file": OLD_PROFILES,
         "gpuhost_install_cuda": False},
    )
    exe = Path(sys.executable).with_name("pyinfra")
    proc = subprocess.run(
        [
            str(exe),
            "-y",
            str(good),
            str(Path(__file__).parents[2] / "deploys/provision.py"),
            "--limit",
            "h1",
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    yield view, work, good
    view.reset("h1", "h2")  # leave clean hosts to the modules that run after this one


APPLYING_STATIC = [
    "test_profile_resolves",
    "test_profile_marker_matches",
    "test_driver_packages_installed",
    "test_coupled_packages_at_profile_version",
    "test_coupled_packages_held",
]
GPU_CHECKS = [
    "test_driver_loaded",
    "test_driver_version_matches_profile",
    "test_nvidia_smi_lists_gpus",
    "test_persistence_mode_on",
    "test_no_uncorrectable_ecc_errors",
    "test_no_remapped_row_failures",
    "test_pcie_link_at_max",
    "test_no_troubling_xid_since_boot",
]


def test_static_on_provisioned_and_bare_host(lab_setup) -> None:
    _view, work, good = lab_setup
    rc, out, got = _check(good, work / "static.xml", "--tier", "static")
    assert rc == 1, out[-3000:]
    for name in APPLYING_STATIC:
        assert got[f"{name}[ssh://h1]"] == "passed", (name, out[-4000:])
    for name in GPU_CHECKS:  # the lab has no GPU: the host's real state, as a FAIL
        assert got[f"{name}[ssh://h1]"] == "failure", name
    assert "nvidia-smi reports driver-not-loaded" in out
    assert "the NVIDIA kernel module is not loaded" in out
    assert got["test_fabric_manager[ssh://h1]"] == "skipped"
    assert got["test_docker_nvidia_runtime[ssh://h1]"] == "skipped"
    for name in (
        "test_profile_marker_matches",
        "test_driver_packages_installed",
        "test_coupled_packages_held",
    ):
        assert got[f"{name}[ssh://h2]"] == "failure", name
    assert "ssh://h2: /etc/gpuhost/profile does not exist" in out
    assert "error" not in got.values()


def test_unheld_driver_fails(lab_setup) -> None:
    view, work, good = lab_setup
    h1 = view.host("h1")
    assert h1.run("apt-mark unhold nvidia-smi libnvidia-ml1").returncode == 0
    try:
        rc, out, got = _check(
            good, work / "unheld.xml", "--tier", "static", "--limit", "h1", "--", "-k", "held"
        )
    finally:
        assert h1.run("apt-mark hold nvidia-smi libnvidia-ml1").returncode == 0
    assert rc == 1 and got["test_coupled_packages_held[ssh://h1]"] == "failure"
    assert "driver packages not held" in out and "libnvidia-ml1" in out and "nvidia-smi" in out


def test_wrong_profile_fails(lab_setup) -> None:
    _view, work, _good = lab_setup
    wrong = _inventory(
        work / "wrong.py",
        _view.inventory_path,
        {"gpuhost_profile": "debian12-nonfree-535-security", "gpuhost_install_cuda": False},
    )
    rc, out, got = _check(wrong, work / "wrong.xml", "--tier", "static", "--limit", "h1")
    assert rc == 1
    assert got["test_profile_marker_matches[ssh://h1]"] == "failure"
    assert got["test_coupled_packages_at_profile_version[ssh://h1]"] == "failure"
    assert "provisioned with profile 'debian12-nonfree-535'" in out
    assert "packages not at driver 535.309.01" in out and "nvidia-driver 535.261.03-1" in out


def test_functional_smoke_policy_on_lab_python(lab_setup) -> None:
    view, work, good = lab_setup
    rc, out, got = _check(good, work / "func.xml", "--limit", "h1", "--", "-k", "smoke")
    assert got["test_smoke_python_envs[ssh://h1]"] == "skipped"  # nothing expected, no torch
    assert "has neither torch nor tensorflow and none is expected" in out
    named = _inventory(
        work / "named.py",
        view.inventory_path,
        {"gpuhost_profile": PROFILE, "gpuhost_profiles_file": OLD_PROFILES,
         "gpuhost_pythons": ["/usr/bin/python3"]},
    )
    rc, out, got = _check(named, work / "named.xml", "--limit", "h1", "--", "-k", "smoke")
    assert rc == 1 and got["test_smoke_python_envs[ssh://h1]"] == "failure"
    assert "/usr/bin/python3 is named in gpuhost_pythons but has neither torch nor" in out
    h1 = view.host("h1")
    assert h1.run("ls /tmp/gpuhost-smoke-* 2>/dev/null | wc -l").stdout.strip() == "0"
