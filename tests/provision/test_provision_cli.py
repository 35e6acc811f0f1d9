"""`gpuhost provision` without lab hosts: argument handling, errors, the guard path through the
deploy runner (lab runs are in tests/integration/test_provision_*.py)."""

from __future__ import annotations

from gpuhost.cli import main


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


def test_limit_matching_nothing_is_a_usage_error(tmp_path, capsys) -> None:
    inventory = tmp_path / "inv.py"
    inventory.write_text('hosts = ["@local"]\n')
    assert main(["provision", str(inventory), "--dry", "--limit", "gpu_a100"]) == 2
    err = capsys.readouterr().err
    assert "--limit gpu_a100: matches no host or group" in err and "Traceback" not in err


def test_host_without_profile_is_refused_exit_2(tmp_path, capsys) -> None:
    """The profile guard is static (no fact is read): the host is refused, one line names the
    host, the field and the accepted profiles; ``--profiles`` reaches the host's data."""
    inventory = tmp_path / "inv.py"
    inventory.write_text('hosts = ["@local"]\n')
    profiles = tmp_path / "profiles.yaml"
    profiles.write_text(
        "profiles:\n  my-site-535:\n    description: a site's own pinned set\n"
        "    os: [debian-12]\n    source: debian-nonfree\n"
        "    driver: {version: '535.261.03', branch: 535, kernel_module: proprietary}\n"
        "    cuda: {versions: ['11.8'], default: '11.8'}\n"
        "    clocks: {policy: none}\n    persistence: true\n"
    )
    assert main(["provision", str(inventory), "--dry", "--profiles", str(profiles)]) == 2
    captured = capsys.readouterr()
    out = captured.out.strip().splitlines()
    assert out, captured.err
    assert out[-1].startswith("@local: failed: gpuhost_profile: not set; accepted: ")
    assert "my-site-535" in out[-1] and "debian12-nonfree-535" in out[-1]
