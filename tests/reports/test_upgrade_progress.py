"""``gpuhost upgrade`` and ``gpuhost rollback`` show fleet progress on a terminal (hosts done,
failed or rolled back so far, elapsed) under their per-step lines, and only the per-step lines
on a pipe. The hosts are on 10.123.255.x, which no lab uses: they fail at preflight (upgrade)
or at the restore (rollback) without any host answering."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from upgrade.test_snapshot import host_output

from gpuhost.upgrade.host_state import parse_host_state
from gpuhost.upgrade.snapshot import SnapshotStore, build_snapshot
from reports.test_terminal import _inventory, _run_in_pty

HOSTS = [f"gpu{n}.dc1.example.org" for n in range(3)]
STATUS = re.compile(r"(upgrade|rollback): (\d)/3 done, (\d) failing, 0:\d\d elapsed")


def _env() -> dict[str, str]:
    env = dict(os.environ, TERM="xterm", COLUMNS="200")
    env.pop("NO_COLOR", None)
    return env


def _pipe(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuhost", *args], capture_output=True, text=True, env=_env()
    )


def test_upgrade_shows_hosts_done_and_failing_on_a_terminal(tmp_path: Path) -> None:
    inventory = str(_inventory(tmp_path))
    args = ["upgrade", inventory, "--to", "debian12-nonfree-535-security", "--canary", "0",
            "--max-failures", "5"]
    out = _run_in_pty([*args, "--state-dir", str(tmp_path / "tty")], _env())
    assert "Traceback" not in out
    counts = [(int(m[2]), int(m[3])) for m in STATUS.finditer(out) if m[1] == "upgrade"]
    assert counts[0] == (0, 0)  # drawn before the first host starts
    assert (1, 1) in counts and (2, 2) in counts  # each refused host is counted as failing
    assert all(done < 3 for done, _ in counts)  # gone once every host finished
    for host in HOSTS:
        assert f"[{host}] => " in out and f"[{host}] preflight audit ..." in out
    assert "\r\x1b[K\n" not in out  # a step line starts at the left edge, after the status line

    plain = _pipe([*args, "--state-dir", str(tmp_path / "pipe")])
    assert plain.returncode == 1, plain.stderr
    assert "done," not in plain.stdout and "\x1b" not in plain.stdout
    lines = plain.stdout.splitlines()
    for host in HOSTS:  # the per-step lines as before: start, end, outcome
        assert f"[{host}] preflight audit ..." in lines
        assert any(
            line.startswith(f"[{host}] preflight audit: failed (") and "unreachable" in line
            for line in lines
        )
        assert any(line.startswith(f"[{host}] => refused: preflight: ") for line in lines)
        assert f"  {host}: refused" in lines  # the summary


def test_rollback_shows_hosts_done_and_failing_on_a_terminal(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path / "snapshots")
    for host in HOSTS:
        store.save(build_snapshot(host, parse_host_state(host_output()), "20250101T000000Z"))
    args = ["rollback", str(_inventory(tmp_path)), "--state-dir", str(tmp_path), "--yes",
            "--parallel", "1"]
    out = _run_in_pty(args, _env())
    assert "Traceback" not in out
    counts = [(int(m[2]), int(m[3])) for m in STATUS.finditer(out) if m[1] == "rollback"]
    assert counts[0] == (0, 0) and (1, 1) in counts and (2, 2) in counts
    assert all(done < 3 for done, _ in counts)
    assert out.count(": rollback failed: ") == 3

    plain = _pipe(args)
    assert plain.returncode == 1, plain.stderr
    assert "done," not in plain.stdout and "\x1b" not in plain.stdout
    for host in HOSTS:
        assert f"{host}: back to snapshot 20250101T000000Z" in plain.stdout
        assert re.search(rf"^{re.escape(host)}: rollback failed: .*unreachable", plain.stdout,
                         re.MULTILINE)
