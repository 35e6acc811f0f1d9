"""Every data or configuration file gpuhost reads goes through the safe reader
(``datafiles.read_file_text`` -> ``safeio.read_regular``): a FIFO or a link to /dev/zero given
as a profiles file, a matrix or a provider config is one line and exit 2, never a
hang or memory without bound (before: ``Path.read_text`` blocked on the FIFO forever and read
/dev/zero until memory ran out). Each command runs as its own process with a time bound."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from robustness.conftest import ROOT


def _planted(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / f"planted-{kind}.yaml"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    return path


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
@pytest.mark.parametrize(
    "args",
    [
        ["matrix", "profile", "list", "--profiles", "{file}"],
        ["matrix", "validate", "{file}"],
        ["upgrade", "{inv}", "--to", "debian12-nonfree-535-security", "--dry",
         "--provider-config", "{file}", "--state-dir", "{tmp}/state"],
    ],
)  # fmt: skip
def test_a_planted_config_file_is_one_line(tmp_path, kind, args):
    inventory = tmp_path / "inv.py"
    inventory.write_text("gpu = [('n1', {'ssh_hostname': '127.0.0.1', 'ssh_port': 1})]\n")
    file = _planted(tmp_path, kind)
    argv = [a.format(file=file, inv=inventory, tmp=tmp_path) for a in args]

    run = subprocess.run(
        [sys.executable, "-m", "gpuhost", *argv], capture_output=True, text=True, cwd=ROOT,
        timeout=120, check=False, env=dict(os.environ, PYTHONWARNINGS="ignore"),
    )  # fmt: skip

    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr and str(file) in run.stderr
    assert run.stderr.count("\n") == 1, run.stderr
