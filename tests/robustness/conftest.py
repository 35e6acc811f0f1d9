"""Helpers of the robustness suite: run the real CLI in a subprocess and judge its stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent


def a_builtin_profile() -> str:
    """The name of one built-in profile (the tests do not depend on which)."""
    from gpuhost.matrix.profiles import load_profiles

    return sorted(load_profiles())[0]


@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


def gpuhost(*args: str, cwd: Path | None = None, timeout: float = 120) -> Run:
    """``python -m gpuhost ARGS`` as a user runs it (a new process, real exit code)."""
    env = dict(os.environ, PYTHONWARNINGS="ignore", NO_COLOR="1")
    proc = subprocess.run(
        [sys.executable, "-m", "gpuhost", *args],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        env=env,
        timeout=timeout,
        check=False,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def assert_one_line(run: Run, code: int, *culprits: str) -> None:
    """Exit ``code``, no traceback, and one error line naming every culprit."""
    assert "Traceback" not in run.err + run.out, run.err
    assert run.code == code, (run.code, run.err)
    errors = [line for line in run.lines if "error" in line.lower() or line.startswith("gpuhost:")]
    assert len(errors) == 1, run.err
    for culprit in culprits:
        assert culprit in errors[0], (culprit, errors[0])


@pytest.fixture(scope="session")
def endpoints(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, int], Path]]:
    folder = tmp_path_factory.mktemp("endpoints")
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / "host_key")],
        check=True,
    )
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "endpoints.py"), str(folder)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ports = json.loads(proc.stdout.readline())
        yield ports, folder
    finally:
        proc.kill()
        proc.wait()


def start(*args: str) -> subprocess.Popen[str]:
    """``python -m gpuhost ARGS`` in the background (to signal it)."""
    env = dict(os.environ, PYTHONWARNINGS="ignore", NO_COLOR="1")
    return subprocess.Popen(
        [sys.executable, "-m", "gpuhost", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )


def accepted(folder: Path, log: str = "accepted-silent") -> int:
    """How many connections the silent endpoint has accepted (the lines of another of the
    endpoints' logs: ``commands-mute``, the commands the mute host took)."""
    path = folder / log
    return len(path.read_text().splitlines()) if path.exists() else 0


def start_connecting(
    folder: Path, *args: str, log: str = "accepted-silent"
) -> subprocess.Popen[str]:
    """Start gpuhost and return once the silent endpoint accepted one of its connections (the
    run is then connecting, its signal handlers in place), however loaded the machine is; with
    ``log="commands-mute"``: once the mute host took one of its commands."""
    before = accepted(folder, log)
    proc = start(*args)
    deadline = time.monotonic() + 120
    while accepted(folder, log) <= before:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    time.sleep(0.5)
    return proc
