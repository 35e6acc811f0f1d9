"""Operating-system shapes of lab hosts: ``tests/lab/lab up N --os KEY`` (default debian-12).

A shape is what a lab host looks like to gpuhost beyond the shared Debian 12 base image: files
written into the host's root when it is created (``/etc/os-release``, apt sources, ...), and the
stand-in repository of NVIDIA's that the lab serves for it (``compute/cuda/repos/<dir>/<arch>``,
signed with the lab's key).  Every shape is built from the one cached base image; no other OS's
archive is reachable here, so whatever is OS-specific is a stand-in under tests/lab/.

Each OS family's shapes live in their own module ``tests/lab/shape_<family>.py`` exporting
``SHAPES`` (a list of ``Shape``); this registry finds them by that name, so adding a family is a
new file and nothing else.
"""

from __future__ import annotations

import importlib
import pkgutil
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from . import aptrepo
from .config import LabConfigError

DEFAULT = "debian-12"

#: sign(folder): writes the folder's InRelease and Release.gpg (aptrepo.signing)
Sign = Callable[[Path], None]


@dataclass(frozen=True)
class Shape:
    """One OS a lab host can look like."""

    key: str  # gpuhost's OS key, e.g. ubuntu-24.04
    summary: str
    #: NVIDIA's repository folder for this OS (compute/cuda/repos/<repo_dir>/<arch>)
    repo_dir: str
    #: the stand-ins of NVIDIA's repository for this OS
    stand_ins: Callable[[], list[aptrepo.StandIn]] = aptrepo.stand_ins
    #: lab state -> {path on the host: content} written at host creation ("" removes the path)
    host_files: Callable[[dict[str, Any]], dict[str, str | bytes]] = field(
        default=lambda state: {})
    #: further repositories of the shape (e.g. a stand-in OS archive), built with the others:
    #: (served root, dpkg architecture, sign) -> nothing
    extra_repos: Callable[[Path, str, Sign], None] | None = None
    #: the lower directory its hosts boot: base image root -> a cached variant of it (None: the
    #: base image itself; shape_rhel adds dnf and rpm to it)
    image: Callable[[Path], Path] | None = None
    #: False: NVIDIA's repository for this OS is not an apt one (build_repos leaves it out) and
    #: ``prepare`` builds the shape's repositories when its first host is created
    apt: bool = True
    #: (lab state, served root) -> what lab.json keeps of them in state["shapes"][key]; its
    #: ``repo_url`` becomes the OS's state["repo_urls"] entry, its ``key_path`` the key
    #: inventories name (toolfiles)
    prepare: Callable[[dict[str, Any], Path], dict[str, Any]] | None = None

    def root(self, base: Path) -> Path:
        """The lower directory of this shape's hosts, given the base image's."""
        return base if self.image is None else self.image(base)

    def apply(self, root: Path, state: dict[str, Any]) -> None:
        """Write this shape's files into a host's root (its overlay, before it boots)."""
        for rel, text in self.host_files(state).items():
            path = root / rel.lstrip("/")
            if path.is_symlink() or (path.exists() and not text):
                path.unlink()
            if not text:
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(text, bytes):
                path.write_bytes(text)
            else:
                path.write_text(text)


DEBIAN_12 = Shape(DEFAULT, "Debian 12 (the base image as it is)", "debian12")


@lru_cache(maxsize=1)
def registry() -> dict[str, Shape]:
    """Every shape: Debian 12 and those of the ``shape_*`` modules next to this one."""
    shapes = {DEFAULT: DEBIAN_12}
    here = Path(__file__).resolve().parent
    for info in sorted(pkgutil.iter_modules([str(here)]), key=lambda m: m.name):
        if info.name.startswith("shape_"):
            module = importlib.import_module(f"{__package__}.{info.name}")
            for shape in module.SHAPES:
                shapes[shape.key] = shape
    return shapes


def get(key: str | None) -> Shape:
    """The shape of ``key`` (None: the default); one clear error for an unknown key."""
    shapes = registry()
    found = shapes.get(key or DEFAULT)
    if found is None:
        raise LabConfigError(f"--os {key!r}: expected one of {', '.join(sorted(shapes))}")
    return found


def build_repos(root: Path, arch: str) -> dict[str, Path]:
    """(Re)build every shape's stand-in repositories under ``root`` (the lab's served folder),
    all signed with one new lab key (``root/<aptrepo.KEY_NAME>.gpg``); returns the flat NVIDIA
    repository folder of each OS key.  About a second per repository."""
    shutil.rmtree(root, ignore_errors=True)
    built: dict[str, Path] = {}
    done_extra: list[object] = []
    with aptrepo.signing(root) as sign:
        for shape in registry().values():
            if not shape.apt:
                continue
            repo = (root / "compute/cuda/repos" / shape.repo_dir
                    / aptrepo.REPO_ARCH_DIR.get(arch, arch))
            if not repo.exists():
                aptrepo.publish_flat(repo, shape.stand_ins(), arch, sign)
            built[shape.key] = repo
            if shape.extra_repos is not None and shape.extra_repos not in done_extra:
                shape.extra_repos(root, arch, sign)
                done_extra.append(shape.extra_repos)
    return built


def prepare(keys: set[str], state: dict[str, Any], served: Path) -> bool:
    """Build the repositories of the shapes ``keys`` that build theirs on first use and this
    lab has not built yet (kept in ``state["shapes"]``); True when ``state`` changed."""
    done = state.setdefault("shapes", {})
    changed = False
    for key in sorted(keys):
        shape = get(key)
        if shape.prepare is None or key in done:
            continue
        done[key] = record = shape.prepare(state, served)
        state.setdefault("repo_urls", {})[key] = record["repo_url"]
        changed = True
    return changed
