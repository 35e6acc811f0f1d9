"""The host's Debian archive entries carry the components a profile installs from (non-free,
non-free-firmware, contrib), in both source formats apt reads:

* one-line ``deb [options] URI SUITE COMPONENT...`` in ``/etc/apt/sources.list`` and
  ``/etc/apt/sources.list.d/*.list``;
* deb822 stanzas (``Types:``/``URIs:``/``Suites:``/``Components:``) in ``sources.list.d/*.sources``.

An entry is the Debian archive's when it is enabled, of type ``deb``, lists ``main`` and every suite
is the release's codename or ``<codename>-<something>`` (``bookworm``, ``bookworm-updates``,
``bookworm-security``). Third-party repositories (Docker's ``bookworm stable``, NVIDIA's flat
``/``) never match. Missing components are appended; nothing else in the file changes; the
previous file is kept as ``<file>.gpuhost.bak``.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Generator, Sequence
from io import StringIO
from typing import Any

from pyinfra import host
from pyinfra.api import FileUploadCommand, OperationError, StringCommand, operation
from pyinfra.facts.files import FindFiles
from pyinfra.facts.server import LinuxDistribution

from gpuhost.facts.files import SmallFile
from gpuhost.pkgmgr import APT

SOURCES_LIST = "/etc/apt/sources.list"
SOURCES_DIR = "/etc/apt/sources.list.d"
_FIELD_RE = re.compile(r"^([A-Za-z][A-Za-z0-9-]*):(.*)$")


def _debian_suites(suites: Sequence[str], codename: str) -> bool:
    return bool(suites) and all(s == codename or s.startswith(f"{codename}-") for s in suites)


def _merged(present: Sequence[str], wanted: Sequence[str]) -> list[str]:
    return list(present) + [c for c in wanted if c not in present]


def fix_one_line(text: str, codename: str, components: Sequence[str]) -> tuple[str, int]:
    """(new text, entries that matched) for the one-line format; comments and options kept."""
    out: list[str] = []
    matched = 0
    for line in text.split("\n"):
        body, hash_, comment = line.partition("#")
        tokens = body.split()
        if len(tokens) < 3 or tokens[0] != "deb":
            out.append(line)
            continue
        index = 1
        if tokens[1].startswith("["):  # [arch=amd64 signed-by=...] may hold spaces
            while index < len(tokens) and not tokens[index].endswith("]"):
                index += 1
            index += 1
        rest = tokens[index:]
        if len(rest) < 3 or "main" not in rest[2:] or not _debian_suites([rest[1]], codename):
            out.append(line)
            continue
        matched += 1
        missing = [c for c in components if c not in rest[2:]]
        if not missing:
            out.append(line)
            continue
        new = " ".join(tokens + missing)
        out.append(f"{new} {hash_}{comment}" if hash_ else new)
    return "\n".join(out), matched


def _stanzas(lines: list[str]) -> list[tuple[int, int]]:
    """(start, end) line ranges of the deb822 paragraphs (separated by blank lines)."""
    ranges, start = [], None
    for number, line in enumerate(lines + [""]):
        if line.strip() == "":
            if start is not None:
                ranges.append((start, number))
            start = None
        elif start is None:
            start = number
    return ranges


def fix_deb822(text: str, codename: str, components: Sequence[str]) -> tuple[str, int]:
    """(new text, stanzas that matched) for the deb822 format; other fields and comments kept."""
    lines = text.split("\n")
    matched = 0
    for start, end in _stanzas(lines):
        fields: dict[str, tuple[int, str]] = {}
        for number in range(start, end):
            match = _FIELD_RE.match(lines[number])
            if match and not lines[number].startswith("#"):
                fields[match.group(1).lower()] = (number, match.group(2).strip())
        types = fields.get("types", (0, ""))[1].split()
        suites = fields.get("suites", (0, ""))[1].split()
        enabled = fields.get("enabled", (0, "yes"))[1].lower() not in ("no", "false")
        if "components" not in fields or "deb" not in types or not enabled:
            continue
        number, value = fields["components"]
        present = value.split()
        if "main" not in present or not _debian_suites(suites, codename):
            continue
        matched += 1
        if any(c not in present for c in components):
            lines[number] = "Components: " + " ".join(_merged(present, components))
    return "\n".join(lines), matched


def fix_sources(
    files: dict[str, str], codename: str, components: Sequence[str]
) -> tuple[dict[str, str], int]:
    """({path: new text} of the files that change, Debian entries found in all files)."""
    changed: dict[str, str] = {}
    found = 0
    for path, text in files.items():
        fix = fix_deb822 if path.endswith(".sources") else fix_one_line
        new, matched = fix(text, codename, components)
        found += matched
        if new != text:
            changed[path] = new
    return changed, found


def source_files() -> dict[str, str]:
    """{path: text} of the host's apt sources (sources.list, sources.list.d/*.list|*.sources)."""
    paths = [SOURCES_LIST] + sorted(
        p
        for p in host.get_fact(FindFiles, path=SOURCES_DIR) or []
        if posixpath.dirname(p) == SOURCES_DIR and p.endswith((".list", ".sources"))
    )
    files = {}
    for path in paths:
        lines = host.get_fact(SmallFile, path=path)
        if lines is not None:
            files[path] = "\n".join(lines) + "\n"
    return files


APT_UPDATE = APT.refresh()


@operation()
def components(components: list[str]) -> Generator:
    """Append ``components`` to every Debian archive entry of the host's release (backup first),
    then ``apt-get update`` (only after a change); fails when the host has no enabled Debian
    archive entry for its release at all."""
    distro: Any = host.get_fact(LinuxDistribution)
    codename = str((distro.get("release_meta") or {}).get("VERSION_CODENAME") or "")
    if not codename:
        raise OperationError("cannot tell the Debian release: no VERSION_CODENAME in os-release")
    files = source_files()
    changed, found = fix_sources(files, codename, components)
    if not found:
        raise OperationError(
            f"no enabled Debian archive entry for {codename} (deb ... {codename} main) in "
            f"{SOURCES_LIST} or {SOURCES_DIR}/*.list|*.sources: add one, then run again"
        )
    if not changed:
        host.noop(f"Debian sources for {codename} carry {' '.join(components)}")
        return
    for path, text in changed.items():
        quoted = shlex.quote(path)
        yield StringCommand(f"cp -p {quoted} {quoted}.gpuhost.bak")
        yield FileUploadCommand(StringIO(text), path)
        yield StringCommand(f"chmod 644 {quoted}")
    yield StringCommand(APT_UPDATE)  # only after a change: apt sees the new components now
