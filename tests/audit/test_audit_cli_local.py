"""``gpuhost audit`` with no inventory audits this machine (no GPU, no nvidia-smi here): the
report says so, exit code 0 (a warning), in every output format."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET

import pytest

from gpuhost.cli import main
from tests.schema_check import assert_valid

pytestmark = pytest.mark.skipif(
    shutil.which("nvidia-smi") is not None,
    reason="this machine has nvidia-smi; these tests describe a machine without an NVIDIA stack",
)


def test_local_audit_says_there_is_no_gpu_and_exits_0(capsys):
    assert main(["audit", "--python", "/usr/bin/python3"]) == 0
    out = capsys.readouterr().out
    assert "gpuhost audit: localhost" in out
    assert "gpu.none" in out
    assert "no NVIDIA GPU found" in out
    assert "verdict: warning" in out
    assert "Traceback" not in out


def test_local_audit_json_on_stdout_is_schema_1(capsys):
    assert main(["audit", "--python", "/usr/bin/python3", "--json", "-"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)  # stdout holds only the JSON; the table went to stderr
    assert list(report) == [
        "schema", "generated_at", "gpuhost_version", "matrix_date", "data", "hosts", "summary"
    ]
    assert report["data"] == {"date": report["matrix_date"], "origin": "shipped with gpuhost"}
    assert_valid(report, "audit-report")
    assert report["schema"] == 1
    (host,) = report["hosts"]
    assert list(host) == ["name", "reachable", "facts", "findings", "verdict", "security"]
    # no driver to judge; a CUDA toolkit of this machine (if any) meets the CUDA bulletins
    security_rules = {f["rule"] for f in host["security"]["findings"]}
    assert security_rules <= {"security.cuda-toolkit"}
    assert not security_rules or host["facts"]["cuda"]["toolkits"]
    assert host["security"]["verdict"] == ("ok" if not security_rules else "error")
    assert host["reachable"] is True
    assert host["verdict"] == "warning"
    assert [f["rule"] for f in host["findings"]] == ["gpu.none"]
    keys = ["rule", "severity", "message", "found", "expected", "fix", "source", "action"]
    assert all(list(f) == keys for f in host["findings"])
    assert host["facts"]["driver"]["smi"]["state"] == "absent"
    assert report["summary"]["verdict"] == "warning"
    assert "verdict: warning" in captured.err


def test_at_local_is_this_machine_as_for_check(capsys):
    # `gpuhost check @local` and the node-side timer's `gpuhost audit @local`: pyinfra's name for
    # this machine means the same as no inventory, not a missing file
    assert main(["audit", "@local", "--python", "/usr/bin/python3", "--json", "-"]) == 0
    report = json.loads(capsys.readouterr().out)
    (host,) = report["hosts"]
    assert [f["rule"] for f in host["findings"]] == ["gpu.none"]


def test_local_audit_junit_and_prom_files(tmp_path):
    junit, prom = tmp_path / "audit.xml", tmp_path / "audit.prom"
    assert main(["audit", "-q", "--python", "/usr/bin/python3", "--junit", str(junit),
                 "--prom", str(prom)]) == 0
    root = ET.parse(junit).getroot()
    cases = root.findall(".//testcase")
    assert {c.get("name") for c in cases} >= {"driver.state", "driver.reboot-needed", "ssh"}
    (state,) = [c for c in cases if c.get("name") == "driver.state"]
    assert "warning: gpu.none:" in state.find("system-out").text
    assert root.get("failures") == "0"
    skipped = [c for c in cases if c.find("skipped") is not None]
    assert skipped and all(s.find("skipped").get("message") for s in skipped)
    text = prom.read_text()
    assert 'gpuhost_audit_finding{host="localhost",rule="gpu.none",severity="warning"} 1' in text


def test_unwritable_output_is_a_usage_error(capsys):
    assert main(["audit", "-q", "--json", "/nonexistent/dir/report.json"]) == 2
    err = capsys.readouterr().err
    assert "--json /nonexistent/dir/report.json: cannot write" in err
    assert "Traceback" not in err


def test_limit_without_inventory_is_a_usage_error(capsys):
    assert main(["audit", "--limit", "h1"]) == 2


def test_prometheus_output_parses_and_escapes_labels():
    parser = pytest.importorskip(
        "prometheus_client.parser", reason="prometheus-client (a dev dependency) is not installed"
    )
    from gpuhost.audit.host import unreachable_host
    from gpuhost.audit.report import prom
    from gpuhost.audit.report.json_report import build_report

    hosts = [unreachable_host('odd"name\\with\nnewline', "refused")]
    text = prom.render(hosts, build_report(hosts)["summary"])
    families = {f.name: f for f in parser.text_string_to_metric_families(text)}
    (up,) = families["gpuhost_audit_host_up"].samples
    assert up.labels["host"] == 'odd"name\\with\nnewline'
    assert up.value == 0
    assert text.endswith("\n")


def test_junit_is_valid_xml_for_odd_messages():
    from gpuhost.audit.host import unreachable_host
    from gpuhost.audit.report import junit

    text = junit.render([unreachable_host("h<1>&", 'said "<no>" & left')])
    root = ET.fromstring(text.split("\n", 1)[1])
    case = root.find(".//testcase")
    assert case is not None and case.get("classname") == "gpuhost.h<1>&"
    assert root.get("errors") == "1"
