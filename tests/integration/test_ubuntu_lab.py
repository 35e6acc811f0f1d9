"""The built-in NVIDIA-repository profiles on Ubuntu-shaped lab hosts: h1 = Ubuntu 22.04, h2 =
Ubuntu 24.04 (``tests/lab/lab up --os``: the Debian 12 base with Ubuntu's os-release,
lsb-release and ubuntu.sources), each with one emulated T4, installed from the lab's stand-ins of
NVIDIA's ubuntu2204 / ubuntu2404 repositories (tests/lab/nvidia_ubuntu.py: Ubuntu's per-branch
names up to 580, the unsuffixed names from 590, a newer release of each profile's branch and a
newer branch, 610, under the same unsuffixed names).

One profile of each naming scheme, one per release, in one provision run:
h1 gets ``nvidia-repo-595-cuda13.2`` (branch 595: ``libnvidia-compute``, ``nvidia-dkms-open``,
``nvidia-persistenced`` ...), h2 ``nvidia-repo-580-cuda13.0`` (``libnvidia-compute-580`` ...).
On the same two hosts; the provision is a module fixture (``provisioned``) the later tests ask
for, so each test also passes alone:
1. ``provision --reboot`` exits 0 with each profile's names installed and held, the run after it
   changes nothing, ``audit`` finds no error, ``check --tier static`` passes;
2. the OS's own ``apt-get dist-upgrade`` keeps both pinned sets (the repository offers a newer
   580 release, 610 under the 595 profile's names, and newer cuDNN) and the audit stays clean;
3. on h2, ``upgrade --to nvidia-repo-595-cuda13.2`` crosses from the per-branch names to the
   unsuffixed ones (each -580 package conflicts with its successor), ``rollback`` crosses back;
4. a profile for an OS the host is not: one line, exit 2, nothing changed.

The two releases differ on these hosts only in os-release, lsb-release and the repository
directory (same apt, dpkg and stand-in packages), so the upgrade and rollback run on one of them
(a fresh 580 provision on 22.04 and a fresh 595 one on 24.04 would repeat the same apt runs).
What the Ubuntu shape proves and what it does not: docs/testing.md ("Ubuntu-shaped lab hosts").
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

from gpuhost.upgrade.journal import Journal

pytestmark = [pytest.mark.lab, pytest.mark.slow]

GPUHOST = [sys.executable, "-m", "gpuhost"]
PROFILE, NEW = "nvidia-repo-580-cuda13.0", "nvidia-repo-595-cuda13.2"
SHAPES = {1: "ubuntu-22.04", 2: "ubuntu-24.04"}
#: the compute set provision installs from NVIDIA's Ubuntu repository (data/package_sets.yaml),
#: per-branch names up to 580, unsuffixed from 590 (with nvidia-persistenced, a package of its own
#: there, pinned by the profile's companions)
INSTALLED = {PROFILE: ["libnvidia-compute-580", "nvidia-utils-580", "nvidia-compute-utils-580",
                       "libnvidia-cfg1-580", "nvidia-dkms-580-open"],
             NEW: ["libnvidia-compute", "nvidia-utils", "nvidia-compute-utils", "libnvidia-cfg1",
                   "nvidia-dkms-open", "nvidia-firmware", "nvidia-persistenced",
                   "nvidia-modprobe", "nvidia-kernel-common"]}
DRIVER = {PROFILE: "580.178.04-1ubuntu1", NEW: "595.91.07-1ubuntu1"}
#: the profile each host is provisioned with
ON = {"h1": NEW, "h2": PROFILE}
STATE = "dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n' | sort"


class Ubuntu:
    def __init__(self, view: Any, workdir: Path) -> None:
        self.view, self.workdir = view, workdir
        self.hosts = view.hosts[:2]

    def inventory(self, profiles: str | dict[str, str], name: str = "") -> Path:
        """An inventory of both hosts: one profile for both, or {host name: profile}."""
        key = self.view.repo_key_path
        hosts = [(host.name, {**ssh_data(self.view, host),
                              "gpuhost_profile": profiles if isinstance(profiles, str)
                              else profiles[host.name],
                              "gpuhost_cuda_repo_url": self.view.repo_url_for(host),
                              "gpuhost_cuda_repo_key": str(key),
                              "gpuhost_cuda_repo_key_sha256":
                                  hashlib.sha256(key.read_bytes()).hexdigest()})
                 for host in self.hosts]
        name = name or (profiles if isinstance(profiles, str) else "mixed")
        path = self.workdir / f"{name}.py"
        path.write_text(f'"""Ubuntu-shaped lab hosts ({name})."""\n\nhosts = {hosts!r}\n')
        return path

    def gpuhost(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*GPUHOST, *args], capture_output=True, text=True,
                              timeout=timeout, cwd=self.workdir, check=False,
                              stdin=subprocess.DEVNULL)

    def errors(self, profiles: str | dict[str, str]) -> list[dict[str, Any]]:
        out = self.workdir / "audit.json"
        proc = self.gpuhost("audit", str(self.inventory(profiles)), "--json", str(out))
        assert proc.returncode in (0, 1), proc.stdout + proc.stderr
        report = json.loads(out.read_text())
        assert all(h["reachable"] for h in report["hosts"]), proc.stdout
        return [{"host": h["name"], **f} for h in report["hosts"]
                for f in h.get("findings", []) if f["severity"] == "error"]

    def versions(self, host: Any, names: list[str]) -> dict[str, str]:
        out = host.run("dpkg-query -W -f='${Package} ${Version}\\n' " + " ".join(names)).stdout
        return dict(line.split() for line in out.splitlines() if line.strip())

    def on(self, host: Any, profile: str) -> None:
        """``host`` has ``profile``'s compute set at its driver version, held, and no package
        of the other naming scheme's set; the marker names the profile."""
        names = INSTALLED[profile]
        assert self.versions(host, names) == dict.fromkeys(names, DRIVER[profile])
        held = set(host.run("apt-mark showhold").stdout.split())
        assert set(names) <= held, held
        other = next(p for p in INSTALLED if p != profile)
        left = host.run(f"dpkg-query -W -f='${{db:Status-Abbrev}} ${{Package}}\\n' "
                        f"{' '.join(INSTALLED[other])} 2>/dev/null | grep '^.i' || true").stdout
        assert not left.strip(), left
        assert json.loads(host.run("cat /etc/gpuhost/profile").stdout)["profile"] == profile


@pytest.fixture(scope="module")
def ubuntu(lab: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ubuntu]:
    view = lab(max(2, lab.count))
    for index, os_key in SHAPES.items():
        view.hosts[index - 1].record = view.manager.set_shape(index, ("t4", 1), None, os_key)
    try:
        yield Ubuntu(view, tmp_path_factory.mktemp("ubuntu"))
    finally:
        for index in SHAPES:
            view.manager.set_shape(index, None, None)


def test_the_hosts_are_ubuntu_to_gpuhost(ubuntu: Ubuntu) -> None:
    for host, (version, codename) in zip(ubuntu.hosts, (("22.04", "jammy"), ("24.04", "noble")),
                                         strict=True):
        release = host.run(". /etc/os-release; echo $ID $VERSION_ID $VERSION_CODENAME").stdout
        assert release.split() == ["ubuntu", version, codename]
        assert f"DISTRIB_CODENAME={codename}" in host.run("cat /etc/lsb-release").stdout
        sources = host.run("cat /etc/apt/sources.list.d/ubuntu.sources").stdout
        assert f"Suites: {codename} {codename}-updates" in sources, sources


@pytest.fixture(scope="module")
def provisioned(ubuntu: Ubuntu) -> tuple[subprocess.CompletedProcess[str], ...]:
    """Both hosts provisioned (ON) with --reboot, then once more: after the first boot with the
    module loaded the persistence daemon starts (the Debian loops, test_nvidia_repo_loop_lab,
    show the run after that changes nothing). (first, second)."""
    inventory = str(ubuntu.inventory(ON))
    first = ubuntu.gpuhost("provision", inventory, "--reboot")
    again = ubuntu.gpuhost("provision", inventory) if first.returncode == 0 else first
    return first, again


def test_provision_audit_and_static_checks_on_both_releases(
    ubuntu: Ubuntu, provisioned: tuple[subprocess.CompletedProcess[str], ...]
) -> None:
    inventory = str(ubuntu.inventory(ON))
    proc, again = provisioned
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    for host in ubuntu.hosts:
        profile = ON[host.name]
        ubuntu.on(host, profile)
        upstream = DRIVER[profile].split("-")[0]
        smi = host.run("nvidia-smi --query-gpu=name,driver_version --format=csv,noheader").stdout
        assert smi.strip() == f"Tesla T4, {upstream}", smi
        assert "Open Kernel Module" in host.run("cat /proc/driver/nvidia/version").stdout
        assert host.run("systemctl is-active nvidia-persistenced").stdout.strip() == "active"
    # NVIDIA's pinning packages are kept out, never installed (gpuhost's pins are the lock)
    assert "nvidia-driver-pinning" not in ubuntu.hosts[0].run("dpkg -l").stdout
    assert not ubuntu.errors(ON)
    check = ubuntu.gpuhost("check", inventory, "--tier", "static")
    assert check.returncode == 0, check.stdout[-4000:] + check.stderr[-2000:]
    assert " passed" in check.stdout and "FAILED" not in check.stdout, check.stdout[-3000:]


@pytest.mark.usefixtures("provisioned")
def test_the_os_dist_upgrade_keeps_the_pinned_sets(ubuntu: Ubuntu) -> None:
    #: what the repository offers above each host's set: the 595 host's unsuffixed names also
    #: at 610.57.04 (a newer branch under the same names), the 580 host's at 580.199.02
    newer = {NEW: ("libnvidia-compute", "610.57.04-1ubuntu1"),
             PROFILE: ("libnvidia-compute-580", "580.199.02-1ubuntu1")}
    for host in ubuntu.hosts:
        profile = ON[host.name]
        watched = [*INSTALLED[profile], "libcudnn9-cuda-13"]
        before = ubuntu.versions(host, watched)
        name, version = newer[profile]
        offered = host.run(f"apt-get update -qq && apt-cache madison {name}").stdout
        assert version in offered, offered
        proc = host.run("DEBIAN_FRONTEND=noninteractive apt-get -y dist-upgrade", timeout=600)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert ubuntu.versions(host, watched) == before
    assert not ubuntu.errors(ON)


@pytest.mark.usefixtures("provisioned")
def test_upgrade_to_the_unsuffixed_names_and_rollback(ubuntu: Ubuntu) -> None:
    """580 -> 595 on h2: every per-branch package gives way to its unsuffixed successor (they
    conflict), and the rollback brings the per-branch set back from the snapshot's cache."""
    state_dir = ubuntu.workdir / "state"
    inventory = str(ubuntu.inventory(ON))
    h2 = ubuntu.hosts[1]
    # PROFILE's default CUDA 13.0 through NVIDIA's cuda alternatives group (auto: the newest);
    # NEW brings 13.2 and keeps 13.0 installed: rollback must put the group back
    link = "readlink -f /usr/local/cuda; head -n 1 /var/lib/dpkg/alternatives/cuda"
    before_link = h2.run(link).stdout.split()
    assert before_link == ["/usr/local/cuda-13.0", "auto"], before_link
    # the 580 profile's CUDA toolkits (13.0.2, 12.9.1) stay installed beside 13.2 (an upgrade
    # adds toolkits, never removes one), and NVIDIA's CUDA Toolkit bulletin 5755 names them
    # (fixed in 13.1.0; data/advisories.yaml): a known condition of the hosts' old toolkits,
    # not of the 595 driver, that the validation audit would otherwise fail on
    proc = ubuntu.gpuhost("upgrade", inventory, "--limit", "h2", "--to", NEW, "--canary", "0",
                          "--accept-audit", "security.cuda-toolkit",
                          "--state-dir", str(state_dir), timeout=1500)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    (journal,) = (state_dir / "runs").glob("*.jsonl")
    progress = Journal.open(journal).progress()
    assert {h: p.outcome for h, p in progress.items()} == {"h2": "upgraded"}
    ubuntu.on(h2, NEW)
    assert ubuntu.versions(h2, ["libcudnn9-cuda-13"]) == {"libcudnn9-cuda-13": "9.24.1.1-1"}
    assert h2.run(link).stdout.split()[0] == "/usr/local/cuda-13.2"
    assert not ubuntu.errors(NEW)
    proc = ubuntu.gpuhost("rollback", inventory, "--limit", "h2", "--state-dir", str(state_dir),
                          "--yes")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    ubuntu.on(h2, PROFILE)
    assert ubuntu.versions(h2, ["libcudnn9-cuda-13"]) == {"libcudnn9-cuda-13": "9.17.0.29-1"}
    assert h2.run(link).stdout.split() == before_link
    assert not ubuntu.errors(ON)


def test_a_profile_for_another_os_is_one_line_and_changes_nothing(ubuntu: Ubuntu) -> None:
    before = [host.run(STATE).stdout for host in ubuntu.hosts]
    marker = [host.run("cat /etc/gpuhost/profile").stdout for host in ubuntu.hosts]
    proc = ubuntu.gpuhost("provision", str(ubuntu.inventory("debian12-nonfree-535-security")))
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    for name, os_key in (("h1", "ubuntu-22.04"), ("h2", "ubuntu-24.04")):
        lines = [line for line in (proc.stdout + proc.stderr).splitlines()
                 if line.startswith(f"{name}: ")]
        assert lines == [f"{name}: failed: OS: {os_key} is not supported by profile "
                         "debian12-nonfree-535-security (source debian-nonfree); accepted: "
                         "debian-12"], lines
    assert [host.run(STATE).stdout for host in ubuntu.hosts] == before
    assert [host.run("cat /etc/gpuhost/profile").stdout for host in ubuntu.hosts] == marker
