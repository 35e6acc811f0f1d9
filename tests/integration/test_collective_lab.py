"""The multi-node collective tier on a real Slurm cluster (issue #28's Show): Debian's
slurmctld on h1 (the launch host, reached over SSH), slurmd on h2-h4, munge; ``gpuhost check
INVENTORY --tier collective`` runs nccl-tests through real ``srun`` from h1.

The lab hosts have no GPU: nccl-tests is test equipment (tests/lab/nccl/fake_nccl_perf.py,
installed as all_reduce_perf and all_gather_perf in /opt/nccl-tests/build) replaying the real
2 x 8 H100 capture of tests/fixtures/nccl-tests; its ranks meet over TCP and every bandwidth is
scaled by the slowest node of the job. h3's /etc/gpuhost-lab/nccl-slow holds 0.5: gpuhost must
find and name h3 (pairs h2+h3 slow, h4+h2 fine; splits h3+h4 slow, h2+h4 fine). One module, four
hosts, set up once (about 3 minutes on a loaded machine, Debian's slurm packages ~30 MB).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.integration.harden_support import REPO
from tests.integration.test_cluster_lab import SLURM_CONF as CLUSTER_SLURM_CONF
from tests.integration.test_cluster_lab import _inventory, _ok

pytestmark = [pytest.mark.lab, pytest.mark.slow]
NCCL_DIR = "/opt/nccl-tests/build"
SLOW_FILE = "/etc/gpuhost-lab/nccl-slow"
CAPTURES = {
    "all_reduce_perf": "all_reduce__h100x8__2-nodes__gcp-a3mega.txt",
    "all_gather_perf": "all_gather__2-gpus__bfloat16__excerpt.txt",
}
# test_cluster_lab's slurm.conf, its node and partition lines written for this module's hosts
SLURM_CONF = (
    "".join(
        line + "\n"
        for line in CLUSTER_SLURM_CONF.splitlines()
        if not line.startswith(("NodeName=", "PartitionName="))
    )
    + "{nodes}\nPartitionName=all Nodes={names} Default=YES State=UP\n"
)


def _put(host, path: str, text: str, mode: str = "644") -> None:
    subprocess.run(
        [*host.ssh_args, f"mkdir -p $(dirname {path}) && cat > {path} && chmod {mode} {path}"],
        input=text.encode(),
        check=True,
        timeout=120,
    )


def _install_fake_nccl(host) -> None:
    code = (REPO / "tests" / "lab" / "nccl" / "fake_nccl_perf.py").read_text()
    for test, capture in CAPTURES.items():
        _put(host, f"{NCCL_DIR}/{test}", code, "755")
        fixture = REPO / "tests" / "fixtures" / "nccl-tests" / capture
        _put(host, f"{NCCL_DIR}/captures/{test}.txt", fixture.read_text())


@pytest.fixture(scope="module")
def cluster(lab, tmp_path_factory):
    view = lab(4)
    h1, *computes = view.hosts
    tmp = tmp_path_factory.mktemp("collective")
    apt = "DEBIAN_FRONTEND=noninteractive apt-get -qq"
    conf = SLURM_CONF.format(
        h1=h1.address,
        nodes="\n".join(f"NodeName={h.name} NodeAddr={h.address} CPUs=1" for h in computes),
        names=",".join(h.name for h in computes),
    )

    def setup(host) -> None:
        packages = "slurmctld slurm-client munge" if host is h1 else "slurmd slurm-client munge"
        _ok(
            host,
            f"{apt} update && {apt} install -y --no-install-recommends {packages} >/dev/null "
            f"&& cat > /etc/slurm/slurm.conf <<'EOF'\n{conf}EOF",
        )
        if host is not h1:
            _install_fake_nccl(host)

    with ThreadPoolExecutor(len(view.hosts)) as pool:
        list(pool.map(setup, view.hosts))
    key = _ok(h1, "base64 -w0 /etc/munge/munge.key")
    for host in computes:
        _ok(host, f"echo {key} | base64 -d > /etc/munge/munge.key && systemctl restart munge")
        _ok(host, "systemctl restart slurmd")
    _ok(
        h1,
        "mkdir -p /var/spool/slurmctld && chown slurm /var/spool/slurmctld && "
        "systemctl restart slurmctld",
    )
    deadline = time.monotonic() + 60
    while _ok(h1, "sinfo -h -N -o %T").split().count("idle") < len(computes):
        assert time.monotonic() < deadline, h1.run("sinfo; scontrol show nodes").stdout
        time.sleep(1)
    node_data = {
        "gpuhost_gpus": ["NVIDIA H100 80GB HBM3"],
        "gpuhost_nccl_tests": NCCL_DIR,
        "gpuhost_collective_floor": 300,
    }
    data = {"h1": {"gpuhost_collective_launcher": True}} | {h.name: node_data for h in computes}
    yield view, _inventory(tmp, view.inventory_path, data), tmp
    view.reset()


def _collective(inventory: Path, tmp: Path) -> tuple[int, str, Path, Path, Path]:
    out = (tmp / "collective.json", tmp / "collective.xml", tmp / "collective.prom")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuhost",
            "check",
            str(inventory),
            "--tier",
            "collective",
            f"--json={out[0]}",
            f"--junit={out[1]}",
            f"--prom={out[2]}",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
        timeout=600,
    )
    return proc.returncode, proc.stdout + proc.stderr, *out


def test_collective_tier_names_the_slow_node(cluster):
    view, inventory, tmp = cluster
    h3 = view.hosts[2]
    _ok(h3, f"mkdir -p /etc/gpuhost-lab && echo 0.5 > {SLOW_FILE}")

    rc, text, json_path, xml_path, prom_path = _collective(inventory, tmp)

    assert rc == 1, text[-4000:]
    assert (
        "FAIL          all_reduce_perf over h2,h3,h4 (all): bus bandwidth 169.41 GB/s is "
        "below the floor 300 GB/s" in text
    ), text[-4000:]
    assert "slow: node h3 (pairs below the floor: h2+h3)" in text, text[-4000:]
    document = json.loads(json_path.read_text())
    assert document["launch_host"] == "h1" and document["slow"]["nodes"] == ["h3"]
    first = document["runs"][0]
    assert first["hosts_seen"] == ["h2", "h3", "h4"]  # every rank really ran, one per node
    assert [(r["stage"], r["nodes"], r["verdict"]) for r in document["runs"][2:]] == [
        ("pair", ["h2", "h3"], "FAIL"),
        ("pair", ["h4", "h2"], "PASS"),
        ("split", ["h3", "h4"], "FAIL"),
    ]
    suite = ET.parse(xml_path).getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "5" and suite.get("failures") == "3"
    assert 'gpuhost_collective_slow_node{node="h3"} 1.0' in prom_path.read_text()


def test_healthy_cluster_passes_and_a_missing_binary_could_not_run(cluster):
    view, inventory, tmp = cluster
    h3, h4 = view.hosts[2], view.hosts[3]
    _ok(h3, f"rm -f {SLOW_FILE}")

    rc, text, *_ = _collective(inventory, tmp)

    assert rc == 0, text[-4000:]
    assert (
        "PASS          all_reduce_perf over h2,h3,h4 (all): bus bandwidth 338.82 GB/s "
        "(floor 300 GB/s)"
        in text
        and "collective: PASS" in text
    ), text[-4000:]

    _ok(h4, f"mv {NCCL_DIR}/all_gather_perf {NCCL_DIR}/all_gather_perf.away")
    try:
        rc, text, *_ = _collective(inventory, tmp)
    finally:  # the binary back: the slow-node test, run after this one, needs every binary
        _ok(h4, f"mv {NCCL_DIR}/all_gather_perf.away {NCCL_DIR}/all_gather_perf")

    assert rc == 1, text[-4000:]
    assert f"not found: h4: {NCCL_DIR}/all_gather_perf" in text, text[-4000:]
    assert "collective: COULD-NOT-RUN" in text
