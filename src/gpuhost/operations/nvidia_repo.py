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

from gpuhost.operations._files import put_text
from gpuhost.pkgmgr import APT

KEYRING_DIR = "/usr/share/keyrings"
SOURCES_PATH = "/etc/apt/sources.list.d/gpuhost-cuda.list"
DOWNLOAD_TIMEOUT_S = 30


def fetch_verified(src: str, sha256: str, proxies: dict[str, str] | None = None) -> bytes:
    """Bytes of ``src`` (http(s) URL or controller path) whose SHA-256 must equal ``sha256``;
    ``proxies`` ({"http"|"https": URL}, the host's ``gpuhost_proxy``) for a download."""
    if src.startswith(("http://", "https://")):
        try:
            response = requests.get(src, timeout=DOWNLOAD_TIMEOUT_S, proxies=proxies or None)
            response.raise_for_status()
        except requests.RequestException as exc:
            raise OperationError(f"cannot download {src}: {exc}") from exc
        data = response.content
    else:
        try:
            data = Path(src).read_bytes()
        except OSError as exc:
            raise OperationError(f"cannot read {src}: {exc.strerror}") from exc
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
