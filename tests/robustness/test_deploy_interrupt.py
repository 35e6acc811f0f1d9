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


def _start(command: str, folder: Path) -> subprocess.Popen[str]:
    data = {"gpuhost_profile": a_builtin_profile()} if command == "provision" else {}
    (folder / "inventory.py").write_text(f"hosts = [('@local', {data!r})]\n", encoding="utf-8")
    script = SCRIPT.format(module=DEPLOYS[command], command=command, slow=SLOW_S)
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
