"""Small helpers around processes, file locks, mounts, cgroups and network links."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path


class LabError(Exception):
    """A lab operation failed; the message says what and where."""


def run(
    cmd: Sequence[str],
    *,
    check: bool = True,
    input: str | None = None,
    timeout: float = 300,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command, capture its output; on failure raise LabError with its stderr."""
    try:
        proc = subprocess.run(
            list(cmd), input=input, capture_output=True, text=True, timeout=timeout, cwd=cwd
        )
    except FileNotFoundError as exc:
        raise LabError(f"{cmd[0]}: not installed ({exc})") from None
    except subprocess.TimeoutExpired:
        raise LabError(f"{' '.join(cmd)}: no answer after {timeout:.0f} s") from None
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip()[-2000:]
        raise LabError(f"{' '.join(cmd)} failed with exit code {proc.returncode}: {detail}")
    return proc


@contextlib.contextmanager
def file_lock(path: Path, what: str, timeout: float = 900) -> Iterator[None]:
    """Hold an exclusive flock on ``path``; waits at most ``timeout`` seconds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LabError(f"{what}: {path} stayed locked for {timeout:.0f} s") from None
                time.sleep(0.2)
        yield
    finally:
        os.close(fd)


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie counts as gone (and is reaped when it is our child)."""
    if pid <= 0:
        return False
    with contextlib.suppress(ChildProcessError, OSError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def wait_gone(pids: Sequence[int], timeout: float) -> list[int]:
    """Wait until all ``pids`` exited; return those still alive after ``timeout``."""
    deadline = time.monotonic() + timeout
    alive = [p for p in pids if pid_alive(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if pid_alive(p)]
    return alive


def signal_pids(pids: Sequence[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


# ---------------------------------------------------------------- cgroups


def cgroup_roots() -> list[Path]:
    """The cgroup hierarchies systemd-nspawn uses: cgroup2, and name=systemd on hybrid hosts."""
    base = Path("/sys/fs/cgroup")
    if (base / "cgroup.controllers").exists():
        return [base]  # unified hierarchy only
    return [p for p in (base / "unified", base / "systemd") if (p / "cgroup.procs").exists()]


def cgroup_enter(relpath: str) -> None:
    """Move the calling process into ``relpath`` in every hierarchy (creating it)."""
    for root in cgroup_roots():
        path = root / relpath
        path.mkdir(parents=True, exist_ok=True)
        (path / "cgroup.procs").write_text(f"{os.getpid()}\n")


def cgroup_pids(relpath: str) -> list[int]:
    """Every process in the subtree ``relpath`` of any hierarchy."""
    pids: set[int] = set()
    for root in cgroup_roots():
        top = root / relpath
        if not top.is_dir():
            continue
        for dirpath, _dirs, _files in os.walk(top):
            with contextlib.suppress(OSError):
                text = (Path(dirpath) / "cgroup.procs").read_text()
                pids.update(int(x) for x in text.split())
    return sorted(pids)


def cgroup_remove(relpath: str) -> list[str]:
    """rmdir the subtree ``relpath`` bottom-up; return the directories that stayed."""
    left: list[str] = []
    for root in cgroup_roots():
        top = root / relpath
        if not top.is_dir():
            continue
        for dirpath, _dirs, _files in sorted(os.walk(top), key=lambda t: -len(t[0])):
            try:
                os.rmdir(dirpath)
            except OSError:
                left.append(dirpath)
    return left


def cgroup_exists(relpath: str) -> list[str]:
    return [str(root / relpath) for root in cgroup_roots() if (root / relpath).exists()]


# ---------------------------------------------------------------- mounts


def _unescape(field: str) -> str:
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace(
        "\\134", "\\"
    )


def mounts_under(path: Path) -> list[str]:
    """Mount points at or below ``path`` in this mount namespace, deepest first."""
    prefix = str(path).rstrip("/")
    found = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            point = _unescape(line.split()[4])
            if point == prefix or point.startswith(prefix + "/"):
                found.append(point)
    return sorted(set(found), key=lambda p: -p.count("/"))


def fs_type(path: Path) -> str:
    """The file system type of the mount that holds ``path`` ("" when none is found)."""
    target = str(Path(path).resolve())
    best, kind = "", ""
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            left, _, right = line.partition(" - ")
            point = _unescape(left.split()[4])
            inside = target == point or target.startswith(point.rstrip("/") + "/")
            if inside and len(point) >= len(best) and right:
                best, kind = point, right.split()[0]
    return kind


def unmount_all(path: Path) -> None:
    for point in mounts_under(path):
        if run(["umount", point], check=False).returncode != 0:
            run(["umount", "-l", point], check=False)


# ---------------------------------------------------------------- network


def link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def netns_list() -> list[str]:
    with contextlib.suppress(FileNotFoundError):
        return sorted(os.listdir("/run/netns"))
    return []


def links_with_prefix(prefix: str) -> list[str]:
    with contextlib.suppress(FileNotFoundError):
        return sorted(n for n in os.listdir("/sys/class/net") if n.startswith(prefix))
    return []
