"""Terminal output: progress of fleet runs on a terminal, plain lines elsewhere, NO_COLOR, and
table rows that wrap instead of cutting values."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

from gpuhost.audit.host import unreachable_host
from gpuhost.audit.report import table
from gpuhost.escape import terminal_output
from gpuhost.terminal import FleetProgress, wrap_last

ANSI_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_on_a_terminal_keeps_a_status_line_under_the_host_lines():
    stream, clock = Tty(), Clock()
    progress = FleetProgress(3, "audit", stream, clock)
    progress.start()
    clock.now += 5
    progress.host_done("h1 ok", failing=False)
    clock.now += 70
    progress.host_done("h2 unreachable", failing=True)
    progress.host_done("h3 error", failing=True)
    progress.close()
    text = terminal_output(stream.getvalue())  # what the escaping stream writes to the terminal
    assert text.startswith("audit: 0/3 done, 0 failing, 0:00 elapsed\r\x1b[K")
    assert "h1 ok\naudit: 1/3 done, 0 failing, 0:05 elapsed\r\x1b[K" in text
    assert "h2 unreachable\naudit: 2/3 done, 1 failing, 1:15 elapsed\r\x1b[K" in text
    assert text.endswith("h3 error\n")  # the status line is gone once all are done


def test_progress_elsewhere_is_plain_lines():
    stream = io.StringIO()
    progress = FleetProgress(2, "audit", stream)
    progress.start()
    progress.host_done("h1 ok", failing=False)
    progress.host_done("h2 error", failing=True)
    progress.close()
    assert stream.getvalue() == "h1 ok\nh2 error\n"


def test_rows_wrap_the_last_column_instead_of_cutting():
    gpus = ", ".join(f"1x NVIDIA H100 80GB HBM3 (slot {n})" for n in range(8))
    prefix = "host-a   ERROR   "
    text = wrap_last(prefix, gpus, width=60)
    lines = text.split("\n")
    assert len(lines) > 2 and all(len(line) <= 60 for line in lines)
    assert lines[0].startswith(prefix)
    assert all(line.startswith(" " * len(prefix)) for line in lines[1:])
    assert " ".join(line[len(prefix) :] for line in lines) == gpus


def test_host_line_prints_long_names_and_reasons_whole():
    name = "gpu-0001.rack01.dc1.a-rather-long-domain.example.org"
    reason = "connect timed out after 10s while resolving " + "x" * 150
    line = table.host_line(unreachable_host(name, reason), width=100)
    assert line.startswith(name + " UNREACHABLE")
    assert "".join(part.strip() for part in line.split("\n")).count("x" * 150) == 1
    assert ANSI_COLOUR.search(line) is None  # no stream given: no colour


def test_host_line_colours_the_verdict_only_on_a_terminal(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    report = unreachable_host("h1", "refused")
    assert ANSI_COLOUR.search(terminal_output(table.host_line(report, Tty())))
    assert ANSI_COLOUR.search(terminal_output(table.host_line(report, io.StringIO()))) is None
    monkeypatch.setenv("NO_COLOR", "1")
    assert ANSI_COLOUR.search(terminal_output(table.host_line(report, Tty()))) is None


def _run_in_pty(args: list[str], env: dict[str, str], timeout: float = 120) -> str:
    """Run ``python -m gpuhost ARGS`` with a pseudo-terminal as stdout/stderr; its output."""
    main, child = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuhost", *args], stdout=child, stderr=child, env=env
    )
    os.close(child)
    chunks = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main], [], [], 0.5)
        if ready:
            try:
                data = os.read(main, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    proc.wait(timeout=10)
    os.close(main)
    return b"".join(chunks).decode("utf-8", "replace")


def _inventory(tmp_path: Path) -> Path:
    # closed ports of 127.0.0.1: each connection is refused, no address beyond this machine
    path = tmp_path / "inv.py"
    hosts = ", ".join(
        f'("gpu{n}.dc1.example.org", {{"ssh_hostname": "127.0.0.1", "ssh_port": {n + 1}}})'
        for n in range(3)
    )
    path.write_text(f"gpus = [{hosts}]\n")
    return path


def test_fleet_audit_on_a_terminal_shows_progress_and_colour(tmp_path):
    env = dict(os.environ, TERM="xterm", COLUMNS="120")
    env.pop("NO_COLOR", None)
    args = ["audit", str(_inventory(tmp_path)), "--connect-timeout", "1", "--parallel", "1"]
    out = _run_in_pty(args, env)
    assert "audit: 0/3 done, 0 failing" in out
    assert re.search(r"audit: [12]/3 done, [12] failing, 0:\d\d elapsed", out)
    assert ANSI_COLOUR.search(out)  # verdicts (and click's styles) in colour
    assert "gpu2.dc1.example.org" in out and "Traceback" not in out
    plain = subprocess.run(
        [sys.executable, "-m", "gpuhost", *args], capture_output=True, text=True, env=env
    )
    assert "done," not in plain.stdout and "\x1b" not in plain.stdout  # a pipe: plain lines
    assert plain.stdout.count("UNREACHABLE") == 3


def test_no_color_is_honoured_on_a_terminal(tmp_path):
    env = dict(os.environ, TERM="xterm", NO_COLOR="1")
    args = ["audit", str(_inventory(tmp_path)), "--connect-timeout", "1", "--parallel", "3"]
    out = _run_in_pty(args, env)
    assert "UNREACHABLE" in out and ANSI_COLOUR.search(out) is None


def test_harden_and_provision_show_progress_on_a_terminal(tmp_path):
    env = dict(os.environ, TERM="xterm")
    inventory = str(_inventory(tmp_path))
    for command in ("harden", "provision"):
        out = _run_in_pty([command, inventory, "--dry"], env)
        assert f"{command}: 0/3 done, 0 failing" in out  # the status line, before any host
        assert re.search(rf"{command}: [12]/3 done, [12] failing", out)
        assert out.count(": unreachable: ") == 3 and "Traceback" not in out
        plain = subprocess.run(
            [sys.executable, "-m", "gpuhost", command, inventory, "--dry"],
            capture_output=True,
            text=True,
            env=env,
        )
        assert "done," not in plain.stdout and plain.stdout.count("unreachable") == 3
