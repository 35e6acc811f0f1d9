"""The upgrade's install: provision's deploy run in this process, with ``gpuhost provision``'s
runner (``deploy_runner.run_deploy_on``), hosts that reach the install together deployed together.

pyinfra's context (``ctx_state``, ``ctx_inventory``) is process-wide, while the upgrade runs each
host of a batch in its own worker: one deploy runs at a time, and hosts that ask for one while it
runs are deployed together in the next run (pyinfra runs them in parallel), so a batch of N hosts
costs at most two runs, not N. Each host's share of pyinfra's output goes to its own log file.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from gpuhost.deploy_runner import HostOutcome, run_deploy_on
from gpuhost.errors import HostError
from gpuhost.inventory.loader import InventoryHost
from gpuhost.safeio import open_new
from gpuhost.statedir import checked_folder
from gpuhost.upgrade.connect import Canceller

ANSI = re.compile(r"\x1b\[[0-9;]*m")
_run_lock: list[threading.Lock] = []


def run_lock() -> threading.Lock:
    """pyinfra's context is process-wide: one in-process deploy at a time, whatever the batcher.
    Made on first use, not at import: ``gpuhost upgrade`` patches threading for gevent after
    importing this module, and a lock made before would block every greenlet while waited on."""
    if not _run_lock:
        _run_lock.append(threading.Lock())
    return _run_lock[0]


@dataclass(frozen=True)
class DeployRequest:
    entry: InventoryHost  # the host with the data the deploy must see (target profile, ...)
    log_path: Path


class HostLogs(logging.Handler):
    """pyinfra's log lines, each into the log file of the host it names (``[name] ...``)."""

    def __init__(self, files: Mapping[str, TextIO]) -> None:
        super().__init__(logging.DEBUG)
        self.files = dict(files)

    def emit(self, record: logging.LogRecord) -> None:
        text = ANSI.sub("", logging.Formatter().format(record))  # with a traceback, if any
        for name, out in self.files.items():
            if text.lstrip().startswith(f"[{name}]"):
                out.write(text.strip() + "\n")
                out.flush()


@contextlib.contextmanager
def host_logs(requests: Mapping[str, DeployRequest]) -> Iterator[dict[str, TextIO]]:
    """Open each host's log and route the ``pyinfra`` logger's lines there (and nowhere else:
    the upgrade prints its own step lines) while the deploy runs."""
    files: dict[str, TextIO] = {}
    pyinfra_logger = logging.getLogger("pyinfra")
    level, propagate = pyinfra_logger.level, pyinfra_logger.propagate
    handler = HostLogs(files)
    try:
        for name, request in requests.items():
            checked_folder(request.log_path.parent, create=True)
            files[name] = open_new(request.log_path)
        handler.files = dict(files)
        pyinfra_logger.addHandler(handler)
        pyinfra_logger.setLevel(logging.INFO)
        pyinfra_logger.propagate = False
        yield files
    finally:
        pyinfra_logger.removeHandler(handler)
        pyinfra_logger.setLevel(level)
        pyinfra_logger.propagate = propagate
        for out in files.values():
            out.close()


def error_lines(log_text: str, limit: int = 6) -> str:
    """The error lines of a host's deploy log (pyinfra's ``Error``/``E:`` lines, a failed
    command's output), for the one-line reason a failed install gives (pure)."""
    picked = []
    for line in log_text.splitlines():
        body = re.sub(r"^\[[^]]*\]\s*", "", line.strip())
        if "error" in body.lower() or body.startswith("E: "):
            picked.append(body)
    return " | ".join(picked[-limit:])[:1500]


def outcome_error(outcome: HostOutcome, log_path: Path) -> HostError | None:
    """None for an ok outcome; else the HostError the install step fails with, naming the log."""
    if outcome.status == "ok":
        return None
    message = outcome.message
    if "(see output above)" in message:
        details = error_lines(log_path.read_text(encoding="utf-8")) if log_path.exists() else ""
        message = message.replace("(see output above)", f"({details})" if details else "")
    verb = {
        "refused": "deploy refused",
        "bad-data": "deploy refused",
        "unreachable": "deploy could not connect",
    }.get(outcome.status, "deploy failed")
    return HostError(outcome.name, f"{verb}: {message.strip()} (log {log_path})")


class DeployBatcher:
    """Runs ``deploy_func`` for hosts that ask, one in-process run at a time (see module doc)."""

    def __init__(self, deploy_func: Callable[[], Any], canceller: Canceller) -> None:
        self.deploy_func = deploy_func
        self.canceller = canceller
        self._cond = threading.Condition()
        self._pending: dict[str, DeployRequest] = {}
        self._results: dict[str, HostOutcome | BaseException] = {}
        self._running = False
        self.runs: list[list[str]] = []  # host names of each run, in order (for tests, logs)

    def deploy(self, request: DeployRequest) -> None:
        """Deploy on ``request.entry``; HostError when the host did not end ok."""
        name = request.entry.name
        self.canceller.check(name)
        batch: dict[str, DeployRequest] = {}
        with self._cond:
            self._pending[name] = request
            while name not in self._results:
                if not self._running:
                    batch, self._pending, self._running = self._pending, {}, True
                    break
                self._cond.wait()
        if batch:
            self._lead(batch)
        with self._cond:
            result = self._results.pop(name)
        self.canceller.check(name)  # a stop asked for during the run is what ended it
        if isinstance(result, BaseException):
            raise result
        error = outcome_error(result, request.log_path)
        if error is not None:
            raise error

    def _lead(self, batch: dict[str, DeployRequest]) -> None:
        results: dict[str, HostOutcome | BaseException] = {}
        try:
            results.update(self._run(batch))
        except BaseException as exc:
            for other in batch:
                results[other] = exc
        finally:
            for other in batch:
                results.setdefault(other, HostError(other, "deploy ended without an outcome"))
            with self._cond:
                self._results.update(results)
                self._running = False
                self._cond.notify_all()

    def _run(self, batch: dict[str, DeployRequest]) -> dict[str, HostOutcome]:
        self.runs.append(list(batch))
        hosts = [(r.entry.name, r.entry.data, r.entry.groups) for r in batch.values()]
        with run_lock(), host_logs(batch) as files:
            outcomes = run_deploy_on(
                hosts,
                self.deploy_func,
                stop=lambda: self.canceller.cancelled,
                on_state=self.canceller.track_state,
            )
            for outcome in outcomes:
                files[outcome.name].write(f"gpuhost: {outcome.line(dry=False)}\n")
        return {o.name: o for o in outcomes}
