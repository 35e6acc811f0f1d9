"""``gpuhost check @local --tier health`` and ``--drain``: judgement on real captures, the Slurm
node parser on real ``scontrol show node`` output, the drain/resume decision, the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpuhost.checks_support.gpu import NOT_FOUND
from gpuhost.checks_support.health import HealthInputs, gather, judge, reason_line
from gpuhost.errors import ParseError
from gpuhost.faults.catalog import drain_policy
from gpuhost.faults.judge import finding_line
from gpuhost.slurm import REASON_PREFIX, SlurmNode, drain_command, parse_show_node

FIXTURES = Path(__file__).parents[1] / "fixtures"
A100 = (FIXTURES / "health" / "telegraf__a100-sxm4-v12.xml").read_text()
V100_SICK = (FIXTURES / "health" / "openpai__nvidia_smi_retired_pages.xml").read_text()
LOST = (FIXTURES / "health" / "gpu-is-lost__linux.txt").read_text()
DRAINED = (FIXTURES / "slurm" / "scontrol-show-node-drained.txt").read_text()
IDLE = (FIXTURES / "slurm" / "scontrol-show-node-idle.txt").read_text()


def _marker(driver: str) -> str:
    return f'{{"schema": 1, "profile": "p535", "driver": {{"version": "{driver}"}}}}'


def test_healthy_gpu_with_matching_marker_has_no_problem():
    assert judge(HealthInputs(A100, None, _marker("535.54.03"))) == []


def test_sick_gpu_gives_one_finding_per_problem_with_its_action():
    problems = judge(HealthInputs(V100_SICK, None, None))
    assert [(p.rule, p.action) for p in problems] == [
        ("gpu.ecc-uncorrectable", "reset-gpu"),
        ("gpu.retired-pages-pending", "reboot"),
    ]
    assert [drain_policy(p) for p in problems] == ["persistent", "persistent"]
    lines = [finding_line(p) for p in problems]
    assert lines[0].startswith(
        "[gpu.ecc-uncorrectable, action: reset-gpu] GPU 0 (Tesla V100-SXM3-32GB"
    )
    assert "volatile 1" in lines[0]
    assert lines[1].startswith("[gpu.retired-pages-pending, action: reboot] ")
    line = reason_line(problems)
    assert line.startswith(
        "[gpu.ecc-uncorrectable, action: reset-gpu] GPU 0 (Tesla V100-SXM3-32GB, 00000000:34:00.0)"
    )
    assert line.endswith("(+1 more)") and "\n" not in line


def test_driver_other_than_the_marker_records():
    (problem,) = judge(HealthInputs(A100, None, _marker("550.54.15")))
    assert problem.action is None  # not a GPU fault: the catalog has no row
    assert finding_line(problem) == (
        "[profile.driver] driver 535.54.03 found, profile p535 pins 550.54.15; fix: gpuhost "
        "upgrade (or gpuhost provision on a fresh host)"
    )


@pytest.mark.parametrize(
    ("inputs", "start"),
    [
        (HealthInputs(NOT_FOUND, None, None), "nvidia-smi is not installed; the NVIDIA kernel"),
        (HealthInputs(None, None, None), "nvidia-smi did not answer within 4 s"),
        (HealthInputs(LOST, None, None), "nvidia-smi reports gpu-lost"),
        (HealthInputs(A100, "garbage\n", None), "/proc/driver/nvidia/version: "),
    ],
)
def test_unavailable_gpus_are_one_reason(inputs, start):
    problems = judge(inputs)
    assert len(problems) == 1 and problems[0].message.startswith(start), problems


def test_a_lost_gpu_calls_for_a_reboot_at_once():
    (lost,) = judge(HealthInputs(LOST, None, None))
    assert (lost.rule, lost.action, drain_policy(lost)) == ("gpu.lost", "reboot", "immediate")
    assert reason_line([lost]).startswith("[gpu.lost, action: reboot] nvidia-smi reports gpu-lost")


def test_bad_marker_is_a_problem_not_a_crash():
    problems = judge(HealthInputs(A100, None, "{not json"))
    assert len(problems) == 1 and problems[0].message.startswith("/etc/gpuhost/profile")


def test_gather_reads_commands_and_files(tmp_path):
    (tmp_path / "proc/driver/nvidia").mkdir(parents=True)
    (tmp_path / "proc/driver/nvidia/version").write_text("NVRM version: x")

    def missing(*_args, **_kwargs):
        raise FileNotFoundError("nvidia-smi")

    def hung(argv, **kwargs):
        raise subprocess.TimeoutExpired(argv, kwargs["timeout"])

    got = gather(run=missing, root=str(tmp_path))
    assert got == HealthInputs(NOT_FOUND, "NVRM version: x", None)
    assert gather(run=hung, root=str(tmp_path)).smi_output is None


def test_a_slow_kernel_log_or_nvlink_read_is_not_judged(tmp_path):
    """The three reads run at once, each bounded: one that does not answer in time is left out
    of the judgement (nvidia-smi's report is still judged)."""

    def run(argv, **kwargs):
        if argv[0] == "sh" or argv[1:2] == ["nvlink"]:
            raise subprocess.TimeoutExpired(argv, kwargs["timeout"])
        return subprocess.CompletedProcess(argv, 0, A100, "")

    got = gather(run=run, root=str(tmp_path))
    assert got.smi_output == A100 and got.nvlink_output is None and got.kernel_log is None
    assert judge(got) == []


def test_reason_line_is_shortened():
    line = reason_line(["x" * 500])
    assert len(line) == 200 and line.endswith("...")


# --- Slurm --------------------------------------------------------------------------------------


def test_scontrol_show_node_captures():
    drained = parse_show_node(DRAINED)
    assert drained == SlurmNode(
        "h1",
        frozenset({"IDLE", "DRAIN"}),
        "gpuhost: GPU 0 (NVIDIA H100 00000000:01:00.0): 2 uncorrectable ECC error(s)",
    )
    assert drained.drained_by_gpuhost
    idle = parse_show_node(IDLE)
    assert idle == SlurmNode("h1", frozenset({"IDLE", "NOT_RESPONDING"}), None)
    assert not idle.drained
    one_line = " ".join(DRAINED.split("\n"))
    assert parse_show_node(one_line) == drained
    with pytest.raises(ParseError, match="expected the output of 'scontrol show node NAME'"):
        parse_show_node("Node h9 not found\n")


def test_drain_and_resume_decisions():
    idle = SlurmNode("n1", frozenset({"IDLE"}), None)
    ours = SlurmNode("n1", frozenset({"IDLE", "DRAIN"}), REASON_PREFIX + "drain: old")
    theirs = SlurmNode("n1", frozenset({"IDLE", "DRAIN"}), "bad fan")
    assert drain_command(idle, "gpuhost: drain: sick", resume=False) == [
        "scontrol",
        "update",
        "nodename=n1",
        "state=drain",
        "reason=gpuhost: drain: sick",
    ]
    assert drain_command(ours, "gpuhost: reboot: new", False)[-1] == "reason=gpuhost: reboot: new"
    assert drain_command(ours, "gpuhost: drain: old", False) is None  # already, for that reason
    assert drain_command(theirs, "gpuhost: drain: sick", False) is None  # an operator's stays
    assert drain_command(ours, None, resume=True) == [
        "scontrol",
        "update",
        "nodename=n1",
        "state=resume",
    ]
    assert drain_command(ours, None, resume=False) is None  # its faults persist
    assert drain_command(theirs, None, resume=True) is None  # never resumes an operator's drain
    assert drain_command(idle, None, resume=True) is None


# --- CLI ----------------------------------------------------------------------------------------


def _gpuhost(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuhost", *args], capture_output=True, text=True, check=False
    )


def test_cli_health_on_this_machine_without_gpu_is_one_line_exit_1():
    """This machine has no NVIDIA GPU: unhealthy, one line, well under 5 s."""
    proc = _gpuhost("check", "@local", "--tier", "health")
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.count("\n") == 1 and "nvidia-smi" in proc.stdout
    assert proc.stderr == ""


@pytest.mark.parametrize(
    "args",
    [
        ("check", "inventories/fleet.py", "--tier", "health"),
        ("check", "@local", "--drain"),
        ("check", "@local", "--tier", "health", "--junit", "x.xml"),
    ],
)
def test_cli_health_usage_errors_exit_2_with_one_line(args):
    proc = _gpuhost(*args)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "--tier health checks this machine only" in proc.stderr


def test_an_advisory_or_old_data_never_drains(monkeypatch):
    """The health tier judges GPU health and the recorded driver only: a driver NVIDIA's
    bulletins name (535.54.03 here) is the audit's security answer, and the matrix or
    advisories data (however old) is never read, so neither can drain a node."""
    import gpuhost.matrix
    from gpuhost.matrix import advisories, load

    assert advisories.exposure(advisories.load_advisories(), driver="535.54.03").verdict == "error"

    def refuse(*_args, **_kwargs):
        raise AssertionError("the health tier read gpuhost's knowledge data")

    monkeypatch.setattr(advisories, "load_advisories", refuse)
    monkeypatch.setattr(load, "load_matrix", refuse)
    monkeypatch.setattr(gpuhost.matrix, "load_matrix", refuse)
    assert judge(HealthInputs(A100, None, _marker("535.54.03"))) == []
