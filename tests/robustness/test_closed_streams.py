"""Standard streams that fail or are closed are one line, never a traceback (issue 29)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from robustness.conftest import ROOT


def _run(args: list[str], **streams) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONWARNINGS="ignore", NO_COLOR="1")
    return subprocess.run(
        [sys.executable, "-m", "gpuhost", *args], cwd=ROOT, env=env, text=True, timeout=120,
        check=False, **streams
    )


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_stdout_to_a_full_device_is_one_line():
    with open("/dev/full", "w") as full:
        run = _run(["matrix", "profile", "list"], stdout=full, stderr=subprocess.PIPE)
    assert run.returncode == 1
    assert run.stderr == (
        "gpuhost: error: cannot write to standard output: No space left on device\n"
    )


def test_closed_stdout_and_stdin_are_no_traceback(tmp_path):
    inventory = tmp_path / "inv.py"
    inventory.write_text("gpu = [('n1', {'ssh_hostname': '127.0.0.1', 'ssh_port': 1})]\n")
    run = _run(["matrix", "profile", "list"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
               pass_fds=())
    assert "Traceback" not in run.stderr
    closed = subprocess.run(
        f"{sys.executable} -m gpuhost matrix profile list >&-; echo rc=$?", shell=True,
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
    )
    assert "Traceback" not in closed.stderr and "rc=0" in closed.stdout
    state = tmp_path / "state"
    rollback = subprocess.run(
        f"{sys.executable} -m gpuhost rollback {inventory} --state-dir {state} <&-", shell=True,
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
    )
    assert "Traceback" not in rollback.stderr and rollback.returncode == 2
    assert rollback.stderr.count("\n") == 1


@pytest.mark.parametrize(
    "args",
    [
        "--help",
        "audit --help",
        "inventory check {inv}",
        "audit {inv} --connect-timeout 1",
        "snapshot list --state-dir {tmp}/state",
        "provision {inv} --dry --connect-timeout 1",
    ],
)
@pytest.mark.parametrize("closed", [">&-", "2>&-", ">&- 2>&- <&-"])
def test_every_command_started_without_a_stream_exits_quietly_with_its_status(
    tmp_path, args, closed
):
    """Each command that imports pyinfra raised AttributeError ('NoneType' object has no
    attribute 'isatty', pyinfra's progress module on import) when stdout was closed. A closed
    stream is now /dev/null (``terminal.reopen_closed_streams``): what goes there is dropped,
    the exit status is the command's own."""
    inventory = tmp_path / "inv.py"
    inventory.write_text("gpu = [('n1', {'ssh_hostname': '127.0.0.1', 'ssh_port': 1})]\n")
    line = args.format(inv=inventory, tmp=tmp_path)
    run = subprocess.run(
        f"{sys.executable} -m gpuhost {line} {closed}; echo rc=$?",
        shell=True, capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
        env=dict(os.environ, PYTHONWARNINGS="ignore"),
    )  # with stderr closed a traceback is not seen, but its exit status 1 is
    assert "Traceback" not in run.stderr + run.stdout
    expected = "rc=1" if args.startswith(("audit {inv}", "provision")) else "rc=0"
    assert run.stdout.strip().endswith(expected)
