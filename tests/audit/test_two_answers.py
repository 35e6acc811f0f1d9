"""Issue 24: the audit's two answers, never mixed. The verdict says whether a host's stack is
right and healthy; the security exposure (``security.*``: NVIDIA bulletins affecting its driver
or container toolkit) is a separate answer in the JSON report (host and summary), the text
summary, the HTML page and report merge; the exit status follows the verdict unless
``--fail-on security``."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from schema_check import assert_valid

from gpuhost.audit.report import html
from gpuhost.audit.report.json_report import report_from_entries
from gpuhost.audit.report.table import fleet_text
from gpuhost.audit.summary import exit_code_for, summarize, with_security
from gpuhost.cli import main
from gpuhost.matrix.advisories import branch_fix, exposure, load_advisories

_LOCAL = Path(__file__).parents[1] / "robustness" / "data" / "audit-local.json"
AFFECTED = "535.161.07"  # R535, behind NVIDIA's bulletins
SAFE = branch_fix(load_advisories(), 580).first_fixed or ""  # the first R580 no bulletin names


def _security_findings(driver: str) -> list[dict[str, Any]]:
    return [f.to_dict() for f in exposure(load_advisories(), driver=driver).findings]


def _old_entry(name: str, driver: str) -> dict[str, Any]:
    """A host entry as gpuhost wrote it before the split: the security finding among the
    findings, the verdict counting it."""
    facts = copy.deepcopy(json.loads(_LOCAL.read_text(encoding="utf-8"))["hosts"][0]["facts"])
    facts["driver"]["loaded_module"] = {"version": driver, "flavor": "open"}
    warning = {
        "rule": "matrix.driver.branch-eol",
        "severity": "warning",
        "message": "driver branch R535 (LTSB) is end of life",
        "found": f"driver {driver}",
        "expected": "a supported branch",
        "fix": "move to a supported LTSB/PB branch",
        "source": "https://docs.nvidia.com/datacenter/tesla/drivers/",
    }
    found = _security_findings(driver) + [warning]
    verdict = "error" if any(f["severity"] == "error" for f in found) else "warning"
    return {"name": name, "reachable": True, "facts": facts, "findings": found, "verdict": verdict}


def test_the_data_names_the_driver_as_affected():
    assert "error" in [f["severity"] for f in _security_findings(AFFECTED)]
    assert SAFE and _security_findings(SAFE) == []


def test_an_entry_written_before_the_split_gets_its_answers_apart():
    entry = with_security(_old_entry("h1", AFFECTED))
    assert entry["verdict"] == "warning"
    assert [f["rule"] for f in entry["findings"]] == ["matrix.driver.branch-eol"]
    assert entry["security"]["verdict"] == "error"
    assert {f["rule"] for f in entry["security"]["findings"]} == {"security.driver"}
    assert with_security(entry) == entry  # a current entry is kept as it is


def test_summary_verdict_and_exit_follow_compatibility_unless_fail_on_security():
    hosts = [with_security(_old_entry(n, d)) for n, d in (("h1", AFFECTED), ("h2", SAFE))]
    summary = summarize(hosts)
    assert summary["verdict"] == "warning"
    assert summary["findings"] == {"error": 0, "warning": 2, "info": 0}
    assert summary["security"]["verdict"] == "error"
    assert summary["security"]["verdicts"] == {"ok": 1, "warning": 0, "error": 1, "unreachable": 0}
    assert summary["security"]["rules"] == {"security.driver": len(_security_findings(AFFECTED))}
    assert exit_code_for(summary) == 0 and exit_code_for(summary, "compatibility") == 0
    assert exit_code_for(summary, "security") == 1
    text = fleet_text(summary).splitlines()
    assert text[-2].startswith("verdict: warning - 2 host(s)")
    assert text[-1].startswith("security: error - NVIDIA security bulletins affect 1 host(s)")
    report = report_from_entries(hosts)
    assert_valid(report, "audit-report")


def test_report_merge_splits_old_reports_and_takes_fail_on(tmp_path, capsys):
    paths = []
    for shard, name in ((1, "a1"), (2, "b1")):
        path = tmp_path / f"{name}.json"
        entries = [_old_entry(name, AFFECTED)]
        path.write_text(json.dumps(report_from_entries(entries, {"shard": f"{shard}/2"})))
        paths.append(str(path))
    out = tmp_path / "merged.json"
    assert main(["report", "merge", *paths, "-o", str(out)]) == 0
    merged = json.loads(out.read_text())
    assert_valid(merged, "merged-report")
    assert [h["verdict"] for h in merged["hosts"]] == ["warning", "warning"]
    assert {h["security"]["verdict"] for h in merged["hosts"]} == {"error"}
    assert merged["summary"]["verdict"] == "warning"
    assert merged["summary"]["security"]["verdict"] == "error"
    assert "security: error" in capsys.readouterr().out
    assert main(["report", "merge", *paths, "-o", str(out), "--fail-on", "security"]) == 1


def test_html_shows_the_exposure_apart():
    hosts = [with_security(_old_entry("h1", AFFECTED))]
    data = html.page_data(report_from_entries(hosts))
    assert data["verdict"] == "warning" and data["counts"]["error"] == 0
    assert [f[2] for f in data["findings"]] == ["matrix.driver.branch-eol"]
    assert data["security"]["verdict"] == "error"
    assert {f[2] for f in data["security"]["findings"]} == {"security.driver"}
    assert data["hosts"] == [["h1", "warning", 0, "error"]]
    page = html.render(report_from_entries(hosts))
    assert 'id="security-findings"' in page


def test_audit_takes_fail_on(capsys):
    # this machine: no NVIDIA driver; a CUDA toolkit only where one is installed (the
    # CUDA Toolkit bulletins judge it), so the exposure is read first, then --fail-on follows it
    assert main(["audit", "--json", "-"]) == 0
    (host,) = json.loads(capsys.readouterr().out)["hosts"]
    assert {f["rule"] for f in host["security"]["findings"]} <= {"security.cuda-toolkit"}
    affected = host["security"]["verdict"] == "error"
    assert not affected or host["facts"]["cuda"]["toolkits"]
    assert main(["audit", "--fail-on", "security"]) == (1 if affected else 0)
    if not host["security"]["findings"]:
        assert "security: no known advisory" in capsys.readouterr().out
    assert main(["audit", "--fail-on", "everything"]) == 2
