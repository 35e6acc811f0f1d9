"""The CLI's contract: errors become one line and an exit code, never a traceback."""

from __future__ import annotations

import subprocess
import sys

from gpuhost.cli import main


def test_unknown_subcommand_is_a_usage_error(capsys):
    assert main(["no-such-command"]) == 2
    err = capsys.readouterr().err
    assert "No such command" in err
    assert "Traceback" not in err


def test_version_exits_zero(capsys):
    assert main(["--version"]) == 0
    assert "gpuhost" in capsys.readouterr().out


def test_console_entry_point_runs_as_module():
    proc = subprocess.run(
        [sys.executable, "-m", "gpuhost", "--help"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0
    assert "Usage" in proc.stdout
