"""``gpuhost parse`` of a kernel log or dmesg output judges each Xid through the fault catalog
(issue #35, part 6): the finding id and the action are the ones ``gpuhost audit`` gives for the
same lines. Real captures from tests/fixtures/faults (SOURCE.md names each one's source; the Xid
154 file is hand-made from NVIDIA's catalog wording and says so)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuhost.audit.host import AuditSettings, audit_host
from gpuhost.cli import main
from gpuhost.facts.host_facts import GpuFaultFacts, HostFacts
from gpuhost.parsers.xid import xid_events

FAULTS = Path(__file__).resolve().parents[1] / "fixtures" / "faults"

CASES = [
    ("xid-79__pop-os-3363__syslog.txt", {("gpu.xid.79", "reboot", "error")}),
    ("xid-79__open-gpu-kernel-modules-1151__dmesg.txt", {("gpu.xid.79", "reboot", "error")}),
    ("xid-63__ml-engineering__debug-md.txt", {("gpu.xid.63", "none", "info")}),
    (
        "xid-154__handmade-from-xid-catalog.txt",
        {
            ("gpu.xid.74", "reset-gpu", "error"),
            ("gpu.xid.79", "reboot", "error"),
            ("gpu.xid.154", "reboot", "error"),
            ("gpu.xid.154", "reset-gpu", "error"),
        },
    ),
]


def _parsed(name: str, capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["parse", str(FAULTS / name), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(("name", "expected"), CASES, ids=[c[0] for c in CASES])
def test_each_xid_of_a_kernel_log_is_judged(
    name: str, expected: set, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _parsed(name, capsys)
    assert data["kind"] == "kernel-log"  # a syslog with Xid 79 is not an nvidia-smi error
    assert {(f["rule"], f["action"], f["severity"]) for f in data["findings"]} == expected


@pytest.mark.parametrize(("name", "expected"), CASES, ids=[c[0] for c in CASES])
def test_parse_says_what_the_audit_says(
    name: str, expected: set, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same lines as the host's kernel log (the audit's xid-log section): same ids,
    actions, severities and messages."""
    text = (FAULTS / name).read_text(encoding="utf-8")
    facts = HostFacts(gpu_faults=GpuFaultFacts(xid=xid_events(text)))
    audit = audit_host("n1", facts, {}, AuditSettings(None, {}))
    audited = {
        (f.rule, f.action, f.severity, f.message)
        for f in audit.findings
        if f.rule.startswith("gpu.xid.")
    }
    parsed = {
        (f["rule"], f["action"], f["severity"], f["message"])
        for f in _parsed(name, capsys)["findings"]
    }
    assert parsed == audited
    assert {(r, a, s) for r, a, s, _ in audited} == expected


def test_the_summary_names_each_finding_and_its_action(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["parse", str(FAULTS / "xid-79__pop-os-3363__syslog.txt")]) == 0
    out = capsys.readouterr().out
    assert "kind: kernel-log" in out and "xid events: 1" in out
    assert "[gpu.xid.79, action: reboot] Xid 79 (GPU has fallen off the bus) on 0000:01:00" in out


def test_a_kernel_log_without_an_xid_judges_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "dmesg.txt"
    lines = (FAULTS / "xid-79__open-gpu-kernel-modules-1151__dmesg.txt").read_text().splitlines()
    log.write_text("\n".join(lines[:2]) + "\n")  # the GPU's NVRM lines before the Xid
    assert main(["parse", str(log), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "kernel-log" and data["xid_events"] == [] and data["findings"] == []
