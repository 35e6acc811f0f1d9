"""The lab's NVIDIA-layout APT repository: signed, trusted via signed-by, pinnable, upgradable.

Its packages are EMPTY STAND-INS (names, versions and relations of NVIDIA's packages only).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.lab


def _sh(host, cmd: str, timeout: float = 180):
    proc = host.run(cmd, timeout=timeout)
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}"
    return proc.stdout


def _add_repo(host, lab, signed_by: str) -> None:
    _sh(host, f"echo 'deb [signed-by={signed_by}] {lab.repo_url} /' "
              "> /etc/apt/sources.list.d/cuda.list")


def _version(host, pkg: str) -> str:
    return _sh(host, f"dpkg-query -W -f='${{Version}}' {pkg}").strip()


def test_repository_is_signed_and_rejected_without_its_key(fresh_host, lab) -> None:
    view = lab(1)
    _add_repo(fresh_host, view, "/usr/share/keyrings/debian-archive-keyring.gpg")
    proc = fresh_host.run("apt-get update")
    assert "NO_PUBKEY" in proc.stdout + proc.stderr or "not signed" in proc.stdout + proc.stderr
    _add_repo(fresh_host, view, view.repo_key_path_on_host)
    out = _sh(fresh_host, "apt-get update 2>&1")
    assert view.repo_url.rstrip("/").split("//")[1] in out
    assert "Err:" not in out and "W: " not in out


#: the Debian-style driver packages that cuda-drivers-550 pulls in with "= v" Depends
DRIVER_SET = ["cuda-drivers-550", "nvidia-driver", "nvidia-smi", "libcuda1", "libnvidia-ml1",
              "libnvidia-cfg1", "nvidia-kernel-dkms", "nvidia-driver-libs", "nvidia-driver-bin",
              "nvidia-kernel-support", "firmware-nvidia-gsp", "libnvidia-ptxjitcompiler1",
              "nvidia-fabricmanager-550"]


def _at(version: str) -> str:
    return " ".join(f"{name}={version}" for name in DRIVER_SET)


def test_exact_driver_pin_pulls_matching_driver_and_fabricmanager(fresh_host, lab) -> None:
    view = lab(1)
    _add_repo(fresh_host, view, view.repo_key_path_on_host)
    _sh(fresh_host, "apt-get update -qq")
    policy = _sh(fresh_host, "apt-cache policy cuda-drivers-550 nvidia-smi")
    for v in ("550.54.14-1", "550.54.15-1", "550.127.05-1"):
        assert v in policy
    # Debian non-free offers the same Debian-style names at 535.x (what provision's pins beat)
    assert "535." in policy.split("nvidia-smi:")[1], policy
    # like NVIDIA's repository: the exact Depends is not resolved to an older driver by itself
    proc = fresh_host.run("apt-get install -y -qq cuda-drivers-550=550.54.14-1")
    assert proc.returncode == 100 and "held broken packages" in proc.stderr
    _sh(fresh_host, f"apt-get install -y -qq --no-install-recommends {_at('550.54.14-1')}")
    assert _version(fresh_host, "nvidia-driver") == "550.54.14-1"
    assert _sh(fresh_host, "cat /usr/share/gpuhost-lab/nvidia-smi.version").strip() \
        == "550.54.14-1"
    # holding the driver keeps it back; the fabric manager's exact Depends follows it
    _sh(fresh_host, f"apt-mark hold {' '.join(DRIVER_SET)}")
    upgrade = _sh(fresh_host, "apt-get -s upgrade")
    assert "kept back" in upgrade and "Inst nvidia-driver " not in upgrade
    _sh(fresh_host, f"apt-mark unhold {' '.join(DRIVER_SET)}")
    _sh(fresh_host, f"apt-get install -y -qq --no-install-recommends {_at('550.54.15-1')}")
    assert _version(fresh_host, "nvidia-driver") == "550.54.15-1"
    assert _version(fresh_host, "nvidia-fabricmanager-550") == "550.54.15-1"


def test_cuda_metapackage_drags_in_the_newest_driver_branch(fresh_host, lab) -> None:
    view = lab(1)
    _add_repo(fresh_host, view, view.repo_key_path_on_host)
    _sh(fresh_host, "apt-get update -qq")
    sim = _sh(fresh_host, "apt-get -s install cuda")
    assert "Inst cuda-toolkit-13-0 (13.0.2-1 " in sim, sim
    assert "Inst cuda-drivers-580 " in sim and "Inst cuda-drivers-550 " not in sim
    assert "Inst nvidia-driver (580.178.04-1 " in sim, sim
    # a branch pin keeps 580 out even for upgrades that ask for "cuda-drivers"
    _sh(fresh_host, "printf 'Package: cuda-drivers-580 cuda-drivers\\n"
                    "Pin: version 580.*\\nPin-Priority: -1\\n' > /etc/apt/preferences.d/no-580")
    proc = fresh_host.run("apt-get -s install cuda")
    assert proc.returncode != 0 and "Inst cuda-drivers-580 " not in proc.stdout
    for pkg, versions in {"cuda-toolkit-12-4": ("12.4.0-1", "12.4.1-1"),
                          "cuda-toolkit-12-9": ("12.9.0-1", "12.9.1-1"),
                          "libcudnn9-cuda-12": ("9.1.0.70-1", "9.3.0.75-1", "9.5.1.17-1",
                                                "9.10.2.21-1"),
                          "libcudnn9-cuda-13": ("9.16.0.29-1", "9.17.0.29-1", "9.19.0.56-1"),
                          "nvidia-fabricmanager-580": ("580.105.08-1", "580.159.03-1",
                                                       "580.178.04-1"),
                          "nvidia-container-toolkit": ("1.16.2-1", "1.17.0-1", "1.19.1-1"),
                          "libnvidia-container1": ("1.16.2-1", "1.17.0-1", "1.19.1-1")}.items():
        policy = _sh(fresh_host, f"apt-cache policy {pkg}")
        assert all(v in policy for v in versions), policy


def test_three_field_cudnn_profile_pins_the_four_field_package(fresh_host, lab) -> None:
    """cuDNN "9.5.1" (profiles, cudnn_version.h) pins NVIDIA's 9.5.1.17-1, not 9.10.2.21-1."""
    from gpuhost.deploys.spec import package_plan
    from gpuhost.desired import DesiredState
    from gpuhost.operations.apt_pin import render_preferences

    spec = DesiredState(profile="t", source="nvidia-cuda-repo", os=("debian-12",),
                     driver_version="550.54.15", driver_branch="550",
                     kernel_module="proprietary", cuda_versions=("12.4",), cuda_default="12.4",
                     cudnn="9.5.1")
    plan = package_plan(spec, "debian-12")
    prefs = render_preferences(plan.pins, plan.blocked, plan.blocked_patterns)
    view = lab(1)
    _add_repo(fresh_host, view, view.repo_key_path_on_host)
    _sh(fresh_host, f"cat > /etc/apt/preferences.d/gpuhost-nvidia <<'PREFS'\n{prefs}PREFS")
    _sh(fresh_host, "apt-get update -qq")
    policy = _sh(fresh_host, "apt-cache policy libcudnn9-cuda-12")
    assert "Candidate: 9.5.1.17-1" in policy, policy
    assert " 9.5.1.17-1 1001" in policy and " 9.10.2.21-1 -1" in policy, policy
    _sh(fresh_host, "apt-get install -y -qq libcudnn9-cuda-12=9.5.1.17-1")
    assert _sh(fresh_host, "cat /usr/share/gpuhost-lab/libcudnn9-cuda-12.version").strip() \
        == "9.5.1.17-1"
    assert "Inst libcudnn9-cuda-12" not in _sh(fresh_host, "apt-get -s upgrade")


#: the built-in profile of this test and what the stand-in repository resolves it to
BUILT_IN = "nvidia-repo-580-cuda13.0"


def _gpuhost(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "gpuhost", *args], capture_output=True,
                          text=True, timeout=900, cwd=cwd, check=False)
    return proc


def test_built_in_nvidia_profile_on_a_gpu_shaped_host_converges_and_audits_clean(
    lab, tmp_path: Path
) -> None:
    """The built-in nvidia-repo-580-cuda13.0 from the stand-in repository on a t4:1 host, with the
    lab's own inventory (``lab up --profile`` data: the repository URL and key): provision
    --reboot converges (the emulator answers as the stand-in driver's nvidia-smi and presents
    the open module loaded at boot), a re-run changes nothing, and ``gpuhost audit --json`` has
    no error nor warning: driver 580.178.04 (open module), CUDA 13.0 and 12.9 side by side with
    /usr/local/cuda at 13.0, cuDNN 9.17.0, container toolkit 1.19.1 read from nvidia-ctk.  Then
    the stand-in fabric manager: its daemon stays up with the loaded driver at its version and
    stops with the real daemon's words when they differ."""
    view = lab(lab.count or 1)
    index = len(view.hosts)  # the session's last host, as fresh_host uses
    host = view.hosts[-1]
    view.manager.set_shape(index, ("t4", 1), BUILT_IN)
    try:
        inventory = str(view.inventory_path)
        first = _gpuhost("provision", inventory, "--limit", host.name, "--reboot", cwd=tmp_path)
        out = first.stdout + first.stderr
        assert first.returncode == 0, out[-3000:]
        assert "module 580.178.04 loaded" in out, out[-2000:]
        # after the reboot the module is loaded: persistence and clocks are applied once more
        assert _gpuhost("provision", inventory, "--limit", host.name, cwd=tmp_path).returncode == 0
        again = _gpuhost("provision", inventory, "--limit", host.name, cwd=tmp_path)
        assert f"{host.name}: ok, 0 changed" in again.stdout + again.stderr, again.stdout[-2000:]

        report = tmp_path / "audit.json"
        audit = _gpuhost("audit", inventory, "--limit", host.name, "--json", str(report),
                         cwd=tmp_path)
        assert audit.returncode == 0, audit.stdout[-3000:] + audit.stderr[-2000:]
        (entry,) = json.loads(report.read_text())["hosts"]
        bad = [f for f in entry["findings"] if f["severity"] in ("error", "warning")]
        assert not bad, bad
        facts = entry["facts"]
        assert facts["driver"]["loaded_module"]["flavor"] == "open", facts["driver"]
        assert facts["driver"]["loaded_module"]["version"] == "580.178.04"
        assert {t["version"] for t in facts["cuda"]["toolkits"]} == {"13.0.2", "12.9.1"}
        assert facts["container"]["toolkit_version"] == "1.19.1"
        assert _sh(host, "readlink -f /usr/local/cuda").strip() == "/usr/local/cuda-13.0"
        smi = _sh(host, "nvidia-smi --query-gpu=name,driver_version --format=csv,noheader")
        assert smi.strip() == "Tesla T4, 580.178.04", smi

        # fabric manager (pinned by the profile's pins to the driver's version): up with the
        # loaded module at its version, down with the real daemon's message when they differ
        _sh(host, "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nvidia-fabricmanager-580")
        assert _version(host, "nvidia-fabricmanager-580") == "580.178.04-1"
        assert _sh(host, "nv-fabricmanager --version").strip() \
            == "Fabric Manager version is : 580.178.04"
        _sh(host, "systemctl start nvidia-fabricmanager && sleep 1 && "
                  "systemctl is-active nvidia-fabricmanager")
        view.manager.gpu_inject(index, "driver-mismatch")
        down = host.run("systemctl restart nvidia-fabricmanager; sleep 1; "
                        "systemctl is-active nvidia-fabricmanager; "
                        "journalctl -u nvidia-fabricmanager -b --no-pager | tail -n 3")
        assert down.stdout.startswith("failed") or down.stdout.startswith("inactive"), down.stdout
        assert "driver interface version 580.178.04 don't match with driver version " \
               "580.177.04" in down.stdout, down.stdout
    finally:
        view.manager.set_shape(index, None, None)
