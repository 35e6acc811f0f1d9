"""The RDMA fabric of a live lab host, read through gpuhost's real paths and commands.

One host (h1) is GPU-shaped (tests/lab/gpu: eight emulated H100 SXM5, the lab repository's
stand-in nvidia-smi) and gets the emulated fabric of tests/lab/fabric.py: /sys/class/infiniband
built from a real 8x H100 node's capture (8 ConnectX-7 at 400 Gb/s NDR + a RoCE bond),
nvidia_peermem in /sys/module, an lspci showing a PLX switch between a GPU and a NIC. What is
expected comes from the data: the node class hgx-h100-8gpu of data/node_classes.yaml matches the
eight GPUs nvidia-smi reports (no gpuhost_node in the inventory). Healthy, ``gpuhost audit``,
``gpuhost check --tier fabric`` and the health tier on the host (gpuhost copied there as
test_cluster_lab does) find nothing; then every fault at once (a port down, a port at
200 Gb/s, link_downed growing, nvidia_peermem unloaded, ACS on) and each gives its own finding
in audit and checks, the health tier names the ports, and the Prometheus textfile shows the port
down. One host, no reboot. The healthy audit is a module fixture (``healthy``): it records the
counters' baseline the fault test's ``counters-growing`` finding is measured against, so each
test also passes alone; the fault test puts the healthy fabric back at its end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_cluster_lab import NODE_GPUHOST, _install_gpuhost, _ok
from tests.lab import fabric as emulated

pytestmark = [pytest.mark.lab, pytest.mark.slow]

GPU_SHAPE = ("h100-sxm", 8)
FAULTS = [
    "fabric.acs",
    "fabric.counters-growing",
    "fabric.peermem",
    "fabric.port-down",
    "fabric.port-rate",
]


def _inventory(path: Path, lab: Any, host: Any) -> Path:
    data = {
        "ssh_hostname": host.address,
        "ssh_user": "root",
        "ssh_key": str(lab.key_path),
        "ssh_known_hosts_file": str(lab.known_hosts_path),
        "ssh_strict_host_key_checking": "yes",
    }
    path.write_text(f"fabric_nodes = [({host.name!r}, {data!r})]\n")
    return path


def gpuhost(*args: str, work: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GPUHOST_STATE_DIR": str(work / "state"), "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "gpuhost", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=work,
        timeout=600,
        check=False,
    )


@pytest.fixture(scope="module")
def fabric_host(lab, tmp_path_factory):  # type: ignore[no-untyped-def]
    lb = lab(1)
    lb.manager.set_shape(1, GPU_SHAPE)  # h1 re-created with eight emulated H100
    h1 = lb.hosts[0]
    _ok(
        h1,
        f"echo 'deb [signed-by={lb.repo_key_path_on_host}] {lb.repo_url} /' "
        "> /etc/apt/sources.list.d/lab.list && DEBIAN_FRONTEND=noninteractive apt-get -qq "
        "update && DEBIAN_FRONTEND=noninteractive apt-get -qq install -y nvidia-smi >/dev/null "
        # the emulator "loads" the module at boot: its boot step instead of a reboot
        "&& systemctl restart gpuhost-lab-gpu.service && nvidia-smi -L",
    )
    emulated.attach(h1)  # after the GPU's boot step: it mounts its own /sys/module
    work = tmp_path_factory.mktemp("fabric-lab")
    (work / "state").mkdir(mode=0o700)
    _install_gpuhost(h1, work)
    inventory = _inventory(work / "inventory.py", lb, h1)
    yield h1, inventory, work
    lb.manager.set_shape(1, None)  # the emulated mounts go with the host's overlay


def _health(h1: Any) -> tuple[int, str]:
    """The health tier on the host itself: its exit status and its one line."""
    proc = h1.run(f"{NODE_GPUHOST} check @local --tier health")
    return proc.returncode, proc.stdout


def _audit(inventory: Path, work: Path, name: str) -> tuple[dict[str, Any], str]:
    proc = gpuhost(
        "audit",
        str(inventory),
        "--json",
        str(work / f"{name}.json"),
        "--prom",
        str(work / f"{name}.prom"),
        work=work,
    )
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    (host,) = json.loads((work / f"{name}.json").read_text())["hosts"]
    return host, (work / f"{name}.prom").read_text()


def _fabric_ids(host: dict[str, Any]) -> list[str]:
    return sorted({f["rule"] for f in host["findings"] if f["rule"].startswith("fabric.")})


@pytest.fixture(scope="module")
def healthy(fabric_host):  # type: ignore[no-untyped-def]
    """The audit of the healthy fabric (its host entry and Prometheus textfile): it also records
    the counters' baseline in the state folder, which the fault test's growth is judged from."""
    _h1, inventory, work = fabric_host
    return _audit(inventory, work, "healthy")


def test_a_healthy_fabric_passes_audit_and_checks(fabric_host, healthy) -> None:  # type: ignore[no-untyped-def]
    h1, inventory, work = fabric_host
    host, prom = healthy
    assert _fabric_ids(host) == []
    ports = host["facts"]["fabric"]["ports"]
    assert len(ports) == 9 and {p["rate"] for p in ports} == {"400 Gb/sec (4X NDR)"}
    assert host["facts"]["fabric"]["peermem"] is True
    assert (
        f'gpuhost_fabric_port_up{{host="{h1.name}",link_layer="InfiniBand",port="mlx5_3/1"}} 1.0'
        in prom
    )
    check = gpuhost("check", str(inventory), "--tier", "fabric", work=work)
    assert check.returncode == 0, check.stdout + check.stderr
    # counters: the audit recorded the baseline, the check compared with it; affinity: the
    # emulated nvidia-smi is absent (no driver installed), said in the skip
    assert "4 passed, 1 skipped" in check.stdout, check.stdout
    assert _health(h1) == (0, "healthy\n")


@pytest.mark.usefixtures("healthy")  # the counters' baseline: link_downed 255
def test_each_fault_gives_its_finding_in_audit_and_checks(fabric_host) -> None:  # type: ignore[no-untyped-def]
    h1, inventory, work = fabric_host
    try:
        _each_fault_gives_its_finding(h1, inventory, work)
    finally:
        emulated.attach(h1)  # the healthy fabric again, for whatever runs next on h1


def _each_fault_gives_its_finding(h1: Any, inventory: Path, work: Path) -> None:
    emulated.inject(h1, "port-down", "mlx5_3")
    emulated.inject(h1, "rate", "mlx5_4", "200 Gb/sec (4X HDR)")
    emulated.inject(h1, "counter", "mlx5_1", "link_downed", "260")
    emulated.inject(h1, "peermem-off")
    emulated.inject(h1, "acs-on")
    host, prom = _audit(inventory, work, "faults")
    assert _fabric_ids(host) == FAULTS
    messages = {f["rule"]: f["message"] for f in host["findings"]}
    assert "mlx5_3/1 DOWN/Disabled" in messages["fabric.port-down"]
    assert "mlx5_4/1 200 Gb/sec (4X HDR)" in messages["fabric.port-rate"]
    assert "mlx5_1/1 link_downed 255 -> 260 (+5)" in messages["fabric.counters-growing"]
    assert "0000:02:08.0" in messages["fabric.acs"]
    assert (
        f'gpuhost_fabric_port_up{{host="{h1.name}",link_layer="InfiniBand",port="mlx5_3/1"}} 0.0'
        in prom
    )
    emulated.inject(h1, "counter", "mlx5_1", "link_downed", "262")  # grows again for the check
    check = gpuhost("check", str(inventory), "--tier", "fabric", work=work)
    assert check.returncode == 1, check.stdout + check.stderr
    for rule in FAULTS:
        assert f"{rule}: " in check.stdout, (rule, check.stdout)
    assert "4 failed, 1 skipped" in check.stdout, check.stdout
    rc, line = _health(h1)
    assert rc == 1 and "[fabric.port-down]" in line and "mlx5_3/1 DOWN/Disabled" in line, line
