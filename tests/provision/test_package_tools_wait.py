"""The wait for apt/dpkg left running (provision's dpkg_settled and the upgrade's install and
rollback steps run the same shell, ``apt_pin.wait_for_package_tools``), run for real with sh and
pgrep on this machine. A copy of ``sleep`` under a name of the test's own stands in for apt-get,
so an apt really running here (or on a lab host sharing the process table) cannot disturb it; the
name carries this process's id, so two test runs on one machine never see each other's stand-in."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuhost.facts.apt_pins import DpkgState, dpkg_state_command, parse_dpkg_state
from gpuhost.operations.apt_pin import settle_command, wait_for_package_tools
from gpuhost.parsers.packages import parse_dpkg_audit, parse_pgrep_processes
from gpuhost.pkgmgr import APT, DNF

# pgrep -x matches at most 15 characters of a process name
NAME = f"gpuhost-t{os.getpid() % 1_000_000:06d}"


@pytest.fixture
def fake_apt(tmp_path: Path) -> Iterator[Path]:
    sleeper = tmp_path / NAME
    shutil.copy(shutil.which("sleep") or "/bin/sleep", sleeper)
    yield sleeper


def _start(sleeper: Path, seconds: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen([str(sleeper), str(seconds)])


def _wait(timeout_s: int) -> subprocess.CompletedProcess[str]:
    command = wait_for_package_tools(timeout_s, poll_s=1, tools=NAME)
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=60)


def test_nothing_running_returns_at_once() -> None:
    started = time.monotonic()
    result = _wait(30)
    assert (result.returncode, result.stderr) == (0, "")
    assert time.monotonic() - started < 2


def test_waits_until_the_process_is_gone(fake_apt: Path) -> None:
    child = _start(fake_apt, 3)
    try:
        started = time.monotonic()
        result = _wait(30)
        waited = time.monotonic() - started
    finally:
        child.kill()
        child.wait()
    assert (result.returncode, result.stderr) == (0, "")
    assert 2 <= waited < 10


def test_gives_up_after_the_timeout_naming_the_process(fake_apt: Path) -> None:
    child = _start(fake_apt, 60)
    try:
        result = _wait(2)
    finally:
        child.kill()
        child.wait()
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"apt/dpkg still running after 2s (dpkg's lock is taken): {child.pid} {fake_apt} 60;"
    ]


def test_provision_and_upgrade_share_the_wait() -> None:
    wait = wait_for_package_tools()
    assert settle_command().startswith(wait + "; ")
    # the upgrade's and the rollback's wait: the seam's, for the host's package manager
    assert APT.settle_command(tolerant=True).startswith(wait + "; ")
    assert "after 600s" in wait
    assert "'dnf|dnf-3|yum|rpm|dnf-automatic|microdnf'" in DNF.wait_command()
    assert "dnf/rpm still running after 600s (rpm's lock is taken)" in DNF.wait_command()


def test_running_tools_fact_parses_pgrep_output() -> None:
    assert "pgrep -a" in DpkgState().command() and "dpkg --audit" in DpkgState().command()
    lines = [
        "5188 /usr/bin/dpkg --status-fd 35 --configure --pending",
        "",
        "5120 apt-get install -y nvidia-driver",
        "pgrep: pattern that searches for process name longer than 15 characters ...",
    ]
    assert parse_pgrep_processes(lines) == [
        "5120 apt-get install -y nvidia-driver",
        "5188 /usr/bin/dpkg --status-fd 35 --configure --pending",
    ]
    assert DpkgState().process([]) == {"running": [], "unfinished": []}


@pytest.mark.skipif(shutil.which("dpkg") is None, reason="dpkg is not installed here (not Debian)")
def test_one_command_reads_what_runs_and_what_dpkg_left(fake_apt: Path) -> None:
    """The fact's shell, run here: the stand-in apt-get as running, and dpkg --audit's own
    answer on this machine as unfinished."""
    child = _start(fake_apt, 30)
    try:
        out = subprocess.run(
            ["sh", "-c", dpkg_state_command(NAME)], capture_output=True, text=True, timeout=60
        )
    finally:
        child.kill()
        child.wait()
    assert out.returncode == 0, out.stderr
    state = parse_dpkg_state(out.stdout.splitlines())
    assert state["running"] == [f"{child.pid} {fake_apt} 30"]
    audit = subprocess.run(["dpkg", "--audit"], capture_output=True, text=True, timeout=60)
    assert state["unfinished"] == parse_dpkg_audit(audit.stdout.splitlines())


def test_captured_half_installed_package_is_unfinished() -> None:
    """Real output from a lab host with a package unpacked but not configured."""
    path = Path(__file__).parent / "data" / "dpkg_state" / "lab-debian12-hello-unpacked.txt"
    state = parse_dpkg_state(path.read_text(encoding="utf-8").splitlines())
    assert state == {"running": [], "unfinished": ["hello"]}


def test_unattended_upgrades_shutdown_helper_is_not_waited_for(tmp_path: Path) -> None:
    """unattended-upgrade-shutdown --wait-for-signal runs the whole boot on every host with
    unattended-upgrades (Ubuntu's default) under the process name "unattended-upgr": provision
    waited 600 s for it and failed (seen on the lab's Ubuntu-shaped host). A process of the
    tools' name whose command line is the helper's is left out of the wait and of the fact."""
    shell = tmp_path / NAME
    shutil.copy(shutil.which("sh") or "/bin/sh", shell)
    child = subprocess.Popen([str(shell), "-c", "sleep 30; true", "unattended-upgrade-shutdown",
                              "--wait-for-signal"])
    try:
        time.sleep(0.3)
        started = time.monotonic()
        result = _wait(30)
        waited = time.monotonic() - started
        state = subprocess.run(["sh", "-c", dpkg_state_command(NAME)], capture_output=True,
                               text=True, timeout=60)
    finally:
        child.kill()
        child.wait()
    assert (result.returncode, result.stderr) == (0, "")
    assert waited < 2
    assert DpkgState().process(state.stdout.splitlines())["running"] == []
