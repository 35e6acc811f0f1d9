"""NVIDIA security advisories: CSAF bulletins (recorded in tests/fixtures/nvidia-csaf, see its
SOURCE.md) -> data/advisories.yaml -> security.driver / security.container-toolkit findings in
matrix check, profile verify and the audit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from old_profiles import OLD_PROFILES

from gpuhost.cli import main
from gpuhost.knowledge.csaf import bulletin_row, read_bulletins, render_advisories
from gpuhost.matrix.advisories import (
    default_advisories_path,
    driver_hits,
    load_advisories,
    security_findings,
    toolkit_hits,
)
from gpuhost.matrix.profiles import load_profiles

RECORDED = Path(__file__).parent.parent / "fixtures" / "nvidia-csaf"
ADVS = load_advisories()


def _row(bulletin: str) -> dict[str, Any]:
    doc = next(d for p, d in read_bulletins(RECORDED) if p.stem == bulletin)
    row = bulletin_row(doc)
    assert row is not None
    return row


def test_shipped_advisories_are_the_recorded_bulletins() -> None:
    rows = [r for _, d in read_bulletins(RECORDED) if (r := bulletin_row(d))]
    assert (
        render_advisories(rows, ADVS.error_at_cvss) == Path(default_advisories_path()).read_text()
    )
    assert all(a.url.startswith("https://nvidia.custhelp.com/") and a.confidence for a in ADVS.rows)


def test_container_toolkit_bulletins_as_nvidia_publishes_them() -> None:
    """The three facts H13a's profile test relies on, now read from NVIDIA's own CSAF."""
    assert _row("5582")["fixed"] == {"toolkit": "1.16.2", "gpu-operator": "24.6.2"}  # CVE-2024-0132
    assert {c["id"]: c["cvss"] for c in _row("5582")["cves"]}["CVE-2024-0132"] == 9.0
    assert _row("5616")["fixed"] == {"toolkit": "1.17.4", "gpu-operator": "24.9.2"}  # 23359
    assert _row("5659")["fixed"] == {"toolkit": "1.17.8", "gpu-operator": "25.3.2"}  # 23266/7
    assert _row("5659")["highest_cvss"] == 9.0 and _row("5659")["date"] == "2025-07-15"


def test_driver_bulletin_fixed_version_per_linux_branch() -> None:
    row = _row("5703")
    assert row["fixed"] == {"535": "535.274.02", "570": "570.195.03", "580": "580.95.05"}
    assert row["component"] == "driver" and row["highest_cvss"] is not None


@pytest.mark.parametrize(
    ("version", "bulletins"),
    [
        ("1.16.1", {"5582", "5585", "5599", "5616", "5659", "5850"}),
        ("1.17.8", {"5850"}),
        ("1.19.1", set()),
    ],
)
def test_toolkit_versions(version: str, bulletins: set[str]) -> None:
    assert {h.advisory.id for h in toolkit_hits(ADVS, version)} == bulletins


def test_driver_on_its_own_branch_and_an_unfixed_branch() -> None:
    hits, unpatched = driver_hits(ADVS, "580.95.05")
    assert "5703" not in {h.advisory.id for h in hits}  # 580.95.05 is 5703's R580 fix
    assert {"5747", "5821"} <= {h.advisory.id for h in hits} and not unpatched
    hits, unpatched = driver_hits(ADVS, "550.163.01")  # R550's last fix (5630), then none
    assert not hits and "5703" in {a.id for a in unpatched}


def test_findings_name_cves_fixed_version_and_severity() -> None:
    (f,) = security_findings(ADVS, container_toolkit="1.17.3")
    assert f.rule == "security.container-toolkit" and f.severity == "error"
    assert (
        "CVE-2025-23359" in f.message and f.fix == "upgrade nvidia-container-toolkit to >= 1.19.1"
    )
    driver = security_findings(ADVS, driver="535.261.03")
    assert [x.severity for x in driver] == ["error", "warning"]
    assert "535.309.01" in (driver[0].expected or "")
    # bulletin 5861 (September 2026) fixes R580 and newer only: R535 is told to move on
    (unfixed,) = security_findings(ADVS, driver="535.309.01")
    assert unfixed.severity == "warning" and "5861" in unfixed.message


def test_cli_check_and_profile_verify(capsys: pytest.CaptureFixture[str]) -> None:
    """The exposure is its own answer: shown, in the exit status only with --fail-on security."""
    check = ["matrix", "check", "--driver", "580.178.04", "--container-toolkit", "1.17.7"]
    assert main(check) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "verdict: ok" and "security.container-toolkit" in lines[1]
    assert lines[-1].startswith("security: error")
    assert main([*check, "--fail-on", "security"]) == 1
    capsys.readouterr()
    fixed = ["matrix", "check", "--driver", "580.178.04", "--container-toolkit", "1.19.1"]
    assert main([*fixed, "--fail-on", "security"]) == 0
    out = capsys.readouterr().out
    assert "security." not in out and "\nsecurity: ok" in out
    old = ["matrix", "profile", "verify", "debian12-nonfree-535", "--profiles", OLD_PROFILES]
    assert main([*old, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] != "error" and data["security"]["verdict"] == "error"
    assert {a["rule"] for a in data["security"]["advisories"]} == {"security.driver"}
    assert main([*old, "--fail-on", "security"]) == 1
    capsys.readouterr()
    new = ["matrix", "profile", "verify", "debian12-nonfree-535-security", "--fail-on", "security"]
    assert main(new) == 0


@pytest.mark.parametrize("name", sorted(load_profiles()))
def test_builtin_profile_pins_no_affected_version(name: str) -> None:
    p = load_profiles()[name]
    found = security_findings(ADVS, driver=p.driver_version, container_toolkit=p.container_toolkit)
    assert not [f for f in found if f.severity == "error"], [f.message for f in found]


def test_advisories_sync_from_recorded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", "advisories-sync", "--from", str(RECORDED), "--check"]) == 0
    out = tmp_path / "advisories.yaml"
    out.write_text("schema: 1\nerror_at_cvss: 7.0\nadvisories: []\n")
    args = ["matrix", "advisories-sync", "--from", str(RECORDED), "--advisories", str(out)]
    assert main([*args, "--check"]) == 1
    assert "bulletin 5659 (2025-07-15): new" in capsys.readouterr().out
    assert main([*args, "--write"]) == 0 and load_advisories(str(out)).rows == ADVS.rows
    assert main(["matrix", "advisories-sync", "--from", str(tmp_path / "none")]) == 2


@pytest.mark.parametrize(
    "damage",
    [
        {"vulnerabilities": "x"},
        {"vulnerabilities": [5]},
        {"product_tree": {"branches": [{"category": 5, "branches": "y"}]}},
        {"product_tree": {"branches": "y"}},
    ],
)
def test_a_damaged_bulletin_is_one_line_naming_it(tmp_path, capsys, damage):
    """A CSAF document with fields of the wrong type made advisories-sync raise
    AttributeError/TypeError (issue 29)."""
    import shutil

    root = tmp_path / "csaf"
    shutil.copytree(RECORDED, root)
    victim = sorted(p for p in root.rglob("*.json") if p.stem.isdigit())[0]
    victim.write_text(json.dumps(json.loads(victim.read_text()) | damage))
    code = main(["matrix", "advisories-sync", "--from", str(root), "--check"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert f"{victim}: damaged CSAF bulletin" in err
