"""A mirror that misbehaves never hangs ``gpuhost data update`` / ``matrix sync`` and never
leaks its password: each answer has a deadline and a size cap (a mirror trickling one byte at a
time: the read timeout restarts with every byte), the whole run a deadline, ``Retry-After`` is
honoured up to a bound, a redirect gpuhost cannot follow is one line, and the data in use is
kept. Every server here is on 127.0.0.1 (port 0); the limits are made small so each test ends in
seconds."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from gpuhost import datadir
from gpuhost.cli import main
from gpuhost.errors import PackageIndexError
from gpuhost.knowledge import pypi
from gpuhost.knowledge.pypi import HttpIndex

from .served import build, serve, serve_handler

SECRET = "s3cret-mirror-pw"


class Hostile(BaseHTTPRequestHandler):
    """One misbehaviour per path (see the tests); ``/ok`` answers normally."""

    protocol_version = "HTTP/1.1"
    hits: dict[str, int] = {}

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        return

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if "Content-Length" not in (headers or {}):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        path = self.path.split("?")[0]
        Hostile.hits[path] = Hostile.hits.get(path, 0) + 1
        with contextlib.suppress(OSError):
            self._answer(path)

    def _answer(self, path: str) -> None:  # noqa: C901 (one branch per misbehaviour)
        if path == "/ok":
            self._send(200, b"fine\n")
        elif path == "/trickle":  # a byte every 0.2 s: each read is quick, the answer endless
            self._send(200, b"", {"Content-Length": "100000"})
            for _ in range(200):
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.2)
        elif path == "/large":
            self._send(200, b"y" * 5000)
        elif path == "/endless":  # no length, chunked, never ends by itself
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for _ in range(10_000):
                self.wfile.write(b"400\r\n" + b"z" * 1024 + b"\r\n")
        elif path.startswith("/busy-a-day"):
            self._send(503, b"busy", {"Retry-After": "86400"})
        elif path == "/busy-till-2099":
            self._send(429, b"slow down", {"Retry-After": "Thu, 01 Jan 2099 00:00:00 GMT"})
        elif path == "/busy-once":
            if Hostile.hits[path] == 1:
                self._send(503, b"busy", {"Retry-After": "0"})
            else:
                self._send(200, b"after the retry\n")
        elif path.startswith("/redirect-"):
            where = {
                "/redirect-bracket": "http://[::1",
                "/redirect-space": "http://exa mple.invalid/x",
                "/redirect-file": "file:///etc/passwd",
                "/redirect-port": "http://127.0.0.1:99999999/x",
            }[path]
            self._send(302, b"", {"Location": where})
        else:
            self._send(404, b"no")


@pytest.fixture
def hostile() -> Iterator[str]:
    Hostile.hits = {}
    with serve_handler(Hostile) as base:
        yield base


def _refused(index: HttpIndex, url: str) -> str:
    started = time.monotonic()
    with pytest.raises(PackageIndexError) as caught:
        index.text(url)
    assert time.monotonic() - started < 30
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_trickling_answer_is_cut_at_its_deadline(hostile, monkeypatch):
    monkeypatch.setattr(pypi, "RESPONSE_S", 1.0)

    message = _refused(HttpIndex(hostile), f"{hostile}/trickle")

    assert "did not arrive within 1 s" in message and "trickling" in message


def test_the_whole_run_has_a_deadline(hostile):
    index = HttpIndex(hostile, deadline_s=1.0)

    first = _refused(index, f"{hostile}/trickle")
    second = _refused(index, f"{hostile}/ok")  # nothing is asked once the deadline passed

    assert "did not arrive within" in first
    assert "the update's deadline of 1 s has passed" in second
    assert Hostile.hits.get("/ok") is None


@pytest.mark.parametrize("path", ["/large", "/endless"])
def test_an_answer_over_the_size_cap_is_refused(hostile, monkeypatch, path):
    monkeypatch.setattr(pypi, "MAX_BYTES", 4096)

    message = _refused(HttpIndex(hostile), f"{hostile}{path}")

    assert "more than" in message and "4096" in message


@pytest.mark.parametrize("path", ["/busy-a-day", "/busy-till-2099"])
def test_a_retry_after_beyond_the_bound_is_one_line_at_once(hostile, path):
    message = _refused(HttpIndex(hostile), f"{hostile}{path}")

    assert "Retry-After" in message and "more than gpuhost waits (60 s)" in message
    assert Hostile.hits[path] == 1


def test_a_short_retry_after_is_honoured(hostile):
    assert HttpIndex(hostile).text(f"{hostile}/busy-once") == "after the retry\n"
    assert Hostile.hits["/busy-once"] == 2


@pytest.mark.parametrize(
    "path",
    [
        "/redirect-bracket",
        "/redirect-space",
        "/redirect-file",
        "/redirect-port",
    ],
)
def test_a_redirect_to_a_malformed_url_is_one_line(hostile, path):
    message = _refused(HttpIndex(hostile, retries=0), f"{hostile}{path}")

    assert message.startswith(f"{hostile}{path}: ")


def _update(index: str, base: str, folder: Path, csaf: str | None = None) -> int:
    return main(
        [
            "data",
            "update",
            "--data-dir",
            str(folder),
            "--index",
            index,
            "--csaf",
            csaf or f"{base}/csaf",
            "--cuda-redist",
            f"{base}/redist/",
            "--cudnn-redist",
            f"{base}/cudnn-redist/",
        ]
    )


def test_a_mirror_asking_to_wait_a_day_fails_the_update_and_keeps_the_data(
    hostile, data_dir, capsys
):
    busy = f"http://mirror:{SECRET}@{hostile[7:]}/busy-a-day"
    code = _update(busy, hostile, data_dir, csaf=busy)

    out, err = capsys.readouterr()
    assert code != 0 and not out
    assert err.count("\n") == 1, err
    assert "keeping the data of" in err and "Retry-After" in err
    assert not (data_dir / datadir.META).exists()


def test_a_mirror_password_is_never_printed_nor_stored(tmp_path, data_dir, capsys):
    root = build(tmp_path / "served")
    with serve(root) as base:
        index = f"http://mirror:{SECRET}@{base[7:]}"
        code = _update(index, base.replace("http://", f"http://mirror:{SECRET}@"), data_dir)
        status = main(["data", "status", "--json"])
    out, err = capsys.readouterr()

    assert code == 0 and status == 0, err
    assert SECRET not in out + err
    assert "mirror:***@" in out
    for path in data_dir.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(encoding="utf-8"), path
    meta = json.loads((data_dir / datadir.META).read_text())
    assert "mirror:***@127.0.0.1" in meta["origin"]


def test_a_refused_url_option_is_echoed_without_its_password(capsys):
    code = main(["data", "update", "--index", f"ftp://mirror:{SECRET}@host/simple"])

    err = capsys.readouterr().err
    assert code == 2 and SECRET not in err and "mirror:***@host" in err
