"""Writing a command's document: one rule for every ``-o``/``--json``/``--html`` FILE option."""

from __future__ import annotations

import sys
from pathlib import Path

from gpuhost.errors import ConfigError


def check_output_path(path: str, option: str) -> None:
    """Refuse, before any work, an output path that cannot be written: its folder missing or
    not a folder, or the path itself a folder (``-`` is standard output and always fine)."""
    if path == "-":
        return
    target = Path(path)
    folder = target.parent
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise ConfigError(f"{option} {path}: cannot write (folder {folder} {what})")
    if target.is_dir():
        raise ConfigError(f"{option} {path}: cannot write (it is a folder; expected a file path)")


def write_output(path: str, text: str, option: str) -> None:
    """Write ``text`` to ``path``; ``-`` is standard output. The folder is not created: a path
    whose folder does not exist (a default such as docs/matrix.md outside the checkout) is one
    ConfigError naming ``option``, the path and that folder."""
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    target = Path(path)
    try:
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        folder = target.parent
        why = exc.strerror or str(exc)
        if not folder.is_dir():
            why = f"folder {folder} {'is not a folder' if folder.exists() else 'does not exist'}"
        raise ConfigError(f"{option} {path}: cannot write ({why})") from exc
