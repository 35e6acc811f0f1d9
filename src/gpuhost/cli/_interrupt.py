"""Ctrl-C (SIGINT) and SIGTERM during ``gpuhost provision`` / ``gpuhost harden``: stop at the
next operation boundary, never in the middle of one.

.. code:: python

    with StopAtOperationBoundary("gpuhost provision") as stop:
        outcomes = run_deploy(inventory, provision, stop=stop)
    if stop.received:                # each stopped host: 'h1: interrupted after OP (3 of 24 ...'
        return stop.exit_code        # 130 (SIGINT) or 143 (SIGTERM)

Before the execute stage (connecting, reading facts) nothing has changed on any host, so a signal
unwinds the command at once as everywhere else (``gpuhost.cli``'s handler). Once the runner asks
``stop`` before a host's first operation, the first signal only asks every host to stop before
its next operation: the operation in flight on each host (an ``apt-get install`` unpacking the
driver, an sshd reload with its confirm step) finishes, so no host is left mid-dpkg or with an
unconfirmed SSH change. A second signal quits at once; a command then cut off on a host is
finished by the next run (provision's first operation waits for apt/dpkg and completes an
interrupted dpkg with ``dpkg --configure -a``).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

import click

from gpuhost.deploy_runner import HostOutcome, outcome_lines, run_deploy
from gpuhost.upgrade.signals import StopOnSignals


def _say(line: str) -> None:
    # os.write: the handler may interrupt a write to sys.stderr (a reentrant buffered write
    # raises RuntimeError)
    os.write(2, f"{line}\n".encode())


class StopAtOperationBoundary(StopOnSignals):
    """Context manager and the runner's ``stop`` hook (``deploy_runner.run_deploy(stop=)``):
    the first SIGINT/SIGTERM of the execute stage makes every ``stop()`` after it True;
    ``received`` is that signal (None: none)."""

    def __init__(self, command: str) -> None:
        super().__init__(lambda: None, command)
        self.command = command
        self.executing = False

    def __call__(self) -> bool:
        """Asked by the runner before each operation of the execute stage."""
        self.executing = True
        return self.received is not None

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.received or signal.SIGINT).name

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if not self.executing:  # nothing changed yet: stop now, as every command does
            previous = self._previous.get(signum)
            if callable(previous):
                previous(signum, frame)
                return
            raise SystemExit(128 + signum)
        name = signal.Signals(signum).name
        if self.received is not None:
            _say(
                f"gpuhost: {name} again: quitting now; a command cut off on a host is finished "
                f"by the next run: run {self.command} again"
            )
            os._exit(128 + signum)
        self.received = signum
        _say(
            f"gpuhost: {name}: each host stops after the operation it is running (package "
            "installs are never cut off); again to quit at once"
        )

    def __enter__(self) -> StopAtOperationBoundary:
        super().__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # a handler gpuhost.cli put in place while unwinding (quit on a second signal) stays
        for signum in list(self._previous):
            if signal.getsignal(signum) != self._handle:
                del self._previous[signum]
        super().__exit__(kind, exc, tb)


def stopped_line(stop: StopAtOperationBoundary) -> str:
    """The last line of a stopped run (stderr), after the per-host lines."""
    verb = "terminated" if stop.received == signal.SIGTERM else "interrupted"
    return (
        f"gpuhost: {verb} ({stop.signal_name}): every host stopped at an operation boundary; "
        f"run {stop.command} again to finish"
    )


def cut_off(outcomes: list[HostOutcome]) -> bool:
    """True when the signal stopped a host before its last operation (False: it came after
    every host had finished, so nothing was left undone on any host)."""
    return any(o.status == "interrupted" for o in outcomes)


def late_line(stop: StopAtOperationBoundary) -> str:
    """The line of a run whose signal came after every host had finished its operations."""
    return f"gpuhost: {stop.signal_name} came after every host had finished: nothing was cut off"


def run_and_report(
    command: str,
    inventory: str,
    deploy_func: Callable[[], Any],
    dry: bool,
    **options: Any,
) -> tuple[list[HostOutcome], StopAtOperationBoundary]:
    """``run_deploy`` (``options`` passed on) under ``StopAtOperationBoundary``, then one line
    per host on stdout and, when a signal stopped the run, ``stopped_line`` on stderr (the
    caller then exits with ``stop.exit_code``), or ``late_line`` when the signal came after every
    host had finished (``cut_off`` False: the caller does no further step, e.g. no reboot, and
    exits with the run's own code unless that step was asked for)."""
    with StopAtOperationBoundary(command) as stop:
        outcomes = run_deploy(inventory, deploy_func, dry=dry, stop=stop, **options)
    for line in outcome_lines(outcomes, dry, again=command):
        click.echo(line)
    if stop.received:
        click.echo(stopped_line(stop) if cut_off(outcomes) else late_line(stop), err=True)
    return outcomes, stop
