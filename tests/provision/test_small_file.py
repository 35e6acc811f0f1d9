"""What provision reads of a host's configuration files (dnf.conf, the .repo files, apt's proxy
file, units: every file an operation compares before writing it) goes through
``gpuhost.facts.files.SmallFile``, run here in a real shell. Before, pyinfra's FileContents ran
``cat``: a dnf.conf that is a FIFO hung provision's prepare stage for ever, a .repo linked to
/dev/zero was read without end, a 2 MiB binary dnf.conf was taken as its lines."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gpuhost.errors import ParseError
from gpuhost.facts.files import SmallFile


def _read(path: Path) -> list[str] | None:
    fact = SmallFile()
    done = subprocess.run(["sh", "-c", fact.command(path=str(path))], capture_output=True,
                          text=True, errors="replace", check=False, timeout=20)  # fmt: skip
    assert done.returncode == 0 and len(done.stdout) < 2000
    return fact.process(done.stdout.splitlines())


@pytest.mark.parametrize("kind", ["fifo", "device", "folder", "huge", "dangling"])
def test_a_config_file_that_is_no_small_regular_file_is_one_line(tmp_path: Path, kind: str) -> None:
    conf = tmp_path / "etc/dnf/dnf.conf"
    conf.parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(conf)
    elif kind in ("device", "dangling"):
        conf.symlink_to("/dev/zero" if kind == "device" else tmp_path / "gone")
    elif kind == "folder":
        conf.mkdir()
    else:
        conf.write_bytes(b"\x00\xff" * (1024 * 1024 + 1))

    with pytest.raises(ParseError) as caught:
        _read(conf)
    assert str(conf) in str(caught.value) and "\n" not in str(caught.value)


def test_absent_empty_and_plain_files_read_as_file_contents_did(tmp_path: Path) -> None:
    conf = tmp_path / "dnf.conf"
    assert _read(conf) is None
    conf.write_text("")
    assert _read(conf) == []
    conf.write_text("[main]\ngpgcheck=1\n# a comment\n")
    assert _read(conf) == ["[main]", "gpgcheck=1", "# a comment"]
    link = tmp_path / "link.conf"
    link.symlink_to(conf)
    assert _read(link) == ["[main]", "gpgcheck=1", "# a comment"]


def test_no_module_reads_a_file_with_pyinfras_cat() -> None:
    src = Path(__file__).resolve().parents[2] / "src" / "gpuhost"
    users = [p.relative_to(src) for p in src.rglob("*.py") if "FileContents" in p.read_text()]
    assert users == []
