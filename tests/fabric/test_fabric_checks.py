"""The fabric check tier and the health tier's fabric part, offline: the checks' reading of a
host through the probe's commands, this machine's sysfs ports, and the tier selection."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gpuhost.checks_support.fabric import fabric_view, port_problems, read_sysfs_ports
from gpuhost.parsers.fabric import parse_ib_sysfs
from gpuhost.parsers.nvidia_smi import SmiReport
from gpuhost.probe.script import IOMMU_CODE, PEERMEM_CODE, RDMA_PORTS_CODE

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "fabric"
SYSFS = (FIXTURES / "sysfs-h100-8x-cx7.txt").read_text()
H100 = ["NVIDIA H100 80GB HBM3"] * 8


class Host:
    name = "h1"
    smi: SmiReport | None = None


def test_the_checks_read_the_host_with_the_probes_commands() -> None:
    answers = {
        RDMA_PORTS_CODE: SYSFS,
        PEERMEM_CODE: "",
        IOMMU_CODE: "cmdline=ro iommu=pt\nunit=dmar0\n",
        "uname -r": "6.1.0-56-amd64\n",
    }
    view = fabric_view(lambda code: answers.get(code, ""), Host(), {"gpuhost_fabric": {"ports": 8}})
    assert len(view.facts.ports) == 9 and not view.facts.peermem and not view.absent
    assert view.facts.iommu is not None and view.facts.iommu.mode == "passthrough"
    assert (
        view.expected is not None and view.expected.ports == 8 and view.kernel == "6.1.0-56-amd64"
    )
    empty = fabric_view(lambda code: "", Host(), {})
    assert empty.absent and empty.facts.iommu is None


def write_tree(root: Path, text: str) -> None:
    for line in text.splitlines():
        path, _, value = line.partition(":")
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(value + "\n")


def problems(gpus: list[str], root: Path) -> list[str]:
    return [f"[{f.rule}] {f.message}" for f in port_problems(gpus, read_sysfs_ports(str(root)))]


def test_the_health_tier_reads_the_ports_from_sysfs(tmp_path: Path) -> None:
    assert problems(H100, tmp_path) == []  # no RDMA device at all
    write_tree(tmp_path, SYSFS)
    assert parse_ib_sysfs(read_sysfs_ports(str(tmp_path))) == parse_ib_sysfs(SYSFS)
    assert problems(H100, tmp_path) == []
    write_tree(
        tmp_path,
        "/sys/class/infiniband/mlx5_2/ports/1/state:1: DOWN\n"
        "/sys/class/infiniband/mlx5_5/ports/1/rate:100 Gb/sec (4X EDR)\n",
    )
    found = problems(H100, tmp_path)
    assert [p.split()[0] for p in found] == ["[fabric.port-down]", "[fabric.port-rate]"]
    assert "mlx5_2/1 DOWN/LinkUp" in found[0] and "mlx5_5/1 100 Gb/sec" in found[1]
    # without a node class, ports that are present must still be up
    assert [p.split()[0] for p in problems([], tmp_path)] == ["[fabric.port-down]"]


def test_the_health_judgement_includes_the_fabric_ports(tmp_path: Path) -> None:
    from gpuhost.checks_support.health import HealthInputs, judge
    from gpuhost.checks_support.health_run import faults

    smi = Path(__file__).resolve().parents[1] / "fixtures" / "parsers" / "smi-two-gpus-v12.xml"
    down = SYSFS.replace("mlx5_0/ports/1/state:4: ACTIVE", "mlx5_0/ports/1/state:1: DOWN")

    def fabric_faults(ports: str) -> list[str]:
        found = faults(judge(HealthInputs(smi.read_text(), None, None, ports)))
        return [fault.id for fault in found if fault.id.startswith("fabric.")]

    assert fabric_faults(down) == ["fabric.port-down"]
    (fault,) = (
        f
        for f in faults(judge(HealthInputs(smi.read_text(), None, None, down)))
        if f.id.startswith("fabric.")
    )
    # two GPUs of no node class: the ports present are judged up or down
    assert fault.line.startswith("[fabric.port-down] 1 RDMA port(s) not ACTIVE/LinkUp")
    assert (fault.action, fault.drain) == ("inspect-hardware", "persistent")
    assert fabric_faults(SYSFS) == [] and fabric_faults("") == []


def gpuhost(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GPUHOST_STATE_DIR": str(tmp_path / "state")}
    return subprocess.run(
        [sys.executable, "-m", "gpuhost", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )


def test_the_fabric_tier_runs_the_fabric_checks_only(tmp_path: Path) -> None:
    proc = gpuhost("check", "--tier", "fabric", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "5 skipped" in proc.stdout and "no RDMA port" in proc.stdout
    static = gpuhost("check", "--tier", "stress", "--", "--collect-only", "-q", tmp_path=tmp_path)
    assert "test_fabric_manager.py" in static.stdout
    assert "test_fabric.py::" not in static.stdout


def test_the_checks_keep_the_counters_under_the_audits_host_names() -> None:
    from gpuhost.checks_support.fabric import counter_key

    assert counter_key("ssh://h1") == "h1" and counter_key("local") == "localhost"
