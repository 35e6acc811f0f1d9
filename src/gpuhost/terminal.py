"""What a person sees in a terminal: colour only where it helps, progress of fleet runs.

- ``colour_enabled(stream)``: colour only on a terminal, never with ``NO_COLOR`` set
  (https://no-color.org) or ``TERM=dumb``; ``gpuhost.cli.main`` applies the same rule to every
  ``click.echo`` of the CLI; ``style`` colours text for a stream by that rule (the same escape
  codes as ``click.style``: click is the CLI's alone).
- ``FleetProgress``: per-host lines as hosts finish; on a terminal also one status line kept at
  the bottom (``audit: 37/120 done, 2 failing, 0:14 elapsed``), redrawn in place; elsewhere (a
  pipe, a log file, CI) only the plain per-host lines.
- ``wrap_last(prefix, text, width)``: a table row whose last column wraps under itself at the
  terminal's width instead of being cut.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO

from gpuhost.escape import OWN_CR, OWN_ESC, EscapingStream, own_controls

FAILED_COLOURS = {"ok": "green", "warning": "yellow", "error": "red", "unreachable": "magenta"}


def is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed or not a real stream
        return False


def colour_allowed() -> bool:
    """False when the environment asks for no colour (``NO_COLOR`` non-empty, ``TERM=dumb``)."""
    return not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def colour_enabled(stream: IO[str]) -> bool:
    return is_terminal(stream) and colour_allowed()


_FG = {"black": 30, "red": 31, "green": 32, "yellow": 33, "blue": 34, "magenta": 35, "cyan": 36}


def ansi(text: str, fg: str | None = None, bold: bool | None = None) -> str:
    """``text`` in colour ``fg`` (bold, or explicitly not), then reset (as ``click.style``)."""
    start = f"\x1b[{_FG[fg]}m" if fg else ""
    if bold is not None:
        start += "\x1b[1m" if bold else "\x1b[22m"
    return f"{start}{text}\x1b[0m"


def style(text: str, stream: IO[str], fg: str | None = None, bold: bool | None = None) -> str:
    """``text`` coloured (``ansi``) when ``stream`` shows colour, else ``text``."""
    return own_controls(ansi(text, fg, bold)) if colour_enabled(stream) else text


def verdict_word(verdict: str, stream: IO[str], width: int = 0) -> str:
    """A verdict in upper case, padded to ``width``, coloured on a terminal."""
    word = verdict.upper().ljust(width)
    return style(word, stream, fg=FAILED_COLOURS.get(verdict), bold=verdict != "ok")


def terminal_width(default: int = 100) -> int:
    return shutil.get_terminal_size((default, 24)).columns


def wrap_last(prefix: str, text: str, width: int | None = None) -> str:
    """``prefix`` + ``text``; when too long for ``width``, ``text`` wraps onto lines indented
    to where it started (nothing is cut). ``prefix`` must be plain text (no colour codes)."""
    width = width or terminal_width()
    room = width - len(prefix)
    if room < 20 or len(prefix) + len(text) <= width:
        return prefix + text
    lines = textwrap.wrap(text, room, break_on_hyphens=False) or [""]
    return prefix + ("\n" + " " * len(prefix)).join(lines)


def elapsed_text(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class FleetProgress:
    """Progress of a run over ``total`` hosts (thread-safe; hosts finish in any order)."""

    def __init__(
        self,
        total: int,
        label: str,
        stream: IO[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        live: bool | None = None,
        done: int = 0,
        failing: int = 0,
    ) -> None:
        self.total = total
        self.label = label
        self.stream = stream if stream is not None else sys.stdout
        self.clock = clock
        self.live = is_terminal(self.stream) if live is None else live
        self.started = clock()
        self.done = done  # hosts an earlier run already finished (a resumed upgrade)
        self.failing = failing
        self.lock = threading.Lock()
        self._status_shown = False

    def status_text(self) -> str:
        return (
            f"{self.label}: {self.done}/{self.total} done, {self.failing} failing, "
            f"{elapsed_text(self.clock() - self.started)} elapsed"
        )

    def _clear_status(self) -> None:
        if self._status_shown:
            self.stream.write(f"{OWN_CR}{OWN_ESC}[K")  # escape.py: gpuhost's own controls
            self._status_shown = False

    def _draw_status(self) -> None:
        if self.live and self.done < self.total:
            self.stream.write(self.status_text()[: max(terminal_width() - 1, 20)])
            self._status_shown = True
        self.stream.flush()

    def start(self) -> None:
        with self.lock:
            self._draw_status()

    def host_done(self, line: str, failing: bool) -> None:
        """Print a finished host's line (above the status line on a terminal) and count it."""
        with self.lock:
            self._clear_status()
            self.done += 1
            self.failing += 1 if failing else 0
            self.stream.write(line + "\n")
            self._draw_status()

    def line(self, text: str) -> None:
        """Print a line that is not a host's result (a step of a host) above the status line."""
        with self.lock:
            self._clear_status()
            self.stream.write(text + "\n")
            self._draw_status()

    def host_finished(self, failing: bool) -> None:
        """Count a finished host whose line comes later (a deploy prints outcomes at the end)."""
        with self.lock:
            self._clear_status()
            self.done += 1
            self.failing += 1 if failing else 0
            self._draw_status()

    def close(self) -> None:
        with self.lock:
            self._clear_status()
            self.stream.flush()


def reopen_closed_streams() -> None:
    """A standard stream the command was started without (``gpuhost ... >&-``, ``<&-``) is
    /dev/null from here on: its file descriptor too, so no file gpuhost opens takes its number
    (a child process would write its output into that file), and libraries that ask the
    stream (pyinfra's ``sys.stdout.isatty()`` on import) find one. What goes there is dropped;
    the command runs and exits with its status."""
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
        if getattr(sys, name) is None:
            setattr(sys, name, open(fd, mode, closefd=False, encoding="utf-8"))  # noqa: SIM115


def tolerant_streams() -> None:
    """Text the terminal's encoding cannot show (a host named 'gpu-日本' under
    PYTHONIOENCODING=ascii or LANG=C, a lone surrogate from a byte name) is escaped, not a
    UnicodeEncodeError in the middle of a fleet run."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):  # closed or detached: leave it
                reconfigure(errors="backslashreplace")


@contextlib.contextmanager
def escaping_streams() -> Iterator[None]:
    """Everything written to stdout and stderr while a command runs shows control characters
    escaped (a host's OSC title or clipboard sequence, CR, backspace, C1 codes are data;
    ``gpuhost.escape``), whichever writer wrote it."""
    saved = sys.stdout, sys.stderr
    if sys.stdout is not None:  # None: started with stdout closed (click.echo then drops text)
        sys.stdout = EscapingStream(sys.stdout, "standard output")
    if sys.stderr is not None:
        sys.stderr = EscapingStream(sys.stderr, "standard error")
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            if isinstance(stream, EscapingStream):
                with contextlib.suppress(OSError):  # the error that ends the command is said
                    stream.release()
        sys.stdout, sys.stderr = saved


def quiet_stream(stream: object) -> None:
    """Point a stream that failed at /dev/null, so that Python's flush at exit does not print
    a second error about it."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        fd = stream.fileno()  # type: ignore[attr-defined]
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
