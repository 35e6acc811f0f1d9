"""The upgrade journal: fsync'd lines, replay into per-host progress, torn last lines."""

from __future__ import annotations

import json

import pytest

from gpuhost.errors import ConfigError
from gpuhost.upgrade.journal import Journal, find_resumable, read_records, replay


def _journal(tmp_path, hosts=("a", "b")):
    return Journal.create(tmp_path / "runs", "inv.py", "target", list(hosts), {"batch": 1})


def test_header_round_trips(tmp_path):
    j = _journal(tmp_path)
    again = Journal.open(j.path)
    assert again.header.run_id == j.header.run_id
    assert again.header.hosts == ["a", "b"]
    assert again.header.options == {"batch": 1}
    assert again.header.target == "target"


def test_replay_tracks_done_current_failed_and_data(tmp_path):
    j = _journal(tmp_path)
    j.step("a", "preflight", "started")
    j.step("a", "preflight", "done")
    j.step("a", "snapshot", "started")
    j.step("a", "snapshot", "done", data={"snapshot_id": "S1"})
    j.step("a", "drain", "started")
    j.step("b", "preflight", "started")
    j.step("b", "preflight", "failed", "unreachable")
    j.outcome("b", "refused", "unreachable")
    p = j.progress()
    assert p["a"].done == ["preflight", "snapshot"]
    assert p["a"].current == "drain"
    assert p["a"].data == {"snapshot_id": "S1"}
    assert p["a"].started and not p["a"].finished
    assert p["b"].failed == "preflight" and p["b"].failure == "unreachable"
    assert p["b"].outcome == "refused" and p["b"].finished


def test_every_line_is_on_disk_as_json(tmp_path):
    j = _journal(tmp_path)
    j.step("a", "preflight", "started")
    lines = j.path.read_text().splitlines()
    assert len(lines) == 2
    assert [json.loads(x)["kind"] for x in lines] == ["run", "step"]


def test_torn_last_line_is_ignored(tmp_path):
    j = _journal(tmp_path)
    j.step("a", "preflight", "done")
    with open(j.path, "a") as handle:
        handle.write('{"kind": "step", "host": "a", "st')  # controller died mid-write
    records = read_records(j.path)
    assert [r["kind"] for r in records] == ["run", "step"]


def test_corrupt_middle_line_is_an_error_naming_file_and_line(tmp_path):
    j = _journal(tmp_path)
    with open(j.path, "a") as handle:
        handle.write("garbage\n")
    j.step("a", "preflight", "done")
    with pytest.raises(ConfigError, match=r":2: unreadable upgrade journal line"):
        read_records(j.path)


def test_not_a_journal(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"kind": "step"}\n')
    with pytest.raises(ConfigError, match="not an upgrade journal"):
        read_records(path)


def test_find_resumable_picks_newest_unfinished_run_of_that_inventory(tmp_path):
    runs = tmp_path / "runs"
    first = Journal.create(runs, "inv.py", "t", ["a"], {})
    Journal.create(runs, "other.py", "t", ["a"], {})
    assert find_resumable(runs, "inv.py") == first.path
    first.end({})
    assert find_resumable(runs, "inv.py") is None
    assert find_resumable(tmp_path / "nothing", "inv.py") is None


def test_unknown_status_and_outcome_are_rejected(tmp_path):
    j = _journal(tmp_path)
    with pytest.raises(ValueError):
        j.step("a", "x", "maybe")
    with pytest.raises(ValueError):
        j.outcome("a", "fine")


def test_replay_is_pure():
    records = [
        {"kind": "step", "host": "a", "step": "preflight", "status": "done", "data": {"x": 1}},
        {"kind": "step", "host": "a", "step": "snapshot", "status": "done", "data": {"x": 2}},
    ]
    p = replay(records, ["a", "b"])
    assert p["a"].data == {"x": 2}
    assert not p["b"].started


@pytest.mark.parametrize("hosts", [[], ["h1", "h1"]])
def test_a_run_header_without_hosts_or_with_a_host_twice_is_refused(tmp_path, hosts):
    """'upgrade 0 host(s)' and '2 host(s)' for one host were read from such headers."""
    path = tmp_path / "run.jsonl"
    path.write_text(
        json.dumps(
            {
                "kind": "run",
                "run_id": "r1",
                "hosts": hosts,
                "target": "t",
                "inventory": "i",
                "started_at": "x",
                "options": {},
            }
        )
        + "\n"
    )
    with pytest.raises(ConfigError, match="run.hosts: found .*expected each upgraded host once"):
        read_records(path)
