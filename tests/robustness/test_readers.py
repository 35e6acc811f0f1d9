"""Files users hand to gpuhost: captures (``gpuhost parse``), smoke results (``gpuhost smoke
judge``), audit reports (``gpuhost report merge``), the provision marker. Table-driven CLI cases
(exit code, one line naming the file and the field path, no traceback) and hypothesis over the
readers: whatever the bytes, a result or gpuhost's own error, never another exception."""

from __future__ import annotations

import contextlib
import copy
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuhost.errors import GpuhostError
from gpuhost.parsers.profile_marker import parse_profile_marker
from gpuhost.readers import decode, read_json
from gpuhost.smoke.result import parse_result_text
from tests.robustness.conftest import assert_one_line, gpuhost

PROC = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.261.03  Tue Jul  1 2025\n"
FIXTURE = Path(__file__).parent / "data" / "audit-local.json"  # `gpuhost audit --json` here


@pytest.mark.parametrize(
    "encoded",
    [
        b"\xef\xbb\xbf" + PROC.encode(),  # UTF-8 with a BOM (Notepad)
        PROC.encode("utf-16"),  # UTF-16 LE with a BOM (Windows PowerShell's >)
        b"\xfe\xff" + PROC.encode("utf-16-be"),
        PROC.encode("utf-16-le"),  # no BOM
        PROC.replace("\n", "\r\n").encode(),
    ],
)
def test_parse_reads_bom_and_utf16_captures(tmp_path: Path, encoded: bytes) -> None:
    path = tmp_path / "version.txt"
    path.write_bytes(encoded)
    run = gpuhost("parse", str(path))
    assert run.code == 0, run.err
    assert "kind: proc-driver-version" in run.out and "535.261.03" in run.out


def _fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def _out(command: str, tmp_path: Path) -> list[str]:
    return ["-o", str(tmp_path / "out.json")] if command == "report merge" else []


BAD_FILES = [
    ("latin-1", lambda p: p.write_bytes(b"NVRM version: caf\xe9\n"), "binary data, not text"),
    ("utf-16 bom, odd bytes", lambda p: p.write_bytes(b"\xff\xfeA\x00B"), "byte order mark"),
    ("missing", lambda p: None, "cannot read file"),
    ("directory", lambda p: p.mkdir(), "is a directory"),
]


@pytest.mark.parametrize("command", ["parse", "smoke judge", "report merge"])
@pytest.mark.parametrize(("case", "make", "named"), BAD_FILES, ids=[c[0] for c in BAD_FILES])
def test_unreadable_files_are_exit_2(tmp_path: Path, command, case, make, named) -> None:
    path = tmp_path / "input"
    make(path)
    run = gpuhost(*command.split(), str(path), *_out(command, tmp_path), timeout=30)
    assert_one_line(run, 2, str(path), named)


@pytest.mark.parametrize("command", ["parse", "smoke judge", "report merge"])
def test_a_fifo_is_refused_not_waited_on(tmp_path: Path, command: str) -> None:
    path = _fifo(tmp_path)
    run = gpuhost(*command.split(), str(path), *_out(command, tmp_path), timeout=30)
    assert_one_line(run, 2, str(path), "is a FIFO")


def _mutate(path: list[object], value: object) -> dict[str, object]:
    doc = json.loads(FIXTURE.read_text(encoding="utf-8"))
    target = doc
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return copy.deepcopy(doc)


REPORT_CASES = [
    (["hosts", 0, "findings"], "x", "hosts[0].findings: 'x' is not of type 'array'"),
    (["hosts", 0, "findings"], [1], "hosts[0].findings[0]: 1 is not of type 'object'"),
    (["hosts", 0, "verdict"], 5, "hosts[0].verdict: 5 is not one of"),
    (["hosts", 0, "reachable"], "yes", "hosts[0].reachable: 'yes' is not of type 'boolean'"),
    (["hosts", 0, "name"], None, "hosts[0].name: None is not of type 'string'"),
    (["hosts", 0, "facts", "driver"], "x", "hosts[0].facts.driver"),
    (["schema"], 2, "found schema 2"),
    (["hosts"], {}, "hosts"),
]


@pytest.mark.parametrize(("where", "value", "named"), REPORT_CASES)
def test_report_merge_names_the_field_path(tmp_path: Path, where, value, named) -> None:
    path = tmp_path / "shard.json"
    path.write_text(json.dumps(_mutate(where, value)), encoding="utf-8")
    run = gpuhost("report", "merge", str(path), "-o", str(tmp_path / "out.json"))
    assert_one_line(run, 2, str(path), named)


def test_report_merge_reads_a_utf16_report(tmp_path: Path) -> None:
    path = tmp_path / "shard.json"
    path.write_bytes(FIXTURE.read_text(encoding="utf-8").encode("utf-16"))
    run = gpuhost("report", "merge", str(path), "-o", str(tmp_path / "out.json"))
    assert run.code in (0, 1) and "Traceback" not in run.err, run.err


# --- hypothesis over the readers ---------------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_decode_gives_text_or_one_config_error(data: bytes) -> None:
    try:
        assert isinstance(decode(data, "f"), str)
    except GpuhostError as exc:
        assert str(exc).startswith("f: ") and "\n" not in str(exc)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.binary(max_size=200))
def test_read_json_gives_json_or_one_config_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "doc.json"
    path.write_bytes(data)
    try:
        read_json(path, "a document")
    except GpuhostError as exc:
        assert str(exc).startswith(str(path)) and "\n" not in str(exc)


def _merge_gives_report_or_error(tmp_path: Path, doc: object) -> None:
    from gpuhost.audit.report.merge import merge_reports

    path = tmp_path / "shard.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    try:
        merge_reports([str(path)])
    except GpuhostError as exc:
        assert str(path) in str(exc) and "\n" not in str(exc)


_fixture_health = [HealthCheck.function_scoped_fixture]


@settings(max_examples=150, deadline=None, suppress_health_check=_fixture_health)
@given(_json)
def test_report_reader_takes_any_json(tmp_path: Path, doc: object) -> None:
    _merge_gives_report_or_error(tmp_path, doc)


_host_entry = st.fixed_dictionaries(
    {}, optional={key: _json for key in ("name", "reachable", "facts", "findings", "verdict")}
)


@settings(max_examples=150, deadline=None, suppress_health_check=_fixture_health)
@given(st.lists(_host_entry, max_size=3))
def test_report_reader_takes_any_host_entries(tmp_path: Path, entries: list[dict]) -> None:
    base = json.loads(FIXTURE.read_text(encoding="utf-8"))
    base["hosts"] = [{**base["hosts"][0], **entry} for entry in entries]
    _merge_gives_report_or_error(tmp_path, base)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=200), _json.map(json.dumps)))
def test_marker_parser_takes_any_text(text: str) -> None:
    with contextlib.suppress(GpuhostError):
        parse_profile_marker(text)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=200), _json.map(json.dumps)))
def test_smoke_result_parser_takes_any_text(text: str) -> None:
    try:
        parse_result_text(text, "result.json")
    except GpuhostError as exc:
        assert "result.json" in str(exc)


def test_a_marker_edited_with_a_bom_is_read() -> None:
    marker = parse_profile_marker("\ufeffdebian12-nonfree-535\n")
    assert marker is not None and marker.profile == "debian12-nonfree-535"
