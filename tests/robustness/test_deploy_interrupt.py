"""Ctrl-C (SIGINT) or SIGTERM while ``gpuhost provision`` / ``gpuhost harden`` change hosts: each
host stops after the operation it is running (never in the middle of one), one line per host says
what it finished and where it stopped, and the exit code is 130 / 143 (HSIG; the tester's case:
Ctrl-C during the driver install went on through every operation and printed no host line).

The real command runs in its own process (``gpuhost.cli.main``, its signal handlers, the runner,
pyinfra) on ``@local``, with the packaged deploy replaced by three harmless shell operations in a
temporary folder: the first takes a few seconds, so the signal arrives while it runs. (The real
provision deploy installs NVIDIA packages and the real harden rewrites sshd: not on this machine;
tests/integration/test_provision_interrupt_lab.py stops the real provision on a lab host.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.robustness.conftest import ROOT, a_builtin_profile

SLOW_S = 4
# the packaged deploy module and function each command imports when it runs
DEPLOYS = {"provision": "gpuhost.deploys.provision", "harden": "gpuhost.deploys.harden"}

SCRIPT = """
import importlib
import sys
from pyinfra.operations import server
from gpuhost.cli import main

deploys = importlib.import_module("{module}")
assert deploys.__name__ == "{module}"

folder = sys.argv[1]

def deploy():
    slow = f"touch {{folder}}/started; sleep {slow}; touch {{folder}}/first"
    server.shell(name="first", commands=[slow])
    server.shell(name="second", commands=[f"touch {{folder}}/second"])
    server.shell(name="third", commands=[f"touch {{folder}}/third"])

deploys.{command} = deploy
sys.argv = ["gpuhost", "{command}", f"{{folder}}/inventory.py"]
main()
"""


def _start(command: str, folder: Path, slow_last: bool = False) -> subprocess.Popen[str]:
    """``slow_last``: the slow operation is the last one (a signal during it comes when no host
    has another operation to run)."""
    data = {"gpuhost_profile": a_builtin_profile()} if command == "provision" else {}
    (folder / "inventory.py").write_text(f"hosts = [('@local', {data!r})]\n", encoding="utf-8")
    script = SCRIPT.format(module=DEPLOYS[command], command=command, slow=SLOW_S)
    if slow_last:
        script = script.replace(
            'name="first", commands=[slow]', 'name="first", commands=["true"]'
        ).replace(
            'name="third", commands=[f"touch {folder}/third"]',
            'name="third", commands=[slow.replace("/first", "/third")]',
        )
    env = dict(os.environ, PYTHONWARNINGS="ignore", NO_COLOR="1")
    return subprocess.Popen(
        [sys.executable, "-c", script, str(folder)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )


def _wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120  # imports and fact gathering on a loaded machine
    while not path.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("command", "signum", "code", "verb"),
    [
        ("provision", signal.SIGINT, 130, "interrupted (SIGINT)"),
        ("harden", signal.SIGTERM, 143, "terminated (SIGTERM)"),
    ],
)
def test_a_signal_stops_each_host_after_its_operation_in_flight(
    tmp_path: Path, command: str, signum: int, code: int, verb: str
) -> None:
    proc = _start(command, tmp_path)
    _wait_for(tmp_path / "started", proc)
    proc.send_signal(signum)
    signalled = time.monotonic()
    out, err = proc.communicate(timeout=60)
    took = time.monotonic() - signalled

    assert proc.returncode == code, err
    assert "Traceback" not in err, err
    # the operation in flight finished, the next one never started
    assert (tmp_path / "first").exists()
    assert not (tmp_path / "second").exists() and not (tmp_path / "third").exists()
    assert took < SLOW_S + 15, f"exit {took:.0f}s after the signal"
    assert out.splitlines() == [
        f"@local: interrupted after first (1 of 3 operations done); "
        f"run gpuhost {command} again to finish"
    ]
    name = signal.Signals(signum).name
    assert f"gpuhost: {name}: each host stops after the operation it is running" in err
    assert err.strip().splitlines()[-1] == (
        f"gpuhost: {verb}: every host stopped at an operation boundary; "
        f"run gpuhost {command} again to finish"
    )


def test_a_second_signal_quits_without_waiting_for_the_operation(tmp_path: Path) -> None:
    proc = _start("provision", tmp_path)
    _wait_for(tmp_path / "started", proc)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    signalled = time.monotonic()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert time.monotonic() - signalled < SLOW_S - 1, "it waited for the operation"
    assert "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == (
        "gpuhost: SIGINT again: quitting now; a command cut off on a host is finished by the "
        "next run: run gpuhost provision again"
    )
    assert not (tmp_path / "second").exists()


@pytest.mark.parametrize("command", ["provision", "harden"])
def test_a_signal_after_the_last_operation_cuts_nothing_off(tmp_path: Path, command: str) -> None:
    # it said 'every host stopped at an operation boundary; run ... again to finish' and exited
    # 130, though every host had finished
    proc = _start(command, tmp_path, slow_last=True)
    _wait_for(tmp_path / "started", proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert (tmp_path / "third").exists()
    assert proc.returncode == 0, err
    assert "Traceback" not in err, err
    assert out.splitlines() == ["@local: ok, 3 changed, 0 unchanged"]
    assert err.strip().splitlines()[-1] == (
        "gpuhost: SIGINT came after every host had finished: nothing was cut off"
    )


def test_a_signal_after_the_last_operation_still_skips_the_reboot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """provision --reboot: the hosts finished, the reboot is what the signal stops (never a
    reboot the operator asked to stop); exit 130 and the command that reboots them."""
    from click.testing import CliRunner

    from gpuhost.cli import provision as provision_cli
    from gpuhost.deploy_runner import HostOutcome
    from gpuhost.signals import StopAtOperationBoundary, Stopped
    from gpuhost.upgrade import reboot_hosts

    rebooted: list[list[str]] = []
    monkeypatch.setattr(
        reboot_hosts, "reboot_fleet", lambda _inv, names, *_: rebooted.append(names)
    )

    def finished_then_signalled(*args: object, **kwargs: object) -> tuple[list, object]:
        stop = StopAtOperationBoundary("gpuhost provision")
        stop.received = signal.SIGINT
        return [HostOutcome("h1", changed=3)], stop

    monkeypatch.setattr(provision_cli, "run_and_report", finished_then_signalled)
    inventory = tmp_path / "inventory.py"
    inventory.write_text(f"hosts = [('h1', {{'gpuhost_profile': '{a_builtin_profile()}'}})]\n")
    result = CliRunner().invoke(
        provision_cli.command, [str(inventory), "--reboot"], standalone_mode=False
    )
    # gpuhost.cli.main prints the line and exits 130
    assert isinstance(result.exception, Stopped), result.output
    assert result.exception.code == 130
    assert rebooted == []
    assert (
        f"gpuhost provision: no reboot (SIGINT): run gpuhost provision {inventory} --reboot to "
        "reboot the hosts that need it"
    ) in (result.exception.line or "")
