"""Every external tool gpuhost starts ends by its deadline, with everything it started
(:mod:`gpuhost.toolrun`): a launcher that leaves a child holding the output pipe (a hung
``srun``'s step) no longer keeps the collective tier, the health tier's scontrol/kubectl or a
provider command waiting after the timeout (under gevent, which the CLI's pyinfra import
installs, ``subprocess.run`` waits for the pipe's end after its timeout's kill). Each test's
tool ends by the deadline under test or by its own ``sleep``."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from gpuhost import node_tool, toolrun
from gpuhost.collective import hosts
from gpuhost.errors import HostError
from gpuhost.upgrade.providers import CommandProvider

# a launcher that starts a step in the background (it inherits stdout) and then hangs itself
HUNG = "echo started; sleep 300 & echo $! > {pid}; sleep 300"


def _gone(pid_file: Path) -> bool:
    pid = int(pid_file.read_text())
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie not yet reaped by its (killed) parent's reaper counts as gone
    state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    return state == "Z"


def _wait_gone(pid_file: Path) -> bool:
    until = time.monotonic() + 10
    while time.monotonic() < until:
        if _gone(pid_file):
            return True
        time.sleep(0.05)
    return False


def test_a_hung_launcher_and_its_step_are_stopped_at_the_run_timeout(tmp_path):
    pid = tmp_path / "step.pid"

    rc, output = hosts._run(["sh", "-c", HUNG.format(pid=pid)], 1.0)

    assert rc == 124
    assert output.startswith("started\n")
    assert output.endswith("the run took longer than 1 s and was stopped")
    assert _wait_gone(pid), "the launcher's background step outlived the timeout"


def test_a_tool_ignoring_sigterm_is_killed(tmp_path):
    result = toolrun.run(["sh", "-c", "trap '' TERM; echo up; sleep 300"], 0.5)

    assert result.timed_out and result.returncode == -signal.SIGKILL
    assert result.stdout == b"up\n"


def test_a_tool_that_ended_but_left_a_child_on_the_pipe_returns(tmp_path):
    pid = tmp_path / "daemon.pid"

    result = toolrun.run(["sh", "-c", f"echo done; sleep 300 & echo $! > {pid}; exit 3"], 60)

    assert (result.returncode, result.stdout, result.timed_out) == (3, b"done\n", False)
    assert _wait_gone(pid)


def test_output_is_capped_and_input_is_written():
    flood = toolrun.run(["sh", "-c", "yes | head -c 3000000"], 30, max_output=1000)
    echoed = toolrun.run(["cat"], 30, input=b"x" * 200_000)

    assert flood.returncode == 0 and flood.stdout == b"y\n" * 500
    assert echoed.stdout == b"x" * 200_000


def test_a_missing_tool_raises_oserror():
    with pytest.raises(FileNotFoundError):
        toolrun.run(["/nonexistent/gpuhost-tool"], 5)


def test_a_hung_scontrol_is_one_line_and_its_children_go(tmp_path, monkeypatch):
    pid = tmp_path / "child.pid"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "scontrol"
    tool.write_text(f"#!/bin/sh\nsleep 300 & echo $! > {pid}\nsleep 300\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")

    with pytest.raises(HostError) as caught:
        node_tool.run_tool(["scontrol", "show", "node", "n1"], "no scontrol", timeout=0.5)

    assert "scontrol show node n1: no answer in 0.5 s" in str(caught.value)
    assert _wait_gone(pid)


def test_a_hung_provider_command_is_one_line_and_its_children_go(tmp_path):
    pid = tmp_path / "child.pid"
    provider = CommandProvider(f"sleep 300 & echo $! > {pid}; sleep 300", timeout_s=0.5)

    with pytest.raises(HostError) as caught:
        provider.snapshot("h1", {}, "label", "id1")

    assert "provider command timed out after 0.5s" in str(caught.value)
    assert _wait_gone(pid)


def test_stderr_lines_are_handed_over_while_the_tool_runs(tmp_path):
    """The acceptance agent's progress: each stderr line reaches the caller before the tool
    ends (the tool here waits for the file the first line's handler writes)."""
    seen = tmp_path / "seen"
    lines: list[str] = []

    def said(line: str) -> None:
        lines.append(line)
        seen.write_text(line)

    script = f"echo 'progress soak 1/2' >&2; while [ ! -e {seen} ]; do sleep 0.05; done; echo out"
    result = toolrun.Tool(["sh", "-c", script], on_stderr_line=said).finish(10)

    assert (result.timed_out, result.stdout, lines) == (False, b"out\n", ["progress soak 1/2"])


def test_a_hung_acceptance_agent_is_one_line_at_its_deadline(tmp_path, monkeypatch):
    """Before, `gpuhost accept` read the agent's output with no deadline at all: an agent
    (or an ssh) that never ended held the run forever. Now its group goes at the soak's
    duration plus the slack."""
    from gpuhost.accept import remote
    from gpuhost.accept.options import AcceptOptions
    from gpuhost.checks_support.inventory import LOCAL, CheckHost

    pid = tmp_path / "child.pid"
    monkeypatch.setattr(remote, "SLACK_S", 0.5)
    monkeypatch.setattr(
        remote.Remote, "agent_command", lambda *_: f"sh -c 'sleep 300 & echo $! > {pid}; sleep 300'"
    )
    agent = remote.Remote(CheckHost(LOCAL), None)

    with pytest.raises(HostError) as caught:
        # the timed stages skipped: the deadline is the soak's duration plus the slack
        agent.run_agent(AcceptOptions(duration_s=0.5, skip=frozenset({"dcgm", "nvbandwidth",
                                                                       "nccl"})),
                        "python3", "", lambda _: None)  # fmt: skip

    assert "the acceptance agent did not finish within 1 s" in str(caught.value)
    assert _wait_gone(pid)
    agent.stop()  # the agent is over: nothing to signal


def test_the_agents_deadline_covers_the_limits_it_runs_under():
    """The deadline was the soak's duration plus 30 min, while the agent lets dcgmi diag run 2 h
    (and nvbandwidth, NCCL 15 min each): a level 3/4 diag over 30 min had a healthy host's run
    killed as 'did not finish'. The agent gets the limits the deadline is made of."""
    import shlex

    from gpuhost.accept import agent as agent_script
    from gpuhost.accept import remote
    from gpuhost.accept.options import AcceptOptions
    from gpuhost.checks_support.inventory import LOCAL, CheckHost

    options = AcceptOptions(duration_s=3600.0)
    argv = shlex.split(remote.Remote(CheckHost(LOCAL), None).agent_command(options, "python3", ""))
    opts = agent_script.parse_args(argv[2:])
    after_soak = remote.agent_deadline(options) - options.duration_s
    assert after_soak > opts["dcgm_timeout"] + 2 * opts["tool_timeout"]
    assert (opts["dcgm_timeout"], opts["tool_timeout"]) == (
        remote.DCGM_TIMEOUT_S, remote.TOOL_TIMEOUT_S)
    skipped = AcceptOptions(duration_s=60.0, skip=frozenset({"dcgm", "nvbandwidth", "nccl"}))
    assert remote.agent_deadline(skipped) == 60.0 + remote.SLACK_S


def test_a_long_soaks_document_is_read_whole(tmp_path, monkeypatch):
    """The agent prints its document as one line at the end; toolrun keeps 16 MiB of stdout by
    default, so a long soak's telemetry (72 h of 8 GPUs every 10 s: about 24 MB) was cut and the
    host's run ended in 'printed no result'. The cap grows with the soak's samples."""
    from gpuhost import toolrun
    from gpuhost.accept import remote
    from gpuhost.accept.options import AcceptOptions
    from gpuhost.checks_support.inventory import LOCAL, CheckHost

    row = "0, 00000000:18:00.0, 59, 631.95, 700.00, 1980, 1980, 100, Not Active, " * 2
    options = AcceptOptions(duration_s=72 * 3600.0, interval_s=10.0)
    samples = int(options.duration_s / options.interval_s)
    script = tmp_path / "agent.py"
    script.write_text(
        "import json\n"
        f"sample = {{'t': 1.0, 'rc': 0, 'csv': {row!r} * 8}}\n"
        f"print(json.dumps({{'stages': {{'soak': {{'samples': [sample] * {samples}}}}}}}))\n"
    )
    monkeypatch.setattr(remote.Remote, "agent_command",
                        lambda *_: f"{sys.executable} {script}")  # fmt: skip
    doc = remote.Remote(CheckHost(LOCAL), None).run_agent(options, "python3", "", lambda _: None)

    assert len(doc["stages"]["soak"]["samples"]) == samples
    assert len(json.dumps(doc)) > toolrun.MAX_OUTPUT  # what was cut before
