"""The health tier acts without flapping (issue 26): consecutive-run counts per fault id in the
state file, drain at once / after N runs / never by the fault's drain policy, the drain reason
naming the action, resume only when gpuhost's own faults clear, the Kubernetes condition and
taint. Slurm and Kubernetes are the stand-in tools in tests/checks/fakes (argv recorded)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuhost.checks_support import health_run
from gpuhost.checks_support.health import HealthInputs
from gpuhost.checks_support.health_decide import (
    HealthFault,
    Memory,
    check_after,
    decide,
    summary,
)
from gpuhost.checks_support.health_memory import (
    MAX_BYTES,
    load_memory,
    memory_path,
    save_memory,
)
from gpuhost.checks_support.health_run import HealthRequest, reason, run_health
from gpuhost.errors import ConfigError, HostError, ParseError
from gpuhost.k8s import CONDITION, TAINT_KEY, K8sNode, camel, commands, parse_node

FIXTURES = Path(__file__).parents[1] / "fixtures"
FAKE = Path(__file__).parent / "fakes" / "cluster_tool.py"
A100 = (FIXTURES / "health" / "telegraf__a100-sxm4-v12.xml").read_text()
V100_SICK = (FIXTURES / "health" / "openpai__nvidia_smi_retired_pages.xml").read_text()

ECC = HealthFault("gpu.ecc", "reset-gpu", "persistent", "[gpu.ecc] GPU 0: 1 uncorrectable")
LOST = HealthFault("gpu.lost", "reboot", "immediate", "GPU 00000000:3B:00.0 fell off the bus")
SLOW = HealthFault("gpu.clocks.sw-thermal", "watch", "never", "[gpu.clocks] GPU 1 slowed")
LINK = HealthFault("gpu.nvlink.down", "inspect-hardware", "persistent", "[gpu.nvlink] link 3")


def _runs(
    *seen: list[HealthFault], after: int = 3, memory: Memory | None = None, lifted: bool = False
):
    """decide() over consecutive runs; each run's decision."""
    memory = Memory() if memory is None else memory
    out = []
    for faults in seen:
        decision = decide(faults, memory, after, lifted)
        memory = decision.memory
        out.append(decision)
    return out


def test_a_fault_that_clears_on_the_next_run_drains_nothing():
    first, second = _runs([ECC], [])
    assert first.drain == [] and first.waiting == [(ECC, 1)]
    assert second.drain == [] and second.memory.streaks == {}


def test_a_fault_seen_on_n_consecutive_runs_drains():
    runs = _runs([ECC], [ECC], [ECC], [ECC])
    assert [d.drain for d in runs] == [[], [], [ECC], [ECC]]
    assert runs[1].waiting == [(ECC, 2)]
    assert runs[2].memory.drained_for == ("gpu.ecc",)
    # a gap starts the count again
    assert [d.drain for d in _runs([ECC], [ECC], [], [ECC], [ECC])] == [[]] * 5
    assert _runs([ECC], after=1)[0].drain == [ECC]


def test_immediate_faults_drain_at_once_and_never_faults_never():
    (first,) = _runs([SLOW, LOST])
    assert first.drain == [LOST]
    runs = _runs(*[[SLOW]] * 10)
    assert all(d.drain == [] and d.waiting == [] for d in runs)
    assert runs[-1].memory.streaks == {"gpu.clocks.sw-thermal": 10}


def test_resume_only_when_gpuhosts_own_faults_clear():
    drained = _runs([ECC], [ECC], [ECC])[-1].memory
    # X (gpu.ecc) persists, another fault came and cleared: still held
    held = _runs([ECC, LOST], [ECC], memory=drained)
    assert held[0].drain == [LOST, ECC] and not held[0].resume
    assert held[1].drain == [ECC] and not held[1].resume
    # X clears while another fault is new (not yet persistent): gpuhost's drain is lifted
    (lifted,) = _runs([LINK], memory=drained)
    assert lifted.drain == [] and lifted.resume and lifted.memory.drained_for == ()
    # a watch fault alone never holds a drain
    assert _runs([SLOW], memory=drained)[0].resume


def test_unknown_drain_record_is_lifted_only_without_any_fault():
    unknown = Memory(drained_for=None)
    (held,) = _runs([LINK], memory=unknown)
    assert not held.resume and held.memory.drained_for is None
    (lifted,) = _runs([SLOW], memory=unknown)
    assert lifted.resume and lifted.memory.drained_for == ()


XID = HealthFault("gpu.xid.46", "reset-gpu", "persistent", "[gpu.xid.46] Xid 46 on GPU 0")


def test_an_operators_resume_acknowledges_logged_xids_not_states():
    drained = _runs([XID, ECC], after=1)[0].memory
    assert drained.drained_for == ("gpu.xid.46", "gpu.ecc")
    # the operator resumed the node: the Xid (still in the kernel log) is acknowledged, the ECC
    # errors (a state) drain again
    (again,) = _runs([XID, ECC], after=1, memory=drained, lifted=True)
    assert again.drain == [ECC] and again.memory.acknowledged == ("gpu.xid.46",)
    (only_xid,) = _runs([XID], after=1, memory=again.memory, lifted=True)
    assert only_xid.drain == [] and only_xid.resume
    # acknowledged while logged; a reboot clears the log and the acknowledgement with it
    assert _runs([XID], after=1, memory=only_xid.memory)[0].drain == []
    gone = _runs([], memory=only_xid.memory)[0].memory
    assert gone.acknowledged == () and _runs([XID], after=1, memory=gone)[0].drain == [XID]
    # no drain of gpuhost's was lifted: nothing is acknowledged
    assert _runs([XID], after=1, memory=Memory(), lifted=True)[0].drain == [XID]


def test_reason_names_the_strongest_action_within_slurms_length():
    decision = _runs([ECC, LINK, LOST], after=1)[0]
    assert [f.id for f in decision.drain] == ["gpu.nvlink.down", "gpu.lost", "gpu.ecc"]
    assert reason(decision) == "gpuhost: inspect-hardware: [gpu.nvlink] link 3 (+2 more)"
    long = HealthFault("gpu.x", "drain", "immediate", "[gpu.x] " + "word " * 100)
    text = reason(_runs([long, ECC])[0])  # gpu.ecc is not persistent yet: not in the reason
    assert text is not None and len(text) == 200 and text.endswith(" wor...")
    both = reason(_runs([long, ECC], after=1)[0])  # reset-gpu is the stronger action
    assert both == "gpuhost: reset-gpu: [gpu.ecc] GPU 0: 1 uncorrectable (+1 more)"
    assert summary([], 200) == "healthy"
    assert summary([SLOW, long], 50) == "drain: [gpu.x] word word word word wo... (+1 more)"
    assert _runs([ECC])[0].drain == [] and reason(_runs([ECC])[0]) is None


@pytest.mark.parametrize("bad", [0, -1, 1001, True, "3"])
def test_after_must_be_a_count_of_runs(bad):
    assert "expected a whole number of runs from 1 to 1000" in (check_after(bad) or "")
    with pytest.raises(ConfigError, match="^--after: expected"):
        run_health(HealthRequest(drain=True, after=bad), print)


def test_a_fault_with_an_unknown_drain_policy_is_refused():
    with pytest.raises(ValueError, match="drain policy 'sometimes'"):
        HealthFault("gpu.x", "drain", "sometimes", "x")


# --- the state file -----------------------------------------------------------------------------


def test_memory_round_trip_is_private(tmp_path):
    state = tmp_path / "state"
    memory, damaged = load_memory(state)
    assert damaged is None and memory == Memory(drained_for=None)  # no record: unknown
    save_memory(state, Memory({"gpu.ecc": 2}, ("gpu.lost",), ("gpu.xid.46",)))
    assert load_memory(state) == (Memory({"gpu.ecc": 2}, ("gpu.lost",), ("gpu.xid.46",)), None)
    assert memory_path(state).stat().st_mode & 0o777 == 0o600
    assert memory_path(state).parent.stat().st_mode & 0o777 == 0o700
    assert json.loads(memory_path(state).read_text())["schema"] == 1


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("{not json", "not JSON"),
        ('{"schema": 2, "streaks": {}}', "expected an object with schema 1"),
        ('{"schema": 1, "streaks": {"gpu.ecc": 0}}', "streaks: expected"),
        ('{"schema": 1, "streaks": {"gpu.ecc": true}}', "streaks: expected"),
        ('{"schema": 1, "streaks": {}, "drained_for": "gpu.ecc"}', "drained_for: expected"),
        ('{"schema": 1, "streaks": {}, "acknowledged": [1]}', "acknowledged: expected"),
        ("\xff\xfe", "codec can't decode"),
        (" " * (MAX_BYTES + 1), f"more than {MAX_BYTES}"),
    ],
)
def test_a_damaged_state_file_is_one_line_and_counts_afresh(tmp_path, content, why):
    path = memory_path(tmp_path)
    path.parent.mkdir(mode=0o700)
    path.write_bytes(content.encode("latin-1"))
    memory, damaged = load_memory(tmp_path)
    assert memory == Memory(drained_for=None)
    assert damaged is not None and "\n" not in damaged and why in damaged
    assert damaged.startswith(f"{path}: health state unusable (")


def test_an_unsafe_state_file_is_not_trusted(tmp_path):
    path = memory_path(tmp_path)
    path.parent.mkdir(mode=0o700)
    target = tmp_path / "elsewhere.json"
    target.write_text('{"schema": 1, "streaks": {"gpu.ecc": 9}, "drained_for": []}')
    path.symlink_to(target)
    memory, damaged = load_memory(tmp_path)
    assert memory == Memory(drained_for=None) and "symbolic link" in (damaged or "")
    save_memory(tmp_path, Memory({"gpu.ecc": 1}))  # replaces the link, never writes through it
    assert not path.is_symlink() and json.loads(target.read_text())["streaks"] == {"gpu.ecc": 9}
    path.chmod(0o666)
    assert "world-writable" in (load_memory(tmp_path)[1] or "")
    path.unlink()
    os.mkfifo(path)
    assert "not a regular file" in (load_memory(tmp_path)[1] or "")  # and it did not block


def test_an_unsafe_state_folder_is_refused(tmp_path):
    state = tmp_path / "state"
    (state / "health").mkdir(parents=True)
    (state / "health").chmod(0o777)
    with pytest.raises(ConfigError, match="health is group and world-writable"):
        load_memory(state)


# --- Kubernetes ---------------------------------------------------------------------------------


def _fake_node(tmp_path, **changes) -> K8sNode:
    env = {**os.environ, "FAKE_CLUSTER_DIR": str(tmp_path)}
    bin_dir = _fake_bin(tmp_path)
    out = subprocess.run(
        [str(bin_dir / "kubectl"), "get", "node", "h1", "-o", "json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return parse_node(out)


def test_kubernetes_node_parsed_and_only_gpuhosts_marks_touched(tmp_path):
    node = _fake_node(tmp_path)
    assert node == K8sNode("h1", None, None)
    argv = commands(node, "reset-gpu", "reset-gpu: [gpu.ecc] x", False, "2026-11-26T18:00:00Z")
    assert argv[0] == [
        "kubectl",
        "taint",
        "node",
        "h1",
        f"{TAINT_KEY}=reset-gpu:NoSchedule",
        "--overwrite",
    ]
    assert argv[1][:6] == [
        "kubectl",
        "patch",
        "node",
        "h1",
        "--subresource=status",
        "--type=strategic",
    ]
    (condition,) = json.loads(argv[1][-1])["status"]["conditions"]
    assert condition["type"] == CONDITION and condition["status"] == "False"
    assert (condition["reason"], condition["message"]) == ("ResetGpu", "reset-gpu: [gpu.ecc] x")
    marked = K8sNode("h1", "reset-gpu", ("False", "ResetGpu", "reset-gpu: [gpu.ecc] x"))
    assert commands(marked, "reset-gpu", "reset-gpu: [gpu.ecc] x", False, "t") == []
    assert len(commands(marked, "reboot", "reboot: y", False, "t")) == 2
    cleared = commands(marked, None, "healthy", True, "t")
    assert cleared[0] == ["kubectl", "taint", "node", "h1", f"{TAINT_KEY}:NoSchedule-"]
    assert json.loads(cleared[1][-1]) == {
        "status": {"conditions": [{"$patch": "delete", "type": CONDITION}]}
    }
    assert commands(marked, None, "x", resume=False, now="t") == []  # its faults persist
    assert commands(node, None, "healthy", True, "t") == []  # nothing of gpuhost's there
    assert camel("inspect-hardware") == "InspectHardware"
    with pytest.raises(ParseError, match="kubectl get node NAME -o json"):
        parse_node('{"kind": "Status", "status": "Failure"}')
    with pytest.raises(ParseError, match="kubectl get node NAME -o json"):
        parse_node('error: the server doesn\'t have a resource type "node"')


# --- the run, with the stand-in scontrol and kubectl --------------------------------------------


def _fake_bin(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    if not bin_dir.exists():
        bin_dir.mkdir()
        for name in ("scontrol", "kubectl"):
            (bin_dir / name).symlink_to(FAKE)
    return bin_dir


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    """Stand-in scontrol/kubectl on PATH (node h1), a state folder, and this machine's nvidia-smi
    answer set by the test (``cluster.smi = ...``)."""

    class Cluster:
        smi: str = A100
        state = tmp_path / "state"

        def run(self, **options) -> tuple[int, list[str], list[str]]:
            out: list[str] = []
            err: list[str] = []

            def echo(line, err_=False, **kwargs):
                (err if kwargs.get("err") or err_ else out).append(line)

            request = HealthRequest(node="h1", k8s_node="h1", state_dir=self.state, **options)
            code = run_health(request, echo)
            return code, out, err

        def slurm(self) -> dict:
            return json.loads((tmp_path / "slurm.json").read_text())

        def node(self) -> K8sNode:
            return parse_node((tmp_path / "node.json").read_text())

        def calls(self, tool: str) -> list[list[str]]:
            log = tmp_path / "argv.log"
            lines = log.read_text().splitlines() if log.exists() else []
            return [
                a
                for a in map(json.loads, lines)
                if a[0] == tool and a[1] != "show" and a[1] != "get"
            ]

    box = Cluster()
    monkeypatch.setenv("PATH", f"{_fake_bin(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_CLUSTER_DIR", str(tmp_path))
    monkeypatch.setattr(health_run, "gather", lambda: HealthInputs(box.smi, None, None))
    return box


def test_persistent_fault_drains_slurm_and_kubernetes_after_n_runs_then_resumes(cluster):
    cluster.smi = V100_SICK
    for run in (1, 2):
        code, out, err = cluster.run(drain=True, k8s=True)
        assert code == 1 and out[0].startswith("reboot: [gpu.retired-pages-pending] GPU 0 (Tesla")
        assert err == [
            f"gpuhost: not drained yet: gpu.ecc-uncorrectable seen on {run} of 3, "
            f"gpu.retired-pages-pending seen on {run} of 3 consecutive runs"
        ]
    assert cluster.calls("scontrol") == [] and cluster.calls("kubectl") == []

    code, out, err = cluster.run(drain=True, k8s=True)

    assert code == 1
    assert err == [
        "gpuhost: drained Slurm node h1",
        f"gpuhost: tainted Kubernetes node h1 ({TAINT_KEY}=reboot:NoSchedule)",
    ]
    slurm = cluster.slurm()
    assert slurm["state"] == "IDLE+DRAIN" and slurm["reason"] == f"gpuhost: {out[0]}"
    assert slurm["reason"].endswith("(+1 more)") and len(slurm["reason"]) <= 200
    assert cluster.node().taint == "reboot" and cluster.node().condition[:2] == ("False", "Reboot")
    cluster.run(drain=True, k8s=True)  # nothing new to do
    assert len(cluster.calls("scontrol")) == 1 and len(cluster.calls("kubectl")) == 2

    cluster.smi = A100
    code, out, err = cluster.run(drain=True, k8s=True)

    assert (code, out) == (0, ["healthy"])
    assert err == [
        "gpuhost: resumed Slurm node h1",
        "gpuhost: removed gpuhost's taint and condition from Kubernetes node h1",
    ]
    assert cluster.slurm()["state"] == "IDLE" and cluster.node() == K8sNode("h1", None, None)


def test_an_operator_resuming_after_a_logged_xid_is_not_overruled(cluster, tmp_path, monkeypatch):
    """A drain for an Xid (kernel log: there until the next boot) that an operator lifted after
    dealing with the GPU stays lifted; ECC errors still there drain it again."""
    lines = ["[gpu.xid.46] Xid 46 (GPU stopped processing) on GPU 0"]
    monkeypatch.setattr(health_run, "judge", lambda _inputs: list(lines))
    assert "gpuhost: drained Slurm node h1" in cluster.run(drain=True, after=1)[2]
    (tmp_path / "slurm.json").write_text(
        json.dumps({"name": "h1", "state": "IDLE", "reason": None})
    )
    for _ in range(2):
        assert cluster.run(drain=True, after=1)[2] == []
    assert cluster.slurm()["state"] == "IDLE"
    lines.append("[gpu.ecc-uncorrectable] GPU 0: 1 uncorrectable ECC error")
    code, out, err = cluster.run(drain=True, after=1)
    assert err == ["gpuhost: drained Slurm node h1"]
    assert cluster.slurm()["reason"] == "gpuhost: drain: " + lines[1]


def test_an_operators_drain_and_taints_stay(cluster, tmp_path):
    (tmp_path / "slurm.json").write_text(
        json.dumps({"name": "h1", "state": "IDLE+DRAIN", "reason": "fan broken"})
    )
    cluster.smi = V100_SICK
    code, _out, err = cluster.run(drain=True, after=1)
    assert code == 1 and err == []
    cluster.smi = A100
    assert cluster.run(drain=True, after=1)[2] == []
    assert cluster.slurm()["reason"] == "fan broken" and cluster.calls("scontrol") == []


def test_without_drain_or_k8s_nothing_is_counted_or_touched(cluster):
    cluster.smi = V100_SICK
    for _ in range(4):
        assert cluster.run(after=1)[0] == 1
    assert not cluster.state.exists() and cluster.calls("scontrol") == []


def test_a_failing_scontrol_or_kubectl_is_one_error(cluster, monkeypatch):
    cluster.smi = V100_SICK
    monkeypatch.setenv("FAKE_CLUSTER_FAIL", "1")
    with pytest.raises(HostError, match="scontrol update nodename=h1 state=drain failed"):
        cluster.run(drain=True, after=1)
    with pytest.raises(HostError, match=r"kubectl taint node h1 failed \(exit 1\): Error from"):
        cluster.run(k8s=True, after=1)


def _gpuhost(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuhost", *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **env},
    )


def test_cli_counts_runs_in_the_state_folder_and_names_the_action(tmp_path):
    """This machine has no nvidia-smi: a persistent fault (gpu.unavailable) drains on the third
    run with --drain --k8s (stand-in tools), the line naming the action."""
    env = {
        "PATH": f"{_fake_bin(tmp_path)}{os.pathsep}{os.environ['PATH']}",
        "FAKE_CLUSTER_DIR": str(tmp_path),
    }
    state = str(tmp_path / "state")
    args = ("check", "@local", "--tier", "health", "--drain", "--node", "h1", "--k8s-node", "h1")
    for run in (1, 2, 3):
        proc = _gpuhost(*args, "--state-dir", state, env=env)
        assert proc.returncode == 1 and proc.stdout.startswith("drain: nvidia-smi is not installed")
        if run < 3:
            assert proc.stderr == (
                f"gpuhost: not drained yet: gpu.unavailable seen on {run} of 3 consecutive runs\n"
            )
    assert "drained Slurm node h1" in proc.stderr and "tainted Kubernetes node h1" in proc.stderr
    assert json.loads((tmp_path / "slurm.json").read_text())["reason"] == (
        "gpuhost: " + proc.stdout.strip()
    )
    streaks = json.loads((tmp_path / "state/health/streaks.json").read_text())["streaks"]
    assert streaks == {"gpu.unavailable": 3}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--tier", "health", "--drain", "--after", "0"), "Invalid value for '--after'"),
        (("--tier", "health", "--drain", "--after", "x"), "Invalid value for '--after'"),
        (("--tier", "static", "--after", "2"), "--tier health checks this machine only"),
        (("--k8s",), "--tier health checks this machine only"),
        (("--tier", "static", "--state-dir", "/tmp"), "--tier health checks this machine only"),
        (("--tier", "health", "--after", "2"), "--after and --state-dir count runs for --drain"),
    ],
)
def test_cli_bad_health_options_exit_2(args, message):
    proc = _gpuhost("check", "@local", *args, env={})
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_cli_unsafe_state_folder_is_one_line_exit_2(tmp_path):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    state.chmod(0o777)
    proc = _gpuhost(
        "check", "@local", "--tier", "health", "--drain", "--state-dir", str(state), env={}
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "is group and world-writable (mode 0777); refusing to use it" in proc.stderr
