"""Children of an upgrade run in their own session and end when the run is stopped (real
processes: ``sh`` children, signals sent as a terminal's Ctrl-C would be)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from gpuhost.errors import HostError
from gpuhost.inventory.loader import InventoryHost
from gpuhost.upgrade.connect import Canceller, PyinfraRemote, _run_logged

ENTRY = InventoryHost("h1", {}, ())


def test_child_has_its_own_session_so_the_terminals_sigint_misses_it(tmp_path: Path) -> None:
    canceller = Canceller()
    log = tmp_path / "child.log"
    script = "echo $$ > {pid}; sleep 1; echo finished".format(pid=tmp_path / "pid")
    result: dict[str, int] = {}

    def run() -> None:
        result["rc"] = _run_logged(ENTRY, ["sh", "-c", script], log, 30, "timeout",
                                   canceller=canceller)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 5
    while not (tmp_path / "pid").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int((tmp_path / "pid").read_text())
    assert os.getpgid(child) != os.getpgid(0)  # not in the controller's process group
    assert os.getsid(child) == child  # leads its own session: no terminal, no Ctrl-C
    thread.join(10)
    assert result["rc"] == 0 and "finished" in log.read_text()


def test_cancel_ends_the_child_group_and_the_step_reports_the_stop(tmp_path: Path) -> None:
    canceller = Canceller()
    log = tmp_path / "child.log"
    # a grandchild in the same group must end too (pyinfra's ssh helpers would be there)
    script = "sleep 60 & sleep 60; echo not-reached"
    errors: list[str] = []

    def run() -> None:
        try:
            _run_logged(ENTRY, ["sh", "-c", script], log, 120, "timeout", canceller=canceller)
        except HostError as exc:
            errors.append(str(exc))

    thread = threading.Thread(target=run)
    started = time.monotonic()
    thread.start()
    time.sleep(0.5)
    canceller.cancel()
    thread.join(15)
    assert not thread.is_alive()
    assert time.monotonic() - started < 10
    assert errors == ["h1: stopped by the operator"]
    assert "not-reached" not in log.read_text()
    with pytest.raises(HostError, match="stopped by the operator"):
        PyinfraRemote(ENTRY, canceller=canceller).connect()  # no new command after a stop


def test_a_child_killed_by_a_signal_is_an_error_not_success(tmp_path: Path) -> None:
    log = tmp_path / "child.log"
    with pytest.raises(HostError, match="killed by signal 9"):
        _run_logged(ENTRY, [sys.executable, "-c", "import os; os.kill(os.getpid(), 9)"], log,
                    30, "timeout")


def test_timeout_ends_the_child(tmp_path: Path) -> None:
    with pytest.raises(HostError, match="took too long"):
        _run_logged(ENTRY, ["sleep", "30"], tmp_path / "log", 0.5, "took too long")


def test_sigint_handler_calls_stop_once_and_restores(tmp_path: Path) -> None:
    from gpuhost.signals import StopOnSignals

    calls: list[int] = []
    before = signal.getsignal(signal.SIGINT)
    with StopOnSignals(lambda: calls.append(1)) as signals:
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + 5
        while not calls and time.monotonic() < deadline:
            time.sleep(0.05)
    assert calls == [1]
    assert signals.received == signal.SIGTERM and signals.stopped("").code == 143
    assert signal.getsignal(signal.SIGINT) is before
