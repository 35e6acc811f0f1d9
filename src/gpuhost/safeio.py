"""Files on the controller, read and replaced safely.

* ``read_regular``: a file opened without following a symbolic link (``O_NOFOLLOW``) and without
  blocking (``O_NONBLOCK``: a FIFO named like a state file never hangs a command), then refused
  unless it is a regular file (and, for state, owned by this user or root and writable by no one
  else);
* ``write_atomic``: a temporary file made in the target's own folder (``mkstemp``: ``O_EXCL``,
  never through a planted link), written, flushed to disk, then renamed over the target
  (``os.replace``: a symbolic link at the target is replaced, never followed); a failure (a full
  disk) leaves the previous file as it was and no temporary file behind;
* ``open_new``: a log file created or truncated without following a symbolic link.

Every problem is a ``ConfigError`` of one line naming the path.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import TextIO, cast

from gpuhost.errors import ConfigError

_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def trusted_owner(uid: int) -> bool:
    """Whether a file or folder owned by ``uid`` may hold state this process acts on: its own,
    or root's (OpenSSH's StrictModes rule)."""
    return uid in (os.geteuid(), 0)


def owner_problem(info: os.stat_result) -> str | None:
    """Why state with this ``stat`` may have been changed by someone else, or None."""
    if not trusted_owner(info.st_uid):
        return f"owned by uid {info.st_uid}, not by uid {os.geteuid()} (this user) or root"
    if info.st_mode & 0o022:
        who = (
            "group and world"
            if info.st_mode & 0o022 == 0o022
            else ("world" if info.st_mode & 0o002 else "group")
        )
        return f"{who}-writable (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


def read_regular(
    path: Path, what: str, follow: bool = True, owned: bool = False, limit: int | None = None
) -> bytes:
    """The bytes of ``path``, a regular file. ``follow=False``: a symbolic link is refused;
    ``owned``: a file another user owns or may write is refused (state gpuhost acts on);
    ``limit``: a file of more bytes is refused unread (bounded work for a planted file)."""
    flags = _READ_FLAGS | (0 if follow else NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise ConfigError(
                f"{path}: {what} is a symbolic link; refusing to follow it (expected a file)"
            ) from None
        raise ConfigError(f"{path}: cannot read {what}: {exc.strerror}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):  # before fdopen, which raises for a folder
        os.close(fd)
        raise ConfigError(f"{path}: {what} is not a regular file")
    with os.fdopen(fd, "rb") as handle:
        problem = owner_problem(info) if owned else None
        if problem:
            raise ConfigError(
                f"{path}: {what} is {problem}; refusing to use it (fix: remove it, or "
                f"chown {os.geteuid()} and chmod go-w it if it is yours)"
            )
        if limit is not None and info.st_size > limit:
            raise ConfigError(f"{path}: {what} is {info.st_size} bytes, more than {limit}")
        os.set_blocking(fd, True)
        try:
            data = handle.read() if limit is None else handle.read(limit + 1)
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read {what}: {exc.strerror}") from None
        if limit is not None and len(data) > limit:  # grew while it was read
            raise ConfigError(f"{path}: {what} is more than {limit} bytes")
        return data


def target_problem(path: Path) -> str | None:
    """Why ``path`` cannot be replaced by a new file: a symbolic link, a folder, or something
    other than a regular file (a device such as /dev/full, a FIFO, a socket); None if fine."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return exc.strerror or str(exc)
    if stat.S_ISLNK(info.st_mode):
        return "it is a symbolic link; give the file's real path"
    if stat.S_ISDIR(info.st_mode):
        return "it is a folder; expected a file path"
    if not stat.S_ISREG(info.st_mode):
        return "it is not a regular file (a device, FIFO or socket)"
    return None


def _default_mode() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def write_atomic(path: Path, data: bytes, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` atomically (see the module doc). ``mode`` defaults to
    what a new file gets under the umask. Raises OSError (the caller names the option)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), _default_mode() if mode is None else mode)
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_folder(path.parent)


def fsync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def open_new(path: Path, mode: int = 0o600) -> TextIO:
    """``path`` created or truncated for writing text, never through a symbolic link."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | NOFOLLOW | os.O_CLOEXEC, mode)
    return cast(TextIO, os.fdopen(fd, "w", encoding="utf-8", errors="replace"))
