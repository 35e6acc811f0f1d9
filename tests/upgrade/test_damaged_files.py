"""Damaged controller state (journals, snapshots, provider config): one line naming the file and
field, exit 2, never a traceback (issue 15/20)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuhost.cli import main
from gpuhost.upgrade.host_state import parse_host_state
from gpuhost.upgrade.snapshot import SnapshotStore, build_snapshot
from upgrade.test_snapshot import host_output

RUN = {"kind": "run", "schema": 1, "run_id": "upgrade-1", "inventory": "", "target":
       "debian12-nonfree-535-security", "hosts": ["n1"], "options": {}, "created": "x"}


def _inventory(tmp_path: Path) -> Path:
    path = tmp_path / "inv.py"
    path.write_text("gpu = [('n1', {'ssh_hostname': '10.123.250.1'})]\n")
    return path


def _resume(tmp_path: Path, lines: list[str] | bytes, capsys) -> tuple[int, str]:
    inv = _inventory(tmp_path)
    runs = tmp_path / "runs"
    runs.mkdir()
    path = runs / "upgrade-20250101T000000000000Z.jsonl"
    if isinstance(lines, bytes):
        path.write_bytes(lines)
    else:
        path.write_text("\n".join(lines) + "\n")
    code = main(["upgrade", str(inv), "--to", "debian12-nonfree-535-security", "--resume",
                 "--dry", "--state-dir", str(tmp_path)])
    return code, capsys.readouterr().err


def _header(**changes) -> str:
    return json.dumps({**RUN, "inventory": "", **changes})


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00binary", "byte 0 is not UTF-8 text"),
        ([_header(run_id=None)], ":1: run.run_id: found None, expected a string"),
        ([_header(hosts="n1")], ":1: run.hosts: found 'n1', expected a list"),
        ([_header(), json.dumps({"kind": "step", "step": "install", "status": "done"})],
         ":2: step.host: found None, expected a string"),
        ([_header(), json.dumps({"kind": "step", "host": "n1", "step": "install",
                                 "status": "half-done"})],
         ":2: step.status: found 'half-done', expected one of started, done, failed, interrupted"),
        ([_header(), json.dumps({"kind": "outcome", "host": "n1", "outcome": "great"})],
         ":2: outcome.outcome: found 'great'"),
        ([_header(), json.dumps({"kind": "party"})], ":2: kind: 'party' is not one of"),
    ],
)
def test_a_damaged_journal_is_one_line_and_exit_2(tmp_path, capsys, lines, message) -> None:
    if not isinstance(lines, bytes):
        inv = str((tmp_path / "inv.py").resolve())
        lines = [line.replace('"inventory": ""', f'"inventory": {json.dumps(inv)}')
                 for line in lines]
    code, err = _resume(tmp_path, lines, capsys)
    assert code == 2, err
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def _snapshot(tmp_path: Path, **changes) -> Path:
    doc = build_snapshot("n1", parse_host_state(host_output()), "20250101T000000Z")
    doc.update(changes)
    return SnapshotStore(tmp_path / "snapshots").save(doc)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"package_cache": "lost"}, "package_cache: found 'lost', expected an object"),
        ({"package_cache": {"files": ["a.deb"]}}, "package_cache.files: expected an object"),
        ({"package_cache": {"files": {}, "size_bytes": "big"}},
         "package_cache.size_bytes: found 'big', expected a number"),
        ({"files": {"/etc/x": "text"}}, "files./etc/x: expected an object with a 'category'"),
    ],
)
def test_a_damaged_snapshot_is_one_line_and_exit_2(tmp_path, capsys, change, message) -> None:
    path = _snapshot(tmp_path, **change)
    code = main(["snapshot", "diff", str(path), str(path), "--state-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err, err


def test_an_undecodable_snapshot_is_one_line(tmp_path, capsys) -> None:
    path = _snapshot(tmp_path)
    path.write_bytes(b"\xff\xfe{\x00")
    code = main(["snapshot", "diff", str(path), str(path), "--state-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "not a snapshot (byte 0 is not UTF-8 text" in err, err


def test_an_undecodable_provider_config_is_one_line(tmp_path, capsys) -> None:
    config = tmp_path / "provider.yaml"
    config.write_bytes(b"type: command\n\xff\xff")
    code = main(["upgrade", str(_inventory(tmp_path)), "--to", "debian12-nonfree-535-security",
                 "--provider-config", str(config), "--state-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "provider config is not text" in err and "Traceback" not in err, err
