"""Keep unattended-upgrades away from the pinned NVIDIA stack.

Holds and pins already stop apt from moving these packages; this drop-in also tells
unattended-upgrades not to try (no failed attempts in its log, no partial upgrade if a hold is
ever lifted by hand). ``Unattended-Upgrade::Package-Blacklist`` is a list, and apt appends the
lists of every file in ``/etc/apt/apt.conf.d/``, so Debian's own ``50unattended-upgrades`` stays
as it is. Entries are regular expressions matched at the start of a package name; each is
anchored to one exact name.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Sequence

from pyinfra import host
from pyinfra.api import operation

from gpuhost.operations._files import put_text

BLACKLIST_FILE = "/etc/apt/apt.conf.d/51gpuhost-unattended-upgrades"
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9.+-]*$")


def _literal(name: str) -> str:
    """A regular expression matching ``name`` literally; ``.`` and ``+`` as ``[.]``/``[+]``
    (apt.conf strings and backslashes do not mix)."""
    return re.sub(r"([.+])", r"[\1]", name)


NVIDIA_HEADER = (
    "// Written by gpuhost: NVIDIA packages pinned by the provision profile are never\n"
    "// upgraded by unattended-upgrades (gpuhost upgrade moves them, with a snapshot).\n"
)


def render_blacklist(packages: Sequence[str], header: str = NVIDIA_HEADER) -> str:
    """The apt.conf drop-in for ``packages`` (sorted, deduplicated) under ``header`` (comment
    lines); ValueError for a name that is not a Debian package name."""
    names = sorted(set(packages))
    bad = [n for n in names if not _NAME_RE.match(n)]
    if bad:
        raise ValueError(f"not Debian package names: {', '.join(bad)}")
    entries = "".join(f'    "^{_literal(n)}$";\n' for n in names)
    return header + "Unattended-Upgrade::Package-Blacklist {\n" + entries + "};\n"


@operation()
def excluded(
    packages: list[str],
    path: str = BLACKLIST_FILE,
    what: str = "NVIDIA packages",
    header: str = NVIDIA_HEADER,
) -> Generator:
    """Write the blacklist drop-in when its content differs (written even before
    unattended-upgrades is installed, so installing it later changes nothing).

    + packages: exact package names
    + path: the drop-in (one per kind of package: precompiled.kernel_excluded writes its own)
    + what: how the no-change note names them
    + header: the drop-in's comment lines
    """
    commands = list(put_text(path, render_blacklist(packages, header)))
    if not commands:
        host.noop(f"{what} already excluded from unattended-upgrades")
        return
    yield from commands
