"""The bundle copied to a host: every file under its folder with its SHA-256, so provision
copies only what differs (``operations/offline.copied``)."""

from __future__ import annotations

import shlex

from pyinfra.api import FactBase
from typing_extensions import override


def parse_sha256_listing(lines: list[str]) -> dict[str, str]:
    """``sha256sum`` lines (``<hex>  ./pool/x.deb``) -> {"pool/x.deb": hex}; other lines
    (a folder that does not exist yet prints none) skipped."""
    found = {}
    for line in lines:
        digest, _, name = line.partition("  ")
        if len(digest) == 64 and name.startswith("./"):
            found[name[2:]] = digest.lower()
    return found


class BundleFiles(FactBase[dict[str, str]]):
    """{relative path: sha256} of the regular files under ``path`` ({} when it is absent)."""

    @staticmethod
    @override
    def default() -> dict[str, str]:
        return {}

    @override
    def command(self, path: str) -> str:
        return (
            f"cd {shlex.quote(path)} 2>/dev/null && "
            "find . -type f -exec sha256sum {} + 2>/dev/null || true"
        )

    @override
    def process(self, output: list[str]) -> dict[str, str]:
        return parse_sha256_listing(output)
