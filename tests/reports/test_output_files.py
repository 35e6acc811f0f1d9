"""Output files (--json, --junit, --prom, --html, report -o, smoke --save) are replaced
atomically and never written through a symbolic link (issue 29): a full disk leaves the previous
file intact; a link, FIFO or device at the path is refused before any work."""

from __future__ import annotations

import errno
import json
import os

import pytest

from gpuhost.cli import main
from gpuhost.errors import ConfigError
from gpuhost.output import write_output
from tests.reports.fleet_data import fleet_report


def _merge(tmp_path, out: str) -> tuple[int, str]:
    source = tmp_path / "r.json"
    source.write_text(json.dumps(fleet_report(2)))
    code = main(["report", "merge", str(source), "-o", out])
    return code, source.read_text()


def test_an_output_path_that_is_a_symbolic_link_is_refused(tmp_path, capsys):
    victim = tmp_path / "authorized_keys"
    victim.write_text("ssh-ed25519 AAAA keep\n")
    link = tmp_path / "report.json"
    link.symlink_to(victim)
    code, _ = _merge(tmp_path, str(link))
    err = capsys.readouterr().err
    assert code == 2 and "symbolic link" in err and err.count("\n") == 1
    assert victim.read_text() == "ssh-ed25519 AAAA keep\n" and link.is_symlink()
    for option in ("--json", "--junit", "--prom", "--html"):
        code = main(["audit", "-q", "--python", "/no/such/python", option, str(link)])
        assert code == 2 and "symbolic link" in capsys.readouterr().err
        assert victim.read_text() == "ssh-ed25519 AAAA keep\n"


def test_a_fifo_output_path_is_refused(tmp_path, capsys):
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    code, _ = _merge(tmp_path, str(fifo))
    assert code == 2 and "not a regular file" in capsys.readouterr().err


def test_a_full_disk_leaves_the_previous_file_intact(tmp_path, monkeypatch):
    out = tmp_path / "report.json"
    out.write_text("previous\n")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("gpuhost.safeio.os.fsync", full)
    with pytest.raises(ConfigError, match=r"^-o .*report.json: cannot write \(No space left"):
        write_output(str(out), "new\n" * 1000, "-o")
    assert out.read_text() == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]  # no temp file left


def test_an_output_file_is_replaced_not_rewritten(tmp_path, capsys):
    out = tmp_path / "merged.json"
    out.write_text("old\n")
    other = tmp_path / "hardlink.json"
    os.link(out, other)  # a second name of the old file keeps the old content
    code, _ = _merge(tmp_path, str(out))
    assert code in (0, 1), capsys.readouterr().err
    assert other.read_text() == "old\n" and json.loads(out.read_text())["hosts"]
