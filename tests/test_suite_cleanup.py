"""The suite leaves nothing behind in the temporary folder.

Each pytest process makes its own data and state folders (tests/conftest.py); before, none was
removed, and every run left two `gpuhost-test-*` folders per process in /tmp (hundreds on a shared
machine). A pytest run here, as one process and with an xdist worker, under a TMPDIR of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ONE_TEST = "test_findings.py::test_an_unreachable_host_is_unreachable_whatever_its_findings_say"


@pytest.mark.parametrize("workers", [["-p", "no:xdist"], ["-n", "1"]], ids=["one-process", "xdist"])
def test_a_pytest_run_removes_the_folders_it_made(tmp_path: Path, workers: list[str]) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *workers,
         str(TESTS / ONE_TEST)],
        cwd=TESTS.parent, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    left = sorted(path.name for path in tmp_path.iterdir() if path.name.startswith("gpuhost-test-"))
    assert left == [], f"left in TMPDIR: {left}"
