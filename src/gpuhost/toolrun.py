"""Running an external tool with a deadline that holds (srun, mpirun, scontrol, kubectl, dcgmi,
a provider's command, the local probe): ``run(argv, timeout)``.

``subprocess.run(timeout=...)`` kills only the process it started, then waits for the end of its
output pipes; a launcher's children (srun's steps, mpirun's ranks, a shell's commands) still hold
them, so the caller waits for as long as they live. Here the tool starts in a session of its own
(``start_new_session``: its own process group, which everything it starts joins unless it leaves
on purpose), and:

* at ``timeout`` the whole group gets SIGTERM (srun cancels its step and gives back the
  allocation), ``GRACE_S`` later SIGKILL; the output read so far is returned, ``timed_out``;
* when the tool itself has ended, its pipes are read at most ``LINGER_S`` longer: a process
  still holding them (a daemon it left behind, one that left the group) cannot keep the caller
  waiting, and what is left of the group is killed;
* at most ``max_output`` bytes of each stream are kept (a tool printing without end costs
  memory no more than that); the rest is read and dropped.

The group is signalled only while its leader is not yet reaped, so its id cannot belong to
another process group then. ``input`` is written to the tool's stdin (else stdin is /dev/null).
A tool that cannot start raises OSError (the caller says which option or tool it was).

.. code:: python

    result = run(["scontrol", "show", "node", "n1"], timeout=10)
    result.returncode, result.stdout, result.timed_out
"""

from __future__ import annotations

import contextlib
import math
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

GRACE_S = 5.0  # from SIGTERM to SIGKILL of the group
LINGER_S = 2.0  # the tool has ended: how long its pipes are still read
MAX_OUTPUT = 16 * 1024 * 1024  # bytes kept of each stream
_CHUNK = 65536


@dataclass(frozen=True)
class ToolResult:
    """What one run gave: the exit status (negative: ended by that signal; the timeout's kill
    included), stdout and stderr (stderr is empty when merged into stdout), and whether the
    deadline ended it."""

    returncode: int
    stdout: bytes
    stderr: bytes
    timed_out: bool = False

    def text(self, stream: bytes | None = None) -> str:
        """``stream`` (default stdout) decoded, undecodable bytes replaced."""
        return (self.stdout if stream is None else stream).decode("utf-8", errors="replace")


class _Pipes:
    """The tool's pipes read (and its input written) without blocking, each capped; stderr's
    whole lines handed to ``on_line`` as they come, when given."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        data: bytes | None,
        cap: int,
        on_line: Callable[[str], None] | None = None,
    ) -> None:
        self.selector = selectors.DefaultSelector()
        self.kept: dict[int, bytearray] = {}
        self.cap = cap
        self.data = memoryview(data or b"")
        self.on_line = on_line
        self.partial = b""
        self.line_fd = proc.stderr.fileno() if proc.stderr is not None and on_line else None
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                os.set_blocking(stream.fileno(), False)
                self.kept[stream.fileno()] = bytearray()
                self.selector.register(stream, selectors.EVENT_READ)
        if proc.stdin is not None:
            os.set_blocking(proc.stdin.fileno(), False)
            self.selector.register(proc.stdin, selectors.EVENT_WRITE)

    @property
    def open(self) -> bool:
        return bool(self.selector.get_map())

    def _lines(self, chunk: bytes) -> None:
        assert self.on_line is not None
        text = self.partial + chunk
        *whole, self.partial = text.split(b"\n") if chunk else [text, b""]
        self.partial = self.partial[-_CHUNK:]  # a line without end costs no more than this
        for line in whole:
            if line:
                self.on_line(line.decode("utf-8", errors="replace"))

    def pump(self, wait: float) -> None:
        for key, _ in self.selector.select(max(wait, 0.0)):
            fd = key.fd
            try:
                if fd in self.kept:
                    chunk = os.read(fd, _CHUNK)
                    room = self.cap - len(self.kept[fd])
                    self.kept[fd] += chunk[: max(room, 0)]
                    if fd == self.line_fd:
                        self._lines(chunk)
                    done = not chunk
                else:
                    sent = os.write(fd, self.data[:_CHUNK])
                    self.data = self.data[sent:]
                    done = not self.data
            except BlockingIOError:
                continue
            except OSError:  # EPIPE: the tool closed its stdin; EIO and the like: over
                done = True
            if done:
                self.selector.unregister(key.fileobj)
                key.fileobj.close()  # type: ignore[union-attr]

    def close(self) -> None:
        for key in list(self.selector.get_map().values()):
            self.selector.unregister(key.fileobj)
            with contextlib.suppress(OSError):
                key.fileobj.close()  # type: ignore[union-attr]
        self.selector.close()


def _ended(pid: int) -> bool:
    """Whether the process has ended, without reaping it (its group id stays its own)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


#: ``stdout=`` of :class:`Tool`: kept and returned (the default), or this process's own
CAPTURE = subprocess.PIPE
INHERIT = None


class Tool:
    """One external tool started now in a process group of its own (the module doc);
    ``finish`` waits for it under a deadline and returns its :class:`ToolResult`. Another
    thread may ``send`` it a signal meanwhile (a stop asked for): the group, and only while the tool
    is not yet reaped.

    ``stdout``: :data:`CAPTURE`, :data:`INHERIT` or an open file (then stderr goes there too
    when ``merge_stderr``); ``on_stderr_line``: stderr's lines as they come (stderr is still
    returned); ``own_group=False``: the tool stays in gpuhost's process group (a terminal's
    Ctrl-C reaches both: ``gpuhost check``'s pytest) and signals reach the tool alone."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,  # noqa: A002 (subprocess's name)
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdout: int | IO[Any] | None = CAPTURE,
        merge_stderr: bool = False,
        max_output: int = MAX_OUTPUT,
        on_stderr_line: Callable[[str], None] | None = None,
        own_group: bool = True,
    ) -> None:
        captured = stdout is CAPTURE
        self.own_group = own_group
        self._lock = threading.Lock()
        self._reaped = False
        self.proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.STDOUT if merge_stderr else (subprocess.PIPE if captured else None),
            env=None if env is None else dict(env),
            cwd=cwd,
            start_new_session=own_group,
        )
        self.pipes = _Pipes(self.proc, input, max_output, on_stderr_line)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def running(self) -> bool:
        """Whether the tool has not ended yet."""
        with self._lock:
            return not self._reaped and not _ended(self.proc.pid)

    def send(self, sig: int) -> None:
        """``sig`` to the tool's group (or the tool alone, not in a group of its own)."""
        with self._lock:
            if self._reaped:
                return
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if self.own_group:
                    os.killpg(self.proc.pid, sig)
                else:
                    os.kill(self.proc.pid, sig)

    def _wait(self, seconds: float) -> None:
        if self.pipes.open:
            self.pipes.pump(seconds)
        else:
            time.sleep(seconds)

    def wait_end(self, seconds: float) -> bool:
        """At most ``seconds`` for the tool to end (its pipes read meanwhile); whether it did."""
        until = time.monotonic() + seconds
        while not _ended(self.proc.pid):
            left = until - time.monotonic()
            if left <= 0:
                return False
            self._wait(min(left, 0.05))
        return True

    def stop(self, grace: float = GRACE_S, first: int = signal.SIGTERM) -> None:
        """``first`` (SIGTERM) to the group, SIGKILL ``grace`` seconds later."""
        self.send(first)
        if not self.wait_end(grace):
            self.send(signal.SIGKILL)

    def _run_out(self, timeout: float | None) -> bool:
        """Wait for the end, its pipes' end (``LINGER_S`` at most) or the deadline: whether
        the deadline came first."""
        deadline = math.inf if timeout is None else time.monotonic() + timeout
        ended_at: float | None = None
        while True:
            now = time.monotonic()
            if ended_at is None and _ended(self.proc.pid):
                ended_at = now
            if ended_at is not None and not self.pipes.open:
                return False
            end = deadline if ended_at is None else min(deadline, ended_at + LINGER_S)
            if now >= end:
                return ended_at is None
            self._wait(min(end - now, 0.05))

    def kill(self) -> None:
        self.send(signal.SIGKILL)

    def finish(
        self,
        timeout: float | None,
        grace: float = GRACE_S,
        unwind: Callable[[Tool], None] | None = None,
    ) -> ToolResult:
        """Wait for the tool at most ``timeout`` seconds (None: no deadline), then SIGTERM and
        ``grace`` seconds later SIGKILL its group. Unwound by an exception (a signal: gpuhost
        stopped), the group is killed at once, or ``unwind(tool)`` decides (it must end it)."""
        timed_out = False
        try:
            timed_out = self._run_out(timeout)
            if timed_out:
                self.stop(grace)
            elif self.own_group:
                self.send(signal.SIGKILL)  # what is left of it holds no pipe of ours
        except BaseException:
            (unwind or Tool.kill)(self)
            raise
        finally:
            kept = dict(self.pipes.kept)
            self.pipes.close()
            self.proc.wait()
            with self._lock:
                self._reaped = True
        streams = list(kept.values())  # stdout first, then stderr (when not merged)
        stdout = bytes(streams[0]) if streams else b""
        stderr = bytes(streams[1]) if len(streams) > 1 else b""
        return ToolResult(self.proc.returncode, stdout, stderr, timed_out)


def run(
    argv: Sequence[str],
    timeout: float,
    *,
    input: bytes | None = None,  # noqa: A002 (subprocess's name)
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    merge_stderr: bool = False,
    max_output: int = MAX_OUTPUT,
) -> ToolResult:
    """Run ``argv`` in a process group of its own, at most ``timeout`` seconds (module doc)."""
    tool = Tool(
        argv, input=input, env=env, cwd=cwd, merge_stderr=merge_stderr, max_output=max_output
    )
    return tool.finish(timeout)


def completed(
    argv: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    **_subprocess_options: object,
) -> subprocess.CompletedProcess[str]:
    """:func:`run` in ``subprocess.run``'s shape, for code written (and tested) against it:
    text output (undecodable bytes replaced), ``subprocess.TimeoutExpired`` at ``timeout``
    (the group killed first), FileNotFoundError for a missing tool. Its other options
    (``capture_output``, ``text``, ``check=False``) are what it does anyway."""
    result = run(argv, timeout, env=env)
    if result.timed_out:
        raise subprocess.TimeoutExpired(list(argv), timeout, result.stdout, result.stderr)
    return subprocess.CompletedProcess(
        list(argv), result.returncode, result.text(), result.text(result.stderr)
    )
