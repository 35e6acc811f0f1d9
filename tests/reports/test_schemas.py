"""Every document gpuhost writes matches its shipped JSON Schema, and ``gpuhost schema`` prints it.

Documents come from the real code paths: the audit of this machine and of probe outputs captured
on lab hosts (tests/audit/data), report merge, a snapshot built from a host-state output, the
smoke script run here and the hand-made smoke documents the smoke tests use, and the marker
provision writes for every built-in profile.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from gpuhost import __version__
from gpuhost.audit.host import AuditSettings, audit_host, unreachable_host
from gpuhost.audit.report import json_report
from gpuhost.cli import main
from gpuhost.deploys.guards import spec_from_profile
from gpuhost.facts.build import host_facts_from_text
from gpuhost.matrix import load_matrix, load_profiles
from gpuhost.operations.marker import render_marker
from gpuhost.parsers.profile_marker import parse_profile_marker
from gpuhost.schemas import NAMES, load_schema, schema_text, standalone_text
from gpuhost.upgrade.host_state import parse_host_state
from gpuhost.upgrade.snapshot import build_snapshot
from tests.schema_check import assert_valid, problems, validator
from tests.smoke.documents import gpu_document
from tests.upgrade.test_snapshot import host_output

DATA = Path(__file__).resolve().parents[1] / "audit" / "data"
CAPTURES = sorted(DATA.glob("*.probe"))


def fleet_report() -> dict:
    """A report of the three lab captures plus one unreachable host, as the CLI writes it."""
    matrix = load_matrix()
    settings = AuditSettings(matrix=matrix, profiles=load_profiles(None))
    reports = [
        audit_host(p.stem, host_facts_from_text(p.read_text(encoding="utf-8")), {}, settings)
        for p in CAPTURES
    ]
    reports.append(unreachable_host("gpu-down.example.org", "connect timed out after 10s"))
    return json_report.build_report(reports, {"inventory": "inv.py"}, matrix.updated)


@pytest.mark.parametrize("name", NAMES)
def test_every_schema_is_valid_draft_2020_12_and_printed_by_the_cli(name, capsys):
    validator(name)  # check_schema raises on an invalid schema
    assert load_schema(name)["$id"] == f"urn:gpuhost:schema:{name}"
    assert main(["schema", name]) == 0
    printed = capsys.readouterr().out
    assert printed == standalone_text(name)
    if name != "merged-report":  # refers to no other schema: the shipped file as it is
        assert printed == schema_text(name)


def test_printed_merged_report_schema_stands_alone(tmp_path, capsys):
    """``gpuhost schema merged-report > f`` is all a validator needs: the audit report schema it
    refers to by id travels in its $defs (no registry, no network); a real merged report
    validates and a wrong verdict inside a host (an audit-report rule) is refused."""
    from jsonschema import Draft202012Validator

    assert main(["schema", "merged-report"]) == 0
    schema = json.loads(capsys.readouterr().out)
    Draft202012Validator.check_schema(schema)
    assert schema["$defs"]["audit-report"]["$id"] == "urn:gpuhost:schema:audit-report"
    report = fleet_report()
    paths = []
    for index, hosts in enumerate((report["hosts"][:2], report["hosts"][2:])):
        path = tmp_path / f"shard{index}.json"
        path.write_text(json_report.dumps({**report, "hosts": hosts}))
        paths.append(str(path))
    out = tmp_path / "merged.json"
    assert main(["report", "merge", *paths, "-o", str(out)]) == 1  # one host unreachable
    merged = json.loads(out.read_text())
    plain = Draft202012Validator(schema)  # no registry: only what the printed document holds
    assert list(plain.iter_errors(merged)) == []
    merged["hosts"][0]["verdict"] = "bogus"
    assert [e.validator for e in plain.iter_errors(merged)] == ["enum"]


def test_schema_without_a_name_lists_them_and_a_wrong_name_is_a_usage_error(capsys):
    assert main(["schema"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == list(NAMES)
    assert main(["schema", "audit"]) == 2
    err = capsys.readouterr().err
    assert "'audit' is not one of" in err and "Traceback" not in err


def test_local_audit_report_is_valid_and_dated(tmp_path):
    path = tmp_path / "report.json"
    before = datetime.now(timezone.utc).replace(microsecond=0)
    assert main(["audit", "-q", "--python", "/no/such/python", "--json", str(path)]) == 0
    report = json.loads(path.read_text())
    assert_valid(report, "audit-report")
    generated = datetime.strptime(report["generated_at"], "%Y-%m-%dT%H:%M:%SZ")
    generated = generated.replace(tzinfo=timezone.utc)
    assert before <= generated <= datetime.now(timezone.utc) + timedelta(seconds=1)
    assert report["gpuhost_version"] == __version__
    assert report["matrix_date"] == load_matrix().updated
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", report["matrix_date"])


def test_fleet_report_from_lab_captures_is_valid():
    report = fleet_report()
    assert_valid(report, "audit-report")
    assert [h["verdict"] for h in report["hosts"]].count("unreachable") == 1


def test_every_warning_and_error_names_found_expected_and_fix():
    for host in fleet_report()["hosts"]:
        for finding in host["findings"]:
            if finding["severity"] == "info":
                continue
            missing = [k for k in ("found", "expected", "fix", "source") if not finding[k]]
            assert missing == [], (host["name"], finding["rule"], missing)


def test_merged_report_is_valid(tmp_path):
    report = fleet_report()
    first, second = dict(report), dict(report)
    first["hosts"], second["hosts"] = report["hosts"][:2], report["hosts"][2:]
    paths = []
    for index, part in enumerate((first, second)):
        path = tmp_path / f"shard{index}.json"
        path.write_text(json_report.dumps(part))
        paths.append(str(path))
    out = tmp_path / "merged.json"
    assert main(["report", "merge", *paths, "-o", str(out)]) == 1  # one host unreachable
    merged = json.loads(out.read_text())
    assert_valid(merged, "merged-report")
    assert merged["summary"]["merged_from"] == paths
    assert merged["matrix_date"] == report["matrix_date"]
    assert problems(report, "merged-report")  # a plain report names no inputs


def test_snapshot_is_valid():
    doc = build_snapshot("h1", parse_host_state(host_output()), "20250101T000000Z")
    assert_valid(doc, "snapshot")
    doc["packages"]["nvidia-smi"] = {"arch": "amd64"}
    assert problems(doc, "snapshot") == [
        "$.packages['nvidia-smi']: 'version' is a required property"
    ]


def test_smoke_documents_are_valid(tmp_path):
    assert_valid(gpu_document(), "smoke-result")
    # The real script on this machine (no GPU; torch may be absent): still a valid document.
    saved = tmp_path / "here.json"
    assert main(["smoke", "run", "--quick", "--save", str(saved)]) in (0, 1)
    assert_valid(json.loads(saved.read_text()), "smoke-result")


@pytest.mark.parametrize("name", sorted(load_profiles(None)))
def test_provision_marker_of_every_built_in_profile_is_valid(name):
    profile = load_profiles(None)[name]
    marker = spec_from_profile(profile, ["NVIDIA H100 80GB HBM3"]).to_marker()
    assert_valid(json.loads(render_marker(marker)), "provision-marker")
    parsed = parse_profile_marker(render_marker(marker))
    assert parsed is not None and parsed.profile == name


def test_a_finding_without_its_structured_fields_is_rejected():
    report = fleet_report()
    finding = report["hosts"][0]["findings"][0]
    del finding["fix"]
    finding["severity"] = "warn"
    found = problems(report, "audit-report")
    assert any("'fix' is a required property" in p for p in found)
    assert any("'warn' is not one of" in p for p in found)


def test_upgrade_journal_lines_are_valid_and_the_enums_match_the_code(tmp_path):
    from gpuhost.upgrade.journal import OUTCOMES, STEP_STATUSES, Journal, read_records
    from gpuhost.upgrade.orchestrate import ALL_STEPS

    journal = Journal.create(tmp_path, "inv.py", "debian12-nonfree-535", ["h1", "h2"], {"batch": 1})
    journal.step("h1", "snapshot", "started")
    journal.step("h1", "snapshot", "done", data={"snapshot_id": "20250101T000000Z"})
    journal.step("h2", "install", "interrupted", "stopped by the operator")
    journal.outcome("h1", "upgraded")
    journal.end({"upgraded": 1})
    records = read_records(journal.path)
    assert [r["kind"] for r in records] == ["run", "step", "step", "step", "outcome", "end"]
    for record in records:
        assert_valid(record, "upgrade-journal")
    defs = load_schema("upgrade-journal")["$defs"]
    assert tuple(defs["step"]["properties"]["status"]["enum"]) == STEP_STATUSES
    assert tuple(defs["outcome"]["properties"]["outcome"]["enum"]) == OUTCOMES
    assert tuple(defs["step"]["properties"]["step"]["enum"]) == ALL_STEPS
