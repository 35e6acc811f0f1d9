"""The controller's state folder (``--state-dir``): only its owner may change it.

Snapshots, upgrade journals, locks and logs there decide what gpuhost does to hosts as root, so
before any of it is read or written the folder must be safe, as OpenSSH's StrictModes asks of
``~/.ssh``: the state folder, the folders in it and every folder above it are owned by this user
or root, and none is writable by group or world (a folder above may be world-writable only with
the sticky bit, as ``/tmp``). One rule, ``folder_problem``; one ``ConfigError`` line naming the
folder and the fix. Folders gpuhost creates there are mode 0700.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from gpuhost.errors import ConfigError
from gpuhost.safeio import owner_problem

SUBFOLDERS = ("snapshots", "runs", "logs", "locks", "health", "acceptance")


def folder_problem(folder: Path, above: bool = False) -> str | None:
    """Why ``folder`` could be changed by someone other than this user or root (None if it
    cannot). ``above``: a folder above the state folder, where a sticky bit is enough."""
    try:
        info = os.stat(folder)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be examined ({exc.strerror})"
    if not stat.S_ISDIR(info.st_mode):
        return "not a folder"
    if above and info.st_mode & stat.S_ISVTX:
        info = os.stat_result((info.st_mode & ~0o022, *tuple(info)[1:]))
    return owner_problem(info)


def _refuse(state_dir: Path, folder: Path, problem: str) -> ConfigError:
    if problem.startswith("owned by"):
        fix = f"chown {os.geteuid()} {folder}, or give --state-dir a folder of your own"
    elif problem == "not a folder":
        fix = "give --state-dir a folder"
    else:
        fix = f"chmod go-w {folder}"
    where = (
        f"state folder {folder}" if folder == state_dir else f"state folder {state_dir}: {folder}"
    )
    return ConfigError(f"{where} is {problem}; refusing to use it (fix: {fix})")


def _ancestors(path: Path) -> list[Path]:
    seen: list[Path] = []
    for base in (path.absolute(), path.resolve()):
        for parent in base.parents:
            if parent not in seen:
                seen.append(parent)
    return seen


def unsafe_folder(top: Path, inside: tuple[str, ...] = ()) -> tuple[Path, str] | None:
    """The first folder of ``top``'s that someone other than this user or root could change,
    with why: every folder above ``top`` (a sticky bit enough), ``top`` and the folders
    ``inside`` it that exist; None when all are safe (the StrictModes rule of the module doc,
    also the data folder's: ``datadir``)."""
    for folder in _ancestors(top):
        problem = folder_problem(folder, above=True)
        if problem:
            return folder, problem
    for folder in (top, *(top / name for name in inside)):
        problem = folder_problem(folder)
        if problem:
            return folder, problem
    return None


def check_state_dir(state_dir: Path) -> None:
    """Refuse an unsafe state folder (see the module doc): the folder and the standard folders
    in it where they exist, and every folder above it. A missing folder is fine (it is created
    0700 when first written)."""
    found = unsafe_folder(state_dir, SUBFOLDERS)
    if found:
        raise _refuse(state_dir, *found)


def checked_folder(folder: Path, create: bool = False) -> Path:
    """``folder`` (in the state folder) after the same check; ``create``: made (with missing
    parents) mode 0700 first. One ConfigError line when it cannot be created or is unsafe."""
    if create:
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"state folder {folder}: cannot create it ({exc.strerror or exc}); "
                "give --state-dir a folder you can write"
            ) from None
    problem = folder_problem(folder)
    if problem:
        raise _refuse(folder, folder, problem)
    return folder


def default_state_dir(env: Mapping[str, str], home: Path) -> Path:
    """``$GPUHOST_STATE_DIR``, else ``$XDG_STATE_HOME/gpuhost``, else
    ``<home>/.local/state/gpuhost`` (the XDG base directory default) (pure)."""
    if env.get("GPUHOST_STATE_DIR"):
        return Path(env["GPUHOST_STATE_DIR"])
    xdg = env.get("XDG_STATE_HOME", "")
    if xdg and Path(xdg).is_absolute():  # the spec: a relative value is to be ignored
        return Path(xdg) / "gpuhost"
    return home / ".local" / "state" / "gpuhost"
