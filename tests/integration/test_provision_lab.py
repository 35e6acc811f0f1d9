"""Provision on real lab hosts: the real Debian driver pinned and held, the NVIDIA-repo profile
against the lab's repository, zero changes on re-runs, bad data refused before any change; a
no-op re-run executes nothing and only a drifted host is touched; another profile on a
provisioned host: a driver change is refused unchanged, a cuDNN/toolkit change converges."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from old_profiles import OLD_PROFILES
from provision_support import (
    lab_profiles_with,
    repo_data,
    run_provision,
    ssh_data,
    write_inventory,
)

from gpuhost.deploy_runner import run_deploy
from gpuhost.deploys import guards
from gpuhost.deploys.provision import provision
from gpuhost.errors import DeployError

REPO = Path(__file__).resolve().parents[2]

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
                gpuhost_profiles_file=OLD_PROFILES,
                gpuhost_install_cuda=False)  # nvidia-cuda-toolkit: 1.6 GB, 5.5 GB installed
    first = run_provision([(fresh_host.name, data)])[fresh_host.name]
    assert any(first.values())
    spec = guards.check_profile(fresh_host.name, data, guards.load_profile_table(OLD_PROFILES))
    from gpuhost.deploys.spec import package_plan
    plan = package_plan(spec, "debian-12")
    installed = _versions(fresh_host, plan.coupled)
    assert "nvidia-driver" in installed and len(installed) >= 20, installed
    for name, status in installed.items():
        assert status.startswith("535.261.03-1 hi"), (name, status)
    policy = fresh_host.run("apt-cache policy nvidia-smi").stdout
    assert "535.309.01" in policy, "the newer security release must be on offer for this test"
    # issue 20: the companions at the profile's exact (bookworm) versions, held, although
    # bookworm-security offers nvidia-modprobe 535.309.01; the marker records them
    companions = _versions(fresh_host, list(plan.exact))
    assert plan.exact["nvidia-modprobe"] == "535.161.07-1~deb12u1"
    assert "535.309.01" in fresh_host.run("apt-cache madison nvidia-modprobe").stdout
    assert companions == {n: f"{v} hi" for n, v in plan.exact.items()}, companions
    smi = fresh_host.run("nvidia-smi")
    assert smi.returncode == 9  # no GPU in the lab: the honest state
    upgrade = fresh_host.run("DEBIAN_FRONTEND=noninteractive apt-get -y full-upgrade", timeout=600)
    assert upgrade.returncode == 0, upgrade.stderr
    after = _versions(fresh_host, plan.coupled)
    assert after == installed
    assert _versions(fresh_host, list(plan.exact)) == companions
    second = run_provision([(fresh_host.name, data)])[fresh_host.name]
    assert not any(second.values()), {k: v for k, v in second.items() if v}
    marker = json.loads(fresh_host.run("cat /etc/gpuhost/profile").stdout)
    assert marker["profile"] == DEBIAN_PROFILE
    assert marker["driver"]["version"] == "535.261.03"
    assert marker["companions"] == plan.exact


def test_nvidia_repo_profile_pins_branch_toolkit_and_merges_daemon_json(lab, fresh_host) -> None:
    """Lab repository (NVIDIA's Debian-style names): 550.54.15 / cuDNN 9.1.0.70 / container
    toolkit 1.16.2 installed although newer ones are offered, and although Debian non-free offers
    nvidia-driver, nvidia-smi, libcuda1 ... at 535.x under the same names; a user's daemon.json
    keys survive; the cuda metapackage is blocked; re-run is a no-op. (No Docker engine in the
    lab: the merge is checked on the file itself.)"""
    lab_ = lab(lab.count or 1)
    fresh_host.run("mkdir -p /etc/docker && echo '{\"log-driver\": \"local\", "
                   "\"data-root\": \"/srv/docker\"}' > /etc/docker/daemon.json")
    data = dict(ssh_data(lab_, fresh_host), **repo_data(lab_),
                gpuhost_profile="lab-nvidia-repo-550", gpuhost_env={"NCCL_IB_DISABLE": 1})
    run_provision([(fresh_host.name, data)])
    got = _versions(fresh_host, [*REPO_DRIVER, *REPO_COMPONENTS, "cuda-toolkit-12-4", "cuda",
                                 "cuda-drivers", "nvidia-open", "nvidia-kernel-open-dkms",
                                 "nvidia-driver-cuda"])
    assert got == {
        **{name: "550.54.15-1 hi" for name in REPO_DRIVER},
        **REPO_COMPONENTS,
        "cuda-toolkit-12-4": got.get("cuda-toolkit-12-4", "missing"),
    }
    assert got["cuda-toolkit-12-4"].startswith("12.4.")
    # the installed files are the lab repository's (each stand-in writes its version marker),
    # not Debian's 535 packages of the same names
    for name in ("nvidia-smi", "libcuda1", "nvidia-driver", "libnvidia-container1"):
        marker = fresh_host.run(f"cat /usr/share/gpuhost-lab/{name}.version").stdout.strip()
        assert marker == got[name].split()[0], (name, marker)
    offered = fresh_host.run("apt-cache policy nvidia-smi libcuda1 cuda-drivers-550 "
                             "cuda-drivers libnvidia-container1").stdout
    policy = _policy_priorities(offered)
    assert policy["nvidia-smi"]["550.54.15-1"] == 1001
    assert policy["nvidia-smi"]["550.127.05-1"] == -1
    debian = [v for v in policy["nvidia-smi"] if v.startswith("535.")]
    assert debian and all(policy["nvidia-smi"][v] == -1 for v in debian), policy["nvidia-smi"]
    assert all(p == -1 for v, p in policy["libcuda1"].items() if v != "550.54.15-1")
    assert policy["cuda-drivers-550"]["550.127.05-1"] == -1
    assert policy["cuda-drivers"]["560.35.05-1"] == -1
    assert policy["libnvidia-container1"] == {"1.16.2-1": 1001, "1.17.0-1": -1, "1.19.1-1": -1}
    daemon = json.loads(fresh_host.run("cat /etc/docker/daemon.json").stdout)
    assert daemon["log-driver"] == "local" and daemon["data-root"] == "/srv/docker"
    assert daemon["runtimes"]["nvidia"]["path"] == "nvidia-container-runtime"
    assert fresh_host.run("ls /etc/docker/daemon.json.gpuhost-*.bak").returncode == 0
    assert "export NCCL_IB_DISABLE=1" in fresh_host.run("cat /etc/profile.d/gpuhost.sh").stdout
    again = run_provision([(fresh_host.name, data)])[fresh_host.name]
    assert not any(again.values()), {k: v for k, v in again.items() if v}


#: what the lab repository profile installs for the driver (package_sets.yaml, debian-12) and what
#: the exact "= v" Depends of cuda-drivers-550 / nvidia-driver bring with it, all at 550.54.15-1
REPO_DRIVER = ["cuda-drivers-550", "nvidia-smi", "libcuda1", "libnvidia-ml1", "libnvidia-cfg1",
               "nvidia-kernel-dkms", "nvidia-driver", "nvidia-driver-libs", "nvidia-driver-bin",
               "nvidia-kernel-support", "firmware-nvidia-gsp", "libnvidia-ptxjitcompiler1"]
#: cuDNN and the four container toolkit packages of the lab profile (held, newer ones offered)
REPO_COMPONENTS = {
    "libcudnn9-cuda-12": "9.1.0.70-1 hi",
    **{name: "1.16.2-1 hi" for name in ("nvidia-container-toolkit",
                                         "nvidia-container-toolkit-base",
                                         "libnvidia-container-tools", "libnvidia-container1")},
}


def _policy_priorities(text: str) -> dict[str, dict[str, int]]:
    """``apt-cache policy`` output → {package: {version: priority}} (the version-table lines)."""
    table: dict[str, dict[str, int]] = {}
    current = ""
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            current = line[:-1]
            table[current] = {}
            continue
        match = re.match(r"^(?: {5}| \*\*\* )(\S+) (-?\d+)$", line.rstrip())
        if current and match:
            table[current][match.group(1)] = int(match.group(2))
    return table


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


# --- no-op re-runs, drift, another profile (gpuhost provision on two converged hosts) -----------
# The Debian non-free profiles: real packages, and two real drivers (535.261.03, 535.309.01).

BASE = DEBIAN_PROFILE
NEW_DRIVER = "debian12-nonfree-535-security"  # built in: driver 535.309.01
SAME_DRIVER = "lab-debian-535-clocks-max"  # the base profile with another clocks policy
#: what a re-run must leave untouched on a host (files gpuhost manages, dpkg's database, holds)
UNTOUCHED = "find /etc /usr/local /var/lib/dpkg -newer /root/stamp 2>/dev/null | sort"


def _gpuhost_provision(inventory) -> tuple[int, list[str]]:
    """``gpuhost provision INVENTORY`` as a user runs it: (exit code, host summary lines)."""
    proc = subprocess.run([sys.executable, "-m", "gpuhost", "provision", str(inventory)],
                          cwd=REPO, capture_output=True, text=True, timeout=1800, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("h")]
    return proc.returncode, lines


def _stamp(hosts) -> None:
    for host in hosts:
        assert host.run("touch /root/stamp && sleep 1").returncode == 0


def _base_profile() -> dict:
    """debian12-nonfree-535 (535.261.03), from the old profiles file (no longer built in)."""
    import yaml

    with open(OLD_PROFILES) as handle:
        return copy.deepcopy(yaml.safe_load(handle)["profiles"][BASE])


def _same_driver_profile() -> dict:
    profile = _base_profile()
    profile["description"] = "lab: the Debian 535 profile with clocks policy max (same driver)"
    profile["clocks"] = {"policy": "max"}
    return profile


@pytest.fixture(scope="module")
def converged(lab, tmp_path_factory):
    """h1 and h2 reset, then provisioned with the Debian 535 profile (no hardening, no toolkit);
    reset again at the end. Yields (hosts, {profile name: inventory path})."""
    view = lab(max(2, lab.count))
    hosts = view.reset(*view.hosts[:2])
    tmp = tmp_path_factory.mktemp("converged")
    profiles = lab_profiles_with(
        tmp / "profiles.yaml", {BASE: _base_profile(), SAME_DRIVER: _same_driver_profile()}
    )
    base = {"gpuhost_harden": False, "gpuhost_install_cuda": False,
            "gpuhost_profiles_file": str(profiles)}
    inventories = {
        name: write_inventory(tmp / f"{name}.py", [
            (h.name, dict(ssh_data(view, h), **base, gpuhost_profile=name)) for h in hosts])
        for name in (BASE, NEW_DRIVER, SAME_DRIVER)
    }
    try:
        first = {o.name: o for o in run_deploy(str(inventories[BASE]), provision)}
        assert all(o.status == "ok" and o.changed for o in first.values()), first
        yield hosts, inventories
    finally:
        view.reset(*hosts)


def test_noop_rerun_executes_nothing_and_only_a_drifted_host_is_fixed(converged) -> None:
    hosts, inventories = converged
    inventory = inventories[BASE]
    _stamp(hosts)
    again = run_deploy(str(inventory), provision)
    assert [(o.status, o.changed, o.executed) for o in again] == [("ok", 0, 0)] * 2, again
    assert all(o.unchanged >= 10 for o in again)
    for host in hosts:
        assert host.run(UNTOUCHED).stdout == ""  # prepare only read facts

    clean, drifted = hosts
    assert drifted.run("apt-mark unhold nvidia-driver").returncode == 0
    _stamp(hosts)
    code, lines = _gpuhost_provision(inventory)
    assert code == 0, lines
    assert lines[0].startswith(f"{clean.name}: ok, 0 changed, "), lines
    assert lines[1].startswith(f"{drifted.name}: ok, 1 changed, "), lines
    assert clean.run(UNTOUCHED).stdout == ""
    assert "nvidia-driver" in drifted.run("apt-mark showhold").stdout.split()


def test_another_driver_is_refused_unchanged_the_same_driver_converges(converged) -> None:
    hosts, inventories = converged
    _stamp(hosts)
    code, lines = _gpuhost_provision(inventories[NEW_DRIVER])
    assert code == 2, lines
    for host, line in zip(hosts, lines, strict=True):
        assert line.startswith(
            f"{host.name}: failed: profile {NEW_DRIVER} asks for NVIDIA driver 535.309.01 "
            "(proprietary kernel module) but this host has 535.261.03 (provisioned with profile "
            f"{BASE}); 535.261.03 installed ("
        ), line
        assert re.search(r"[(, ]nvidia-driver[,)]", line), line
        assert line.endswith(
            ": provision never replaces the driver of a host (running jobs and the loaded kernel "
            "module would no longer match it until a reboot), nothing was changed; "
            f"`gpuhost upgrade INVENTORY --to {NEW_DRIVER}` moves it safely (snapshot, drain, "
            "install, reboot, validate, roll back on failure)"
        ), line
        assert host.run(UNTOUCHED).stdout == ""

    code, lines = _gpuhost_provision(inventories[SAME_DRIVER])
    assert code == 0 and all(": ok, " in line for line in lines), lines
    for host in hosts:
        marker = json.loads(host.run("cat /etc/gpuhost/profile").stdout)
        assert (marker["profile"], marker["clocks"]["mode"]) == (SAME_DRIVER, "auto")
        assert marker["driver"]["version"] == "535.261.03"
        pins = host.run("cat /etc/apt/preferences.d/gpuhost-nvidia").stdout
        assert f"for profile {SAME_DRIVER}" in pins
        assert _versions(host, ["nvidia-driver"]) == {"nvidia-driver": "535.261.03-1 hi"}
    again = run_deploy(str(inventories[SAME_DRIVER]), provision)
    assert [(o.status, o.changed, o.executed) for o in again] == [("ok", 0, 0)] * 2, again
    code, lines = _gpuhost_provision(inventories[BASE])  # and back
    assert code == 0 and all(": ok, " in line for line in lines), lines


def test_three_field_cudnn_profile_installs_the_four_field_package(lab, fresh_host,
                                                                     tmp_path) -> None:
    """A profile naming cuDNN "9.5.1" (as the built-in ones do) installs and holds
    libcudnn9-cuda-12 9.5.1.17-1 although 9.10.2.21-1 is offered; the re-run changes nothing."""
    import yaml

    lab_ = lab(lab.count or 1)
    base = yaml.safe_load(Path(repo_profiles()).read_text())["profiles"]["lab-nvidia-repo-550"]
    profile = dict(copy.deepcopy(base), cudnn="9.5.1",
                   description="lab: the lab repository profile with cuDNN 9.5.1 (three fields)")
    profiles = lab_profiles_with(tmp_path / "profiles.yaml", {"lab-cudnn-951": profile})
    data = dict(ssh_data(lab_, fresh_host), **repo_data(lab_), gpuhost_profile="lab-cudnn-951",
                gpuhost_install_cuda=False)
    data["gpuhost_profiles_file"] = str(profiles)
    run_provision([(fresh_host.name, data)])
    got = _versions(fresh_host, ["libcudnn9-cuda-12"])
    assert got == {"libcudnn9-cuda-12": "9.5.1.17-1 hi"}
    again = run_provision([(fresh_host.name, data)])[fresh_host.name]
    assert not any(again.values()), {k: v for k, v in again.items() if v}
