"""State only its owner can change, checked before root acts on it (issue 29, first part):
the state folder's owner and mode (as OpenSSH's StrictModes), snapshot file records validated
against their path (category, where rollback writes, mode), files never opened through
symbolic links or FIFOs, snapshot ids unique within a second."""

from __future__ import annotations

import json
import os
import signal

import pytest

from gpuhost.cli import main
from gpuhost.errors import ConfigError, ParseError
from gpuhost.upgrade.host_state import MARK, parse_host_state
from gpuhost.upgrade.journal import Journal, find_resumable, read_records
from gpuhost.upgrade.restore import restore_plan
from gpuhost.upgrade.snapshot import SnapshotStore, build_snapshot, validate_document
from upgrade.test_snapshot import _b64, host_output

SID = "20250101T000000Z"


def _doc(host: str = "n1", sid: str = SID) -> dict:
    return json.loads(json.dumps(build_snapshot(host, parse_host_state(host_output()), sid)))


def _state(tmp_path):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    SnapshotStore(state / "snapshots").save(_doc())
    return state


def _list(state, capsys) -> tuple[int, str]:
    code = main(["snapshot", "list", "--state-dir", str(state)])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("mode", "said"),
    [(0o777, "group and world-writable"), (0o1777, "group and world-writable"),
     (0o770, "group-writable"), (0o703, "world-writable")],
)
def test_a_state_folder_others_can_write_is_refused(tmp_path, capsys, mode, said):
    state = _state(tmp_path)
    state.chmod(mode)
    code, err = _list(state, capsys)
    assert code == 2
    assert err.count("\n") == 1 and f"state folder {state} is {said}" in err
    assert f"chmod go-w {state}" in err


def test_a_state_folder_of_another_user_is_refused(tmp_path, capsys):
    if os.geteuid() != 0:
        pytest.skip("needs root to give a folder to another user")
    state = _state(tmp_path)
    os.chown(state, 12345, 12345)
    code, err = _list(state, capsys)
    assert code == 2 and "owned by uid 12345" in err and "chown" in err


def test_a_writable_folder_inside_or_above_is_refused(tmp_path, capsys):
    state = _state(tmp_path)
    (state / "snapshots").chmod(0o777)
    code, err = _list(state, capsys)
    assert code == 2 and f"{state / 'snapshots'} is group and world-writable" in err
    (state / "snapshots").chmod(0o700)
    tmp_path.chmod(0o777)  # above, without the sticky bit: anyone can rename state away
    try:
        code, err = _list(state, capsys)
        assert code == 2 and f"{tmp_path} is group and world-writable" in err
        tmp_path.chmod(0o1777)  # as /tmp: fine
        assert _list(state, capsys)[0] == 0
    finally:
        tmp_path.chmod(0o700)


def test_a_state_subfolder_that_is_a_file_is_one_line(tmp_path, capsys):
    state = tmp_path / "state"
    state.mkdir()
    (state / "snapshots").write_text("")
    code, err = _list(state, capsys)
    assert code == 2 and "snapshots is not a folder" in err and err.count("\n") == 1


def test_new_state_folders_are_private(tmp_path):
    store = SnapshotStore(tmp_path / "state" / "snapshots")
    path = store.save(_doc())
    assert (path.parent.stat().st_mode & 0o777) == 0o700
    assert (path.stat().st_mode & 0o777) == 0o600


@pytest.mark.parametrize(
    "path",
    ["/root/.ssh/authorized_keys", "/etc/gpuhost/../../root/.ssh/authorized_keys",
     "/etc/systemd/system/evil.service", "etc/gpuhost/x", "/etc/gpuhost//x", "/etc/gpuhost/a\nb"],
)
def test_a_document_cannot_make_rollback_write_any_file(path):
    doc = _doc()
    doc["files"] = {path: {"category": "gpuhost", "mode": "644", "content": "ssh-ed25519 AAAA"}}
    with pytest.raises(ConfigError, match="^snap.json: files: "):
        validate_document(doc, "snap.json")
    with pytest.raises(ConfigError):
        restore_plan(doc, {}, ("gpuhost", "units"), ())


def test_a_file_records_category_comes_from_its_path():
    doc = _doc()
    record = doc["files"]["/etc/apt/preferences.d/gpuhost-nvidia"]
    record["category"] = "units"
    with pytest.raises(ConfigError, match="category: found 'units', expected 'apt_preferences'"):
        validate_document(doc, "snap.json")
    # rollback restores by the path's category even from a document not validated
    plan = restore_plan(doc, {}, ("units",), ())
    assert plan.files == {}


@pytest.mark.parametrize("mode", ["4755", "2755", "1644", "666", "0777", "u+s", "", "99999"])
def test_a_document_cannot_give_a_file_a_dangerous_mode(mode):
    doc = _doc()
    doc["files"]["/etc/apt/preferences.d/gpuhost-nvidia"]["mode"] = mode
    with pytest.raises(ConfigError, match="mode: found"):
        validate_document(doc, "snap.json")


def test_a_null_or_lying_sha256_is_refused():
    doc = _doc()
    doc["files"]["/etc/apt/preferences.d/gpuhost-nvidia"]["sha256"] = None
    with pytest.raises(ConfigError, match="sha256: found None"):
        validate_document(doc, "snap.json")
    doc["files"]["/etc/apt/preferences.d/gpuhost-nvidia"]["sha256"] = "0" * 64
    with pytest.raises(ConfigError, match="sha256: does not match"):
        validate_document(doc, "snap.json")


def test_a_hostile_host_cannot_record_files_outside_the_snapshot_list():
    for line in (f"{MARK} file 644 /root/.ssh/authorized_keys",
                 f"{MARK} file 644 /etc/gpuhost/../../etc/shadow",
                 f"{MARK} file rwx /etc/gpuhost/x"):
        out = host_output().replace(f"{MARK} end", f"{line}\n{_b64('x')}\n{MARK} end")
        with pytest.raises(ParseError, match="host state: file"):
            parse_host_state(out)
    out = host_output().replace(f"{MARK} end", f"{MARK} file 6777 /etc/gpuhost/x\n{_b64('x')}\n"
                                f"{MARK} end")
    assert parse_host_state(out).files["/etc/gpuhost/x"]["mode"] == "775"


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda d: d["packages"].update({"nvidia-x\nnvidia-y install": {"version": "1"}}),
         "packages: found 'nvidia-x\\nnvidia-y install', expected package names"),
        (lambda d: d["packages"]["nvidia-smi"].update(version="1 2"),
         "packages.nvidia-smi.version: found '1 2', expected a package version"),
        (lambda d: d["packages"]["nvidia-smi"].update(version=""),
         "packages.nvidia-smi.version: found '', expected a package version"),
        (lambda d: d["holds"].append("nvidia-smi\nnvidia-smi install"), "holds: found "),
        (lambda d: d["holds"].append(""), "holds: found ''"),
    ],
    ids=["name newline", "version space", "version empty", "hold newline", "hold empty"],
)
def test_a_snapshot_edited_to_hold_no_package_names_is_one_line(edit, said):
    """Rollback hands recorded names, versions and holds to the package manager: a newline in a
    hold split dpkg --set-selections' lines ('nvidia-smi install' unheld a package)."""
    doc = _doc()
    edit(doc)
    with pytest.raises(ConfigError) as exc:
        validate_document(doc, "snap.json")
    assert str(exc.value).startswith(f"snap.json: {said}") and "\n" not in str(exc.value)


def test_real_names_versions_and_dnf_locks_are_valid():
    doc = _doc()
    doc["packages"]["kmod-nvidia-latest-dkms"] = {"version": "3:580.95.05-1.el9"}
    doc["packages"]["libnvidia-compute-580-server"] = {"version": "580.95.05-0ubuntu0.24.04.2"}
    doc["packages"]["NetworkManager_x"] = {"version": "1.2^20240101git-1.el9"}
    doc["holds"] += ["nvidia-driver-3:580.95.05-1.el9.*", "cuda-toolkit-12-9"]
    assert validate_document(doc, "snap.json") is doc


@pytest.mark.parametrize("line", ["nvidia-smi x\t1.0\tamd64\tii ",
                                  "nvidia-smi\t1.0 ;reboot\tamd64\tii "])
def test_a_hostile_host_cannot_record_a_package_rollback_would_refuse(line):
    """A snapshot rollback refuses would be found only when it is needed: the host state that
    would make one is refused when the snapshot is taken, before the upgrade changes anything."""
    out = host_output().replace(f"{MARK} holds", f"{line}\n{MARK} holds")
    with pytest.raises(ParseError, match="host state: package .*: expected a package name"):
        parse_host_state(out)
    out = host_output().replace(f"{MARK} uname", f"nvidia-x\x1b[2J\n{MARK} uname")
    with pytest.raises(ParseError, match="host state: hold 'nvidia-x"):
        parse_host_state(out)


def test_a_snapshot_copied_into_another_hosts_folder_is_refused(tmp_path, capsys):
    state = _state(tmp_path)
    other = state / "snapshots" / "n2"
    other.mkdir(mode=0o700)
    (other / f"{SID}.json").write_text((state / "snapshots" / "n1" / f"{SID}.json").read_text())
    code = main(["snapshot", "list", "n2", "--state-dir", str(state)])
    err = capsys.readouterr().err
    assert code == 2 and "host: found 'n1', expected 'n2'" in err


def test_snapshots_are_never_written_through_a_symbolic_link(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    folder = tmp_path / "state" / "snapshots" / "n1"
    folder.mkdir(parents=True, mode=0o700)
    (folder / f".{SID}.json.tmp").symlink_to(victim)
    (folder / f"{SID}.json").symlink_to(victim)
    path = SnapshotStore(tmp_path / "state" / "snapshots").save(_doc())
    assert victim.read_text() == "keep\n"
    assert not path.is_symlink() and json.loads(path.read_text())["id"] == SID


def test_a_fifo_named_like_a_snapshot_or_journal_never_blocks(tmp_path, capsys):
    state = _state(tmp_path)
    os.mkfifo(state / "snapshots" / "n1" / "20250102T000000Z.json")
    (state / "runs").mkdir(mode=0o700)
    os.mkfifo(state / "runs" / "upgrade-20250102T000000000000Z.jsonl")
    signal.alarm(20)  # a hang fails the test instead of stalling the suite
    try:
        assert main(["snapshot", "list", "--state-dir", str(state)]) == 0
        assert "n1/20250102T000000Z" not in capsys.readouterr().out
        code = main(["snapshot", "diff", str(state / "snapshots/n1/20250102T000000Z.json"), "n1",
                     "--state-dir", str(state)])
        assert code == 2 and "not a regular file" in capsys.readouterr().err
        assert find_resumable(state / "runs", "inv") is None
    finally:
        signal.alarm(0)


def test_a_journal_through_a_symbolic_link_is_refused(tmp_path):
    runs = tmp_path / "runs"
    journal = Journal.create(runs, "inv", "p", ["n1"], {})
    link = runs / "upgrade-link.jsonl"
    link.symlink_to(journal.path)
    with pytest.raises(ConfigError, match="symbolic link"):
        read_records(link)
    assert (journal.path.stat().st_mode & 0o777) == 0o600


def test_snapshot_ids_are_unique_within_a_second(tmp_path):
    store = SnapshotStore(tmp_path / "snapshots")
    ids = [store.unique_id("n1", SID) for _ in range(4)]
    assert len(set(ids)) == 4 and ids[0] == SID and ids[1] == f"{SID}-2"
    store.save(_doc(sid=ids[0]))
    assert store.unique_id("n1", SID) == f"{SID}-5"


@pytest.mark.parametrize("sid", ["", " "])
def test_an_empty_snapshot_id_is_refused_not_read_as_latest(tmp_path, capsys, sid):
    """'--snapshot "$SID"' with SID unset rolled every host back to its latest snapshot (an
    empty value read as the option left out); now one line, exit 2, before any host."""
    state = _state(tmp_path)
    inventory = tmp_path / "inv.py"
    inventory.write_text("hosts = [('n1', {'ssh_hostname': '127.0.0.1', 'ssh_port': 9})]\n")
    code = main(["rollback", str(inventory), "--yes", "--state-dir", str(state),
                 "--snapshot", sid])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert f"--snapshot {sid!r}: expected a snapshot id" in err
