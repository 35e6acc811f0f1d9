"""``SmallFile``: a small configuration file of a host, read safely (pyinfra's ``SmallFile``
runs ``cat``, which waits for ever on a FIFO and reads a link to /dev/zero without end)."""

from __future__ import annotations

import shlex

from pyinfra.api import FactBase
from typing_extensions import override

from gpuhost.parsers.packages import refuse_unread
from gpuhost.pkgmgr.base import small_file_command

MISSING = "##gpuhost-missing"


class SmallFile(FactBase[list[str] | None]):
    """The lines of the file at ``path``, as ``SmallFile`` gives them; None when there is
    none. A FIFO, a device, a folder or a file over ``SMALL_FILE_BYTES`` is never read: a
    ParseError naming it (the host fails with that one line), never "absent" or "empty"."""

    @override
    def command(self, path: str) -> str:
        f = shlex.quote(path)
        return f"{{ [ -e {f} ] || [ -L {f} ] || echo '{MISSING}'; }}; {small_file_command(path)}"

    @override
    def process(self, output: list[str]) -> list[str] | None:
        if output[:1] == [MISSING]:
            return None
        refuse_unread("\n".join(output), "file")
        return output
