"""Ubuntu's own archive end to end (issue 33 parts 4 and 8) on one Ubuntu-24.04-shaped lab host
with an emulated T4 (tests/lab/shape_ubuntu.py), its apt sources on the lab's stand-in of
Ubuntu's archive (tests/lab/ubuntu_archive.py: release, -security and -updates pockets;
-updates offers kernel 6.8.0-101 whose module package needs driver 580.199.02, newer than the
built-in profile's 580.178.04).

The host starts as a fresh Ubuntu host would: the release pocket's kernel metapackages
(linux-generic 6.8.0.100.100) installed. On the same host (module scope); the provision and the
upgrade are module fixtures (``provisioned``, ``upgraded``) the later tests ask for, so each test
also passes alone:

1. ``gpuhost provision --reboot`` with the built-in ubuntu-archive-580-server exits 0 (a second
   run converges: it applies the clocks the GPU could not take before its module loaded), then
   ``gpuhost audit`` finds no error and ``gpuhost check`` (static) passes;
2. the OS's own ``apt-get dist-upgrade`` and an ``unattended-upgrade`` run allowed the -security
   and -updates pockets leave the pinned driver, the kernel 6.8.0-100 and its module: the audit
   is still clean (without gpuhost's kernel holds dist-upgrade takes 6.8.0-101 and keeps its
   module back: tests/provision/test_precompiled_apt.py);
3. ``gpuhost upgrade --to lab-ubuntu-archive-580-updates`` (the -updates driver) moves kernel
   and module together: 6.8.0-101 with its module, the audit clean;
4. ``gpuhost rollback --yes`` puts the driver back at 580.178.04, and the audit (whose
   kernel.next-boot-module rule judges the newest /boot kernel) is clean again.

What the lab cannot show: the running kernel is this machine's (no Ubuntu kernel boots; "the
next boot's kernel" is the newest /boot image, which the stand-in kernel packages fill), the
modules do not load (the GPU emulator answers for the driver), and apt is Debian's 2.6.
Measured on the shared 2-core machine (2026-11-28): 4 passed in 477 s (provision/audit/check
196 s, OS updates 93 s, upgrade 131 s, rollback 35 s); under heavier load an earlier run took
17 minutes to the end of the upgrade.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from lab import ubuntu_archive as ua
from provision_support import ssh_data

pytestmark = [pytest.mark.lab, pytest.mark.slow]

OS_KEY = "ubuntu-24.04"
PROFILES = Path(__file__).parent / "data" / "ubuntu_archive_profiles.yaml"
BUILT_IN = "ubuntu-archive-580-server"
TARGET = "lab-ubuntu-archive-580-updates"
K100, K101 = ua.kernel_releases("24.04")
APT = "DEBIAN_FRONTEND=noninteractive apt-get -y -q -o Dpkg::Options::=--force-confold"
KERNEL_METAS = ("linux-generic", "linux-image-generic", "linux-headers-generic")


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


@pytest.fixture(scope="module")
def ubuntu_host(lab: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    view = lab(max(1, lab.count))
    index = int(view.hosts[-1].name[1:])
    view.manager.set_shape(index, ("t4", 1), None, os_key=OS_KEY)
    try:
        host = lab(max(1, lab.count)).hosts[index - 1]
        _run(host, "apt-get update -q")
        base = " ".join(f"{name}=6.8.0.100.100" for name in KERNEL_METAS)
        _run(host, f"{APT} install --no-install-recommends {base}")
        work = tmp_path_factory.mktemp("ubuntu-archive")
        data = {**ssh_data(view, host), "gpuhost_profile": BUILT_IN, "gpuhost_harden": False}
        (work / "inventory.py").write_text(f"hosts = {[(host.name, data)]!r}\n")
        yield host, work
    finally:
        view.manager.set_shape(index, None, None)


def _packages(host: Any) -> dict[str, str]:
    out = _run(host, "dpkg-query -W -f '${Package} ${Version} ${db:Status-Abbrev}\\n' "
                     "'linux-*' '*nvidia*'")
    return {p[0]: p[1] for p in (line.split() for line in out.splitlines())
            if len(p) == 3 and p[2][1:2] == "i"}


def _boot(host: Any) -> list[str]:
    return sorted(_run(host, "ls /boot").split())


def _audit_clean(work: Path, inventory: str = "inventory.py") -> str:
    audit = _gpuhost(work, "audit", inventory, "--json", "audit.json")
    out = audit.stdout + audit.stderr
    assert audit.returncode == 0, out
    report = json.loads((work / "audit.json").read_text())
    findings = [f for h in report["hosts"] for f in h["findings"]]
    assert not [f for f in findings if f["severity"] == "error"], out
    return out


@pytest.fixture(scope="module")
def provisioned(ubuntu_host: Any) -> tuple[subprocess.CompletedProcess[str], ...]:
    """The host provisioned with --reboot, then once more (converged: the clocks, now that the
    module is up). (first, second)."""
    _host, work = ubuntu_host
    first = _gpuhost(work, "provision", "inventory.py", "--reboot")
    return first, _gpuhost(work, "provision", "inventory.py") if first.returncode == 0 else first


@pytest.fixture(scope="module")
def upgraded(ubuntu_host: Any, provisioned: Any) -> subprocess.CompletedProcess[str]:
    """``gpuhost upgrade --to TARGET`` of the provisioned host (its journal and snapshot in
    ``state/`` of the work folder, which the rollback reads)."""
    _host, work = ubuntu_host
    return _gpuhost(work, "upgrade", "inventory.py", "--to", TARGET, "--profiles", str(PROFILES),
                    "--state-dir", str(work / "state"))


def test_provision_audit_and_check(ubuntu_host: Any, provisioned: Any) -> None:
    host, work = ubuntu_host
    for result in provisioned:
        _ok(result)
    have = _packages(host)
    assert have["nvidia-utils-580-server"].startswith("580.178.04-")
    assert have[f"nvidia-firmware-580-server-{ua.SECURITY_DRIVER}"].startswith("580.178.04-")
    modules = [n for n in have if n.startswith("linux-modules-nvidia-580-server")]
    assert modules and all(have[n] == "6.8.0-100.100+1" for n in modules), modules
    assert not any(n.startswith(("nvidia-dkms", "nvidia-driver-")) for n in have), have
    holds = set(_run(host, "apt-mark showhold").split())
    assert set(KERNEL_METAS) <= holds and "nvidia-utils-580-server" in holds, holds
    _audit_clean(work)
    _ok(_gpuhost(work, "check", "inventory.py", "--tier", "static"))


@pytest.mark.usefixtures("provisioned")
def test_os_updates_leave_the_kernel_with_its_module(ubuntu_host: Any) -> None:
    host, work = ubuntu_host
    _run(host, f"{APT} update && {APT} dist-upgrade")
    _run(host, f"{APT} install --no-install-recommends unattended-upgrades")
    _run(host, "printf 'Unattended-Upgrade::Origins-Pattern { \"origin=Ubuntu,archive=noble-"
               "security\"; \"origin=Ubuntu,archive=noble-updates\"; };\\n' "
               "> /etc/apt/apt.conf.d/52gpuhost-lab-origins")
    # apt's daily timers would start their own unattended-upgrade run later, racing the
    # upgrade below for dpkg's lock: this test runs it once, itself
    _run(host, "systemctl disable --now apt-daily.timer apt-daily-upgrade.timer")
    log = _run(host, "unattended-upgrade -v 2>&1")
    assert "Package linux-generic is marked to be held back." in log, log
    assert _boot(host) == [f"vmlinuz-{K100}"]
    have = _packages(host)
    assert f"linux-image-{K101}" not in have
    assert have["nvidia-utils-580-server"].startswith("580.178.04-")
    _audit_clean(work)


def test_upgrade_moves_kernel_and_module_together(ubuntu_host: Any, upgraded: Any) -> None:
    host, work = ubuntu_host
    _ok(upgraded)
    have = _packages(host)
    assert have["nvidia-utils-580-server"].startswith(f"{ua.UPDATES_DRIVER}-")
    assert have[f"linux-image-{K101}"] == "6.8.0-101.101"
    assert have["linux-generic"] == "6.8.0.101.101"
    assert any(n.endswith(K101) and n.startswith("linux-modules-nvidia-580-server")
               for n in have), have
    assert _boot(host)[-1] == f"vmlinuz-{K101}"
    # the host now runs the target profile: audited against it
    text = (work / "inventory.py").read_text().replace(f"'{BUILT_IN}'", f"'{TARGET}', "
                                                        f"'gpuhost_profiles_file': '{PROFILES}'")
    (work / "inventory-target.py").write_text(text)
    _audit_clean(work, "inventory-target.py")


@pytest.mark.usefixtures("upgraded")
def test_rollback_puts_the_driver_back(ubuntu_host: Any) -> None:
    host, work = ubuntu_host
    _ok(_gpuhost(work, "rollback", "inventory.py", "--state-dir", str(work / "state"), "--yes"))
    have = _packages(host)
    assert have["nvidia-utils-580-server"].startswith("580.178.04-")
    _audit_clean(work)
