"""Ctrl-C (SIGINT) and SIGTERM: the one module that handles them (below the CLI).

Three ways a gpuhost command answers the first signal:

- ``unwind_on_signals`` (every command, installed by ``gpuhost.cli.main``): raise ``Stopped``
  where the program is, so its finally blocks close connections;
- ``StopOnSignals`` (upgrade, rollback): call the run's ``stop`` (off the handler: it may block
  on connections) and let the caller's loop wind down; the steps in flight are cut off;
- ``StopAtOperationBoundary`` (provision, harden: the deploy runner's ``stop`` hook): before the
  execute stage nothing changed on any host, so unwind as every command does; once the runner
  asks it before a host's operation, every host stops before its next operation instead (an
  ``apt-get install`` unpacking the driver or an sshd reload with its confirm step finishes).

A second signal quits at once through the function ``on_quit`` registered (the CLI's, which
exits 128 + the signal); without one the process dies by the signal itself. A command stopped
by a signal raises ``Stopped`` with its last line; the CLI prints it and exits 130 / 143.

Before and after the command, in the ``gpuhost`` process: from the entry point's first line
until the CLI's handlers are in place (``defer_until_started``; importing the CLI takes tens of
milliseconds) a signal is remembered and stops the command as it starts (``stop_if_signalled``);
from the command's end until the process has exited (``exiting``; the interpreter's shutdown
joins threads) a signal quits at once, and once Python has run its exit handlers it is ignored.
Neither Python's KeyboardInterrupt traceback nor a death
by the default action (no line, not 130 / 143) is left.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any, TypeVar

SIGNALS = (signal.SIGINT, signal.SIGTERM)

Quit = Callable[[int, str], None]
_S = TypeVar("_S", bound="StopOnSignals")
_quit: list[Quit] = []


class Stopped(SystemExit):
    """A command stopped by SIGINT/SIGTERM: a SystemExit, so that gevent's hub hands it to the
    main greenlet without printing a traceback and no ``except Exception`` swallows it.
    ``signum`` is the signal, ``line`` the command's last line (stderr; None: the CLI's own)."""

    def __init__(self, signum: int, line: str | None = None) -> None:
        super().__init__(128 + signum)
        self.signum = signum
        self.line = line


def stopped_in(exc: BaseException) -> Stopped | None:
    """The ``Stopped`` that ``exc`` was raised while handling, if any (its ``__context__`` and
    ``__cause__`` chain, ``from None`` included). A signal's ``Stopped`` raised inside a lock's
    release or a library's clean-up comes out as that code's own error ("RuntimeError: cannot
    release un-acquired lock" out of an inventory file's import); the stop is what happened."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending:
        each = pending.pop()
        if each is None or id(each) in seen:
            continue
        if isinstance(each, Stopped):
            return each
        seen.add(id(each))
        pending += [each.__context__, each.__cause__]
    return None


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


def on_quit(quit_now: Quit) -> None:
    """Register what a second signal does: ``quit_now(signum, line)`` writes ``line`` and ends
    the process at once (``gpuhost.cli.main``'s)."""
    _quit[:] = [quit_now]


def _say(line: str) -> None:
    # os.write: the handler may interrupt a write to sys.stderr (a reentrant buffered write
    # raises RuntimeError)
    os.write(2, f"{line}\n".encode())


def quit_now(signum: int, line: str) -> None:
    """A second signal: say ``line`` and end the process at once."""
    if _quit:
        _quit[0](signum, line)
        return
    _say(line)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _second(signum: int, frame: FrameType | None) -> None:
    quit_now(signum, f"gpuhost: {signal_name(signum)} again: quitting now")


def _exiting(signum: int, frame: FrameType | None) -> None:
    quit_now(signum, f"gpuhost: {signal_name(signum)} while exiting: quitting now")


_early: list[int] = []


def _remember(signum: int, frame: FrameType | None) -> None:
    _early.append(signum)


def defer_until_started() -> None:
    """The entry point's first call: a SIGINT/SIGTERM before the CLI's handlers are in place is
    remembered (``stop_if_signalled`` acts on it). At the other end, the last exit handler
    (registered first) ignores them: the interpreter's shutdown then puts back the default
    action of every signal it handles (an ignored one stays ignored), and a signal while it
    frees the modules would kill the process without its line and exit status."""
    for each in SIGNALS:
        signal.signal(each, _remember)
    atexit.register(_ignore_signals)


def _ignore_signals() -> None:
    for each in SIGNALS:
        signal.signal(each, signal.SIG_IGN)


def stop_if_signalled() -> None:
    """Raise ``Stopped`` for a signal that came before the command started (a later one quits
    at once, as a second signal does)."""
    if _early:
        signum = _early[0]
        _early.clear()
        _unwind(signum, None)


def exiting() -> None:
    """The command has ended and the process exits: a signal now quits at once, 128 + the
    signal (a handler quitting on a second signal stays)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for each in SIGNALS:
        if signal.getsignal(each) is not _second:
            signal.signal(each, _exiting)


def _unwind(signum: int, frame: FrameType | None) -> None:
    """The first SIGINT/SIGTERM unwinds the command (its finally blocks close connections); a
    second one quits at once instead of interrupting that clean-up with tracebacks."""
    for each in SIGNALS:
        signal.signal(each, _second)
    raise Stopped(signum)


def unwind_on_signals() -> dict[int, Any]:
    """Install the unwinding handlers (main thread only); returns the previous handlers."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {each: signal.signal(each, _unwind) for each in SIGNALS}


def restore(previous: dict[int, Any]) -> None:
    for each, handler in previous.items():
        signal.signal(each, handler)


def _start(work: Callable[[], None]) -> None:
    """Run ``work`` apart from the signal handler. Under gevent's monkey-patching (pyinfra's
    connections) the handler runs in the event loop, where nothing may block, not even starting
    a thread: a greenlet is scheduled instead."""
    from gevent import monkey

    if monkey.is_module_patched("threading"):
        import gevent

        gevent.spawn(work)
    else:
        threading.Thread(target=work, name="gpuhost-stop", daemon=True).start()


class StopOnSignals:
    """Context manager: SIGINT/SIGTERM call ``stop`` once; ``received`` is the first signal.
    The first signal asks the run to stop; a second one ends the process at once (the journal
    then still shows the steps in flight as started, which ``--resume`` also redoes)."""

    def __init__(self, stop: Callable[[], None], what: str = "run") -> None:
        self.stop = stop
        self.what = what
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    @property
    def signal_name(self) -> str:
        return signal_name(self.received or signal.SIGINT)

    def stopped(self, line: str) -> Stopped:
        """The exception that ends the command with ``line`` (raise it)."""
        return Stopped(self.received or signal.SIGINT, line)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is not None:
            quit_now(
                signum,
                f"gpuhost: {signal_name(signum)} again: quitting now; --resume redoes the "
                "steps that were in flight",
            )
            return
        self.received = signum
        sys.stderr.write(
            f"gpuhost: {signal_name(signum)}: stopping the {self.what}: what runs on the hosts is "
            "cut off now (again to quit at once)\n"
        )
        sys.stderr.flush()
        _start(self.stop)

    def __enter__(self: _S) -> _S:
        for signum in SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # a handler put in place while unwinding (quit on a second signal) stays
        restore({n: h for n, h in self._previous.items() if signal.getsignal(n) == self._handle})


class StopAtOperationBoundary(StopOnSignals):
    """Context manager and the deploy runner's ``stop`` hook (``deploy_runner.run_deploy(stop=)``):
    the first SIGINT/SIGTERM of the execute stage makes every ``stop()`` after it True;
    ``received`` is that signal (None: none). ``command`` is what finishes a stopped run."""

    def __init__(self, command: str) -> None:
        super().__init__(lambda: None, command)
        self.command = command
        self.executing = False

    def __call__(self) -> bool:
        """Asked by the runner before each operation of the execute stage."""
        self.executing = True
        return self.received is not None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if not self.executing:  # nothing changed yet: stop now, as every command does
            previous = self._previous.get(signum)
            if callable(previous):
                previous(signum, frame)
                return
            raise Stopped(signum)
        name = signal_name(signum)
        if self.received is not None:
            quit_now(
                signum,
                f"gpuhost: {name} again: quitting now; a command cut off on a host is finished "
                f"by the next run: run {self.command} again",
            )
            return
        self.received = signum
        _say(
            f"gpuhost: {name}: each host stops after the operation it is running (package "
            "installs are never cut off); again to quit at once"
        )

    def stopped_line(self, cut_off: bool) -> str:
        """The last line of a stopped run (stderr, after the per-host lines): every host stopped
        at an operation boundary (``cut_off``), or the signal came after every host had
        finished, so nothing was left undone on any host."""
        if not cut_off:
            return (
                f"gpuhost: {self.signal_name} came after every host had finished: nothing was "
                "cut off"
            )
        verb = "terminated" if self.received == signal.SIGTERM else "interrupted"
        return (
            f"gpuhost: {verb} ({self.signal_name}): every host stopped at an operation boundary; "
            f"run {self.command} again to finish"
        )
