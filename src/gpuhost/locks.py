"""One writer at a time: locks in the state folder, as apt's and dpkg's.

``hold(state_dir, names, command)`` takes an exclusive ``fcntl`` lock on
``<state dir>/locks/<name>.lock`` (``lock_file_name``) for each name (``host:<host>`` for every
host a command changes or snapshots, ``run:<run id>`` for an upgrade journal) for as long as the
command runs.
The kernel releases them when the process ends, however it ends (a crash leaves no stale lock).
A lock another process holds is one ``ConfigError`` naming the holder, which each holder writes
into its lock file: pid, user, command line and start time. Locks are never waited for: two
operators learn at once that they collide.
"""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import hashlib
import json
import os
import sys
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpuhost.errors import ConfigError
from gpuhost.safeio import NOFOLLOW
from gpuhost.statedir import checked_folder

LOCKS = "locks"


_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-_")
_MAX_STEM = 200  # file names are at most 255 bytes


def lock_file_name(name: str) -> str:
    """A lock's file name, one per name (injective): every byte of its UTF-8 form outside
    ``[A-Za-z0-9._-]`` as ``%XX``, so a host name cannot reach outside the locks folder and two
    names never share a lock. Past 200 characters: the start, ``~`` (never in a shorter one)
    and the SHA-256 of the exact name."""
    safe = "".join(
        chr(b) if b in _SAFE else f"%{b:02X}" for b in name.encode("utf-8", "surrogatepass")
    )
    if len(safe) > _MAX_STEM:
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
        safe = f"{safe[: _MAX_STEM - 65]}~{digest}"
    return f"{safe}.lock"


def holder_text(raw: str) -> str:
    """What a lock file says about its holder, in words (pure)."""
    try:
        info = json.loads(raw)
    except ValueError:
        info = None
    if not isinstance(info, dict):
        return "another gpuhost process (its lock file names no holder)"
    return (
        f"pid {info.get('pid')} (user {info.get('user')}, '{info.get('command')}', "
        f"since {info.get('started')})"
    )


def _me() -> dict[str, Any]:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.geteuid())
    return {
        "pid": os.getpid(),
        "user": user,
        "command": " ".join(["gpuhost", *sys.argv[1:]])[:300],
        "started": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def _take(folder: Path, name: str, what: str) -> int:
    path = folder / lock_file_name(name)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot open lock ({exc.strerror or exc})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 4096, 0).decode("utf-8", "replace")
        os.close(fd)
        raise ConfigError(
            f"{what}: {name.partition(':')[2] or name} is in use by {holder_text(holder)}; "
            f"wait for it to finish (lock {path})"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(_me()) + "\n").encode(), 0)
    return fd


class Lease:
    """Locks held until ``release`` (or until the process ends)."""

    def __init__(self, fds: list[int]) -> None:
        self._fds = fds

    def release(self) -> None:
        fds, self._fds = self._fds, []
        for fd in fds:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)


def acquire(state_dir: Path, names: Iterable[str], what: str) -> Lease:
    """Take the locks ``names`` (in sorted order; all or none); ``what`` names the command in
    the refusal ('upgrade', 'snapshot take'). ConfigError when one is held."""
    folder = checked_folder(state_dir / LOCKS, create=True)
    lease = Lease([])
    try:
        for name in sorted(set(names)):
            lease._fds.append(_take(folder, name, what))
    except BaseException:
        lease.release()
        raise
    return lease


@contextlib.contextmanager
def hold(state_dir: Path, names: Iterable[str], what: str) -> Iterator[None]:
    """``acquire`` for the duration of a block."""
    lease = acquire(state_dir, names, what)
    try:
        yield
    finally:
        lease.release()


def host_locks(hosts: Iterable[str]) -> list[str]:
    return [f"host:{name}" for name in hosts]
