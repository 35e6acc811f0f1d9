"""One pyinfra session per host (``InventoryHost``: a host of ``inventory.loader.select``): connect,
run commands, run deploys.

Each host gets its own pyinfra ``State`` (an inventory of that one host, with its data), so a
host's steps, reconnects after a reboot and deploys never touch another host's session.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import shlex
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pyinfra.api import State
from pyinfra.api.exceptions import PyinfraError

from gpuhost import toolrun
from gpuhost.connection import connect_cause
from gpuhost.errors import HostError
from gpuhost.inventory.loader import InventoryHost
from gpuhost.pyinfra_adapter import (
    close_connection,
    ensure_gevent,
    single_host_state,
    start_prepare,
)
from gpuhost.safeio import open_new
from gpuhost.statedir import checked_folder
from gpuhost.upgrade.remote import Result

RC_MARK = "##GPUHOST_RC="
# after SIGTERM, how long a child (pyinfra, pytest) gets before SIGKILL
CHILD_TERM_GRACE_S = 10.0
# how often a wait on a host (connecting, a command) asks whether the run was stopped
STOP_POLL_S = 0.1

_T = TypeVar("_T")


class Canceller:
    """Stops what a run has in flight when the operator stops it (Ctrl-C, SIGTERM).

    Child processes run in their own session, so a terminal's Ctrl-C (or a signal to the
    controller's process group) reaches only the controller, never a child that would take it
    as a clean exit; ``cancel`` ends the registered children (their whole process group) and
    makes every ``PyinfraRemote`` sharing this canceller refuse new commands and reconnects."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._children: set[toolrun.Tool] = set()
        self._state: State | None = None

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self) -> None:
        self._event.set()
        with self._lock:
            children = list(self._children)
            state, self._state = self._state, None
        for child in children:
            child.send(signal.SIGTERM)
        if state is not None:
            _disconnect_all(state)

    def track_state(self, state: State | None) -> None:
        """The pyinfra State of the in-process deploy now running (None: it is over). A cancel
        drops its hosts' connections, so the command in flight returns now and the deploy
        stops (it asks ``cancelled`` before each further operation)."""
        with self._lock:
            self._state = state
        if state is not None and self.cancelled:
            _disconnect_all(state)

    def check(self, host: str) -> None:
        if self.cancelled:
            raise HostError(host, "stopped by the operator")

    def run_child(
        self, argv: list[str], out: Any, env: dict[str, str] | None, timeout_s: float
    ) -> int:
        """Run ``argv`` in its own session with output to ``out``; its exit code (negative: the
        signal that ended it). ``subprocess.TimeoutExpired`` after ``timeout_s``."""
        self.check(argv[0])
        child = toolrun.Tool(argv, stdout=out, merge_stderr=True, env=env)
        with self._lock:
            self._children.add(child)
        try:
            result = child.finish(
                timeout_s, CHILD_TERM_GRACE_S, unwind=lambda c: c.stop(CHILD_TERM_GRACE_S)
            )
        finally:
            with self._lock:
                self._children.discard(child)
        if result.timed_out:
            raise subprocess.TimeoutExpired(argv, timeout_s)
        return result.returncode


def until_cancelled(
    work: Callable[[], _T], canceller: Canceller, host: str, drop: Callable[[], None]
) -> _T:
    """``work()``, a wait on ``host`` (connecting, a command), in a greenlet of this thread
    while this one asks the canceller every ``STOP_POLL_S``: once the run is stopped, or when
    this thread is unwound (``signals.Stopped``), the wait ends at once: ``drop`` closes what it
    waits on and ``HostError('stopped by the operator')`` (or the unwinding) goes on. Without
    it a stop could only be seen when the host answers or its timeout passes: a host that
    accepts TCP and never speaks held a stopped run for the whole connect timeout. What
    ``work`` raises is raised here (in the greenlet gevent would print it as a traceback)."""
    import gevent

    outcome: list[tuple[bool, Any]] = []

    def job() -> None:
        try:
            outcome.append((True, work()))
        except BaseException as exc:  # handed to the caller below
            outcome.append((False, exc))

    waiting = gevent.spawn(job)
    try:
        while not waiting.ready():
            waiting.join(timeout=STOP_POLL_S)
            if not waiting.ready():
                canceller.check(host)
    except BaseException:
        waiting.kill(timeout=1)
        with contextlib.suppress(Exception):  # closing a broken connection
            drop()
        _free_here(outcome)
        raise
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def _free_here(outcome: list[tuple[bool, Any]]) -> None:
    """Free what the killed wait held (the frames its GreenletExit's traceback keeps: paramiko's
    channel and its files) now, in this greenlet. Left to a later garbage collection, their
    ``__del__`` ran wherever that happened to be, often inside a greenlet being finalized at
    the process's end, where taking paramiko's (gevent) lock fails: "Exception ignored ...
    RuntimeError: greenlet is being finalized" after the run's last line."""
    outcome.clear()
    gc.collect()


def _disconnect_all(state: State) -> None:
    for host in list(state.inventory):
        if host.connected:
            with contextlib.suppress(Exception):  # a dead connection is closed already
                host.disconnect()


def _run_command_with_rc(command: str) -> str:
    return f"( {command} ); printf '\\n{RC_MARK}%s\\n' $?"


def split_rc(stdout: str) -> tuple[int | None, str]:
    """Strip the exit code marker line that ``PyinfraRemote.run`` appends (pure)."""
    lines = stdout.split("\n")
    for index in range(len(lines) - 1, -1, -1):
        if lines[index].startswith(RC_MARK):
            value = lines[index][len(RC_MARK) :].strip()
            body = "\n".join(lines[:index])
            if body.endswith("\n"):
                body = body[:-1]
            return (int(value) if value.isdigit() else None), body
    return None, stdout


class PyinfraRemote:
    """A ``Remote`` over pyinfra's SSH connector for one inventory host."""

    def __init__(
        self, entry: InventoryHost, connect_timeout: int = 10, canceller: Canceller | None = None
    ) -> None:
        self.host = entry.name
        self.entry = entry
        self.connect_timeout = connect_timeout
        self.canceller = canceller or Canceller()
        self.state: State | None = None

    def _new_state(self) -> State:
        data = dict(self.entry.data)
        data.setdefault("ssh_connect_timeout", self.connect_timeout)
        return single_host_state(self.entry.name, data, int(data["ssh_connect_timeout"]))

    def connect(self) -> None:
        self.canceller.check(self.host)
        ensure_gevent()
        pyinfra_logger = logging.getLogger("pyinfra")
        if not pyinfra_logger.handlers:  # a deploy running in-process logs to its hosts' files
            pyinfra_logger.setLevel(logging.CRITICAL)
        state = self._new_state()
        host = state.inventory.get_host(self.host)
        try:
            until_cancelled(
                lambda: host.connect(show_errors=False, raise_exceptions=True),
                self.canceller,
                self.host,
                lambda: close_connection(host),
            )
        except HostError:
            raise
        except Exception as exc:  # DNS, refused, timeout, not SSH, auth, host key: its cause
            cause = connect_cause(exc, self.entry.data, self.host, self.connect_timeout)
            raise HostError(self.host, f"unreachable over SSH: {cause}") from exc
        if not host.connected:
            raise HostError(self.host, "unreachable over SSH")
        start_prepare(state, host)
        self.state = state

    def close(self) -> None:
        if self.state is not None:
            host = self.state.inventory.get_host(self.host)
            with contextlib.suppress(Exception):  # a dead connection is closed already
                close_connection(host)
        self.state = None

    def _host(self) -> Any:
        if self.state is None:
            self.connect()
        assert self.state is not None
        return self.state.inventory.get_host(self.host)

    def run(self, command: str, timeout: float | None = None) -> Result:
        host = self._host()
        self.canceller.check(self.host)
        try:
            _, output = until_cancelled(
                lambda: host.run_shell_command(
                    _run_command_with_rc(command), _timeout=int(timeout) if timeout else None
                ),
                self.canceller,
                self.host,
                self.close,
            )
        except HostError:
            raise
        except (PyinfraError, OSError, EOFError) as exc:
            self.close()
            raise HostError(self.host, f"connection lost while running a command: {exc}") from exc
        except Exception as exc:  # paramiko/gevent timeouts have no common base
            self.close()
            raise HostError(
                self.host, f"command did not finish: {type(exc).__name__} {exc}"
            ) from exc
        rc, stdout = split_rc(output.stdout)
        if rc is None:
            raise HostError(
                self.host, f"connection dropped during: {command[:80]} ({output.stderr[-200:]})"
            )
        return Result(rc, stdout, output.stderr)

    def get_file(self, remote: str, local: Path) -> None:
        """Copy the host's file ``remote`` to ``local`` (SFTP); HostError when it fails."""
        host = self._host()
        self.canceller.check(self.host)
        try:
            ok = host.get_file(remote, str(local))
        except Exception as exc:  # paramiko/SFTP errors have no common base
            self.close()
            raise HostError(self.host, f"cannot copy {remote}: {exc}") from exc
        if ok is False:
            raise HostError(self.host, f"cannot copy {remote}")

    def wait_for_ssh(self, timeout_s: float, poll_s: float = 2.0) -> None:
        """Reconnect until SSH answers again (after a reboot)."""
        deadline = time.monotonic() + timeout_s
        last = "never answered"
        while time.monotonic() < deadline:
            self.close()
            try:
                self.connect()
                if self.run("true").ok:
                    return
            except HostError as exc:
                self.canceller.check(self.host)
                last = str(exc)
            time.sleep(poll_s)
        raise HostError(self.host, f"did not come back over SSH within {timeout_s:g}s ({last})")


def quote(value: str) -> str:
    return shlex.quote(value)


def write_host_inventory(entry: InventoryHost, path: Path) -> Path:
    """A pyinfra inventory file of this one host with its (merged) data."""
    data = json.dumps(dict(entry.data), default=str)
    path.write_text(f"import json\n\nhosts = [({entry.name!r}, json.loads({data!r}))]\n")
    return path


def _run_logged(
    entry: InventoryHost,
    argv: list[str],
    log_path: Path,
    timeout_s: float,
    timeout_message: str,
    env: dict[str, str] | None = None,
    canceller: Canceller | None = None,
) -> int:
    """Run a controller-side process for one host (in its own session) with its output (stdout
    and stderr) in ``log_path``; its exit code. HostError(``timeout_message``) when it runs past
    ``timeout_s``; HostError when the run was stopped (the child's exit then means nothing)."""
    canceller = canceller or Canceller()
    with open_new(log_path) as out:
        try:
            returncode = canceller.run_child(argv, out, env, timeout_s)
        except subprocess.TimeoutExpired as exc:
            raise HostError(entry.name, timeout_message) from exc
    canceller.check(entry.name)
    if returncode < 0:
        raise HostError(
            entry.name,
            f"{argv[2] if len(argv) > 2 else argv[0]} was killed by signal "
            f"{-returncode} (log {log_path})",
        )
    return returncode


def run_checks(
    entry: InventoryHost,
    tier: str,
    log_path: Path,
    timeout_s: float = 3600,
    canceller: Canceller | None = None,
) -> str:
    """The check suite (``checks/``, what ``gpuhost check`` runs) on one host, from the
    controller; returns the JUnit XML text. HostError when pytest could not run the checks."""
    from gpuhost.checks.run import checks_dir, pytest_argv

    checked_folder(log_path.parent, create=True)
    with tempfile.TemporaryDirectory(prefix="gpuhost-checks-") as tmp:
        inventory = write_host_inventory(entry, Path(tmp) / "inventory.py")
        junit = Path(tmp) / "junit.xml"
        argv = pytest_argv(checks_dir(), str(inventory), tier, entry.name, junit)
        returncode = _run_logged(
            entry,
            argv,
            log_path,
            timeout_s,
            f"checks did not finish in {timeout_s:g}s",
            canceller=canceller,
        )
        if returncode not in (0, 1) or not junit.exists():
            raise HostError(
                entry.name, f"checks could not run (pytest exit {returncode}; log {log_path})"
            )
        return junit.read_text()
