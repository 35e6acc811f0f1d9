"""A user's own profile works the same in every command that takes one: inventory data
``gpuhost_profiles_file`` or ``--profiles FILE`` (which takes its place for every host), resolved
by ``gpuhost.inventory.profiles.profile_table``. The audit runs on this machine as the pyinfra
``@local`` host: no GPU here, so the profile's pins are reported missing, by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuhost.errors import ConfigError
from gpuhost.inventory.profiles import profile_table, profiles_file
from tests.robustness.conftest import ROOT, assert_one_line, gpuhost

MY_PROFILES = ROOT / "inventories" / "profiles" / "my-h100.yaml"


def _findings(run_out: str) -> dict[str, str]:
    report = json.loads(run_out)
    return {f["rule"]: f["message"] for f in report["hosts"][0]["findings"]}


def test_option_wins_over_host_data_and_builtins_remain() -> None:
    assert profiles_file("a.yaml", {"gpuhost_profiles_file": "b.yaml"}) == "a.yaml"
    assert profiles_file(None, {"gpuhost_profiles_file": "b.yaml"}) == "b.yaml"
    assert profiles_file(None, {}) is None
    table = profile_table(None, {"gpuhost_profiles_file": str(MY_PROFILES)})
    assert "my-h100" in table and "debian12-nonfree-535-security" in table


def test_a_bad_profiles_file_names_file_and_host(tmp_path: Path) -> None:
    bad = tmp_path / "p.yaml"
    bad.write_text("profiles: [1]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="p.yaml"):
        profile_table(str(bad))
    inv = tmp_path / "inv.py"
    inv.write_text(f"hosts = [('n1.invalid', {{'gpuhost_profiles_file': {str(bad)!r}}})]\n")
    for command in ("audit", "provision", "inventory check"):
        run = gpuhost(*command.split(), str(inv))
        assert_one_line(run, 2, "host n1.invalid", "gpuhost_profiles_file", "p.yaml")


@pytest.mark.parametrize("how", ["inventory data", "--profiles"])
def test_audit_judges_against_the_users_profile(tmp_path: Path, how: str) -> None:
    data = {"gpuhost_profile": "my-h100"}
    extra: list[str] = []
    if how == "inventory data":
        data["gpuhost_profiles_file"] = str(MY_PROFILES)
    else:
        extra = ["--profiles", str(MY_PROFILES)]
    inv = tmp_path / "inv.py"
    inv.write_text(f"hosts = [('@local', {data!r})]\n", encoding="utf-8")
    run = gpuhost("audit", str(inv), "-q", "--json", "-", *extra)
    assert "Traceback" not in run.err and run.code in (0, 1), run.err
    findings = _findings(run.out)
    assert "profile.unknown" not in findings
    assert "profile my-h100 pins" in findings["profile.driver"]


def test_without_the_file_the_audit_refuses_the_unknown_profile(tmp_path: Path) -> None:
    inv = tmp_path / "inv.py"
    inv.write_text("hosts = [('@local', {'gpuhost_profile': 'my-h100'})]\n", encoding="utf-8")
    run = gpuhost("audit", str(inv), "-q", "--json", "-")
    assert_one_line(run, 2, "host @local", "gpuhost_profile", "'my-h100'", "expected one of")
