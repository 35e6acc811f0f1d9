"""The upgrade/snapshot/rollback CLIs without hosts: --dry plans, bad input, snapshot diff."""

from __future__ import annotations

import json

from gpuhost.cli import main
from gpuhost.upgrade.host_state import parse_host_state
from gpuhost.upgrade.snapshot import SnapshotStore, build_snapshot
from upgrade.test_snapshot import host_output


def _inventory(tmp_path, n=3):
    path = tmp_path / "inv.py"
    hosts = ", ".join(f"('n{i}', {{'ssh_hostname': '10.123.250.{i}'}})" for i in range(1, n + 1))
    path.write_text(f"gpu = [{hosts}]\n")
    return path


def test_upgrade_dry_prints_plan_and_connects_to_nothing(tmp_path, capsys):
    inv = _inventory(tmp_path)
    code = main(
        [
            "upgrade",
            str(inv),
            "--to",
            "debian12-nonfree-535-security",
            "--dry",
            "--canary",
            "1",
            "--batch",
            "2",
            "--state-dir",
            str(tmp_path),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "canary 1: n1" in out and "batch 2: n2, n3" in out
    assert "driver 535.309.01" in out
    assert not (tmp_path / "runs").exists()


def test_upgrade_unknown_profile_is_one_usage_error(tmp_path, capsys):
    code = main(["upgrade", str(_inventory(tmp_path)), "--to", "nope", "--dry"])
    err = capsys.readouterr().err
    assert code == 2 and "unknown profile" in err and "Traceback" not in err


def test_resume_without_a_run_is_a_usage_error(tmp_path, capsys):
    code = main(
        [
            "upgrade",
            str(_inventory(tmp_path)),
            "--to",
            "debian12-nonfree-535-security",
            "--resume",
            "--state-dir",
            str(tmp_path),
        ]
    )
    assert code == 2
    assert "no interrupted upgrade run" in capsys.readouterr().err


def test_snapshot_list_and_diff(tmp_path, capsys):
    store = SnapshotStore(tmp_path / "snapshots")
    store.save(build_snapshot("h1", parse_host_state(host_output()), "20250101T000000Z"))
    newer = build_snapshot(
        "h1", parse_host_state(host_output(version="535.309.01-0+deb12u1")), "20250102T000000Z"
    )
    store.save(newer)
    assert main(["snapshot", "list", "--state-dir", str(tmp_path)]) == 0
    assert "h1/20250101T000000Z" in capsys.readouterr().out
    code = main(["snapshot", "diff", "h1/20250101T000000Z", "h1", "--state-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1
    assert "nvidia-smi: 535.261.03-1 -> 535.309.01-0+deb12u1" in out
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"kind": "x"}))
    assert main(["snapshot", "diff", str(bad), "h1", "--state-dir", str(tmp_path)]) == 2


def test_accepted_audit_rules_come_from_the_option_and_with_force_from_preflight(tmp_path) -> None:
    from gpuhost.upgrade.hoststeps import HostSteps, StepSettings
    from gpuhost.upgrade.orchestrate import HostContext, UpgradeOptions

    preflight = {"preflight_audit_rules": ["gpu.ecc-uncorrectable", "driver.not-loaded"]}
    ctx = HostContext("h1", "t", UpgradeOptions(), dict(preflight))

    def steps(**kw) -> HostSteps:
        settings = StepSettings("t", tmp_path / "snapshots", **kw)
        return HostSteps({}, settings)

    assert steps().accepted(ctx) == set()
    assert steps(accept_audit=("driver.not-loaded",)).accepted(ctx) == {"driver.not-loaded"}
    # --force: what was already wrong before the upgrade does not fail it; anything new does
    assert steps(force=True).accepted(ctx) == {"gpu.ecc-uncorrectable", "driver.not-loaded"}


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="gpuhost-check">
<testcase classname="checks.test_driver" name="test_driver_loaded[ssh://h1]">
<failure message="AssertionError: no nvidia module loaded&#10;assert 0">t</failure></testcase>
<testcase classname="checks.test_packages" name="test_packages_held[ssh://h1]">
<failure message="AssertionError: nvidia-smi not held">trace</failure></testcase>
<testcase classname="checks.test_profile" name="test_marker[ssh://h1]"/>
<testcase classname="checks.test_cuda" name="test_cuda[ssh://h1]"><skipped message="no toolkit"/>
</testcase>
<testcase classname="checks.test_x" name="test_broken_fixture[ssh://h1]"><error message="">E</error>
</testcase></testsuite></testsuites>"""


def test_check_failures_from_junit_with_accepted_checks() -> None:
    from gpuhost.upgrade.validate import check_problems, junit_failures

    failures = junit_failures(JUNIT)
    assert failures == [
        ("test_driver_loaded[ssh://h1]", "AssertionError: no nvidia module loaded"),
        ("test_packages_held[ssh://h1]", "AssertionError: nvidia-smi not held"),
        ("test_broken_fixture[ssh://h1]", "E"),
    ]
    assert check_problems(failures, {"test_driver_loaded", "test_broken_fixture"}) == [
        "check test_packages_held[ssh://h1]: AssertionError: nvidia-smi not held"
    ]


def test_upgrade_limit_selects_hosts_like_other_commands(tmp_path, capsys):
    inv = _inventory(tmp_path, 4)
    args = ["upgrade", str(inv), "--to", "debian12-nonfree-535-security", "--dry", "--canary", "0",
            "--batch", "4", "--state-dir", str(tmp_path)]
    assert main([*args, "--limit", "n2,n4"]) == 0
    assert "batch 1: n2, n4" in capsys.readouterr().out
    assert main([*args, "--limit", "n[13]"]) == 0  # a glob, inventory order
    assert "batch 1: n1, n3" in capsys.readouterr().out
    assert main([*args, "--limit", "nope"]) == 2
    err = capsys.readouterr().err
    assert "nope" in err and "Traceback" not in err


def _snapshots(tmp_path, hosts):
    store = SnapshotStore(tmp_path / "snapshots")
    for host in hosts:
        store.save(build_snapshot(host, parse_host_state(host_output()), "20250101T000000Z"))


def test_rollback_without_a_terminal_needs_yes_and_touches_nothing(tmp_path, capsys, monkeypatch):
    """No --yes and no terminal: the hosts and snapshots are listed, nothing is contacted (the
    inventory's addresses do not exist), exit 2 with one line."""
    _snapshots(tmp_path, ["n1", "n2", "n3"])
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    code = main(["rollback", str(_inventory(tmp_path)), "--state-dir", str(tmp_path),
                 "--limit", "n1,n3"])
    captured = capsys.readouterr()
    assert code == 2
    assert "n1: back to snapshot 20250101T000000Z" in captured.out
    assert "n2" not in captured.out  # --limit
    assert "rollback would restore and reboot 2 host(s); confirm with --yes" in captured.err
    assert "Traceback" not in captured.err


def test_rollback_declined_at_the_prompt_changes_nothing(tmp_path, capsys, monkeypatch):
    _snapshots(tmp_path, ["n1"])
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("click.confirm", lambda *a, **k: False)
    code = main(["rollback", str(_inventory(tmp_path, 1)), "--state-dir", str(tmp_path)])
    assert code == 2 and "nothing changed" in capsys.readouterr().err


def test_rollback_host_without_snapshot_is_a_usage_error(tmp_path, capsys):
    _snapshots(tmp_path, ["n1"])
    code = main(["rollback", str(_inventory(tmp_path, 2)), "--state-dir", str(tmp_path), "--yes"])
    err = capsys.readouterr().err
    assert code == 2 and "n2: no snapshot under" in err


def test_a_driver_in_a_security_bulletin_is_a_reason_to_upgrade_not_to_refuse() -> None:
    from gpuhost.upgrade.hoststeps import blocking_errors

    errors = [("security.driver", "driver 535.261.03 is affected by bulletin 5703"),
              ("gpu.ecc-uncorrectable", "GPU 0: 3 uncorrectable errors"),
              ("driver.not-loaded", "no module")]
    assert blocking_errors(errors, {"driver.not-loaded"}) == [
        "gpu.ecc-uncorrectable: GPU 0: 3 uncorrectable errors"]


def test_state_dir_defaults_to_a_per_user_folder(tmp_path) -> None:
    from pathlib import Path

    from gpuhost.statedir import default_state_dir

    home = Path("/home/op")
    assert default_state_dir({}, home) == home / ".local/state/gpuhost"
    assert default_state_dir({"XDG_STATE_HOME": "/srv/st"}, home) == Path("/srv/st/gpuhost")
    assert default_state_dir({"XDG_STATE_HOME": "rel"}, home) == home / ".local/state/gpuhost"
    env = {"GPUHOST_STATE_DIR": str(tmp_path), "XDG_STATE_HOME": "/srv/st"}
    assert default_state_dir(env, home) == tmp_path


def test_snapshot_list_reads_the_per_user_state_dir(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GPUHOST_STATE_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    _snapshots(tmp_path / "gpuhost", ["n1"])
    assert main(["snapshot", "list"]) == 0
    assert "n1/20250101T000000Z" in capsys.readouterr().out



def test_to_is_looked_up_with_the_hosts_profiles_file(tmp_path, capsys):
    """A profile that left the built-ins (tests/data/old_profiles.yaml) is found through
    --profiles or the hosts' gpuhost_profiles_file, as provision and the audit find it."""
    from pathlib import Path

    old = str(Path(__file__).parents[1] / "data" / "old_profiles.yaml")
    inv = _inventory(tmp_path, 2)
    # --force: that old driver is named by NVIDIA's security bulletins (test_target_advisories)
    args = ["upgrade", str(inv), "--to", "debian12-nonfree-535", "--dry", "--force",
            "--state-dir", str(tmp_path)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--to 'debian12-nonfree-535': unknown profile for host n1 (profiles: built-in)" in err
    assert main([*args, "--profiles", old]) == 0
    assert "target: debian12-nonfree-535: driver 535.261.03" in capsys.readouterr().out
    data_inv = tmp_path / "with_data.py"
    data_inv.write_text(
        f"gpu = [('n1', {{'ssh_hostname': '10.123.250.1', 'gpuhost_profiles_file': {old!r}}})]\n"
    )
    assert main(["upgrade", str(data_inv), *args[2:]]) == 0
