"""JUnit XML against the Jenkins/Surefire schema; the Prometheus textfile (prometheus_client)."""

from __future__ import annotations

import os
import stat
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema
from prometheus_client.parser import text_string_to_metric_families

from gpuhost.audit.host import AuditSettings, audit_host, failed_host, unreachable_host
from gpuhost.audit.report import junit, prom
from gpuhost.audit.report.json_report import build_report
from gpuhost.audit.rules import RULES
from gpuhost.cli import main
from gpuhost.facts.build import host_facts_from_text
from gpuhost.matrix import load_matrix, load_profiles

HERE = Path(__file__).resolve().parent
CAPTURES = sorted((HERE.parent / "audit" / "data").glob("*.probe"))
XSD = xmlschema.XMLSchema(str(HERE / "junit-10.xsd"))


def hosts():
    """The lab captures under dotted fleet names, one unreachable and one whose probe failed."""
    settings = AuditSettings(matrix=load_matrix(), profiles=load_profiles(None))
    reports = [
        audit_host(
            f"gpu{index}.dc1.example.org",
            host_facts_from_text(path.read_text(encoding="utf-8")),
            {},
            settings,
        )
        for index, path in enumerate(CAPTURES)
    ]
    reports.append(unreachable_host("gpu9.dc1.example.org", "connect timed out after 10s"))
    reports.append(failed_host("gpu8.dc2.example.org", "probe printed <garbage> & left"))
    return reports


def test_junit_validates_against_the_surefire_schema():
    text = junit.render(hosts())
    XSD.validate(text)  # raises with the offending element on any violation
    assert XSD.is_valid(text)


def test_junit_one_case_per_rule_check_with_dotted_hosts_as_one_class():
    reports = hosts()
    root = ET.fromstring(junit.render(reports).split("\n", 1)[1])
    suites = [s for s in root.findall("testsuite") if not s.get("name").endswith(" security")]
    assert [s.get("name") for s in suites] == sorted(r.name for r in reports)
    checks = {r for r in RULES if not r.startswith("security.")} | {"matrix"}
    for suite in suites:
        name = suite.get("name")
        assert suite.get("hostname") == name
        cases = suite.findall("testcase")
        assert {c.get("classname") for c in cases} == {"gpuhost." + name.replace(".", "_")}
        assert all(c.get("classname").count(".") == 1 for c in cases)
        names = [c.get("name") for c in cases]
        if name == "gpu9.dc1.example.org":
            assert names == ["host.unreachable"] and cases[0].find("error") is not None
        elif name == "gpu8.dc2.example.org":
            assert names == ["host.probe-failed"] and cases[0].find("failure") is not None
        else:
            assert sorted(names) == sorted(checks)  # the same cases on every probed host
        for key in ("failure", "error", "skipped"):
            assert suite.get(key + "s" if key != "skipped" else key) == str(
                sum(1 for c in cases if c.find(key) is not None)
            )
    failed = root.find(".//testcase[@name='driver.state']/failure")
    assert failed is not None and "fix: " in failed.text and "found: " in failed.text
    assert root.get("failures") == str(len(root.findall(".//failure")))


def test_junit_keeps_the_security_exposure_in_its_own_suite():
    """Two answers: the security.* checks are a second suite per probed host, whose errors fail
    only with --fail-on security (as the exit status does)."""
    reports = hosts()
    exposed = [r for r in reports if r.security_verdict == "error"]
    assert exposed, "the captures include a driver NVIDIA's bulletins name"
    security_rules = sorted(r for r in RULES if r.startswith("security."))
    for fail_on, failing in (("compatibility", False), ("security", True)):
        text = junit.render(reports, fail_on)
        XSD.validate(text)
        root = ET.fromstring(text.split("\n", 1)[1])
        suites = {s.get("name"): s for s in root.findall("testsuite")}
        for report in reports:
            if report.facts is None:  # unreachable or probe failed: nothing judged
                assert f"{report.name} security" not in suites
                continue
            suite = suites[f"{report.name} security"]
            cases = suite.findall("testcase")
            assert sorted(c.get("name") for c in cases) == security_rules
            classes = {c.get("classname") for c in cases}
            assert classes == {"gpuhost_security." + report.name.replace(".", "_")}
            (prop,) = suite.findall("properties/property")
            assert prop.get("name") == "verdict" and prop.get("value") == report.security_verdict
            failures = suite.findall(".//failure")
            assert bool(failures) == (failing and report in exposed)
            assert not suites[report.name].findall(".//testcase[@name='security.driver']")


def test_prom_textfile_parses_and_names_the_run(tmp_path):
    reports = hosts()
    summary = build_report(reports)["summary"]
    path = tmp_path / "gpuhost.prom"
    before = time.time()
    prom.write(str(path), reports, summary)
    families = {f.name: f for f in text_string_to_metric_families(path.read_text())}
    (stamp,) = families["gpuhost_audit_last_run_timestamp_seconds"].samples
    assert before - 1 <= stamp.value <= time.time() + 1
    (success,) = families["gpuhost_audit_last_run_success"].samples
    assert success.value == 0  # one host unreachable, one probe failed
    up = {s.labels["host"]: s.value for s in families["gpuhost_audit_host_up"].samples}
    assert up["gpu9.dc1.example.org"] == 0 and up["gpu0.dc1.example.org"] == 1
    hosts_by_verdict = {
        s.labels["verdict"]: s.value for s in families["gpuhost_audit_hosts"].samples
    }
    assert hosts_by_verdict == {k: float(v) for k, v in summary["verdicts"].items()}
    findings = families["gpuhost_audit_finding"].samples
    assert sum(s.value for s in findings) == sum(len(r.findings) for r in reports)
    assert not [s for s in findings if s.labels["rule"].startswith("security.")]
    exposure = families["gpuhost_audit_security_finding"].samples
    assert sum(s.value for s in exposure) == sum(len(r.security_findings) for r in reports) > 0
    assert {s.labels["rule"] for s in exposure} <= {"security.driver", "security.container-toolkit"}
    security = {
        s.labels["host"]: s.labels["verdict"]
        for s in families["gpuhost_audit_host_security_verdict"].samples
    }
    assert security == {r.name: r.security_verdict for r in reports}
    by_security = {
        s.labels["verdict"]: s.value for s in families["gpuhost_audit_security_hosts"].samples
    }
    assert by_security == {k: float(v) for k, v in summary["security"]["verdicts"].items()}
    assert os.listdir(tmp_path) == ["gpuhost.prom"]  # no temporary file left behind


def test_prom_replaces_the_file_atomically(tmp_path):
    path = tmp_path / "gpuhost.prom"
    path.write_text("old\n")
    with path.open() as reader:  # a reader (node_exporter) holding the old file
        reports = hosts()[-2:]
        prom.write(str(path), reports, build_report(reports)["summary"])
        assert reader.read() == "old\n"  # renamed over, never rewritten in place
    assert "gpuhost_audit_host_up" in path.read_text()


def test_prom_success_is_one_when_every_host_was_probed(tmp_path):
    reports = hosts()[:-2]
    text = prom.render(reports, build_report(reports)["summary"])
    assert "gpuhost_audit_last_run_success 1.0" in text


@pytest.mark.parametrize("option", ["--prom", "--junit"])
def test_unwritable_prom_or_junit_is_one_line_exit_two(option, capsys):
    target = "/nonexistent/dir/out"
    assert main(["audit", "-q", "--python", "/no/such/python", option, target]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{option} {target}: cannot write" in err


def test_prom_never_replaces_a_device_fifo_or_folder(tmp_path, capsys) -> None:
    """The textfile is renamed over its path: as root, '--prom /dev/full' turned the device node
    into a regular file. Anything but a regular file is refused before any host is audited."""

    fifo, folder = tmp_path / "metrics.fifo", tmp_path / "metrics.d"
    os.mkfifo(fifo)
    folder.mkdir()
    for target in (fifo, folder):
        assert main(["audit", "-q", "--python", "/usr/bin/python3", "--prom", str(target)]) == 2
        assert "exists and is not a regular file" in capsys.readouterr().err
    assert stat.S_ISFIFO(fifo.stat().st_mode) and folder.is_dir()
    regular = tmp_path / "gpuhost.prom"
    regular.write_text("old\n")
    assert main(["audit", "-q", "--python", "/usr/bin/python3", "--prom", str(regular)]) == 0
    assert "gpuhost_audit_last_run_success" in regular.read_text()
