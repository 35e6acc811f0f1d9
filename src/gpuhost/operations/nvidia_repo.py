"""NVIDIA's CUDA network repository: its signing key for ``signed-by``, and the source entry.

The key is fetched on the controller (``requests``) or read from a local file, and its SHA-256 is
checked against the value the inventory/profile data gives before anything reaches the host.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Generator
from io import BytesIO
from pathlib import Path

import requests
from pyinfra import host
from pyinfra.api import FileUploadCommand, OperationError, operation
from pyinfra.facts.files import Sha256File

from gpuhost.errors import ConfigError
from gpuhost.operations._files import put_text
from gpuhost.pkgmgr import APT
from gpuhost.safeio import read_regular

KEYRING_DIR = "/usr/share/keyrings"
SOURCES_PATH = "/etc/apt/sources.list.d/gpuhost-cuda.list"
DOWNLOAD_TIMEOUT_S = 30


#: the most bytes of a signing key read (NVIDIA's is about 1.7 KB): a path to /dev/zero or a
#: server sending without end is refused, not read until memory runs out
MAX_KEY_BYTES = 1024 * 1024


def download(url: str, limit: int, proxies: dict[str, str] | None = None) -> bytes:
    """The body of ``url``, at most ``limit`` bytes; requests' errors as they are, a longer
    body an OperationError (read in pieces: never more than ``limit`` held)."""
    with requests.get(url, timeout=DOWNLOAD_TIMEOUT_S, proxies=proxies or None,
                      stream=True) as response:
        response.raise_for_status()
        data = bytearray()
        for chunk in response.iter_content(64 * 1024):
            data += chunk
            if len(data) > limit:
                raise OperationError(f"{url}: more than {limit:,} bytes; expected a small file")
    return bytes(data)


def fetch_verified(src: str, sha256: str, proxies: dict[str, str] | None = None) -> bytes:
    """Bytes of ``src`` (http(s) URL or controller path) whose SHA-256 must equal ``sha256``;
    ``proxies`` ({"http"|"https": URL}, the host's ``gpuhost_proxy``) for a download. A path
    must be a regular file (a FIFO never blocks) of at most ``MAX_KEY_BYTES``."""
    if src.startswith(("http://", "https://")):
        try:
            data = download(src, MAX_KEY_BYTES, proxies)
        except requests.RequestException as exc:
            raise OperationError(f"cannot download {src}: {exc}") from exc
    else:
        try:
            data = read_regular(Path(src), "the key", limit=MAX_KEY_BYTES)
        except ConfigError as exc:
            raise OperationError(str(exc)) from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256.lower():
        raise OperationError(
            f"{src}: SHA-256 is {digest}, expected {sha256.lower()} (refusing to install this key)"
        )
    return data


def keyring_path(data: bytes, name: str = "gpuhost-cuda-archive-keyring") -> str:
    """apt reads armored keys only from ``.asc`` files and binary ones from ``.gpg`` files."""
    suffix = ".asc" if data.lstrip().startswith(b"-----BEGIN PGP") else ".gpg"
    return f"{KEYRING_DIR}/{name}{suffix}"


def render_source(url: str, keyring: str) -> str:
    """A flat-repository line as NVIDIA publishes them (``deb [signed-by=K] URL /``)."""
    return (
        "# Written by gpuhost: NVIDIA CUDA repository (pinned by preferences.d/gpuhost-nvidia)\n"
        f"deb [signed-by={keyring}] {url.rstrip('/')}/ /\n"
    )


APT_UPDATE = APT.refresh()


@operation()
def repository(
    url: str, key_src: str, key_sha256: str, proxies: dict[str, str] | None = None
) -> Generator:
    """The CUDA repository with its key, verified, installed for ``signed-by``; ``apt-get
    update`` right after a change (never when nothing changed).

    + url: repository base, e.g. ``https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64``
    + key_src: URL or controller path of the repository signing key
    + key_sha256: expected SHA-256 of the key file
    + proxies: {"http"|"https": URL} for the key's download (the host's ``gpuhost_proxy``)

    **Example:**

    .. code:: python

        nvidia_repo.repository(url=..., key_src=url + "/3bf863cc.pub", key_sha256="...")
    """
    data = fetch_verified(key_src, key_sha256, proxies)
    keyring = keyring_path(data)
    changes: list = []
    if host.get_fact(Sha256File, path=keyring) != hashlib.sha256(data).hexdigest():
        changes.append(f"install -d -m 755 {KEYRING_DIR}")
        changes.append(FileUploadCommand(BytesIO(data), keyring))
        changes.append(f"chmod 644 {shlex.quote(keyring)}")
    changes += list(put_text(SOURCES_PATH, render_source(url, keyring)))
    if not changes:
        host.noop("CUDA repository and key in place")
        return
    yield from changes
    yield APT_UPDATE  # apt reads the new source now, in this operation, only after a change
