"""``gpuhost check --tier health`` given odd node names: a name is one node and one word of the
scontrol/kubectl command line, so a bad one is one line and exit 2 before the GPUs are read and
before scontrol or kubectl runs (it was handed to kubectl as is: a newline split the error line,
'--kubeconfig=...' became kubectl's option, '' fell back to the host name)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from gpuhost.checks_support import health_run
from gpuhost.checks_support.health_run import HealthRequest, run_health
from gpuhost.errors import ConfigError
from tests.robustness.conftest import assert_one_line, gpuhost

FAKE = Path(__file__).resolve().parents[1] / "checks" / "fakes" / "cluster_tool.py"

BAD = [
    ("--k8s-node", "bad\nname;rm", "'bad\\nname;rm'"),
    ("--k8s-node", "--kubeconfig=/tmp/x", "'--kubeconfig=/tmp/x'"),
    ("--k8s-node", "", "found ''"),
    ("--k8s-node", "GPU-Node1", "'GPU-Node1'"),
    ("--k8s-node", "a" * 254, "RFC 1123"),
    ("--k8s-node", "node\x1b[31m", "'node\\x1b[31m'"),
    ("--node", "-x", "found '-x'"),
    ("--node", "n1,n2", "found 'n1,n2'"),
    ("--node", "n[1-4]", "found 'n[1-4]'"),
    ("--node", "", "found ''"),
    ("--node", "n 1", "found 'n 1'"),
    ("--node", "nöde", "found 'nöde'"),
]


@pytest.mark.parametrize(("option", "name", "shown"), BAD, ids=[repr(b[1])[:20] for b in BAD])
def test_a_bad_node_name_is_one_line_before_any_tool_runs(
    tmp_path, monkeypatch, option, name, shown
):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("scontrol", "kubectl"):
        (bin_dir / tool).symlink_to(FAKE)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_CLUSTER_DIR", str(tmp_path))  # the stand-ins log their argv there
    acts = "--k8s" if option == "--k8s-node" else "--drain"
    state = str(tmp_path / "state")
    run = gpuhost("check", "--tier", "health", "--state-dir", state, acts, f"{option}={name}")
    assert_one_line(run, 2, f"{option}: found", shown)
    assert run.out == ""  # refused before the GPUs were judged
    assert not (tmp_path / "argv.log").exists()  # neither scontrol nor kubectl ran


@pytest.mark.parametrize(
    ("request_", "hostname", "option"),
    [
        (HealthRequest(drain=True), "bad host", "--node"),
        (HealthRequest(k8s=True), "node_1", "--k8s-node"),
    ],
)
def test_a_host_name_that_is_no_node_name_asks_for_the_option(
    monkeypatch, tmp_path, request_, hostname, option
):
    monkeypatch.setattr(socket, "gethostname", lambda: hostname)
    monkeypatch.setattr(health_run, "gather", lambda: pytest.fail("the GPUs were read"))
    with pytest.raises(ConfigError) as err:
        run_health(request_, print)
    message = str(err.value)
    assert message.startswith(f"{option}: this machine's name {hostname!r} is not a ")
    assert message.endswith(f": give {option} NAME") and "\n" not in message


@pytest.mark.parametrize("tool", ["scontrol", "kubectl"])
def test_an_answer_for_another_node_is_refused(tmp_path, monkeypatch, tool):
    """The stand-in tools answer for node h1 whatever was asked: gpuhost would have drained or
    tainted h1 when asked for h2 (it acts on the name it read)."""
    from gpuhost import k8s, slurm
    from gpuhost.errors import ParseError

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / tool).symlink_to(FAKE)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_CLUSTER_DIR", str(tmp_path))
    read = slurm.show_node if tool == "scontrol" else k8s.get_node
    assert read("h1").name == "h1"
    with pytest.raises(ParseError, match="node h2: answered for node 'h1'"):
        read("h2")


def test_a_folder_in_place_of_the_state_file_is_one_line(tmp_path, monkeypatch):
    """safeio.read_regular opened it and os.fdopen raised IsADirectoryError (a traceback)
    before the regular-file check; it reads the same for the fabric counters' state."""
    from gpuhost.safeio import read_regular

    folder = tmp_path / "state" / "health" / "streaks.json"
    folder.mkdir(parents=True)
    (tmp_path / "state").chmod(0o700)
    (tmp_path / "state" / "health").chmod(0o700)
    with pytest.raises(ConfigError, match="streaks.json: the state is not a regular file"):
        read_regular(folder, "the state", follow=False, owned=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").symlink_to(FAKE)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_CLUSTER_DIR", str(tmp_path))
    state = str(tmp_path / "state")
    run = gpuhost("check", "--tier", "health", "--drain", "--node", "h1", "--state-dir", state)
    assert_one_line(run, 2, "streaks.json: cannot write the health state (Is a directory)")
