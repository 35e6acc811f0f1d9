"""Signals while an upgrade waits on a host gone silent after the login: its command in flight,
never answered (the ``mute`` endpoint: a real SSH server on 127.0.0.1 that takes commands and
never answers them, as a host frozen or cut off in the middle of a run).

Before, one SIGTERM (or more) stopped the run with its line and 143, then the interpreter's end
printed "Exception ignored in: <function BufferedFile.__del__ ...> ... RuntimeError: greenlet is
being finalized": the command's paramiko channel files, held by the killed wait, were freed by a
garbage collection inside a greenlet being finalized. Now every number and mix of signals gives
one last line, 130/143 and no traceback, and the journal is one ``--resume`` continues.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.robustness.conftest import a_builtin_profile, start_connecting

STOP_LINES = ("upgrade stopped by", "SIGTERM again: quitting now", "SIGINT again: quitting now")


def _inventory(tmp_path: Path, port: int) -> Path:
    key = tmp_path / "client_key"
    if not key.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    data = {
        "ssh_hostname": "127.0.0.1", "ssh_port": port, "ssh_key": str(key),
        "ssh_strict_host_key_checking": "no", "ssh_known_hosts_file": str(tmp_path / "known"),
    }  # fmt: skip
    path = tmp_path / "inv.py"
    path.write_text(f"gpu = {[('m0', data)]!r}\n", encoding="utf-8")
    return path


def _upgrade_in_flight(folder: Path, inv: Path, state: Path, *extra: str) -> subprocess.Popen[str]:
    """The upgrade started and waiting on the mute host's answer to its preflight command."""
    return start_connecting(
        folder, "upgrade", str(inv), "--state-dir", str(state), "--to", a_builtin_profile(),
        "--force", "--canary", "0", *extra, log="commands-mute",
    )  # fmt: skip


def _assert_stopped(proc: subprocess.Popen[str], codes: tuple[int, ...]) -> str:
    out, err = proc.communicate(timeout=60)
    assert "Traceback" not in out + err and "Exception ignored" not in err, err
    assert proc.returncode in codes, (proc.returncode, err)
    last = err.strip().splitlines()[-1]
    assert any(s in last for s in STOP_LINES), err
    return last


@pytest.mark.parametrize(
    "signals_sent",
    [
        [signal.SIGTERM],
        [signal.SIGTERM, signal.SIGTERM],
        [signal.SIGINT, signal.SIGTERM, signal.SIGINT],
    ],
    ids=["one", "two", "three-mixed"],
)
def test_signals_during_a_command_on_a_silent_host(endpoints, tmp_path, signals_sent) -> None:
    ports, folder = endpoints
    inv = _inventory(tmp_path, ports["mute"])
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    proc = _upgrade_in_flight(folder, inv, state)
    for each in signals_sent:
        proc.send_signal(each)
        time.sleep(0.3)
    first = signals_sent[0]
    _assert_stopped(proc, (128 + first, *(128 + s for s in signals_sent[1:])))
    journals = list((state / "runs").glob("upgrade-*.jsonl"))
    assert len(journals) == 1, journals

    # the journal is one --resume takes: it starts again on the same (still silent) host
    again = _upgrade_in_flight(folder, inv, state, "--resume")
    again.send_signal(signal.SIGTERM)
    last = _assert_stopped(again, (143,))
    assert "upgrade stopped by SIGTERM" in last and journals[0].name in last, last


# A signal while the inventory file runs, and a clean-up in it (a lock's release in gevent, a
# library's finally) that fails while the stop unwinds: the error raised then carries the stop as
# its context. Seen for real in a loop of audits signalled at random moments: "gpuhost: error:
# inv.py: cannot load inventory: RuntimeError: cannot release un-acquired lock", exit 2.
_FAILING_CLEANUP = """
import os, signal, time
try:
    os.kill(os.getpid(), signal.{name})
    time.sleep(5)
finally:
    raise RuntimeError("cannot release un-acquired lock")
hosts = ["h1"]
"""


@pytest.mark.parametrize(("name", "code"), [("SIGTERM", 143), ("SIGINT", 130)])
@pytest.mark.parametrize("command", ["audit", "inventory check"])
def test_a_stop_masked_by_a_failing_cleanup_is_still_a_stop(tmp_path, name, code, command):
    from tests.robustness.conftest import gpuhost

    inv = tmp_path / "inv.py"
    inv.write_text(_FAILING_CLEANUP.format(name=name), encoding="utf-8")

    run = gpuhost(*command.split(), str(inv))

    assert "Traceback" not in run.err, run.err
    word = "terminated" if name == "SIGTERM" else "interrupted"
    assert (run.code, run.lines) == (code, [f"gpuhost: {word} ({name})"]), run.err


def test_the_stop_is_found_through_the_whole_chain():
    from gpuhost.errors import ConfigError
    from gpuhost.signals import Stopped, stopped_in

    stop = Stopped(signal.SIGTERM)

    def masked() -> None:
        try:
            try:
                raise stop
            finally:
                raise RuntimeError("cannot release un-acquired lock")
        except RuntimeError:
            raise ConfigError("cannot load inventory") from None

    with pytest.raises(ConfigError) as caught:
        masked()

    assert stopped_in(caught.value) is stop
    assert stopped_in(ConfigError("a real problem")) is None
    looped = RuntimeError("a")
    looped.__context__ = RuntimeError("b")
    looped.__context__.__context__ = looped  # a cycle ends the walk
    assert stopped_in(looped) is None
