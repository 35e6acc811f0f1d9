"""A GPU cluster on real parts (issue #16): Debian's slurmctld/slurmd/munge, prometheus and
prometheus-node-exporter on three lab hosts (h1 controller + prometheus, h2/h3 compute).

One module sharing the three hosts (set up once, given back their plain shape at the end): the
listening-port guard refuses a default-deny firewall without roles (slurmd listens), hardening
with slurm roles and cluster-fabric keeps a 2-node srun working while this machine is cut off
slurmd, the node health check drains a failing node with gpuhost's reason and resumes it when
healthy, the metrics timer feeds a real Prometheus whose drift alert fires for the drifted host.
h3 is GPU-shaped (tests/lab/gpu: an emulated 8-GPU HGX H100 board, the lab repository's
stand-in nvidia-smi package): each GPU fault class injected one at a time gives its action in the
audit JSON, the Prometheus metric, the static check and the health line, and the health check
drains without flapping; h2 has no GPU, so its health check fails for a real reason (no
nvidia-smi). About 5 minutes on a loaded machine (Debian's slurm and prometheus packages: about
110 MB).

What a test needs of the hosts beyond the cluster comes from a module fixture, never from an
earlier test, so each test also passes alone: gpuhost on h2 (``gpuhost_on_h2``: the health
check and the metrics timer run it) and h3's emulated GPUs with the stand-in nvidia-smi and
gpuhost (``gpu_h3``: the drain test and the fault classes).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from urllib.parse import urlencode

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.integration.harden_support import REPO, changed_count, run_gpuhost, tcp_state

pytestmark = [pytest.mark.lab, pytest.mark.slow]
NODE_GPUHOST = "/opt/gpuhost-lab/bin/gpuhost"
GPU_SHAPE = ("h100-sxm", 8)
EMULATOR = "/usr/bin/python3 /usr/lib/gpuhost-lab-gpu/gpuemu.py"
SLURM_CONF = """ClusterName=lab
SlurmctldHost=h1({h1})
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
ReturnToService=2
SlurmdSpoolDir=/var/spool/slurmd
StateSaveLocation=/var/spool/slurmctld
NodeName=h2 NodeAddr={h2} CPUs=1 State=UNKNOWN
NodeName=h3 NodeAddr={h3} CPUs=1 State=UNKNOWN
PartitionName=all Nodes=h2,h3 Default=YES State=UP
"""


def _ok(host, command: str, timeout: int = 600) -> str:
    proc = host.run(command, timeout=timeout)
    assert proc.returncode == 0, (
        f"{host.name}: {command}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    )
    return proc.stdout


def _runtime_tree(target: Path) -> Path:
    """gpuhost (this checkout's src/gpuhost) and the installed files of every distribution it
    needs at run time (its requirements, recursively, from this venv's metadata) under
    ``target``: what ``pip install gpuhost`` puts on a node, without reaching an index. The
    lab hosts run Debian 12's Python 3.11, the same minor version as this venv."""
    seen: set[str] = set()
    stack = ["gpuhost"]
    while stack:
        name = canonicalize_name(stack.pop())
        if name in seen:
            continue
        seen.add(name)
        for text in metadata.distribution(name).requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                stack.append(req.name)
    seen.discard("gpuhost")
    for name in sorted(seen):
        dist = metadata.distribution(name)
        for file in dist.files or []:
            source = Path(str(dist.locate_file(file)))
            if source.is_file() and ".." not in file.parts and file.parts[0] != "bin":
                dest = target / file
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, dest)
    shutil.copytree(REPO / "src" / "gpuhost", target / "gpuhost", dirs_exist_ok=True)
    return target


def _install_gpuhost(host, tmp: Path) -> None:
    """gpuhost and its dependencies copied to the node (``NODE_GPUHOST`` runs it)."""
    target = tmp / "node-gpuhost"
    if not target.exists():
        _runtime_tree(target)
    tar = subprocess.Popen(["tar", "-C", str(target), "-c", "."], stdout=subprocess.PIPE)
    subprocess.run(
        [*host.ssh_args, "mkdir -p /opt/gpuhost-lab/lib && tar -C /opt/gpuhost-lab/lib -x"],
        stdin=tar.stdout,
        check=True,
        timeout=300,
    )
    tar.wait()
    _ok(
        host,
        "mkdir -p /opt/gpuhost-lab/bin && printf '%s\\n' '#!/bin/sh' "
        "'PYTHONPATH=/opt/gpuhost-lab/lib exec python3 -m gpuhost \"$@\"' "
        f"> {NODE_GPUHOST} && chmod 755 {NODE_GPUHOST}",
    )


def _inventory(tmp: Path, lab_inventory: Path, data: dict[str, dict]) -> Path:
    path = tmp / "cluster_inventory.py"
    path.write_text(
        "import runpy\n"
        f"_lab = runpy.run_path({str(lab_inventory)!r})\n"
        f"_extra = {data!r}\n"
        "hosts = [(n, {**d, **_extra[n]}) for n, d in _lab['lab_hosts'] if n in _extra]\n"
    )
    return path


@pytest.fixture(scope="module")
def cluster(lab, tmp_path_factory):
    view = lab(3)
    view.manager.set_shape(3, GPU_SHAPE)
    h1, h2, h3 = view.hosts
    tmp = tmp_path_factory.mktemp("cluster")
    apt = "DEBIAN_FRONTEND=noninteractive apt-get -qq"
    conf = SLURM_CONF.format(h1=h1.address, h2=h2.address, h3=h3.address)
    packages = {
        "h1": "slurmctld slurm-client munge prometheus",
        "h2": "slurmd slurm-client munge prometheus-node-exporter",
        "h3": "slurmd slurm-client munge prometheus-node-exporter",
    }

    def setup(host) -> str:
        return _ok(
            host,
            f"{apt} update && {apt} install -y --no-install-recommends {packages[host.name]} "
            f">/dev/null && cat > /etc/slurm/slurm.conf <<'EOF'\n{conf}EOF",
        )

    with ThreadPoolExecutor(3) as pool:  # the three hosts install at once
        list(pool.map(setup, view.hosts))
    key = _ok(h1, "base64 -w0 /etc/munge/munge.key")
    for host in (h2, h3):
        _ok(host, f"echo {key} | base64 -d > /etc/munge/munge.key && systemctl restart munge")
        _ok(host, "systemctl restart slurmd")
    _ok(
        h1,
        "mkdir -p /var/spool/slurmctld && chown slurm /var/spool/slurmctld && "
        "systemctl restart slurmctld",
    )
    deadline = time.monotonic() + 60
    while "idle" not in h1.run("sinfo -h -o %T").stdout:
        assert time.monotonic() < deadline, h1.run("sinfo; scontrol show nodes").stdout
        time.sleep(1)
    yield view, tmp
    view.manager.set_shape(3, None)
    view.reset()


@pytest.fixture(scope="module")
def gpuhost_on_h2(cluster):  # type: ignore[no-untyped-def]
    """gpuhost installed on h2 (``NODE_GPUHOST``)."""
    view, tmp = cluster
    _install_gpuhost(view.hosts[1], tmp)


@pytest.fixture(scope="module")
def gpu_h3(cluster):  # type: ignore[no-untyped-def]
    """h3's emulated GPUs answering through the lab repository's nvidia-smi (the emulator's boot
    step run instead of a reboot: the NVIDIA module "loads" at boot), and gpuhost on h3."""
    view, tmp = cluster
    h3 = view.hosts[2]
    _ok(
        h3,
        f"echo 'deb [signed-by={view.repo_key_path_on_host}] {view.repo_url} /' "
        "> /etc/apt/sources.list.d/lab.list && DEBIAN_FRONTEND=noninteractive apt-get -qq "
        "update && DEBIAN_FRONTEND=noninteractive apt-get -qq install -y nvidia-smi >/dev/null "
        "&& systemctl restart gpuhost-lab-gpu.service && nvidia-smi -L",
    )
    _install_gpuhost(h3, tmp)


def test_default_deny_without_roles_is_refused_because_slurmd_listens(cluster):
    view, tmp = cluster
    h2 = view.hosts[1]
    inventory = _inventory(tmp, view.inventory_path, {"h2": {"gpuhost_firewall_enabled": True}})
    table = "nft list table inet gpuhost"
    before = h2.run(table)  # none on a fresh cluster; the roles test's, if that ran before

    rc, line, err = run_gpuhost("harden", inventory)

    assert rc == 1, f"{line}\n{err[-3000:]}"
    assert (
        "refusing to load the firewall, nothing was changed: slurmd listens on tcp port 6818"
        in line
    )
    assert "add role slurm-compute to gpuhost_firewall_roles" in line
    assert "prometheus-node listens on tcp port 9100" in line and "role node-exporter" in line
    after = h2.run(table)
    assert (after.returncode, after.stdout) == (before.returncode, before.stdout)  # none loaded
    # nothing asked for: no default-deny firewall at all, only SSH hardening
    bare = _inventory(tmp, view.inventory_path, {"h2": {}})
    proc = subprocess.run(
        [sys.executable, "-m", "gpuhost", "harden", str(bare), "--dry"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "# h2: no gpuhost firewall (not asked for" in proc.stdout, proc.stdout
    assert "nftables" not in proc.stdout, proc.stdout


def test_roles_and_cluster_fabric_keep_a_two_node_srun_running(cluster):
    view, tmp = cluster
    h1, h2, h3 = view.hosts
    nodes = [f"{h.address}/32" for h in view.hosts]  # the controller machine is not in it
    compute = {
        "gpuhost_firewall_roles": ["slurm-compute", "node-exporter", "cluster-fabric"],
        "gpuhost_firewall_cluster_subnets": nodes,
    }
    controller = {
        "gpuhost_firewall_roles": ["slurm-controller", "cluster-fabric"],
        "gpuhost_firewall_cluster_subnets": nodes,
        "gpuhost_firewall_closed_tcp": [9090],  # prometheus: reached on the host itself here
    }
    inventory = _inventory(
        tmp, view.inventory_path, {"h1": controller, "h2": compute, "h3": compute}
    )

    proc = subprocess.run(
        [sys.executable, "-m", "gpuhost", "harden", str(inventory), "--dry"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert f'ip saddr {{ {", ".join(nodes)} }} accept comment "role cluster-fabric"' in proc.stdout

    rc, _line, err = run_gpuhost("harden", inventory)

    assert rc == 0, err[-3000:]
    for host in view.hosts:
        assert "policy drop" in _ok(host, "nft list chain inet gpuhost input")
    assert tcp_state(h2.address, 6818) == "dropped"  # this machine is outside the cluster
    out = _ok(h1, "srun -N2 -l hostname | sort", timeout=120)
    assert out.split() == ["0:", "h2", "1:", "h3"], out
    rc, line, err = run_gpuhost("harden", inventory)
    assert rc == 0 and changed_count(line) == 0, f"{line}\n{err[-2000:]}"


@pytest.mark.usefixtures("gpuhost_on_h2")
def test_failing_health_check_drains_the_node_with_gpuhosts_reason(cluster):
    view, tmp = cluster
    h1, h2 = view.hosts[0], view.hosts[1]
    lines = _deploy(tmp, view, ["h2"], f"install_health_check(gpuhost={NODE_GPUHOST!r})")
    assert lines == ["h2: ok, 1 changed, 0 unchanged"], lines

    start = time.monotonic()
    check = h2.run("/usr/local/sbin/gpuhost-healthcheck")
    took = time.monotonic() - start

    assert check.returncode == 1, check.stderr
    assert check.stdout.startswith("drain: nvidia-smi is not installed"), check.stdout
    assert took < 10, took  # over SSH, with Python start-up, on a loaded 2-core machine
    # a persistent fault: counted, drained on the third consecutive run (--after 3)
    assert "not drained yet: gpu.unavailable seen on 1 of 3" in check.stderr, check.stderr
    assert "DRAIN" not in _ok(h1, "scontrol show node h2")
    for _ in range(2):
        h2.run("/usr/local/sbin/gpuhost-healthcheck")
    node = _ok(h1, "scontrol show node h2")
    assert "DRAIN" in node and "Reason=gpuhost: drain: nvidia-smi is not installed" in node, node
    # an operator's drain is left alone
    _ok(
        h1,
        "scontrol update nodename=h2 state=resume && "
        "scontrol update nodename=h2 state=drain reason='fan broken'",
    )
    h2.run("/usr/local/sbin/gpuhost-healthcheck")
    assert "Reason=fan broken" in _ok(h1, "scontrol show node h2")
    _ok(h1, "scontrol update nodename=h2 state=resume")


@pytest.mark.usefixtures("gpu_h3")
def test_gpu_node_is_drained_without_flapping_and_resumed_when_healthy(cluster):
    """h3's emulated H100s with the lab repository's nvidia-smi, checked by the installed health
    check wrapper (--drain; --after 2 passed on): an uncorrectable ECC error that clears on the
    next run drains nothing; one that persists drains on the second run with the action and the
    GPU's line as reason, and the node is resumed once it is gone; a GPU fallen off the bus
    drains at once."""
    view, tmp = cluster
    h1, h3 = view.hosts[0], view.hosts[2]
    lines = _deploy(tmp, view, ["h3"], f"install_health_check(gpuhost={NODE_GPUHOST!r})")
    assert lines == ["h3: ok, 1 changed, 0 unchanged"], lines

    def check():  # type: ignore[no-untyped-def]
        return h3.run("/usr/local/sbin/gpuhost-healthcheck --after 2")

    def drained() -> str | None:
        node = _ok(h1, "scontrol show node h3")
        if "DRAIN" not in node:
            return None
        return node.split("Reason=", 1)[1].splitlines()[0].rsplit(" [", 1)[0]  # " [user@time]"

    healthy = check()
    assert (healthy.returncode, healthy.stdout) == (0, "healthy\n"), healthy.stdout
    # seen once, gone on the next run: nothing drained
    view.manager.gpu_inject(3, "ecc-uncorrectable")
    once = check()
    assert once.returncode == 1 and "GPU 0 (NVIDIA H100 80GB HBM3" in once.stdout, once.stdout
    assert "not drained yet: gpu.ecc-uncorrectable seen on 1 of 2" in once.stderr, once.stderr
    _ok(h3, f"{EMULATOR} clear")
    assert check().stdout == "healthy\n" and drained() is None

    # persistent: drained on the second consecutive run, the reason naming the action
    view.manager.gpu_inject(3, "ecc-uncorrectable")
    check()
    sick = check()

    assert sick.returncode == 1, sick.stdout + sick.stderr
    # the action is the fault catalog's (data/faults.yaml): uncorrectable ECC -> reset the GPU
    assert sick.stdout.startswith(
        "reset-gpu: [gpu.ecc-uncorrectable] GPU 0 (NVIDIA H100 80GB HBM3"
    ), sick.stdout
    assert sick.stdout.count("\n") == 1, sick.stdout
    assert "drained Slurm node h3" in sick.stderr, sick.stderr
    assert drained() == f"gpuhost: {sick.stdout.strip()}"

    _ok(h3, f"{EMULATOR} clear")
    well = check()

    assert well.returncode == 0, well.stdout + well.stderr
    assert "resumed Slurm node h3" in well.stderr
    assert drained() is None and "Reason=" not in _ok(h1, "scontrol show node h3")

    # a GPU fallen off the bus drains at once
    view.manager.gpu_inject(3, "gpu-lost")
    lost = check()
    assert "drained Slurm node h3" in lost.stderr, lost.stdout + lost.stderr
    assert (drained() or "").startswith("gpuhost: reboot: [gpu.lost] nvidia-smi reports gpu-lost")
    _ok(h3, f"{EMULATOR} clear")
    assert "resumed Slurm node h3" in check().stderr and drained() is None


# One fault class at a time on h3's emulated HGX H100 board: (emulator knob, GPU, the fault id,
# its action in the fault catalog (src/gpuhost/data/faults.yaml), whether the audit judges it
# (its JSON and Prometheus textfile: the audit reads neither `nvidia-smi nvlink -s` nor the
# kernel log), whether a static check does, whether the health tier drains for it (else its line
# says healthy))
FAULT_CLASSES = [
    ("ecc-uncorrectable", 0, "gpu.ecc-uncorrectable", "reset-gpu", True, True, True),
    ("remap-pending", 1, "gpu.remap-pending", "reset-gpu", True, True, True),
    ("clock-event=power-brake", 2, "gpu.clocks.power-brake", "inspect-hardware", True, True, True),
    ("fabric=in-progress", None, "gpu.fabric.state", "drain", True, True, True),
    ("nvlink-down=3", 4, "gpu.nvlink.down", "reset-gpu", False, False, True),
    ("pcie-downgrade", 5, "gpu.pcie-width", "inspect-hardware", True, True, False),
    ("gpu-missing", 6, "gpu.missing", "reboot", True, False, True),
    ("xid=79", 7, "gpu.xid.79", "reboot", False, True, True),
]
FAULT_RUN = f"""G={NODE_GPUHOST}
$G audit --json /tmp/fault.json --prom /tmp/fault.prom >/dev/null 2>/tmp/fault.err
$G check @local --tier static -- -q -p no:cacheprovider -k test_gpu_health >/tmp/fault.check 2>&1
$G check @local --tier health >/tmp/fault.health 2>/dev/null
cat /tmp/fault.json; echo '##PROM'; cat /tmp/fault.prom; echo '##CHECK'; cat /tmp/fault.check
echo '##HEALTH'; cat /tmp/fault.health"""


@pytest.mark.usefixtures("gpu_h3")
def test_each_fault_class_gives_its_action_everywhere(cluster):
    """The same judgement everywhere (issue 26): each fault class injected alone on h3 gives its
    action in the audit JSON (finding.action), the Prometheus textfile
    (gpuhost_audit_fault_action), the static check's line and the health tier's line."""
    view, _tmp = cluster
    h3 = view.hosts[2]
    _ok(h3, f"{EMULATOR} clear")
    wrong = []
    for knob, gpu, rule, action, audit, static, drains in FAULT_CLASSES:
        view.manager.gpu_inject(3, knob, gpu)
        out = _ok(h3, FAULT_RUN, timeout=300)
        _ok(h3, f"{EMULATOR} clear")
        report, rest = out.split("##PROM\n", 1)
        prom, rest = rest.split("##CHECK\n", 1)
        check, health = rest.split("##HEALTH\n", 1)
        found = {
            (f["rule"], f.get("action")) for h in json.loads(report)["hosts"] for f in h["findings"]
        }
        tag = f"[{rule}, action: {action}]"  # a finding's line in the static check
        seen = {
            "audit JSON": (rule, action) in found if audit else True,
            "Prometheus": (rule, action) in _fault_actions(prom) if audit else True,
            "static check": tag in check if static else True,
            "health line": health.startswith(f"{action}: [{rule}] ")
            if drains
            else health == "healthy\n",
        }
        wrong += [f"{knob}: {where}" for where, ok in seen.items() if not ok]
        if any(not ok for ok in seen.values()):
            fault_lines = [ln for ln in prom.splitlines() if "fault_action{" in ln]
            wrong.append(
                f"  JSON {sorted(found)}\n  prom {fault_lines}\n  health {health!r}\n"
                f"  check {check[-1500:]}"
            )
    assert not wrong, "\n".join(wrong)


def _fault_actions(prom: str) -> set[tuple[str, str]]:
    """(rule, action) of every gpuhost_audit_fault_action sample above 0 in a textfile."""
    out = set()
    for match in re.finditer(r"^gpuhost_audit_fault_action\{([^}]*)\} (\S+)$", prom, re.M):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
        if float(match.group(2)) > 0:
            out.add((labels.get("rule", ""), labels.get("action", "")))
    return out


def _deploy(tmp: Path, view, hosts: list[str], call: str) -> list[str]:
    """Run a ``gpuhost.deploys.cluster`` deploy (``call``) on ``hosts``; their summary lines."""
    inventory = _inventory(tmp, view.inventory_path, {name: {} for name in hosts})
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from gpuhost.deploy_runner import run_deploy\n"
            "from gpuhost.deploys import cluster\n"
            f"for o in run_deploy({str(inventory)!r}, lambda: cluster.{call}):\n"
            "    print(o.line(False))\n",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    return proc.stdout.splitlines()


def _query(host, promql: str) -> str:
    url = shlex.quote("http://127.0.0.1:9090/api/v1/query?" + urlencode({"query": promql}))
    return host.run(
        "python3 -c 'import urllib.request,sys; "
        f"print(urllib.request.urlopen(sys.argv[1]).read().decode())' {url}"
    ).stdout


@pytest.mark.usefixtures("gpuhost_on_h2")
def test_metrics_timer_feeds_prometheus_and_the_drift_alert_fires(cluster):
    """h3's marker says it was provisioned with the Debian 535 profile but no driver is there
    (drift: the audit's profile.driver error); h2 has no marker. Both run the metrics timer's
    audit into node_exporter's textfile directory; a real Prometheus with the example rules
    scrapes them and GpuhostDrift fires for h3 only."""
    view, tmp = cluster
    h1, h2, h3 = view.hosts
    _install_gpuhost(h3, tmp)  # h2's is a module fixture (the health check test's too)
    marker = '{"schema": 1, "profile": "debian12-nonfree-535", "driver": {"version": "535.261.03"}}'
    _ok(h3, f"mkdir -p /etc/gpuhost && echo '{marker}' > /etc/gpuhost/profile")
    lines = _deploy(tmp, view, ["h2", "h3"], f"install_metrics_timer(gpuhost={NODE_GPUHOST!r})")
    assert all(": ok, 1 changed" in line for line in lines), lines
    for host in (h2, h3):
        assert _ok(host, "systemctl is-enabled gpuhost-metrics.timer").strip() == "enabled"
        _ok(host, "systemctl start gpuhost-metrics.service")  # the timer's run, now
        prom = _ok(host, "cat /var/lib/prometheus/node-exporter/gpuhost.prom")
        assert "gpuhost_audit_host_up" in prom, prom
    rerun = _deploy(tmp, view, ["h2", "h3"], f"install_metrics_timer(gpuhost={NODE_GPUHOST!r})")
    assert all(": ok, 0 changed" in line for line in rerun), rerun

    rules = (REPO / "docs" / "examples" / "gpuhost-alerts.yml").read_text()
    _ok(h1, f"cat > /etc/prometheus/gpuhost-alerts.yml <<'EOF'\n{rules}EOF")
    _ok(h1, "promtool check rules /etc/prometheus/gpuhost-alerts.yml")
    config = (
        "global: {scrape_interval: 2s, evaluation_interval: 2s}\n"
        "rule_files: [/etc/prometheus/gpuhost-alerts.yml]\n"
        "scrape_configs:\n"
        f"  - job_name: node\n    static_configs: [{{targets: ['{h2.address}:9100', "
        f"'{h3.address}:9100']}}]\n"
    )
    _ok(
        h1,
        "cat > /etc/prometheus/prometheus.yml <<'EOF' && "
        "promtool check config /etc/prometheus/prometheus.yml && systemctl restart prometheus\n"
        f"{config}EOF",
    )
    deadline = time.monotonic() + 90
    while True:
        up = _query(h1, 'up{job="node"} == 1')
        firing = _query(h1, 'ALERTS{alertname="GpuhostDrift",alertstate="firing"}')
        if up.count('"instance"') == 2 and '"instance"' in firing:
            break
        assert time.monotonic() < deadline, f"{up}\n{firing}"
        time.sleep(2)
    assert f'"instance":"{h3.address}:9100"' in firing, firing
    assert h2.address + ":" not in firing, firing
