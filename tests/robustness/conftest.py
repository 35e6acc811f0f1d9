"""Helpers of the robustness suite: run the real CLI in a subprocess and judge its stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


def gpuhost(*args: str, cwd: Path | None = None, timeout: float = 120) -> Run:
    """``python -m gpuhost ARGS`` as a user runs it (a new process, real exit code)."""
    env = dict(os.environ, PYTHONWARNINGS="ignore", NO_COLOR="1")
    proc = subprocess.run(
        [sys.executable, "-m", "gpuhost", *args],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        env=env,
        timeout=timeout,
        check=False,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def assert_one_line(run: Run, code: int, *culprits: str) -> None:
    """Exit ``code``, no traceback, and one error line naming every culprit."""
    assert "Traceback" not in run.err + run.out, run.err
    assert run.code == code, (run.code, run.err)
    errors = [line for line in run.lines if "error" in line.lower() or line.startswith("gpuhost:")]
    assert len(errors) == 1, run.err
    for culprit in culprits:
        assert culprit in errors[0], (culprit, errors[0])
