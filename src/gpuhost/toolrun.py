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
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

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
    """The tool's pipes read (and its input written) without blocking, each capped."""

    def __init__(self, proc: subprocess.Popen[bytes], data: bytes | None, cap: int) -> None:
        self.selector = selectors.DefaultSelector()
        self.kept: dict[int, bytearray] = {}
        self.cap = cap
        self.data = memoryview(data or b"")
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

    def pump(self, wait: float) -> None:
        for key, _ in self.selector.select(max(wait, 0.0)):
            fd = key.fd
            try:
                if fd in self.kept:
                    chunk = os.read(fd, _CHUNK)
                    room = self.cap - len(self.kept[fd])
                    self.kept[fd] += chunk[: max(room, 0)]
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


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _wait(pipes: _Pipes, seconds: float) -> None:
    if pipes.open:
        pipes.pump(seconds)
    else:
        time.sleep(seconds)


def _stop_group(proc: subprocess.Popen[bytes], pipes: _Pipes) -> None:
    """SIGTERM to the group, SIGKILL ``GRACE_S`` later (the pipes read meanwhile)."""
    _signal_group(proc.pid, signal.SIGTERM)
    until = time.monotonic() + GRACE_S
    while time.monotonic() < until and not _ended(proc.pid):
        _wait(pipes, 0.05)
    _signal_group(proc.pid, signal.SIGKILL)


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
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
        env=None if env is None else dict(env),
        cwd=cwd,
        start_new_session=True,
    )
    pipes = _Pipes(proc, input, max_output)
    deadline = time.monotonic() + timeout
    ended_at: float | None = None
    timed_out = False
    try:
        while True:
            now = time.monotonic()
            if ended_at is None and _ended(proc.pid):
                ended_at = now
            if ended_at is not None and not pipes.open:
                break
            end = deadline if ended_at is None else min(deadline, ended_at + LINGER_S)
            if now >= end:
                timed_out = ended_at is None
                break
            tick = min(end - now, 0.05 if ended_at is None else end - now)
            _wait(pipes, tick)
        if timed_out:
            _stop_group(proc, pipes)
        else:
            _signal_group(proc.pid, signal.SIGKILL)  # what is left of it holds no pipe of ours
    except BaseException:  # a signal (gpuhost stopped): the tool's group goes too
        _signal_group(proc.pid, signal.SIGKILL)
        raise
    finally:
        kept = dict(pipes.kept)
        pipes.close()
        proc.wait()
    streams = list(kept.values())  # stdout first, then stderr (when not merged)
    stdout = bytes(streams[0]) if streams else b""
    stderr = bytes(streams[1]) if len(streams) > 1 else b""
    return ToolResult(proc.returncode, stdout, stderr, timed_out)


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
