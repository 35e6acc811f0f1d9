"""Ubuntu's own archive end to end (issue 33 parts 4 and 8) on two Ubuntu-shaped lab hosts, one
22.04 (jammy) on the HWE kernel and one 24.04 (noble) on the GA kernel, an emulated T4 each
(tests/lab/shape_ubuntu.py), their apt sources on the lab's stand-in of Ubuntu's archive
(tests/lab/ubuntu_archive.py: release, -security and -updates pockets of each release and
track; -updates offers kernel 6.8.0-101 on both tracks, whose module packages need driver
580.199.02, newer than the built-in profile's 580.178.04).

Each host starts as a fresh Ubuntu host would: the release pocket's kernel metapackages of its
track installed (jammy: linux-generic-hwe-22.04 6.8.0.100.100~22.04.1, whose modules
metapackage is linux-modules-nvidia-580-server-open-generic-hwe-22.04; the GA one, -generic,
follows jammy's 5.15 kernels; noble: linux-generic 6.8.0.100.100). Module scope: the provision
and the upgrade are module fixtures (``provisioned``, ``upgraded``) the later tests ask for, so
each test also passes alone:

1. ``gpuhost provision --reboot`` with the built-in ubuntu-archive-580-server exits 0 for both
   hosts in one run (pyinfra runs them in parallel; a second run converges: it applies the
   clocks the GPU could not take before its module loaded), then ``gpuhost audit`` of both finds
   no error and ``gpuhost check`` (static) passes;
2. on each host, the OS's own ``apt-get dist-upgrade`` and an ``unattended-upgrade`` run allowed
   the <codename>-security and -updates pockets leave the pinned driver, the release kernel and
   its module (both hosts at once): the audit is still clean (without gpuhost's kernel holds
   dist-upgrade takes the -updates kernel and keeps its module back:
   tests/provision/test_precompiled_apt.py);
3. ``gpuhost upgrade --to lab-ubuntu-archive-580-updates`` (the -updates driver) of the 22.04
   HWE host moves the HWE kernel and its module together: 6.8.0-101 with its module and the
   -generic-hwe-22.04 modules metapackage, no GA (5.15) kernel, the audit clean;
4. ``gpuhost rollback --yes`` puts its driver back at 580.178.04, and the audit (whose
   kernel.next-boot-module rule judges the newest /boot kernel) is clean again.
   (Upgrade and rollback run on the HWE host only, for CI time: the GA move is the same code
   with the track ``generic``, shown offline in tests/provision/test_precompiled_operation.py.)

What the lab cannot show: the running kernel is this machine's (no Ubuntu kernel boots; "the
next boot's kernel" is the newest /boot image, which the stand-in kernel packages fill), the
modules do not load (the GPU emulator answers for the driver), and apt is Debian's 2.6, not
jammy's 2.4 or noble's 2.7. Cost: docs/testing.md ("Ubuntu's archive").
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from lab import ubuntu_archive as ua
from provision_support import ssh_data

pytestmark = [pytest.mark.lab, pytest.mark.slow]

PROFILES = Path(__file__).parent / "data" / "ubuntu_archive_profiles.yaml"
BUILT_IN = "ubuntu-archive-580-server"
TARGET = "lab-ubuntu-archive-580-updates"
HWE = "generic-hwe-22.04"
K101 = ua.kernel_releases("22.04", HWE)[1]
JAMMY_INVENTORY = "inventory-jammy.py"
APT = "DEBIAN_FRONTEND=noninteractive apt-get -y -q -o Dpkg::Options::=--force-confold"


def _gpuhost(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuhost", *args], capture_output=True,
                          text=True, timeout=900, cwd=workdir, check=False)


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    return out


def _run(host: Any, command: str, timeout: float = 600) -> str:
    result = host.run(command, timeout=timeout)
    assert result.returncode == 0, f"{command}: {result.stdout}{result.stderr}"
    return str(result.stdout)


@dataclass(frozen=True)
class Release:
    """What a test expects of one shaped host: its OS, its kernels and package versions."""

    os_version: str  # "22.04"
    codename: str
    track: str  # the kernel track the host is on: generic, generic-hwe-22.04
    kernel: str  # the release pocket's kernel (uname -r form), the one provision pairs
    newer_kernel: str  # the -updates pocket's, whose module the pinned driver cannot take
    meta_version: str  # linux-<track> & co. in the release pocket
    module_version: str  # its module packages rebuilt in -security for the pinned driver

    @property
    def os_key(self) -> str:
        return f"ubuntu-{self.os_version}"

    @property
    def kernel_metas(self) -> tuple[str, ...]:
        return tuple(f"linux-{k}{self.track}" for k in ("", "image-", "headers-"))


def _release(os_version: str, track: str = ua.FLAVOUR) -> Release:
    t = ua.track_of(os_version, track)
    kernel, newer = ua.kernel_releases(os_version, track)
    return Release(os_version, ua.RELEASES[os_version][0], track, kernel, newer,
                   f"{t.kversion}.{t.abi0}.{t.abi0}{t.suffix}",
                   f"{t.kversion}-{t.abi0}.{t.abi0}{t.suffix}+1")


JAMMY, NOBLE = _release("22.04", HWE), _release("24.04")
RELEASES = (JAMMY, NOBLE)


def _each(hosts: dict[Release, Any], step: Callable[[Release, Any], None]) -> None:
    """``step`` on every host at once (one thread each; an assertion in one is raised here)."""
    with ThreadPoolExecutor(len(hosts)) as pool:
        for done in [pool.submit(step, rel, host) for rel, host in hosts.items()]:
            done.result()


def _fresh_ubuntu(rel: Release, host: Any) -> None:
    """A fresh Ubuntu host: the release pocket's kernel metapackages of its track installed."""
    _run(host, "apt-get update -q")
    base = " ".join(f"{name}={rel.meta_version}" for name in rel.kernel_metas)
    _run(host, f"{APT} install --no-install-recommends {base}")


@pytest.fixture(scope="module")
def ubuntu_hosts(lab: Any, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[tuple[dict[Release, Any], Path]]:
    """The lab's last two hosts shaped 22.04 and 24.04 (a T4 each), both in ``inventory.py``
    (provisioned in one run), the 22.04 one alone in ``inventory-jammy.py`` (upgrade and
    rollback)."""
    view = lab(max(2, lab.count))
    indices = [int(h.name[1:]) for h in view.hosts[-2:]]
    try:
        for index, rel in zip(indices, RELEASES, strict=True):
            view.manager.set_shape(index, ("t4", 1), None, os_key=rel.os_key)
        hosts = dict(zip(RELEASES, (lab(max(2, lab.count)).hosts[i - 1] for i in indices),
                         strict=True))
        _each(hosts, _fresh_ubuntu)
        work = tmp_path_factory.mktemp("ubuntu-archive")
        rows = {rel: (host.name, {**ssh_data(view, host), "gpuhost_profile": BUILT_IN,
                                   "gpuhost_harden": False}) for rel, host in hosts.items()}
        (work / "inventory.py").write_text(f"hosts = {list(rows.values())!r}\n")
        (work / JAMMY_INVENTORY).write_text(f"hosts = {[rows[JAMMY]]!r}\n")
        yield hosts, work
    finally:
        for index in indices:
            view.manager.set_shape(index, None, None)


def _packages(host: Any) -> dict[str, str]:
    out = _run(host, "dpkg-query -W -f '${Package} ${Version} ${db:Status-Abbrev}\\n' "
                     "'linux-*' '*nvidia*'")
    return {p[0]: p[1] for p in (line.split() for line in out.splitlines())
            if len(p) == 3 and p[2][1:2] == "i"}


def _boot(host: Any) -> list[str]:
    return sorted(_run(host, "ls /boot").split())


def _audit_clean(work: Path, inventory: str = "inventory.py") -> set[str]:
    """The audit of ``inventory`` finds no error; the names of the hosts it audited."""
    audit = _gpuhost(work, "audit", inventory, "--json", "audit.json")
    out = audit.stdout + audit.stderr
    assert audit.returncode == 0, out
    report = json.loads((work / "audit.json").read_text())
    findings = [f for h in report["hosts"] for f in h["findings"]]
    assert not [f for f in findings if f["severity"] == "error"], out
    assert all(h["reachable"] for h in report["hosts"]), out
    return {h["name"] for h in report["hosts"]}


@pytest.fixture(scope="module")
def provisioned(ubuntu_hosts: Any) -> tuple[subprocess.CompletedProcess[str], ...]:
    """Both hosts provisioned with --reboot in one run, then once more (converged: the clocks,
    now that the module is up). (first, second)."""
    _hosts, work = ubuntu_hosts
    first = _gpuhost(work, "provision", "inventory.py", "--reboot")
    return first, _gpuhost(work, "provision", "inventory.py") if first.returncode == 0 else first


@pytest.fixture(scope="module")
def upgraded(ubuntu_hosts: Any, provisioned: Any) -> subprocess.CompletedProcess[str]:
    """``gpuhost upgrade --to TARGET`` of the provisioned 22.04 HWE host (its journal and
    snapshot in ``state/`` of the work folder, which the rollback reads)."""
    _hosts, work = ubuntu_hosts
    return _gpuhost(work, "upgrade", JAMMY_INVENTORY, "--to", TARGET, "--profiles",
                    str(PROFILES), "--state-dir", str(work / "state"))


def _provisioned_as_pinned(rel: Release, host: Any) -> None:
    have = _packages(host)
    assert have["nvidia-utils-580-server"].startswith("580.178.04-"), rel
    assert have[f"nvidia-firmware-580-server-{ua.SECURITY_DRIVER}"].startswith("580.178.04-")
    modules = [n for n in have if n.startswith("linux-modules-nvidia-580-server")]
    # the kernel's module and its track's modules metapackage (jammy: -generic-hwe-22.04), of
    # the kernel module flavour the profile's "auto" took for the T4
    flavour = "-open" if any("-server-open-" in n for n in modules) else ""
    assert sorted(modules) == [f"linux-modules-nvidia-580-server{flavour}-{rel.kernel}",
                               f"linux-modules-nvidia-580-server{flavour}-{rel.track}"], modules
    assert all(have[n] == rel.module_version for n in modules), (rel, modules)
    assert not any(n.startswith(("nvidia-dkms", "nvidia-driver-")) for n in have), have
    assert _boot(host) == [f"vmlinuz-{rel.kernel}"], rel  # no kernel of another track came
    holds = set(_run(host, "apt-mark showhold").split())
    assert {*rel.kernel_metas, modules[-1]} <= holds, (rel, holds)
    assert "nvidia-utils-580-server" in holds, (rel, holds)


def test_provision_audit_and_check(ubuntu_hosts: Any, provisioned: Any) -> None:
    hosts, work = ubuntu_hosts
    for result in provisioned:
        _ok(result)
    _each(hosts, _provisioned_as_pinned)
    assert _audit_clean(work) == {host.name for host in hosts.values()}
    _ok(_gpuhost(work, "check", "inventory.py", "--tier", "static"))


def _os_updates(rel: Release, host: Any) -> None:
    """The OS's own updates on one host: dist-upgrade, then unattended-upgrade allowed
    <codename>-security and -updates; the kernel (and its module) must stay."""
    _run(host, f"{APT} update && {APT} dist-upgrade")
    _run(host, f"{APT} install --no-install-recommends unattended-upgrades")
    origins = " ".join(f'"origin=Ubuntu,archive={rel.codename}-{p}";'
                       for p in ("security", "updates"))
    _run(host, f"printf 'Unattended-Upgrade::Origins-Pattern {{ {origins} }};\\n' "
               "> /etc/apt/apt.conf.d/52gpuhost-lab-origins")
    # apt's daily timers would start their own unattended-upgrade run later, racing the
    # upgrade below for dpkg's lock: this test runs it once, itself
    _run(host, "systemctl disable --now apt-daily.timer apt-daily-upgrade.timer")
    log = _run(host, "unattended-upgrade -v 2>&1")
    assert f"Package linux-{rel.track} is marked to be held back." in log, log
    assert _boot(host) == [f"vmlinuz-{rel.kernel}"], rel
    have = _packages(host)
    assert f"linux-image-{rel.newer_kernel}" not in have
    assert have[f"linux-{rel.track}"] == rel.meta_version
    assert have["nvidia-utils-580-server"].startswith("580.178.04-")
    modules = [n for n in have if n.startswith("linux-modules-nvidia-") and n.endswith(rel.kernel)]
    assert modules and all(have[n] == rel.module_version for n in modules), have


@pytest.mark.usefixtures("provisioned")
def test_os_updates_leave_the_kernel_with_its_module(ubuntu_hosts: Any) -> None:
    hosts, work = ubuntu_hosts
    _each(hosts, _os_updates)
    _audit_clean(work)


def test_upgrade_moves_kernel_and_module_together(ubuntu_hosts: Any, upgraded: Any) -> None:
    """The HWE track moves: 6.8.0-101 with its module and the -generic-hwe-22.04 modules
    metapackage naming it; no GA kernel (5.15, what -open-generic would follow) comes."""
    hosts, work = ubuntu_hosts
    host = hosts[JAMMY]
    _ok(upgraded)
    have = _packages(host)
    assert have["nvidia-utils-580-server"].startswith(f"{ua.UPDATES_DRIVER}-")
    assert have[f"linux-image-{K101}"] == "6.8.0-101.101~22.04.1"
    assert have[f"linux-{HWE}"] == "6.8.0.101.101~22.04.1"
    flavour = "-open" if f"linux-modules-nvidia-580-server-open-{K101}" in have else ""
    meta = f"linux-modules-nvidia-580-server{flavour}-{HWE}"
    assert have[meta] == have[f"linux-modules-nvidia-580-server{flavour}-{K101}"], have
    assert not any(n.startswith("linux-image-5.15") for n in have), have
    assert _boot(host)[-1] == f"vmlinuz-{K101}"
    # the host now runs the target profile: audited against it
    text = (work / JAMMY_INVENTORY).read_text().replace(
        f"'{BUILT_IN}'", f"'{TARGET}', 'gpuhost_profiles_file': '{PROFILES}'")
    (work / "inventory-target.py").write_text(text)
    _audit_clean(work, "inventory-target.py")


@pytest.mark.usefixtures("upgraded")
def test_rollback_puts_the_driver_back(ubuntu_hosts: Any) -> None:
    hosts, work = ubuntu_hosts
    _ok(_gpuhost(work, "rollback", JAMMY_INVENTORY, "--state-dir", str(work / "state"),
                 "--yes"))
    have = _packages(hosts[JAMMY])
    assert have["nvidia-utils-580-server"].startswith("580.178.04-")
    _audit_clean(work, JAMMY_INVENTORY)
