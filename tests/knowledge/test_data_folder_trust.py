"""The data folder is trusted as the state folder is (StrictModes), and read as state is
(``safeio.read_regular``): an update there that someone else could have changed, a meta.json
that is a FIFO or a link to /dev/zero, or one dated in the future is not used; the shipped data
is, and judging commands and ``data status`` say why in one line. Commands run as their own
process where a reader could block, with a time bound."""

from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuhost import datadir
from gpuhost.cli import main

TODAY = datetime.date.today().isoformat()
# an overlay that would change an answer if it were used: its matrix is not a matrix
BROKEN = "not: [the matrix"


def _overlay(folder: Path, date: str = TODAY) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in datadir.FILES:
        shutil.copy(datadir.shipped_path(name), folder / name)
    (folder / "matrix.yaml").write_text(BROKEN, encoding="utf-8")
    (folder / datadir.META).write_text(json.dumps({"date": date, "origin": "test"}))
    return folder


def _in_use(data_dir: Path) -> bool:
    return datadir.data_path("matrix.yaml") == str(data_dir / "matrix.yaml")


def test_a_fine_overlay_is_used(data_dir):
    _overlay(data_dir)

    assert _in_use(data_dir) and datadir.overlay_problem() is None


def _matrix_check(data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, datadir.ENV: str(data_dir)}
    return subprocess.run(
        [sys.executable, "-m", "gpuhost", "matrix", "check", "--driver", "580.65.06"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "large"])
def test_a_meta_json_that_is_no_file_never_blocks_nor_exhausts_a_reader(data_dir, kind):
    _overlay(data_dir)
    meta = data_dir / datadir.META
    meta.unlink()
    if kind == "fifo":
        os.mkfifo(meta)
    elif kind == "dev-zero":
        meta.symlink_to("/dev/zero")
    else:
        meta.write_text(json.dumps({"date": TODAY, "pad": "x" * (2 * datadir.MAX_META_BYTES)}))

    assert datadir.read_meta(data_dir) is None
    proc = _matrix_check(data_dir)

    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"data directory {data_dir}: meta.json" in proc.stderr
    assert "the shipped data is" in proc.stderr


def test_a_world_writable_data_folder_is_not_used(data_dir, capsys):
    _overlay(data_dir)
    data_dir.chmod(0o777)

    assert not _in_use(data_dir)
    assert main(["data", "status"]) == 0
    out = capsys.readouterr().out
    assert f"data directory {data_dir}: is group and world-writable (mode 0777)" in out
    assert "shipped with gpuhost" in out


def test_a_group_writable_data_file_is_not_used(data_dir):
    _overlay(data_dir)
    (data_dir / "advisories.yaml").chmod(0o664)

    assert not _in_use(data_dir)
    assert "advisories.yaml is group-writable" in (datadir.overlay_problem() or "")


def test_a_data_file_that_is_a_link_is_not_used(data_dir, tmp_path):
    _overlay(data_dir)
    elsewhere = tmp_path / "elsewhere.yaml"
    (data_dir / "wheels.yaml").rename(elsewhere)
    (data_dir / "wheels.yaml").symlink_to(elsewhere)

    assert not _in_use(data_dir)
    assert "wheels.yaml is not a regular file" in (datadir.overlay_problem() or "")


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_data_folder_another_user_owns_is_not_used(data_dir):
    _overlay(data_dir)
    os.chown(data_dir, 4242, 4242)

    assert not _in_use(data_dir)
    assert "owned by uid 4242" in (datadir.overlay_problem() or "")


def test_a_writable_folder_above_without_sticky_bit_is_not_used(tmp_path, monkeypatch):
    above = tmp_path / "shared"
    above.mkdir()
    above.chmod(0o777)
    folder = _overlay(above / "data")
    monkeypatch.setenv(datadir.ENV, str(folder))

    assert not _in_use(folder)
    assert f"{above} is group and world-writable" in (datadir.overlay_problem() or "")


@pytest.mark.parametrize("date", ["2099-01-01", "9999-12-31"])
def test_a_data_date_in_the_future_is_refused_and_the_shipped_data_used(data_dir, capsys, date):
    _overlay(data_dir, date)

    assert not _in_use(data_dir)
    assert datadir.data_info()["origin"] == "shipped with gpuhost"
    assert main(["matrix", "check", "--driver", "580.65.06"]) in (0, 1)
    err = capsys.readouterr().err
    assert f"meta.json is dated {date}, after today ({TODAY})" in err
    assert err.count(str(data_dir)) == 1


def test_an_update_is_not_written_into_an_unsafe_folder(data_dir, capsys):
    data_dir.mkdir()
    data_dir.chmod(0o777)

    code = main(["data", "update", "--data-dir", str(data_dir), "--from", str(data_dir)])

    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1
    assert "is group and world-writable" in err and "refusing to write" in err
    assert list(data_dir.iterdir()) == []
