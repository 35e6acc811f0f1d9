"""Keys and served manifests gpuhost reads for a host are bounded, and a path that is no file
never blocks. Before, ``gpuhost_cuda_repo_key: /dev/zero`` (or a link to it) read until memory ran
out (MemoryError, a traceback), a FIFO blocked the run for ever, and a server answering a
bundle's key or manifest.json with an endless body was read whole; a key whose SHA-256 differed
reached ``gpuhost bundle``'s CLI as pyinfra's OperationError (a traceback, not one line)."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from pyinfra.api import OperationError

from gpuhost.bundle.setting import BundleSetting
from gpuhost.bundle_resolve import Resolved, cuda_source
from gpuhost.deploys import guards, offline
from gpuhost.deploys.spec import package_plan
from gpuhost.errors import ConfigError
from gpuhost.operations import nvidia_repo
from gpuhost.operations.nvidia_repo import MAX_KEY_BYTES, fetch_verified


class _Endless(BaseHTTPRequestHandler):
    """Any path: 200 and zeros until the client stops reading (no length given)."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.end_headers()
        try:
            for _ in range(4096):  # 256 MiB at most: the test's bound, never reached
                self.wfile.write(b"\0" * 65536)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def endless() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Endless)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("kind", ["device", "fifo", "folder", "link to a device"])
def test_a_key_path_that_is_no_file_is_one_line_at_once(tmp_path: Path, kind: str) -> None:
    path = {"device": Path("/dev/zero"), "fifo": tmp_path / "fifo", "folder": tmp_path,
            "link to a device": tmp_path / "key.asc"}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    if kind == "link to a device":
        path.symlink_to("/dev/zero")
    with pytest.raises(OperationError, match=f"^{path}: the key is not a regular file$"):
        fetch_verified(str(path), "a" * 64)


def test_a_key_file_larger_than_any_key_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "key.asc"
    path.write_bytes(b"\0" * (MAX_KEY_BYTES + 1))
    with pytest.raises(OperationError, match=f"more than {MAX_KEY_BYTES}"):
        fetch_verified(str(path), "a" * 64)


def test_an_endless_key_download_stops_at_the_bound(endless: str) -> None:
    with pytest.raises(OperationError, match=f"{endless}/key.gpg: more than 1,048,576 bytes"):
        fetch_verified(f"{endless}/key.gpg", "a" * 64)


def test_an_endless_served_manifest_stops_at_the_bound(endless: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(offline, "MAX_FILE_BYTES", 1024 * 1024)  # the bound, not its size
    with pytest.raises(ConfigError, match="manifest.json: more than 1,048,576 bytes"):
        offline.load_bundle(BundleSetting(url=f"{endless}/b", key_sha256="a" * 64))


def test_a_key_the_inventory_does_not_vouch_for_is_one_gpuhost_line(tmp_path: Path) -> None:
    """gpuhost bundle reads the reference host's repository key through cuda_source."""
    key = tmp_path / "cuda.asc"
    key.write_bytes(b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n")
    data = {"gpuhost_profile": "nvidia-repo-580-cuda12.9", "gpuhost_harden": False,
            "gpuhost_cuda_repo_url": "https://mirror.invalid/rhel9/x86_64/",
            "gpuhost_cuda_repo_key": str(key), "gpuhost_cuda_repo_key_sha256": "0" * 64}
    spec = guards.check_profile("ref1", data, guards.load_profile_table())
    plan = package_plan(spec, "rocky-9")
    resolved = Resolved(data, spec, plan, offline.required_packages(spec, plan, data))
    with pytest.raises(ConfigError) as exc:
        cuda_source("ref1", resolved)
    digest = hashlib.sha256(key.read_bytes()).hexdigest()
    assert str(exc.value) == (f"host ref1: gpuhost_cuda_repo_key: {key}: SHA-256 is {digest}, "
                              f"expected {'0' * 64} (refusing to install this key)")
    assert nvidia_repo.fetch_verified(str(key), digest) == key.read_bytes()
