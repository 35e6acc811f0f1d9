"""``apt-get install --print-uris`` output: what apt would download, one quoted URI per line
(``'http://deb.debian.org/.../less_590-2_amd64.deb' less_590-2_amd64.deb 132852 SHA256:ab..``).
Pure parser of the reference host's answer."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote

from gpuhost.errors import ParseError

_LINE_RE = re.compile(r"^'(?P<uri>[^']+)' (?P<file>\S+) (?P<size>\d+) (?P<hash>\S*)$")


@dataclass(frozen=True)
class Download:
    uri: str
    filename: str
    size: int
    hash_type: str  # apt's HashSum type: "MD5Sum" (apt 2.6 prints it), "SHA256", ...
    digest: str
    package: str
    version: str
    architecture: str


def _split_filename(filename: str) -> tuple[str, str, str]:
    """``name_version_arch.deb`` (version's epoch ``1%3a`` decoded) -> (name, version, arch)."""
    stem = filename.removesuffix(".deb")
    parts = stem.split("_")
    if len(parts) != 3 or not filename.endswith(".deb"):
        raise ParseError(f"not a package file name: {filename!r} (expected name_version_arch.deb)")
    return parts[0], unquote(parts[1]), parts[2]


def parse_print_uris(text: str) -> list[Download]:
    """Every ``.deb`` download of the output (other lines, such as apt's notes, skipped)."""
    found = []
    for line in text.splitlines():
        match = _LINE_RE.match(line.strip())
        if not match or not match["file"].endswith(".deb"):
            continue
        name, version, arch = _split_filename(match["file"])
        hash_type, _, digest = match["hash"].partition(":")
        found.append(
            Download(
                match["uri"], match["file"], int(match["size"]), hash_type, digest.lower(),
                name, version, arch,
            )
        )
    return found
