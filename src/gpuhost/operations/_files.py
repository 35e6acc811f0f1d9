"""Helpers for operations that manage whole small text files (units, scripts, config)."""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Iterator
from io import StringIO

from pyinfra.api import FileUploadCommand, StringCommand

from gpuhost.facts.files import SmallFile
from gpuhost.operations._facts import fact


def same_text(current: list[str] | None, content: str) -> bool:
    """True when the remote lines (``SmallFile``) equal ``content`` (trailing newlines aside)."""
    return current is not None and "\n".join(current).rstrip("\n") == content.rstrip("\n")


def put_text(
    path: str, content: str, mode: str = "644"
) -> Iterator[StringCommand | FileUploadCommand]:
    """Yield the commands writing ``content`` to ``path`` when it differs; nothing otherwise."""
    if same_text(fact(SmallFile, path=path), content):
        return
    yield StringCommand(f"install -d -m 755 {shlex.quote(posixpath.dirname(path))}")
    yield FileUploadCommand(StringIO(content), path)
    yield StringCommand(f"chmod {mode} {shlex.quote(path)}")
