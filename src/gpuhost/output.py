"""Writing a command's document: one rule for every ``-o``/``--json``/``--junit``/``--prom``/
``--html`` FILE option.

``-`` is standard output. A file is replaced atomically (``safeio.write_atomic``: a temporary
file in the same folder, then a rename), so a reader never sees half of it and a full disk
leaves the previous file intact; a path that is a symbolic link, a folder or not a regular file
(a device, a FIFO) is refused before any work, never written through or replaced.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gpuhost.errors import ConfigError
from gpuhost.safeio import target_problem, write_atomic


def check_output_path(path: str, option: str) -> None:
    """Refuse, before any work, an output path that cannot be written: its folder missing or
    not a folder, or the path itself a folder, a symbolic link or not a regular file (``-`` is
    standard output and always fine)."""
    if path == "-":
        return
    target = Path(path)
    folder = target.parent
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise ConfigError(f"{option} {path}: cannot write (folder {folder} {what})")
    problem = target_problem(target)
    if problem:
        raise ConfigError(f"{option} {path}: cannot write ({problem})")


def write_output(path: str, text: str, option: str) -> None:
    """Write ``text`` to ``path`` atomically; ``-`` is standard output. The folder is not
    created: a path whose folder does not exist (a default such as docs/matrix.md outside the
    checkout) is one ConfigError naming ``option``, the path and that folder."""
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    check_output_path(path, option)
    target = Path(path)
    try:
        write_atomic(target, text.encode("utf-8", errors="backslashreplace"))
    except OSError as exc:
        raise ConfigError(f"{option} {path}: cannot write ({exc.strerror or exc})") from exc
