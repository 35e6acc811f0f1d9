"""Drain modes: Slurm (scontrol parsing, waiting for jobs, not resuming an admin's drain) and
Kubernetes (kubectl calls from the controller)."""

from __future__ import annotations

import subprocess

import pytest

from gpuhost.errors import ConfigError, HostError
from gpuhost.upgrade.drain import (
    KubernetesDrain,
    NoDrain,
    SlurmDrain,
    make_drainer,
    parse_scontrol_node,
    slurm_is_idle,
    slurm_state_flags,
)
from upgrade.fakes import ScriptedRemote, fail, ok

NODE_LINE = (
    "NodeName=h2 Arch=x86_64 CoresPerSocket=1 CPUAlloc=1 CPUTot=2 Gres=(null) "
    "NodeAddr=10.123.0.12 NodeHostName=h2 OS=Linux 6.1.0 RealMemory=1000 "
    "State={state} ThreadsPerCore=1 Partitions=debug Reason={reason} [root@2025-01-01T00:00:00]"
)


def node(state: str, reason: str = "none") -> str:
    return NODE_LINE.format(state=state, reason=reason)


def test_parse_scontrol_node_keeps_values_with_spaces():
    fields = parse_scontrol_node(node("MIXED+DRAIN", "gpuhost upgrade to p2"))
    assert fields["NodeName"] == "h2"
    assert fields["State"] == "MIXED+DRAIN"
    assert fields["Reason"] == "gpuhost upgrade to p2 [root@2025-01-01T00:00:00]"
    with pytest.raises(HostError):
        parse_scontrol_node("Node h2 not found")


@pytest.mark.parametrize(
    ("state", "idle"),
    [
        ("IDLE+DRAIN", True),
        ("MIXED+DRAIN", False),
        ("ALLOCATED+DRAIN", False),
        ("COMPLETING+DRAIN", False),
        ("DOWN+DRAIN*", True),
        ("IDLE", True),
    ],
)
def test_slurm_idle(state, idle):
    assert slurm_is_idle(slurm_state_flags(state)) is idle


def test_slurm_drain_waits_for_jobs_then_resume():
    states = iter(["IDLE", "MIXED+DRAIN", "MIXED+DRAIN", "IDLE+DRAIN"])
    jobs = iter(["17\n", "17\n", ""])
    remote = (
        ScriptedRemote("h2")
        .on("hostname -s", ok("h2\n"))
        .on("scontrol -o show node", lambda c: ok(node(next(states)) + "\n"))
        .on("squeue -h -w h2 -o %i", lambda c: ok(next(jobs)))
        .on("scontrol update nodename=h2 state=drain reason='gpuhost upgrade to p2'", ok())
        .on("scontrol update nodename=h2 state=resume", ok())
    )
    drainer = SlurmDrain(poll_s=0, sleep=lambda s: None)
    data = drainer.drain(remote, {}, "gpuhost upgrade to p2")
    assert data == {"drain": "slurm", "slurm_node": "h2", "drained_before": False}
    update = [c for c in remote.commands if c.startswith("scontrol update")]
    assert update == ["scontrol update nodename=h2 state=drain reason='gpuhost upgrade to p2'"]
    drainer.undrain(remote, {}, data)
    assert remote.commands[-1] == "scontrol update nodename=h2 state=resume"


def test_slurm_node_drained_by_an_admin_is_left_drained():
    remote = (
        ScriptedRemote("h2")
        .on("scontrol -o show node", ok(node("IDLE+DRAIN", "bad DIMM, ticket 123")))
        .on("squeue -h -w h2 -o %i", ok(""))
    )
    drainer = SlurmDrain(poll_s=0, sleep=lambda s: None)
    data = drainer.drain(remote, {"slurm_node": "h2"}, "upgrade")
    assert data["drained_before"] is True
    drainer.undrain(remote, {}, data)
    assert not [c for c in remote.commands if "scontrol update" in c]


def test_slurm_drain_times_out_with_the_jobs_named():
    clock = iter(range(100))
    remote = (
        ScriptedRemote("h2")
        .on("scontrol -o show node", ok(node("ALLOCATED+DRAIN")))
        .on("squeue", ok("41\n42\n"))
    )
    drainer = SlurmDrain(timeout_s=3, poll_s=0, sleep=lambda s: None, clock=lambda: next(clock))
    with pytest.raises(HostError, match=r"still runs job\(s\) 41, 42 after 3s"):
        drainer.drain(remote, {"slurm_node": "h2"}, "upgrade")


def test_slurm_errors_are_host_errors():
    remote = ScriptedRemote("h2").on(
        "scontrol -o show node", fail("slurm_load_node error: Unable to contact slurm controller")
    )
    with pytest.raises(HostError, match="Unable to contact slurm controller"):
        SlurmDrain().drain(remote, {"slurm_node": "h2"}, "upgrade")


class Kubectl:
    def __init__(self, cordoned="false", fail_on=None):
        self.calls = []
        self.cordoned = cordoned
        self.fail_on = fail_on

    def __call__(self, argv):
        self.calls.append(argv[1:])
        if self.fail_on and self.fail_on in argv:
            return subprocess.CompletedProcess(argv, 1, "", "error: cannot evict pod\n")
        out = self.cordoned if argv[1] == "get" else ""
        return subprocess.CompletedProcess(argv, 0, out, "")


def test_kubernetes_drain_and_uncordon():
    kubectl = Kubectl()
    drainer = KubernetesDrain(run=kubectl, timeout_s=60)
    remote = ScriptedRemote("gpu-1")
    data = drainer.drain(remote, {}, "upgrade")
    assert kubectl.calls[1] == [
        "drain",
        "gpu-1",
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=60s",
    ]
    drainer.undrain(remote, {}, data)
    assert kubectl.calls[-1] == ["uncordon", "gpu-1"]


def test_kubernetes_already_cordoned_stays_cordoned_and_errors_are_clear():
    kubectl = Kubectl(cordoned="true")
    drainer = KubernetesDrain(run=kubectl)
    data = drainer.drain(ScriptedRemote("n"), {"k8s_node": "node-7"}, "upgrade")
    assert data["k8s_node"] == "node-7" and data["drained_before"] is True
    drainer.undrain(ScriptedRemote("n"), {}, data)
    assert ["uncordon", "node-7"] not in kubectl.calls
    with pytest.raises(HostError, match="kubectl drain .* exited 1: error: cannot evict pod"):
        KubernetesDrain(run=Kubectl(fail_on="drain")).drain(ScriptedRemote("n"), {}, "u")


def test_make_drainer():
    assert isinstance(make_drainer("none"), NoDrain)
    assert isinstance(make_drainer("slurm"), SlurmDrain)
    with pytest.raises(ConfigError, match="expected one of none, slurm, kubernetes"):
        make_drainer("nomad")
