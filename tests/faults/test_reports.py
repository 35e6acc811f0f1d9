"""The fault catalog's action in every output of the audit: the JSON report (schema-valid; old
reports without it stay valid), the Prometheus textfile and the HTML report."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from gpuhost.audit.host import AuditSettings, audit_host
from gpuhost.audit.report import html, prom
from gpuhost.audit.report.json_report import build_report
from gpuhost.facts.host_facts import DriverFacts, HostFacts
from gpuhost.matrix import load_matrix
from gpuhost.parsers.nvidia_smi import parse_output
from tests.schema_check import assert_valid, problems

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "captures"
H100X8 = CAPTURES / "nvidia-smi-q-text" / "thamada-gls__H100SXMx8__565.57.01.txt"
V100_SICK = CAPTURES / "nvidia-smi-xml" / "openpai__nvidia_smi_retired_pages.xml"


def _audited(text: str):
    facts = HostFacts(
        probe_version=1, driver=DriverFacts(smi=parse_output(text), smi_installed=True)
    )
    return [audit_host("gpu01", facts, {}, AuditSettings(load_matrix(), {}))]


def _slow_h100() -> str:
    """The real 8 x H100 report with GPU 0's HW slowdown and fabric state changed (hand-made)."""
    text = H100X8.read_text(encoding="utf-8")
    text = text.replace(
        "        HW Slowdown                       : Not Active",
        "        HW Slowdown                       : Active",
        1,
    )
    return text.replace(
        "        State                             : Completed",
        "        State                             : In Progress",
        1,
    )


def test_audit_json_carries_the_action_and_stays_schema_valid():
    hosts = _audited(V100_SICK.read_text(encoding="utf-8"))
    report = build_report(hosts)
    assert_valid(report, "audit-report")
    actions = {f["rule"]: f["action"] for f in report["hosts"][0]["findings"]}
    assert actions["gpu.ecc-uncorrectable"] == "reset-gpu"
    assert actions["gpu.retired-pages-pending"] == "reboot"
    assert all(actions[rule] is None for rule in actions if not rule.startswith("gpu."))
    # a report written before the action existed is still valid; a made-up action is not
    old = copy.deepcopy(report)
    for finding in old["hosts"][0]["findings"]:
        del finding["action"]
    assert_valid(old, "audit-report")
    bad = copy.deepcopy(report)
    bad["hosts"][0]["findings"][0]["action"] = "panic"
    assert problems(bad, "audit-report")


def test_new_audit_rules_on_a_real_hgx_report():
    hosts = _audited(_slow_h100())
    found = {(f.rule, f.action) for f in hosts[0].findings}
    assert ("gpu.clocks.hw-slowdown", "inspect-hardware") in found
    assert ("gpu.fabric.state", "drain") in found
    assert_valid(build_report(hosts), "audit-report")


def test_prometheus_has_the_fault_action_metric():
    parser = pytest.importorskip(
        "prometheus_client.parser", reason="prometheus-client (a dev dependency) is not installed"
    )
    hosts = _audited(_slow_h100())
    text = prom.render(hosts, build_report(hosts)["summary"])
    families = {f.name: f for f in parser.text_string_to_metric_families(text)}
    samples = {
        (s.labels["rule"], s.labels["action"]): s.value
        for s in families["gpuhost_audit_fault_action"].samples
    }
    assert samples[("gpu.clocks.hw-slowdown", "inspect-hardware")] == 1
    assert samples[("gpu.fabric.state", "drain")] == 1
    assert all(rule.startswith("gpu.") for rule, _ in samples)


def test_html_report_shows_the_action():
    report = build_report(_audited(V100_SICK.read_text(encoding="utf-8")))
    rows = html.page_data(report)["findings"]
    assert ["gpu.ecc-uncorrectable", "reset-gpu"] in [[r[2], r[8]] for r in rows]
    assert "<th>action</th>" in html.render(report)
