"""The lab's NVIDIA-layout APT repository: signed, trusted via signed-by, pinnable, upgradable.

Its packages are EMPTY STAND-INS (names, versions and relations of NVIDIA's packages only).
"""

from __future__ import annotations

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
    assert "Inst cuda-drivers-560 " in sim and "Inst cuda-drivers-550 " not in sim
    assert "Inst nvidia-driver (560.35.05-1 " in sim, sim
    # a branch pin keeps 560 out even for upgrades that ask for "cuda-drivers"
    _sh(fresh_host, "printf 'Package: cuda-drivers-560 cuda-drivers\\n"
                    "Pin: version *\\nPin-Priority: -1\\n' > /etc/apt/preferences.d/no-560")
    proc = fresh_host.run("apt-get -s install cuda")
    assert proc.returncode != 0 and "Inst cuda-drivers-560 " not in proc.stdout
    for pkg, versions in {"cuda-toolkit-12-4": ("12.4.0-1", "12.4.1-1"),
                          "libcudnn9-cuda-12": ("9.1.0.70-1", "9.3.0.75-1", "9.5.1.17-1",
                                                "9.10.2.21-1"),
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
