"""A bundle as the host's only apt source for one provision/upgrade run.

``only_source`` puts the bundle directory (``gpuhost_bundle: {path: DIR}``) under ``REPO_DIR``,
file by file where the SHA-256 differs, and writes an apt.conf.d drop-in pointing apt's source
list, source parts and package lists at gpuhost's own files, which name the bundle alone:
the host's sources files are not edited, its package lists not replaced; every apt command of
the run (facts and installs) sees only the bundle. ``restored`` removes the drop-in at the end,
and apt sees the host's own sources again. A run that stops in between leaves the drop-in: the
next run removes it at its end (or ``rm /etc/apt/apt.conf.d/00gpuhost-bundle``).
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Generator, Mapping
from io import BytesIO
from typing import Any

from pyinfra import host
from pyinfra.api import FileUploadCommand, operation
from pyinfra.facts.files import Sha256File

from gpuhost.facts.bundle import BundleFiles
from gpuhost.facts.files import SmallFile
from gpuhost.operations._facts import fact
from gpuhost.operations._files import put_text
from gpuhost.pkgmgr import APT

ROOT = "/var/lib/gpuhost-bundle"
REPO_DIR = f"{ROOT}/repo"
LISTS_DIR = f"{ROOT}/lists"
CONF_DIR = "/etc/gpuhost/bundle"
SOURCES = f"{CONF_DIR}/sources.list"
PARTS_DIR = f"{CONF_DIR}/sources.list.d"
DROPIN = "/etc/apt/apt.conf.d/00gpuhost-bundle"
URL_KEYRING = "/usr/share/keyrings/gpuhost-bundle.gpg"


def render_dropin(direct_host: str | None = None) -> str:
    """The drop-in: apt's sources and lists are gpuhost's for this run (and, for a bundle
    served over HTTP, that server reached without the site's proxy)."""
    lines = [
        "// Written by gpuhost for one provision/upgrade run from an offline bundle; removed at",
        "// its end. While it exists apt reads only the bundle (docs/offline.md).",
        f'Dir::Etc::SourceList "{SOURCES}";',
        f'Dir::Etc::SourceParts "{PARTS_DIR}";',
        f'Dir::State::Lists "{LISTS_DIR}";',
    ]
    if direct_host:
        lines += [
            f'Acquire::http::Proxy::{direct_host} "DIRECT";',
            f'Acquire::https::Proxy::{direct_host} "DIRECT";',
        ]
    return "\n".join(lines) + "\n"


def render_source(uri: str, keyring: str) -> str:
    return (
        "# Written by gpuhost: the offline bundle, the only source while a run uses it\n"
        f"deb [signed-by={keyring}] {uri.rstrip('/')}/ ./\n"
    )


def copy_plan(
    wanted: Mapping[str, str], present: Mapping[str, str]
) -> tuple[list[str], list[str]]:
    """(files to upload, files to remove): pure, on {relative path: sha256}."""
    upload = sorted(name for name, digest in wanted.items() if present.get(name) != digest)
    remove = sorted(name for name in present if name not in wanted)
    return upload, remove


def copy_commands(src: str, files: Mapping[str, str]) -> list[Any]:
    """The commands putting the bundle directory ``src`` (this machine) under ``REPO_DIR``:
    each of ``files`` ({relative path: sha256}, the controller's checked list) uploaded when
    the host's copy differs, files the bundle no longer has removed."""
    present: dict[str, str] = host.get_fact(BundleFiles, path=REPO_DIR)
    upload, remove = copy_plan(files, present)
    commands: list[Any] = []
    if upload:
        folders = {f"{REPO_DIR}/{name}".rsplit("/", 1)[0] for name in upload} | {REPO_DIR}
        commands.append("install -d -m 755 " + " ".join(shlex.quote(f) for f in sorted(folders)))
    for name in upload:
        target = f"{REPO_DIR}/{name}"
        commands.append(FileUploadCommand(f"{src.rstrip('/')}/{name}", target))
        commands.append(f"chmod 644 {shlex.quote(target)}")
    if remove:
        commands.append("rm -f " + " ".join(shlex.quote(f"{REPO_DIR}/{n}") for n in remove))
    return commands


@operation()
def only_source(
    uri: str,
    keyring: str,
    key: bytes | str | None = None,
    direct_host: str | None = None,
    src: str | None = None,
    files: dict[str, str] | None = None,
) -> Generator:
    """The bundle the only apt source: copied from ``src`` (``files``: {relative path:
    sha256}) when given, its ``uri`` (``file:REPO_DIR`` or its http(s) URL) trusted through
    ``keyring`` (``key``: its bytes, uploaded when they differ), the drop-in; ``apt-get
    update`` of the bundle alone after any change, so apt's lists match its files.

    + uri: the bundle's apt URI
    + keyring: the signing key's path on the host (signed-by)
    + key: the key's bytes when gpuhost uploads it (a served bundle)
    + direct_host: the server of a served bundle, reached without the site's proxy
    + src, files: the bundle directory on this machine and its files with their SHA-256
    """
    commands = copy_commands(src, files or {}) if src else []
    data = key.encode() if isinstance(key, str) else key  # an armored key may come as text
    if data is not None and host.get_fact(Sha256File, path=keyring) != _sha256(data):
        commands.append(f"install -d -m 755 {shlex.quote(keyring.rsplit('/', 1)[0])}")
        commands.append(FileUploadCommand(BytesIO(data), keyring))
        commands.append(f"chmod 644 {shlex.quote(keyring)}")
    commands += put_text(SOURCES, render_source(uri, keyring))
    commands += put_text(DROPIN, render_dropin(direct_host))
    if not commands:
        host.noop(f"the bundle is apt's only source ({len(files or {})} files in place)")
        return
    yield f"install -d -m 755 {PARTS_DIR} {LISTS_DIR}/partial"
    yield from commands
    yield APT.refresh()


@operation()
def restored() -> Generator:
    """The host's own apt sources back: the drop-in removed (its lists were never touched).
    Judged when it runs (the drop-in is written earlier in the same run)."""
    if fact(SmallFile, path=DROPIN) is None:
        host.noop("apt reads the host's own sources")
        return
    yield f"rm -f {DROPIN}"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
