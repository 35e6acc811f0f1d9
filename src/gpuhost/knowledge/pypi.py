"""Reading a Python package index for the data sync (``gpuhost matrix sync``): PyPI's JSON API
and PEP 658 core-metadata files (``<wheel url>.metadata``); where an index has none, the
METADATA inside the wheel read with HTTP byte ranges (:mod:`gpuhost.knowledge.wheelzip`).

Two indexes share one small interface (:class:`Index`):

- :class:`HttpIndex` asks the live index over HTTPS (``requests``, retries, timeouts);
- :class:`DirectoryIndex` answers from recorded responses (the tests, or an offline sync), one
  file per URL at ``<dir>/<host>/<path>`` (:func:`store` writes them).

Both raise :class:`gpuhost.errors.PackageIndexError` with the URL and the cause when an answer
cannot be had, so the CLI prints one line instead of a traceback.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urljoin, urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from gpuhost.errors import PackageIndexError
from gpuhost.knowledge import wheelzip
from gpuhost.matrix.wheels import DEFAULT_INDEX, project_url

__all__ = ["DEFAULT_INDEX", "DirectoryIndex", "HttpIndex", "Index", "project_url", "store"]

_TIMEOUT = (10.0, 60.0)  # connect, read (seconds)


class Index(Protocol):
    """Where project JSON and core metadata come from."""

    base: str

    def project(self, name: str) -> dict[str, Any]:
        """The JSON API answer for ``name`` (``<base>/pypi/<name>/json``)."""

    def text(self, url: str) -> str | None:
        """A text document (a wheel's ``.metadata``) by absolute URL; None when the index does
        not have it (HTTP 404: not every wheel's core metadata is published)."""

    def wheel_metadata(self, url: str) -> str | None:
        """The METADATA inside the wheel at ``url``, read with byte ranges (no PEP 658 file);
        None when the wheel is not there."""


def file_url(project_json_url: str, url: str) -> str:
    """A file URL from the JSON API made absolute (mirrors answer with relative ones)."""
    return urljoin(project_json_url, url)


def _stored_path(root: Path, url: str) -> Path:
    parts = urlsplit(url)
    rel = (parts.netloc + parts.path).strip("/")
    if not rel or ".." in rel.split("/"):
        raise PackageIndexError(f"{url}: not a URL that can be stored under {root}")
    # a folder's index page (NVIDIA's redist listing) beside the files it lists
    return root / rel / "index.html" if parts.path.endswith("/") else root / rel


def store(root: Path, url: str, text: str) -> Path:
    """Write one recorded answer where :class:`DirectoryIndex` reads it."""
    path = _stored_path(root, url)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise PackageIndexError(f"{path}: cannot write ({exc.strerror})") from exc
    return path


class HttpIndex:
    """The live index over HTTPS."""

    def __init__(self, base: str = DEFAULT_INDEX, *, retries: int = 3) -> None:
        self.base = base.rstrip("/")
        self.session = requests.Session()
        retry = Retry(
            total=retries,
            backoff_factor=1.0,
            status_forcelist=(429, 500, 502, 503, 504),
            allowed_methods=("GET",),
        )
        self.session.mount("https://", HTTPAdapter(max_retries=retry))
        self.session.mount("http://", HTTPAdapter(max_retries=retry))
        self.session.headers["User-Agent"] = "gpuhost-matrix-sync"

    def _get(self, url: str, missing_ok: bool = False) -> str | None:
        try:
            resp = self.session.get(url, timeout=_TIMEOUT)
        except requests.RequestException as exc:
            cause = type(exc).__name__
            raise PackageIndexError(
                f"{url}: the package index cannot be reached ({cause}); check the network or "
                "run from recorded responses with --from DIR"
            ) from exc
        if resp.status_code == 404 and missing_ok:
            return None
        if resp.status_code != 200:
            raise PackageIndexError(
                f"{url}: the package index answered HTTP {resp.status_code} (expected 200)"
            )
        return resp.text

    def project(self, name: str) -> dict[str, Any]:
        url = project_url(self.base, name)
        return _json(url, self._get(url) or "")

    def text(self, url: str) -> str | None:
        return self._get(url, missing_ok=True)

    def _range(self, url: str, header: str) -> tuple[bytes, int] | None:
        """(bytes, file size) of one ``Range`` request; None on HTTP 404."""
        try:
            resp = self.session.get(url, headers={"Range": header}, timeout=_TIMEOUT)
        except requests.RequestException as exc:
            raise PackageIndexError(
                f"{url}: cannot be reached ({type(exc).__name__}); check the network"
            ) from exc
        if resp.status_code == 404:
            return None
        total = resp.headers.get("Content-Range", "").rpartition("/")[2]
        if resp.status_code != 206 or not total.isdigit():
            raise PackageIndexError(
                f"{url}: answered HTTP {resp.status_code} to a byte range request "
                "(expected 206 with a Content-Range); its metadata cannot be read"
            )
        return resp.content, int(total)

    def wheel_metadata(self, url: str) -> str | None:
        first = self._range(url, f"bytes=-{wheelzip.TAIL}")
        if first is None:
            return None
        tail, size = first

        def read(start: int, length: int) -> bytes:
            if start >= size - len(tail):
                at = start - (size - len(tail))
                return tail[at : at + length]
            got = self._range(url, f"bytes={start}-{start + length - 1}")
            if got is None:
                raise PackageIndexError(f"{url}: disappeared while being read")
            return got[0]

        return _metadata_of(url, read, size)


class DirectoryIndex:
    """Recorded answers: ``<root>/<host>/<path>`` for each URL (see :class:`HttpIndex`)."""

    def __init__(self, root: Path, base: str = DEFAULT_INDEX) -> None:
        self.root = root
        self.base = base.rstrip("/")
        if not root.is_dir():
            raise PackageIndexError(f"{root}: no such directory of recorded index responses")

    def _read(self, url: str, missing_ok: bool = False) -> str | None:
        path = _stored_path(self.root, url)
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError as exc:
            if missing_ok:
                return None
            raise PackageIndexError(
                f"{url}: not recorded under {self.root} (expected {path})"
            ) from exc
        except OSError as exc:
            raise PackageIndexError(f"{path}: cannot read ({exc.strerror})") from exc

    def project(self, name: str) -> dict[str, Any]:
        url = project_url(self.base, name)
        return _json(url, self._read(url) or "")

    def text(self, url: str) -> str | None:
        return self._read(url, missing_ok=True)

    def wheel_metadata(self, url: str) -> str | None:
        path = _stored_path(self.root, url)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise PackageIndexError(f"{path}: cannot read ({exc.strerror})") from exc
        return _metadata_of(url, lambda start, length: data[start : start + length], len(data))


def _metadata_of(url: str, read: wheelzip.Reader, size: int) -> str:
    try:
        return wheelzip.read_metadata(read, size)
    except (ValueError, UnicodeDecodeError, zlib.error) as exc:
        raise PackageIndexError(f"{url}: not a readable wheel ({exc})") from exc


def _json(url: str, text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PackageIndexError(
            f"{url}: not JSON ({exc.msg} at line {exc.lineno}); expected PyPI's JSON API"
        ) from exc
    if not isinstance(data, dict) or not isinstance(data.get("releases"), dict):
        raise PackageIndexError(f"{url}: no 'releases' mapping; expected PyPI's JSON API answer")
    return data


def make_index(from_dir: str | None, index_url: str) -> Index:
    """The recorded answers under ``from_dir`` (``--from``), else the index at ``index_url``."""
    return DirectoryIndex(Path(from_dir), index_url) if from_dir else HttpIndex(index_url)
