"""Exit codes: 130 on SIGINT and 143 on SIGTERM with one line (a fleet run waiting on hosts that
do not answer), a second signal quits at once; ``check`` turns pytest's own problems (usage 4,
nothing selected 5) into exit 2 with one line."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.robustness.conftest import gpuhost, start


def _accepted(folder: Path) -> int:
    path = folder / "accepted-silent"
    return len(path.read_text().splitlines()) if path.exists() else 0


def _start_connecting(folder: Path, *args: str) -> subprocess.Popen[str]:
    """Start gpuhost and return once the silent endpoint accepted one of its connections (the
    run is then connecting, its signal handlers in place), however loaded the machine is."""
    before = _accepted(folder)
    proc = start(*args)
    deadline = time.monotonic() + 120
    while _accepted(folder) <= before:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    time.sleep(0.5)
    return proc


def _silent_inventory(tmp_path: Path, port: int) -> Path:
    hosts = [(f"s{i}", {"ssh_hostname": "127.0.0.1", "ssh_port": port}) for i in range(3)]
    path = tmp_path / "inv.py"
    path.write_text(f"hosts = {hosts!r}\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("signum", "code", "line"),
    [
        (signal.SIGINT, 130, "gpuhost: interrupted (SIGINT)"),
        (signal.SIGTERM, 143, "gpuhost: terminated (SIGTERM)"),
    ],
)
@pytest.mark.parametrize("command", ["audit", "provision"])
def test_a_signal_ends_a_fleet_run_with_one_line(
    endpoints, tmp_path, command, signum, code, line
) -> None:
    ports, folder = endpoints
    inv = _silent_inventory(tmp_path, ports["silent"])
    args = [command, str(inv)] + (["--connect-timeout", "60"] if command == "audit" else ["--dry"])
    proc = _start_connecting(folder, *args)  # the hosts accept TCP and never answer
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == line


def test_a_second_signal_quits_at_once(endpoints, tmp_path) -> None:
    ports, folder = endpoints
    inv = _silent_inventory(tmp_path, ports["silent"])
    proc = _start_connecting(folder, "audit", str(inv), "--connect-timeout", "60")
    proc.send_signal(signal.SIGTERM)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143 and "Traceback" not in err


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["-k", "no_such_check_xyz"], "no check was selected"),
        (["--no-such-pytest-option"], "pytest refused its arguments"),
    ],
)
def test_check_maps_pytests_own_problems_to_2(extra, named) -> None:
    run = gpuhost("check", "@local", "--tier", "static", "--", *extra)
    # pytest's own complaint comes first; gpuhost's one line ends the output
    assert run.code == 2 and "Traceback" not in run.err
    assert run.lines[-1].startswith("gpuhost: error: check: ") and named in run.lines[-1]
