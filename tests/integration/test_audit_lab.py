"""``gpuhost audit`` against real lab hosts, in all four output formats.

- h1: a clean Debian host (no NVIDIA software)
- h2: Debian's ``nvidia-driver`` and ``nvidia-smi`` really installed (the whole driver
  package set and the DKMS package), every driver package held. No GPU: nvidia-smi exits 9,
  "couldn't communicate with the NVIDIA driver" - the real state. Installed without Recommends,
  i.e. without kernel headers, so DKMS registers the module but does not compile it: the compile
  is for a kernel the lab's containers never run (they share the machine's kernel), and it took
  15-40 minutes on the shared 2-core machine here. The full install with the DKMS-built module
  is covered offline by a probe output captured from a lab host (tests/audit/data/,
  test_audit_lab_captures.py).
- h3: ``nvidia-smi`` + ``libnvidia-ml1`` at bookworm's 535.261.03, not held, while
  bookworm-security offers 535.309.01: the next ``apt upgrade`` would replace the driver
- h4: unreachable (its network is cut)

Plus: exactly one SSH command (and one connection) per host, and shards merged back into the
report of one run. The CLI runs in a subprocess: it monkey-patches the stdlib for gevent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.lab, pytest.mark.slow]

DRIVER_INSTALL = (
    "export DEBIAN_FRONTEND=noninteractive; apt-get update -qq && "
    "apt-get install -y -qq --no-install-recommends nvidia-driver nvidia-smi "
    ">/tmp/install.log 2>&1 && "
    "apt-mark hold $(dpkg-query -W -f='${Package}\\n' | grep -E "
    "'^(nvidia-|libnvidia-|libcuda|firmware-nvidia|libgl1-nvidia|libegl-nvidia|libgles-nvidia|"
    "libglx-nvidia|libnvcuvid|libnvoptix|xserver-xorg-video-nvidia)')"
)
SMI_INSTALL = (
    "export DEBIAN_FRONTEND=noninteractive; apt-get update -qq && "
    "apt-get install -y -qq --no-install-recommends nvidia-smi=535.261.03-1 "
    "libnvidia-ml1=535.261.03-1 nvidia-alternative=535.261.03-1 >/tmp/install.log 2>&1"
)


def _install(host: Any, command: str, errors: list[str]) -> None:
    proc = host.run(command, timeout=900)
    if proc.returncode != 0:
        log = host.run("tail -n 20 /tmp/install.log").stdout
        errors.append(f"{host.name}: install failed ({proc.returncode}): {proc.stderr}\n{log}")


def _inventory(path: Path, lab: Any, hosts: list[Any]) -> Path:
    data = {
        "ssh_user": "root",
        "ssh_key": str(lab.key_path),
        "ssh_known_hosts_file": str(lab.known_hosts_path),
        "ssh_strict_host_key_checking": "yes",
    }
    entries = [(h.name, {"ssh_hostname": h.address, **data}) for h in hosts]
    path.write_text(f"gpu_nodes = {entries!r}\n")
    return path


@pytest.fixture(scope="module")
def audit_lab(lab, tmp_path_factory):
    lb = lab(4)
    h1, h2, h3, h4 = lb.hosts[:4]
    # the session lab is shared with other modules: start from four clean hosts
    lb.reset(h1, h2, h3, h4)
    errors: list[str] = []
    threads = [
        threading.Thread(target=_install, args=(h2, DRIVER_INSTALL, errors)),
        threading.Thread(target=_install, args=(h3, SMI_INSTALL, errors)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert not errors, "\n".join(errors)
        inventory = _inventory(tmp_path_factory.mktemp("audit") / "inventory.py", lb, lb.hosts[:4])
        yield {"lab": lb, "hosts": (h1, h2, h3, h4), "inventory": inventory}
    finally:
        h4.reconnect()
        lb.reset(h2)
        lb.reset(h3)


def _gpuhost(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuhost", *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def full_run(audit_lab, tmp_path_factory):
    out = tmp_path_factory.mktemp("reports")
    h4 = audit_lab["hosts"][3]
    h4.disconnect()
    try:
        proc = _gpuhost("audit", str(audit_lab["inventory"]), "--connect-timeout", "3",
                        "--json", str(out / "audit.json"), "--junit", str(out / "audit.xml"),
                        "--prom", str(out / "audit.prom"))
    finally:
        h4.reconnect()
    report = json.loads((out / "audit.json").read_text())
    return {"proc": proc, "report": report, "dir": out,
            "hosts": {h["name"]: h for h in report["hosts"]}}


def _rules(host: dict[str, Any], severity: str | None = None) -> set[str]:
    return {f["rule"] for f in host["findings"] if severity is None or f["severity"] == severity}


def test_exit_code_and_terminal_table(full_run):
    proc = full_run["proc"]
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    hosts = ("h1", "h2", "h3", "h4")
    lines = {line.split()[0]: line for line in proc.stdout.splitlines() if line[:2] in hosts}
    assert "UNREACHABLE" in lines["h4"]
    assert "WARNING" in lines["h1"]
    assert "ERROR" in lines["h2"] and "ERROR" in lines["h3"]
    assert "verdict: unreachable" in proc.stdout


def test_json_clean_host(full_run):
    h1 = full_run["hosts"]["h1"]
    assert h1["reachable"] is True
    assert h1["verdict"] == "warning"
    assert _rules(h1) == {"gpu.none"}
    assert h1["facts"]["os"]["codename"] == "bookworm"
    assert h1["facts"]["sshd"]["settings"]["passwordauthentication"] == "no"


def test_json_debian_driver_host_without_gpu(full_run):
    h2 = full_run["hosts"]["h2"]
    facts = h2["facts"]
    assert facts["driver"]["smi_rc"] == 9
    assert facts["driver"]["smi"]["state"] == "driver-not-loaded"
    assert facts["driver"]["loaded_module"] is None
    builds = [e for e in facts["dkms"] if e["module"].startswith("nvidia")]
    assert builds and builds[0]["version"] == "535.309.01", facts["dkms"]
    assert "driver.not-loaded" in _rules(h2, "error")
    message = next(f["message"] for f in h2["findings"] if f["rule"] == "driver.not-loaded")
    assert "couldn't communicate" in message and "dkms: nvidia-current 535.309.01" in message
    # Every driver package is held: no unheld / pending-upgrade finding.
    assert not _rules(h2) & {"driver.unheld", "driver.upgrade-pending"}
    assert "nvidia-driver" in facts["packages"]["held"]


def test_json_unheld_driver_host(full_run):
    h3 = full_run["hosts"]["h3"]
    assert {"driver.not-loaded", "driver.upgrade-pending"} <= _rules(h3, "error")
    message = next(f["message"] for f in h3["findings"] if f["rule"] == "driver.upgrade-pending")
    assert "nvidia-smi 535.261.03-1 -> 535.309.01-0+deb12u1" in message
    assert "bookworm-security" in message


def test_json_unreachable_host(full_run):
    h4 = full_run["hosts"]["h4"]
    assert h4["reachable"] is False
    assert h4["facts"] is None
    assert h4["verdict"] == "unreachable"
    assert _rules(h4) == {"host.unreachable"}
    summary = full_run["report"]["summary"]
    assert summary["unreachable"] == 1 and summary["reachable"] == 3
    assert summary["verdicts"] == {"ok": 0, "warning": 1, "error": 2, "unreachable": 1}


def test_junit_has_a_case_per_host_and_rule(full_run):
    root = ET.parse(full_run["dir"] / "audit.xml").getroot()
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    # the security exposure is a second suite per probed host (docs/audit-report.md, JUnit)
    assert set(suites) == {"h1", "h2", "h3", "h4", "h1 security", "h2 security", "h3 security"}
    assert not suites["h3 security"].findall(".//failure")  # only with --fail-on security
    h4_cases = suites["h4"].findall("testcase")
    assert [c.get("name") for c in h4_cases] == ["host.unreachable"]
    assert h4_cases[0].find("error") is not None
    # one case per rule check; the failing finding's id is the failure's type
    cases = suites["h3"].findall("testcase")
    failed = {c.get("name"): c.find("failure").get("type") for c in cases
              if c.find("failure") is not None}
    assert failed["driver.state"] == "driver.not-loaded"
    assert failed["driver.held"] == "driver.upgrade-pending"
    assert suites["h1"].get("failures") == "0"
    xmlschema = pytest.importorskip("xmlschema", reason="xmlschema (a dev dependency) is missing")
    xsd = Path(__file__).resolve().parents[1] / "reports" / "junit-10.xsd"
    xmlschema.XMLSchema(str(xsd)).validate(str(full_run["dir"] / "audit.xml"))


def test_json_report_matches_its_schema(full_run):
    from tests.schema_check import assert_valid

    assert_valid(full_run["report"], "audit-report")


def test_prometheus_textfile_parses(full_run):
    parser = pytest.importorskip("prometheus_client.parser",
                                 reason="prometheus-client (a dev dependency) is not installed")
    text = (full_run["dir"] / "audit.prom").read_text()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in parser.text_string_to_metric_families(text) for s in family.samples}
    assert samples[("gpuhost_audit_host_up", (("host", "h4"),))] == 0
    assert samples[("gpuhost_audit_host_up", (("host", "h2"),))] == 1
    key = ("gpuhost_audit_finding",
           (("host", "h3"), ("rule", "driver.upgrade-pending"), ("severity", "error")))
    assert samples[key] == 1


COUNTING_RUN = textwrap.dedent('''
    import json, sys
    from collections import Counter
    from gpuhost.pyinfra_adapter import ensure_gevent
    ensure_gevent()
    from gpuhost.fleet import gather
    from gpuhost.inventory.loader import select
    import paramiko
    from gpuhost.facts.gpu_stack import GpuStack
    connects, commands = Counter(), Counter()
    real_connect, real_exec = paramiko.SSHClient.connect, paramiko.SSHClient.exec_command
    def connect(self, hostname, *a, **k):
        connects[hostname] += 1
        self._gpuhost_target = hostname
        return real_connect(self, hostname, *a, **k)
    def exec_command(self, command, *a, **k):
        commands[self._gpuhost_target] += 1
        return real_exec(self, command, *a, **k)
    paramiko.SSHClient.connect, paramiko.SSHClient.exec_command = connect, exec_command
    results = list(gather(select(sys.argv[1], limit="h1,h2,h3"), GpuStack))
    print(json.dumps({"ok": sorted(r.name for r in results if r.ok),
                      "connects": connects, "commands": commands}))
''')


def test_audit_makes_exactly_one_ssh_command_per_host(audit_lab):
    proc = subprocess.run([sys.executable, "-c", COUNTING_RUN, str(audit_lab["inventory"])],
                          capture_output=True, text=True, timeout=300, check=False,
                          env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    counts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert counts["ok"] == ["h1", "h2", "h3"]
    addresses = [h.address for h in audit_lab["hosts"][:3]]
    assert counts["commands"] == {address: 1 for address in addresses}
    assert counts["connects"] == {address: 1 for address in addresses}


def test_shards_merge_into_the_report_of_one_run(audit_lab, tmp_path):
    inventory = str(audit_lab["inventory"])
    parts = []
    for k in (1, 2):
        part = tmp_path / f"shard{k}.json"
        proc = _gpuhost("audit", inventory, "--limit", "h1,h2,h3", "--shard", f"{k}/2",
                        "--json", str(part), "-q")
        assert proc.returncode in (0, 1), proc.stderr
        parts.append(json.loads(part.read_text()))
    names = [sorted(h["name"] for h in p["hosts"]) for p in parts]
    assert names == [["h1", "h3"], ["h2"]]  # every 2nd host of the inventory order
    merged_path = tmp_path / "merged.json"
    proc = _gpuhost("report", "merge", *(str(tmp_path / f"shard{k}.json") for k in (1, 2)),
                    "-o", str(merged_path))
    assert proc.returncode == 1, proc.stderr  # h2 and h3 have errors
    merged = json.loads(merged_path.read_text())
    assert [h["name"] for h in merged["hosts"]] == ["h1", "h2", "h3"]
    assert merged["summary"]["verdicts"] == {"ok": 0, "warning": 1, "error": 2, "unreachable": 0}
    assert merged["summary"]["shards"] == ["1/2", "2/2"]
