"""A finding's fix is written once, in its ``fix`` field; the one-line message every renderer
shows ends with it (``MESSAGE; fix: FIX``), so the two can no longer disagree."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
from old_profiles import OLD_PROFILES
from rule_modules import rule_modules

import gpuhost.audit.host as audit_host_module
from gpuhost.audit.host import AuditSettings, audit_host, failed_host, unreachable_host
from gpuhost.facts.build import host_facts_from_text
from gpuhost.facts.host_facts import DriverFacts, HostFacts
from gpuhost.findings import Finding, split_fix
from gpuhost.matrix import load_matrix, load_profiles
from gpuhost.parsers import parse_xml

DATA = Path(__file__).resolve().parent / "data"
SMI = Path(__file__).resolve().parents[1] / "fixtures" / "captures" / "nvidia-smi-xml"
SETTINGS = AuditSettings(matrix=load_matrix(), profiles=load_profiles(OLD_PROFILES))


def _findings() -> list[Finding]:
    found: list[Finding] = []
    for path in sorted(DATA.glob("*.probe")):
        facts = host_facts_from_text(path.read_text(encoding="utf-8"))
        for data in ({}, {"gpuhost_profile": "debian12-nonfree-535"}):
            found += audit_host(path.stem, facts, data, SETTINGS).findings
    for path in sorted(SMI.glob("*.xml")):
        smi = parse_xml(path.read_text(encoding="utf-8"))
        facts = HostFacts(driver=DriverFacts(smi=smi, smi_installed=True))
        found += audit_host(path.stem, facts, {}, SETTINGS).findings
    found += unreachable_host("h", "connection refused").findings
    found += failed_host("h", "probe printed nothing").findings
    return found


def test_every_message_ends_with_its_fix_field_once() -> None:
    findings = _findings()
    assert len({f.rule for f in findings}) > 15  # the captures reach many rules
    for finding in findings:
        said, fix = split_fix(finding.message)
        assert fix == finding.fix, finding
        assert "; fix: " not in said, finding
        assert finding.to_dict()["message"] == finding.message
        assert finding.to_dict()["fix"] == finding.fix


@pytest.mark.parametrize(
    "module", [*rule_modules(), audit_host_module], ids=lambda m: m.__name__
)
def test_the_rules_write_no_fix_into_a_message(module: object) -> None:
    """The audit's rules give their fix only as ``fix=``: no string in their source says
    ``fix:`` (Finding composes the line)."""
    tree = ast.parse(Path(str(getattr(module, "__file__", ""))).read_text(encoding="utf-8"))
    texts = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]
    assert [t for t in texts if "fix: " in t and not t.startswith(("A ", "(", "\n"))] == []


def test_a_message_written_in_one_line_gives_the_field_and_a_field_gives_the_line() -> None:
    from_line = Finding("r", "error", "it broke; fix: mend it")
    assert (from_line.message, from_line.fix) == ("it broke; fix: mend it", "mend it")
    from_field = Finding("r", "error", "it broke", fix="mend it")
    assert from_field == from_line
    assert Finding("r", "info", "fine").message == "fine"
    assert dataclasses.replace(from_field, rule="s").message == "it broke; fix: mend it"
