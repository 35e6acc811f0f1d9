"""Provision on real lab hosts: the real Debian driver pinned and held, the NVIDIA-repo profile
against the lab's repository, zero changes on re-runs, bad data refused before any change."""

from __future__ import annotations

import json

import pytest
from provision_support import repo_data, run_provision, ssh_data

from gpuhost.deploys import guards
from gpuhost.errors import DeployError

pytestmark = [pytest.mark.lab, pytest.mark.slow]

DEBIAN_PROFILE = "debian12-nonfree-535"


def _versions(host, names: list[str]) -> dict[str, str]:
    """{package: "VERSION STATUS"} of the installed packages among ``names``."""
    out = host.run("dpkg-query -W -f='${Package}|${Version}|${db:Status-Abbrev}\\n' "
                   + " ".join(names) + " 2>/dev/null").stdout
    rows = [line.split("|") for line in out.splitlines() if line.count("|") == 2]
    return {name: f"{version} {status.strip()}" for name, version, status in rows if version}


def test_debian_nonfree_driver_pinned_held_survives_full_upgrade(lab, fresh_host) -> None:
    """The real 535.261.03 from bookworm/non-free, pinned and held; full-upgrade keeps it
    although bookworm-security offers 535.309.01; a second run changes nothing."""
    lab_ = lab(lab.count or 1)
    data = dict(ssh_data(lab_, fresh_host), gpuhost_profile=DEBIAN_PROFILE,
                gpuhost_install_cuda=False)  # nvidia-cuda-toolkit: 1.6 GB, 5.5 GB installed
    first = run_provision([(fresh_host.name, data)])[fresh_host.name]
    assert any(first.values())
    spec = guards.check_profile(fresh_host.name, data, guards.load_profile_table())
    from gpuhost.deploys.spec import package_plan
    plan = package_plan(spec, "debian-12")
    installed = _versions(fresh_host, plan.coupled)
    assert "nvidia-driver" in installed and len(installed) >= 20, installed
    for name, status in installed.items():
        assert status.startswith("535.261.03-1 hi"), (name, status)
    policy = fresh_host.run("apt-cache policy nvidia-smi").stdout
    assert "535.309.01" in policy, "the newer security release must be on offer for this test"
    smi = fresh_host.run("nvidia-smi")
    assert smi.returncode == 9  # no GPU in the lab: the honest state
    upgrade = fresh_host.run("DEBIAN_FRONTEND=noninteractive apt-get -y full-upgrade", timeout=600)
    assert upgrade.returncode == 0, upgrade.stderr
    after = _versions(fresh_host, plan.coupled)
    assert after == installed
    second = run_provision([(fresh_host.name, data)])[fresh_host.name]
    assert not any(second.values()), {k: v for k, v in second.items() if v}
    marker = json.loads(fresh_host.run("cat /etc/gpuhost/profile").stdout)
    assert marker["profile"] == DEBIAN_PROFILE
    assert marker["driver"]["version"] == "535.261.03"


def test_nvidia_repo_profile_pins_branch_toolkit_and_merges_daemon_json(lab, fresh_host) -> None:
    """Lab repository: 550.54.15 / cuDNN 9.1.0.70 / toolkit 1.16.2 installed although newer ones
    are offered; a user's daemon.json keys survive; the cuda metapackage is blocked; re-run is
    a no-op. (No Docker engine in the lab: the merge is checked on the file itself.)"""
    lab_ = lab(lab.count or 1)
    fresh_host.run("mkdir -p /etc/docker && echo '{\"log-driver\": \"local\", "
                   "\"data-root\": \"/srv/docker\"}' > /etc/docker/daemon.json")
    data = dict(ssh_data(lab_, fresh_host), **repo_data(lab_),
                gpuhost_profile="lab-nvidia-repo-550", gpuhost_env={"NCCL_IB_DISABLE": 1})
    run_provision([(fresh_host.name, data)])
    got = _versions(fresh_host, ["cuda-drivers-550", "nvidia-driver-550", "cuda-toolkit-12-4",
                                 "libcudnn9-cuda-12", "nvidia-container-toolkit",
                                 "nvidia-container-toolkit-base", "cuda", "cuda-drivers"])
    assert got == {
        "cuda-drivers-550": "550.54.15-1 hi",
        "nvidia-driver-550": "550.54.15-1 hi",
        "cuda-toolkit-12-4": got.get("cuda-toolkit-12-4", "missing"),
        "libcudnn9-cuda-12": "9.1.0.70-1 hi",
        "nvidia-container-toolkit": "1.16.2-1 hi",
        "nvidia-container-toolkit-base": "1.16.2-1 hi",
    }
    assert got["cuda-toolkit-12-4"].startswith("12.4.")
    offered = fresh_host.run("apt-cache policy nvidia-driver-550 cuda-drivers").stdout
    assert "550.127.05-1 -1" in offered and "560.35.05-1 -1" in offered
    daemon = json.loads(fresh_host.run("cat /etc/docker/daemon.json").stdout)
    assert daemon["log-driver"] == "local" and daemon["data-root"] == "/srv/docker"
    assert daemon["runtimes"]["nvidia"]["path"] == "nvidia-container-runtime"
    assert fresh_host.run("ls /etc/docker/daemon.json.gpuhost-*.bak").returncode == 0
    assert "export NCCL_IB_DISABLE=1" in fresh_host.run("cat /etc/profile.d/gpuhost.sh").stdout
    again = run_provision([(fresh_host.name, data)])[fresh_host.name]
    assert not any(again.values()), {k: v for k, v in again.items() if v}


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({}, "gpuhost_profile: not set; accepted: debian12-nonfree-535"),
        ({"gpuhost_profile": "debian-13"}, "gpuhost_profile: 'debian-13' is not a known profile"),
        ({"gpuhost_profile": "lab-impossible"}, "'lab-impossible' is an impossible version set"),
    ],
)
def test_bad_inventory_data_stops_the_host_before_any_change(lab_hosts, data, expected) -> None:
    host = lab_hosts[0]
    before = host.run("find /etc/apt /etc/gpuhost -newer /etc/hostname 2>/dev/null | sort").stdout
    lab_data = dict(ssh_data_for(host), gpuhost_profiles_file=repo_profiles(), **data)
    with pytest.raises(DeployError) as info:
        run_provision([(host.name, lab_data)])
    message = str(info.value)
    assert message.startswith(f"{host.name}: ") and expected in message
    after = host.run("find /etc/apt /etc/gpuhost -newer /etc/hostname 2>/dev/null | sort").stdout
    assert after == before


def ssh_data_for(host) -> dict:
    mgr = host.manager
    return {"ssh_hostname": host.address, "ssh_user": "root", "ssh_key": str(mgr.sd / "id_ed25519"),
            "ssh_known_hosts_file": str(mgr.sd / "known_hosts"),
            "ssh_strict_host_key_checking": "yes"}


def repo_profiles() -> str:
    from provision_support import LAB_PROFILES

    return LAB_PROFILES
