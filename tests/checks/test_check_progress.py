"""``gpuhost check`` says how far a fleet run is: each host's checks run together and, as its
last one ends, one line with its counts and n/N hosts done (a terminal and a pipe alike)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from gpuhost.checks.progress import HostProgress


def test_host_progress_counts_as_pytest_does() -> None:
    ticks = iter([0.0, 14.0, 75.0])
    progress = HostProgress(["h1", "h1", "ssh://h2"], clock=lambda: next(ticks))
    assert progress.report("h1", "setup", "passed") is None
    assert progress.report("h1", "call", "passed") is None
    assert progress.report("h1", "teardown", "passed") is None  # h1 has one more check
    assert progress.report("h1", "setup", "skipped") is None
    assert progress.report("h1", "teardown", "passed") == (
        "gpuhost check: h1: 1 passed, 1 skipped (1/2 hosts done, 0:14 elapsed)"
    )
    assert progress.report("ssh://h2", "setup", "failed") is None  # a fixture failed: error
    assert progress.report("ssh://h2", "teardown", "failed") == (
        "gpuhost check: h2: 2 errors (2/2 hosts done, 1:15 elapsed)"
    )
    assert progress.report("other", "call", "passed") is None


def test_fleet_check_runs_host_by_host_with_a_line_per_host(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nothing listens on: that host is unreachable
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    gone = {"ssh_hostname": "127.0.0.1", "ssh_port": port}
    gone["ssh_known_hosts_file"] = str(tmp_path / "known_hosts")
    inv = tmp_path / "inv.py"
    # inventory order, not pytest's (which sorts 'local' before 'ssh://gone')
    inv.write_text(f"hosts = [('gone', {gone!r}), ('@local', {{}})]\n", encoding="utf-8")
    exe = Path(sys.executable).with_name("gpuhost")
    proc = subprocess.run(
        [str(exe), "check", str(inv), "--tier", "static"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    lines = proc.stdout.splitlines()
    assert proc.returncode == 1, proc.stdout[-3000:]
    done = [i for i, line in enumerate(lines) if "hosts done, " in line]
    assert len(done) == 2, proc.stdout[-3000:]
    gone_line, local = lines[done[0]], lines[done[1]]
    assert gone_line.startswith("gpuhost check: gone: ") and "errors (1/2 hosts done, " in gone_line
    assert local.startswith("gpuhost check: local: ") and "(2/2 hosts done, " in local
    assert " failed" in local and " skipped" in local
    # host by host: the unreachable host's checks (all E) all come before its line
    checks = [i for i, line in enumerate(lines) if line.split(" ")[0].endswith(".py")]
    assert all(set(lines[i].split(" ")[1]) == {"E"} for i in checks if i < done[0]), lines
    assert all("E" not in lines[i].split(" ")[1] for i in checks if i > done[0]), lines
    # pytest's own progress kept; a long relative path can wrap a file's results onto a
    # continuation line, so the last line carrying a percentage is the one to read
    progress = [line.rstrip() for line in lines[: done[1]] if line.rstrip().endswith("%]")]
    assert progress and progress[-1].endswith("[100%]"), lines
