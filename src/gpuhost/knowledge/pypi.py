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

import email.utils
import json
import math
import time
import zlib
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urljoin, urlsplit

import requests

from gpuhost.errors import PackageIndexError
from gpuhost.knowledge import wheelzip
from gpuhost.matrix.wheels import DEFAULT_INDEX, project_url
from gpuhost.redaction import redact_url

__all__ = ["DEFAULT_INDEX", "DirectoryIndex", "HttpIndex", "Index", "project_url", "store"]

_TIMEOUT = (10.0, 60.0)  # connect, read (seconds between two reads)
#: the whole update or sync: every request, retry and wait of one index together (seconds)
DEADLINE_S = 1800.0
#: one answer (a trickling mirror: the read timeout restarts with every byte it sends)
RESPONSE_S = 300.0
#: the most bytes one answer may have (PyPI's torch JSON is a few MB)
MAX_BYTES = 64 * 1024 * 1024
#: the longest ``Retry-After`` honoured; an index asking for more fails the run (one line)
MAX_RETRY_AFTER_S = 60.0
RETRY_STATUS = (429, 500, 502, 503, 504)


def fetch(
    session: requests.Session, url: str, headers: dict[str, str] | None, left: float
) -> tuple[int, Any, bytes]:
    """(status, headers, body) of one GET of ``url``, done within ``min(left, RESPONSE_S)``
    seconds and ``MAX_BYTES`` (PackageIndexError otherwise: a trickling or endless answer);
    a redirect to what is not an http(s) URL is one PackageIndexError line too."""
    allowed = min(left, RESPONSE_S)
    try:
        resp = session.get(url, headers=headers, timeout=_TIMEOUT, stream=True)
    except (requests.ConnectionError, requests.Timeout):
        raise  # retried
    except (requests.RequestException, ValueError) as exc:  # InvalidURL, a bad Location
        raise PackageIndexError(
            f"{redact_url(url)}: the index answered with a redirect gpuhost cannot follow "
            f"({type(exc).__name__}: {redact_url(str(exc))[:200]}); nothing was changed"
        ) from None
    with resp:
        status = resp.status_code
        if status not in (200, 206):  # an error page is not read (nor retried, nor kept)
            return status, resp.headers, b""
        return status, resp.headers, _body(resp, url, allowed)


def _body(resp: requests.Response, url: str, allowed: float) -> bytes:
    until = time.monotonic() + allowed
    size = resp.headers.get("Content-Length", "")
    if size.isdigit() and int(size) > MAX_BYTES:
        raise PackageIndexError(
            f"{redact_url(url)}: the answer is {int(size)} bytes, more than gpuhost reads "
            f"({MAX_BYTES}); nothing was changed"
        )
    raw = resp.raw
    read = raw.read1 if hasattr(raw, "read1") else raw.read  # read1: as soon as bytes come
    body = bytearray()
    while True:
        if time.monotonic() > until:
            raise PackageIndexError(
                f"{redact_url(url)}: the answer did not arrive within "
                f"{allowed:g} s ({len(body)} bytes so far: a stalled or "
                "trickling index); nothing was changed"
            )
        try:
            chunk = read(65536, decode_content=True)
        except (requests.RequestException, OSError, ValueError) as exc:
            raise requests.ConnectionError(str(exc)) from None
        except Exception as exc:  # urllib3's ProtocolError, ReadTimeoutError, DecodeError
            raise requests.ConnectionError(f"{type(exc).__name__}: {exc}") from None
        if not chunk:
            return bytes(body)
        body += chunk
        if len(body) > MAX_BYTES:
            raise PackageIndexError(
                f"{redact_url(url)}: the answer is more than {MAX_BYTES} bytes, more than "
                "gpuhost reads; nothing was changed"
            )


def retry_after(url: str, status: int, value: str | None, attempt: int) -> float:
    """Seconds to wait before retrying an HTTP ``status`` answer: its ``Retry-After`` (seconds
    or an HTTP date) when given, else 1, 2, 4 s; PackageIndexError when the index asks for
    more than ``MAX_RETRY_AFTER_S``."""
    if not value:
        return float(2**attempt)
    seconds: float | None
    try:
        seconds = float(value.strip())
    except ValueError:
        when = email.utils.parsedate_to_datetime(value) if _is_http_date(value) else None
        seconds = None if when is None else when.timestamp() - time.time()
    if seconds is None or not math.isfinite(seconds):
        return float(2**attempt)
    if seconds > MAX_RETRY_AFTER_S:
        raise PackageIndexError(
            f"{redact_url(url)}: the index answered HTTP {status} and asks to retry in "
            f"{value.strip()[:40]} (Retry-After), more than gpuhost waits "
            f"({MAX_RETRY_AFTER_S:g} s); nothing was changed, try again later"
        )
    return max(seconds, 0.0)


def _is_http_date(value: str) -> bool:
    try:
        email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return False
    return True


def _charset(headers: Any) -> str:
    content_type = str(headers.get("Content-Type", ""))
    for part in content_type.split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.lower() == "charset" and value.strip('"'):
            charset = value.strip('"')
            try:
                "".encode(charset)
            except LookupError:
                return "utf-8"
            return charset
    return "utf-8"


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
    # the host (and port), never the user information: no password in a recorded file's path
    host = parts.netloc.rpartition("@")[2]
    rel = (host + parts.path).strip("/")
    if not rel or ".." in rel.split("/"):
        raise PackageIndexError(f"{url}: not a URL that can be stored under {root}")
    # a folder's index page (NVIDIA's redist listing) beside the files it lists
    return root / rel / "index.html" if parts.path.endswith("/") else root / rel


def store(root: Path, url: str, text: str) -> Path:
    """Write one recorded answer where :class:`DirectoryIndex` reads it."""
    path = _stored_path(root, url)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(redact_url(text), encoding="utf-8")
    except OSError as exc:
        raise PackageIndexError(f"{path}: cannot write ({exc.strerror})") from exc
    return path


class HttpIndex:
    """The live index over HTTPS: every request bounded (``_TIMEOUT`` between reads,
    ``RESPONSE_S`` and ``MAX_BYTES`` per answer, ``DEADLINE_S`` for everything this index
    does), retried on a lost connection or HTTP 429/5xx (``retries`` times, ``Retry-After``
    honoured up to ``MAX_RETRY_AFTER_S``), and every failure one PackageIndexError line."""

    def __init__(
        self, base: str = DEFAULT_INDEX, *, retries: int = 3, deadline_s: float = DEADLINE_S
    ) -> None:
        self.base = base.rstrip("/")
        self.retries = retries
        self.deadline = time.monotonic() + deadline_s
        self.deadline_s = deadline_s
        self.session = requests.Session()
        self.session.headers["User-Agent"] = "gpuhost-matrix-sync"

    def _left(self, url: str) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise PackageIndexError(
                f"{redact_url(url)}: the update's deadline of {self.deadline_s:g} s has passed "
                "(a slow or stalled index); nothing was changed"
            )
        return left

    def _request(self, url: str, headers: dict[str, str] | None = None) -> tuple[int, Any, bytes]:
        """(status, headers, body) of one GET, retried (class doc)."""
        for attempt in range(self.retries + 1):
            try:
                status, got, body = fetch(self.session, url, headers, self._left(url))
            except (requests.ConnectionError, requests.Timeout) as exc:
                if attempt == self.retries:
                    raise PackageIndexError(
                        f"{redact_url(url)}: the package index cannot be reached "
                        f"({type(exc).__name__}); check the network or run from recorded "
                        "responses with --from DIR"
                    ) from None
                self._pause(url, float(2**attempt))
                continue
            if status not in RETRY_STATUS or attempt == self.retries:
                return status, got, body
            self._pause(url, retry_after(url, status, got.get("Retry-After"), attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    def _pause(self, url: str, seconds: float) -> None:
        if seconds >= self._left(url):
            raise PackageIndexError(
                f"{redact_url(url)}: a retry in {seconds:g} s would pass the update's deadline "
                f"of {self.deadline_s:g} s; nothing was changed"
            )
        time.sleep(seconds)

    def _get(self, url: str, missing_ok: bool = False) -> str | None:
        status, headers, body = self._request(url)
        if status == 404 and missing_ok:
            return None
        if status != 200:
            raise PackageIndexError(
                f"{redact_url(url)}: the package index answered HTTP {status} (expected 200)"
            )
        return body.decode(_charset(headers), errors="replace")

    def project(self, name: str) -> dict[str, Any]:
        url = project_url(self.base, name)
        return _json(url, self._get(url) or "")

    def text(self, url: str) -> str | None:
        return self._get(url, missing_ok=True)

    def _range(self, url: str, header: str) -> tuple[bytes, int] | None:
        """(bytes, file size) of one ``Range`` request; None on HTTP 404."""
        status, headers, body = self._request(url, {"Range": header})
        if status == 404:
            return None
        total = headers.get("Content-Range", "").rpartition("/")[2]
        if status != 206 or not total.isdigit():
            raise PackageIndexError(
                f"{redact_url(url)}: answered HTTP {status} to a byte range request "
                "(expected 206 with a Content-Range); its metadata cannot be read"
            )
        return body, int(total)

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
