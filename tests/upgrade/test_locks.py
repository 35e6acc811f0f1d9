"""One writer at a time (issue 29): locks per host and per run in the state folder with a
message naming the holder; a plain upgrade over an interrupted run refuses; --resume takes the
options of the run it resumes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpuhost.cli import main
from gpuhost.errors import ConfigError
from gpuhost.locks import acquire, hold, host_locks, lock_file_name
from gpuhost.upgrade.journal import Journal
from gpuhost.upgrade.resume import RECORDED, resumed_params
from upgrade.test_state_safety import _state

TARGET = "debian12-nonfree-535-security"


def _inventory(tmp_path, n=2) -> Path:
    path = tmp_path / "inv.py"
    hosts = ", ".join(f"('n{i}', {{'ssh_hostname': '127.0.0.1', 'ssh_port': 1}})"
                      for i in range(1, n + 1))
    path.write_text(f"gpu = [{hosts}]\n")
    return path


def test_a_held_lock_names_its_holder(tmp_path):
    with hold(tmp_path, ["host:n1"], "upgrade"):
        with pytest.raises(ConfigError) as err:
            acquire(tmp_path, host_locks(["n2", "n1"]), "snapshot take")
        text = str(err.value)
        assert text.startswith("snapshot take: n1 is in use by pid ")
        assert f"pid {os.getpid()} (user " in text and "since 20" in text and "'gpuhost" in text
        assert acquire(tmp_path, ["host:n2"], "x").release() is None  # all or none: n2 is free
    acquire(tmp_path, ["host:n1"], "upgrade").release()  # released with the block
    assert (tmp_path / "locks").stat().st_mode & 0o777 == 0o700


def test_lock_names_stay_in_the_locks_folder():
    assert lock_file_name("host:../../etc/x") == "host%3A..%2F..%2Fetc%2Fx.lock"


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("host:\x10" + "0", "host:\u0100"),  # both were host%3A%100.lock
        ("host:\x1f" + "4A9", "host:\U0001f4a9"),  # both were host%3A%1F4A9.lock
    ],
)
def test_two_host_names_never_share_a_lock(tmp_path, one, other):
    """Every byte of the UTF-8 name outside [A-Za-z0-9._-] is %XX: one name, one file."""
    assert lock_file_name(one) != lock_file_name(other)
    state = _state(tmp_path)
    with hold(state, [one], "upgrade"), hold(state, [other], "snapshot take"):
        assert len(list((state / "locks").iterdir())) == 2


def test_lock_file_names_are_readable_and_bounded():
    assert lock_file_name("host:gpu-01.lab") == "host%3Agpu-01.lab.lock"
    assert lock_file_name("host:\u00e9") == "host%3A%C3%A9.lock"
    long_a, long_b = "host:" + "\u00e9" * 300 + "a", "host:" + "\u00e9" * 300 + "b"
    assert lock_file_name(long_a) != lock_file_name(long_b)
    assert max(len(lock_file_name(n).encode()) for n in (long_a, long_b)) <= 255


@pytest.mark.parametrize("command", [["snapshot", "take"], ["snapshot", "prune"], ["rollback"]])
def test_a_second_writer_of_a_host_is_refused_before_any_work(tmp_path, capsys, command):
    state = _state(tmp_path)
    inv = _inventory(tmp_path)
    with hold(state, ["host:n1"], "upgrade"):
        yes = ["--yes"] if command == ["rollback"] else []
        code = main([*command, str(inv), "--state-dir", str(state), *yes])
    err = capsys.readouterr().err
    assert code == 2 and "n1 is in use by pid" in err and err.count("\n") == 1


def _upgrade(inv: Path, state: Path, *extra: str) -> list[str]:
    return ["upgrade", str(inv), "--to", TARGET, "--state-dir", str(state), *extra]


def _interrupted(inv: Path, state: Path, **options) -> Journal:
    record = {"canary": 1, "batch": 1, "max_failures": 1, "drain": "none", "force": False,
              "accept_audit": ["driver.not-loaded"], "checks": "none", "accept_checks": []}
    record.update(options)
    return Journal.create(state / "runs", str(inv.resolve()), TARGET, ["n1", "n2"], record)


def test_a_plain_upgrade_over_an_interrupted_run_refuses(tmp_path, capsys):
    state = _state(tmp_path)
    inv = _inventory(tmp_path)
    journal = _interrupted(inv, state)
    assert main(_upgrade(inv, state)) == 2
    err = capsys.readouterr().err
    assert f"an interrupted upgrade run exists ({journal.path})" in err
    assert "--resume" in err and "--abandon" in err
    assert not journal.ended()
    assert main(_upgrade(inv, state, "--resume", "--abandon")) == 2
    assert "not both" in capsys.readouterr().err


def test_a_dry_upgrade_over_an_interrupted_run_says_so(tmp_path, capsys):
    """--dry refuses as the plain upgrade does; --dry --abandon shows the plan, closing nothing."""
    state = _state(tmp_path)
    inv = _inventory(tmp_path)
    journal = _interrupted(inv, state)
    assert main(_upgrade(inv, state, "--dry")) == 2
    captured = capsys.readouterr()
    assert f"an interrupted upgrade run exists ({journal.path})" in captured.err
    assert "--resume" in captured.err and "--abandon" in captured.err
    assert captured.err.count("\n") == 1 and captured.out == ""
    assert main(_upgrade(inv, state, "--dry", "--abandon")) == 0
    assert "n1" in capsys.readouterr().out
    assert not journal.ended()


def test_resume_takes_the_recorded_options(tmp_path, capsys):
    state = _state(tmp_path)
    inv = _inventory(tmp_path, 3)
    _interrupted(inv, state, canary=0, batch=3)
    assert main(_upgrade(inv, state, "--resume", "--dry")) == 0
    assert "canary=0, batch=3" in capsys.readouterr().out
    assert main(_upgrade(inv, state, "--resume", "--dry", "--batch", "2")) == 2
    err = capsys.readouterr().err
    assert "--batch 2 (the run has 3)" in err and err.count("\n") == 1


def test_resumed_params_fill_what_was_not_given_and_refuse_conflicts():
    params = {name: None for name in RECORDED.values()} | {"accept_audit": (), "batch": 1}
    merged = resumed_params({"accept_audit": ["driver.not-loaded"], "batch": 4}, params, set(),
                            "run.jsonl")
    assert merged["accept_audit"] == ("driver.not-loaded",) and merged["batch"] == 4
    with pytest.raises(ConfigError, match="--accept-audit \\[\\] \\(the run has"):
        resumed_params({"accept_audit": ["x"]}, params, {"accept_audit"}, "run.jsonl")


def test_two_resumes_of_one_run_cannot_append_to_one_journal(tmp_path, capsys):
    state = _state(tmp_path)
    inv = _inventory(tmp_path)
    journal = _interrupted(inv, state)
    with hold(state, [f"run:{journal.path.name}"], "upgrade"):
        code = main(_upgrade(inv, state, "--resume", "--accept-audit", "driver.not-loaded"))
    err = capsys.readouterr().err
    assert code == 2 and "is in use by pid" in err
    assert [r["kind"] for r in journal.records()] == ["run"]
    assert json.loads(journal.path.read_text().splitlines()[0])["kind"] == "run"


@pytest.mark.parametrize(
    ("record", "option"),
    [
        ({"batch": "many"}, "--batch"),
        ({"canary": -1}, "--canary"),
        ({"drain": "everything"}, "--drain"),
        ({"reboot_timeout": [1]}, "--reboot-timeout"),
        ({"accept_audit": "driver.not-loaded"}, "--accept-audit"),
        ({"checks": 5}, "--checks"),
    ],
)
def test_a_recorded_option_is_checked_as_the_option_is(tmp_path, capsys, record, option):
    """--resume takes the journal's options: each is checked as the option itself is (a journal
    edited by hand or damaged is one line naming it and the option, exit 2), never used
    unchecked (before: accepted, or a traceback further on)."""
    state = _state(tmp_path)
    inv = _inventory(tmp_path)
    journal = _interrupted(inv, state, **record)
    assert main(_upgrade(inv, state, "--resume", "--dry")) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"gpuhost: error: {journal.path}: ") and option in line, line


@pytest.mark.parametrize("extra", [["--resume"], []])
def test_a_second_upgrade_of_one_inventory_is_refused_before_any_work(tmp_path, capsys, extra):
    """One upgrade per inventory (and state folder) at a time: its journal, new or resumed, has
    one writer, whatever hosts each process selects."""
    from gpuhost.upgrade.plan import inventory_lock

    state = _state(tmp_path)
    inv = _inventory(tmp_path)
    journal = _interrupted(inv, state) if extra else None
    with hold(state, [inventory_lock(str(inv))], "upgrade"):
        code = main(_upgrade(inv, state, *extra, "--accept-audit", "driver.not-loaded"))
    err = capsys.readouterr().err
    assert code == 2 and "is in use by pid" in err and err.count("\n") == 1
    if journal is not None:
        assert [r["kind"] for r in journal.records()] == ["run"]


@pytest.mark.parametrize(
    "damage",
    [
        "{not json\n",
        json.dumps({"kind": "run", "schema": 1, "inventory": "/elsewhere/inv.py"}) + "\n{bad\n",
    ],
)
def test_a_damaged_journal_of_another_inventory_does_not_block_this_one(
    tmp_path, capsys, damage
):
    """find_resumable read every journal of the state folder whole: another inventory's damaged
    journal (a newer one, read first) made --resume of this inventory exit 2. A journal whose
    header names another inventory is now skipped unread; one with no readable header cannot
    be told apart from this inventory's and is still refused (first case)."""
    state = _state(tmp_path)
    inv = _inventory(tmp_path)
    _interrupted(inv, state)
    (state / "runs" / "upgrade-99991231T000000000000Z.jsonl").write_text(damage)

    code = main(_upgrade(inv, state, "--resume", "--dry"))

    err = capsys.readouterr().err
    if damage.startswith("{not"):
        assert code == 2 and "unreadable upgrade journal line" in err
    else:
        assert code == 0, err
