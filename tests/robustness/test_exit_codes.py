"""Exit codes: 130 on SIGINT and 143 on SIGTERM with one line (a fleet run waiting on hosts that
do not answer), a second signal quits at once; ``check`` turns pytest's own problems (usage 4,
nothing selected 5) into exit 2 with one line."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.robustness.conftest import a_builtin_profile, accepted, gpuhost, start_connecting


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
    proc = start_connecting(folder, *args)  # the hosts accept TCP and never answer
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == line


def _snapshots(state: Path, hosts: list[str]) -> None:
    from upgrade.test_snapshot import host_output

    from gpuhost.upgrade.host_state import parse_host_state
    from gpuhost.upgrade.snapshot import SnapshotStore, build_snapshot

    store = SnapshotStore(state / "snapshots")
    for host in hosts:
        store.save(build_snapshot(host, parse_host_state(host_output()), "20250101T000000Z"))


@pytest.mark.parametrize(("command", "hosts"), [("upgrade", 1), ("upgrade", 3), ("rollback", 3)])
def test_the_first_sigterm_stops_a_run_waiting_on_a_silent_host(
    endpoints, tmp_path, command, hosts
) -> None:
    """upgrade's preflight (one host: in the run's own thread; three in one batch: on worker
    threads) and rollback's restore connect to hosts that accept TCP and never answer SSH. The
    first SIGTERM ends the waits at once: 143 within seconds, the run's own last line, no
    traceback. Before, the stop was seen only when each connect timed out (the inventory's 60 s
    here; and pyinfra 3 ignored ssh_connect_timeout: its own 10 s)."""
    ports, folder = endpoints
    data = {"ssh_hostname": "127.0.0.1", "ssh_port": ports["silent"], "ssh_connect_timeout": 60}
    names = [f"s{i}" for i in range(hosts)]
    inv = tmp_path / "inv.py"
    inv.write_text(f"gpu = {[(name, data) for name in names]!r}\n", encoding="utf-8")
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    if command == "upgrade":
        args = ["--to", a_builtin_profile(), "--force", "--canary", "0", "--batch", str(hosts)]
        last = "gpuhost: upgrade stopped by SIGTERM; journal "
        per_host = "preflight audit: interrupted"
    else:
        _snapshots(state, names)
        args = ["--yes", "--no-reboot"]
        last = "gpuhost: rollback stopped by SIGTERM; "
        per_host = "rollback stopped: run it again"
    proc = start_connecting(folder, command, str(inv), "--state-dir", str(state), *args)
    signalled = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    took = time.monotonic() - signalled
    assert proc.returncode == 143 and "Traceback" not in err + out, err
    assert took < 8, f"stopped {took:.1f} s after SIGTERM"
    assert err.strip().splitlines()[-1].startswith(last), err
    assert (out + err).count(per_host) == hosts, (out, err)


def test_a_second_signal_quits_at_once(endpoints, tmp_path) -> None:
    """Two SIGTERMs sent together: the kernel (or Python, before its handler ran) may merge
    them into one, which unwinds; else the second quits at once. Either way 143, no traceback,
    and the last line says which."""
    ports, folder = endpoints
    inv = _silent_inventory(tmp_path, ports["silent"])
    proc = start_connecting(folder, "audit", str(inv), "--connect-timeout", "60")
    proc.send_signal(signal.SIGTERM)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] in (
        "gpuhost: terminated (SIGTERM)",
        "gpuhost: SIGTERM again: quitting now",
    ), err


@pytest.mark.parametrize("second", [signal.SIGTERM, signal.SIGINT])
def test_a_second_signal_at_any_moment_of_the_stop(endpoints, tmp_path, second) -> None:
    """The second signal a moment after the first (as a loaded machine spaces two signals sent
    together), whichever phase the stop is in: unwinding, exiting (the interpreter joins threads
    and frees modules for a while) or gone. It quits at once (128 + it, its line) or, in the
    interpreter's last steps, is ignored (143); never a traceback, never a death by the signal.
    Before, the default handlers were back once the command had stopped: killed by SIGTERM
    (-15), a KeyboardInterrupt traceback for SIGINT."""
    ports, folder = endpoints
    inv = _silent_inventory(tmp_path, ports["silent"])
    quit_line = f"gpuhost: {signal.Signals(second).name} again: quitting now"
    for delay in (0.02, 0.1, 0.3):
        proc = start_connecting(folder, "audit", str(inv), "--connect-timeout", "60")
        proc.send_signal(signal.SIGTERM)
        time.sleep(delay)
        proc.send_signal(second)
        _, err = proc.communicate(timeout=30)
        assert "Traceback" not in err, err
        last = err.strip().splitlines()[-1]
        assert (proc.returncode, last) in (
            (143, "gpuhost: terminated (SIGTERM)"),
            (128 + second, quit_line),
        ), (delay, proc.returncode, err)


_SIGNAL_DURING_IMPORT = """
import importlib.abc, os, runpy, signal, sys

class CtrlC(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "click":  # the CLI is being imported: Ctrl-C now
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, CtrlC())
sys.argv = ["gpuhost", "matrix", "show"]
runpy.run_module("gpuhost", run_name="__main__")
"""


def test_a_signal_while_the_cli_is_imported_stops_with_one_line() -> None:
    """Ctrl-C in the first tens of milliseconds (``python -m gpuhost`` importing the CLI): the
    command does not start, one line, 130; before, a KeyboardInterrupt traceback. (Only the
    interpreter's own start-up, before gpuhost's first line, is left to Python.)"""
    env = dict(os.environ, PYTHONWARNINGS="ignore", NO_COLOR="1")
    proc = subprocess.run(
        [sys.executable, "-c", _SIGNAL_DURING_IMPORT],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 130 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines() == ["gpuhost: interrupted (SIGINT)"]
    assert proc.stdout == ""  # matrix show never ran


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


def _check_silent(folder: Path, port: int, tmpdir: Path, timeout: int) -> subprocess.Popen[str]:
    hosts = [
        ("s0", {"ssh_hostname": "127.0.0.1", "ssh_port": port, "ssh_connect_timeout": timeout})
    ]
    inv = tmpdir / "inv.py"
    inv.write_text(f"hosts = {hosts!r}\n", encoding="utf-8")
    env = dict(os.environ, PYTHONWARNINGS="ignore", NO_COLOR="1", TMPDIR=str(tmpdir))
    return subprocess.Popen(
        [sys.executable, "-m", "gpuhost", "check", str(inv), "--tier", "static"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_check_stopped_lets_pytest_clean_up(endpoints) -> None:
    """SIGINT to gpuhost alone (not its process group) while ``check``'s pytest waits on a
    host: pytest is asked to stop too and removes its ssh_config folder; exit 130, one line.
    (Before, pytest was killed and /tmp/gpuhost-check-* stayed behind.)"""
    ports, folder = endpoints
    scratch = Path(tempfile.mkdtemp(prefix="hqa", dir="/tmp"))  # short: the folder goes here
    try:
        before = accepted(folder)
        proc = _check_silent(folder, ports["silent"], scratch, 60)
        deadline = time.monotonic() + 120
        while accepted(folder) <= before:  # pytest's ssh is connecting: its folder exists
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.2)
        made = [p.name for p in scratch.iterdir() if p.name.startswith("gpuhost-check-")]
        assert len(made) == 1, made
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert err.strip().splitlines()[-1] == "gpuhost: interrupted (SIGINT)"
        assert "Traceback" not in err
        # pytest says it was interrupted (stdout); gevent's hub printed it too (before)
        assert "KeyboardInterrupt" not in err, err
        assert not (scratch / made[0]).exists(), "pytest's ssh_config folder was left behind"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def test_check_with_a_long_tmpdir_still_reaches_hosts(endpoints, tmp_path) -> None:
    """$TMPDIR as long as pytest's own tmp_path: every host was 'unreachable: ControlPath too
    long' (OpenSSH's 108-byte socket path limit); the control sockets now go under /tmp and the
    host gets its real cause."""
    ports, folder = endpoints
    assert len(str(tmp_path)) > 26
    proc = _check_silent(folder, ports["silent"], tmp_path, 2)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert "ControlPath too long" not in out
    assert "accepts TCP connections but sent no SSH banner" in out, out[-2000:]
