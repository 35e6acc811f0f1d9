"""The SSH checks on a host without an SSH daemon (a workstation, a container): every SSH check
skips with the reason instead of failing or erroring (``gpuhost check @local`` on such a machine
used to end test_ssh_dropins_are_read_first with a RuntimeError traceback from testinfra, because
/etc/ssh/sshd_config does not exist there)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SSHD_INSTALLED = bool(shutil.which("sshd")) or Path("/usr/sbin/sshd").exists()


@pytest.mark.skipif(
    SSHD_INSTALLED,
    reason="this machine has an SSH daemon; the case needs one without (the lab hosts have one)",
)
def test_ssh_checks_skip_with_reason_where_no_sshd(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-rs",
            "--hosts=local://",
            "--pyargs",
            "gpuhost.checks.test_ssh",
            "-k",
            "test_ssh_",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    summary = out.strip().splitlines()[-1]
    assert "failed" not in summary and "error" not in summary, out[-3000:]
    assert "RuntimeError" not in out, out[-3000:]
    skipped = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert skipped and all(
        "no SSH daemon here (openssh-server not installed)" in line for line in skipped
    ), out[-3000:]
