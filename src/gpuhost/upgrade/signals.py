"""Stopping a fleet run from the terminal: Ctrl-C (SIGINT) or SIGTERM.

The first signal asks the run to stop: ``stop`` is called (off the signal handler, in its own
thread: it may block on connections) and the caller's loop winds down, the steps in flight are
journaled ``interrupted``. A second signal ends the process at once (exit 128 + signal); the
journal then still shows those steps as started, which ``--resume`` also redoes.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


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


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


class StopOnSignals:
    """Context manager: SIGINT/SIGTERM call ``stop`` once; ``received`` is the first signal."""

    def __init__(self, stop: Callable[[], None], what: str = "run") -> None:
        self.stop = stop
        self.what = what
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    @property
    def exit_code(self) -> int:
        return 128 + (self.received or signal.SIGINT)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is not None:
            sys.stderr.write(
                f"gpuhost: {signal_name(signum)} again: quitting now; --resume redoes the "
                "steps that were in flight\n"
            )
            sys.stderr.flush()
            os._exit(128 + signum)
        self.received = signum
        sys.stderr.write(
            f"gpuhost: {signal_name(signum)}: stopping the {self.what}: what runs on the hosts is "
            "cut off now (again to quit at once)\n"
        )
        sys.stderr.flush()
        _start(self.stop)

    def __enter__(self) -> StopOnSignals:
        for signum in SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
