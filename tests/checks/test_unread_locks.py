"""``gpuhost check`` on a Rocky host whose dnf lock file is not a small regular file (a FIFO, a
link to /dev/zero, a folder, 2 MiB): the lock read (``small_file_command``, run here in a real
shell) says so, and the holds check fails with one line naming the file. Before, the
ParseError escaped the check as a Python traceback in the check's output."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_pkgmgr import _unreadable

from gpuhost.checks.checklib import HostFacts
from gpuhost.pkgmgr import DNF


class _Shell:
    """A testinfra host stand-in: runs the command in a local shell, the lock file under
    ``root`` (``Dnf.under``)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def run(self, command: str) -> SimpleNamespace:
        command = command.replace(DNF.lock_list, DNF.under(str(self.root)).lock_list)
        done = subprocess.run(["sh", "-c", command], capture_output=True, text=True,
                              errors="replace", check=False, timeout=20)  # fmt: skip
        return SimpleNamespace(stdout=done.stdout, rc=done.returncode)


@pytest.mark.parametrize("kind", ["fifo", "device", "folder", "huge"])
def test_an_unread_lock_file_fails_the_check_in_one_line(tmp_path: Path, kind: str) -> None:
    lock_file = Path(DNF.under(str(tmp_path)).lock_list)
    _unreadable(kind, lock_file)  # tests/test_pkgmgr.py's kinds of unread lock file
    facts = HostFacts(_Shell(tmp_path), "rocky1")
    facts.__dict__["manager"] = DNF  # what a Rocky host's os-release gives

    with pytest.raises(pytest.fail.Exception) as failed:
        _ = facts.holds
    said = str(failed.value)
    assert "\n" not in said and said.startswith("rocky1: ") and str(lock_file) in said
    assert not failed.value.pytrace
