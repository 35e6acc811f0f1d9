"""Which operating system a lab host is shaped like: ``lab up N --os KEY`` (default debian-12).

Every shape boots the lab's Debian 12 base image with real systemd and sshd; a shape other than
debian-12 boots a cached variant of that image (its own module builds it) and may add its own
repositories to the lab's http server.  One entry per shape in SHAPES, each shape's code in its
own module:

  debian-12   the base image as it is (tests/lab/image.py, the apt stand-in tests/lab/aptrepo.py)
  rocky-9     Debian's real dnf 4.14 and rpm dressed as Rocky Linux 9 (tests/lab/rocky.py), with
              the signed stand-in RPM repositories of tests/lab/rpmrepo.py
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import LabConfigError

DEFAULT_OS = "debian-12"


@dataclass(frozen=True)
class Shape:
    """What a shape adds to a host of the base image.

    ``root(base)``: the lower directory its hosts boot (a cached image variant built from
    ``base``); ``repos(state, repo_root)``: builds the shape's repositories under the lab's served
    folder once per lab and returns what goes into lab.json; ``host_files(state, host, root)``:
    per-host files written into the host's overlay before it boots."""

    key: str
    root: Callable[[Path], Path]
    repos: Callable[[dict[str, Any], Path], dict[str, Any]] | None = None
    host_files: Callable[[dict[str, Any], dict[str, Any], Path], None] | None = None


def _debian(base: Path) -> Path:
    return base


def _rocky() -> Shape:
    from . import rocky

    return Shape("rocky-9", rocky.ensure_root, rocky.repos, rocky.host_files)


SHAPES: dict[str, Callable[[], Shape]] = {
    DEFAULT_OS: lambda: Shape(DEFAULT_OS, _debian),
    "rocky-9": _rocky,
}


def check_os(key: str | None) -> str:
    """The shape's key; one clear line for an unknown one."""
    key = key or DEFAULT_OS
    if key not in SHAPES:
        raise LabConfigError(f"--os {key!r}: expected one of {', '.join(SHAPES)}")
    return key


def shape(key: str | None) -> Shape:
    return SHAPES[check_os(key)]()


def prepare(keys: set[str], state: dict[str, Any], repo_root: Path) -> bool:
    """Build the repositories of the shapes ``keys`` that this lab does not have yet (recorded
    in ``state["shapes"]``); True when ``state`` changed."""
    done = state.setdefault("shapes", {})
    changed = False
    for key in sorted(keys):
        s = shape(key)
        if key in done or s.repos is None:
            continue
        done[key] = s.repos(state, repo_root)
        changed = True
    return changed
