"""`gpuhost provision` without hosts: argument handling and errors (lab runs are in
tests/integration/test_provision_lab.py)."""

from __future__ import annotations

from gpuhost.cli import main
from gpuhost.cli.provision import pyinfra_argv


def test_dry_run_keeps_change_detection() -> None:
    argv = pyinfra_argv("inv.py", "deploy.py", dry=True, limit="gpu_a100", profiles="p.yaml")
    assert "--dry" in argv and "-y" not in argv
    assert argv[argv.index("--limit") + 1] == "gpu_a100"
    assert "gpuhost_profiles_file=p.yaml" in argv
    assert "-y" in pyinfra_argv("inv.py", "deploy.py", dry=False, limit=None, profiles=None)


def test_bad_profiles_file_is_one_error_exit_2(tmp_path, capsys) -> None:
    inventory = tmp_path / "inv.py"
    inventory.write_text("hosts = []\n")
    profiles = tmp_path / "profiles.yaml"
    profiles.write_text("profiles: {p1: {source: nowhere}}\n")
    assert main(["provision", str(inventory), "--profiles", str(profiles)]) == 2
    err = capsys.readouterr().err
    assert str(profiles) in err and "profiles.p1" in err
    assert "Traceback" not in err


def test_missing_inventory_is_a_usage_error(capsys) -> None:
    assert main(["provision", "/nonexistent/inventory.py"]) == 2
    assert "Traceback" not in capsys.readouterr().err
