"""``gpuhost upgrade --to P`` where NVIDIA's security bulletins name P's driver or container
toolkit (``gpuhost.matrix.advisories``, the judgement ``gpuhost matrix profile verify`` uses) is
refused before any host is touched: exit 2, one line naming the bulletins and the fixed version,
no journal; ``--force`` (or resuming a run that was started with it) goes on, with a warning.
The hosts are ``.invalid`` names: nothing here can reach a host."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpuhost.cli import main
from gpuhost.matrix.advisories import load_advisories, security_findings
from gpuhost.matrix.profiles import load_profiles
from gpuhost.upgrade.journal import Journal

OLD_PROFILES = str(Path(__file__).parents[1] / "data" / "old_profiles.yaml")
OLD_DRIVER = "debian12-nonfree-535"  # 535.261.03: bulletins 5703/5747/5821, fixed 535.309.01


def _inventory(tmp_path: Path) -> str:
    path = tmp_path / "inv.py"
    path.write_text("gpu = [('n1.invalid', {}), ('n2.invalid', {})]\n", encoding="utf-8")
    return str(path)


def _upgrade(tmp_path: Path, target: str, *extra: str) -> list[str]:
    return ["upgrade", _inventory(tmp_path), "--to", target, "--profiles", OLD_PROFILES,
            "--state-dir", str(tmp_path / "state"), *extra]


def _error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("gpuhost: error:")]


def test_the_old_profile_is_named_by_the_bulletins() -> None:
    """The premise, from the shipped data: the refusal below is about real bulletins."""
    profile = load_profiles(OLD_PROFILES)[OLD_DRIVER]
    findings = security_findings(load_advisories(), driver=profile.driver_version)
    # the error: bulletins R535 fixes; the warning: 5861 (September 2026) fixes no R535 driver
    assert [f.severity for f in findings] == ["error", "warning"]
    assert "5703" in findings[0].message and "535.309.01" in findings[0].message


@pytest.mark.parametrize("dry", [[], ["--dry"]])
def test_an_affected_target_is_refused_before_any_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], dry: list[str]
) -> None:
    code = main(_upgrade(tmp_path, OLD_DRIVER, *dry))
    captured = capsys.readouterr()
    errors = _error_lines(captured.err)
    assert code == 2 and len(errors) == 1, captured.err
    line = errors[0]
    assert f"--to '{OLD_DRIVER}'" in line
    for bulletin in ("5703", "5747", "5821"):
        assert bulletin in line
    assert "535.309.01" in line and "--force" in line
    assert "Traceback" not in captured.err and "unreachable" not in captured.out + captured.err
    assert not (tmp_path / "state" / "runs").exists()  # no journal: the run never started


def test_the_toolkit_bulletin_is_named_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A profile whose driver is fixed but whose container toolkit is not (1.16.2)."""
    data = yaml.safe_load(Path(OLD_PROFILES).read_text(encoding="utf-8"))
    fixed_580 = yaml.safe_load(
        (Path(__file__).parents[2] / "src/gpuhost/data/profiles.yaml").read_text(encoding="utf-8")
    )["profiles"]["nvidia-repo-580-cuda12.9"]
    data["profiles"] = {"old-ctk": {**fixed_580, "container_toolkit": "1.16.2"}}
    site = tmp_path / "site.yaml"
    site.write_text(yaml.safe_dump(data), encoding="utf-8")
    args = ["upgrade", _inventory(tmp_path), "--to", "old-ctk", "--profiles", str(site),
            "--dry", "--state-dir", str(tmp_path / "state")]
    code = main(args)
    errors = _error_lines(capsys.readouterr().err)
    assert code == 2 and len(errors) == 1
    assert "NVIDIA Container Toolkit 1.16.2" in errors[0] and "5850" in errors[0]
    assert "fixed in 1.19.1" in errors[0] and "driver 580" not in errors[0]


def test_force_goes_on_with_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(_upgrade(tmp_path, OLD_DRIVER, "--dry", "--force"))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert f"target: {OLD_DRIVER}: driver 535.261.03" in captured.out
    warnings = [line for line in captured.err.splitlines() if line.startswith("warning:")]
    # the driver's two, then its CUDA toolkit's (Debian's 11.8: bulletins fixed in 13.1.0)
    assert len(warnings) == 3 and "5821" in warnings[0] and "535.309.01" in warnings[0]
    assert "R535 gets no fix" in warnings[1] and "CUDA Toolkit" in warnings[2]


def test_a_target_at_its_branch_fix_is_only_warned_of_the_branch_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(_upgrade(tmp_path, "debian12-nonfree-535-security", "--dry"))
    captured = capsys.readouterr()
    warning, toolkit = [line for line in captured.err.splitlines() if "warning" in line]
    assert code == 0 and "R535 gets no fix in NVIDIA security bulletin(s) 5861" in warning
    assert "driver 535.309.01 (R535) is affected" not in captured.err
    assert toolkit.startswith("warning: --to") and "CUDA Toolkit" in toolkit  # warned, not refused


def test_resuming_a_forced_run_needs_no_second_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run started with --force and interrupted is resumed as it was started."""
    inventory = _inventory(tmp_path)
    runs = tmp_path / "state" / "runs"
    for forced in (True, False):
        Journal.create(runs, str(Path(inventory).resolve()), OLD_DRIVER,
                       ["n1.invalid", "n2.invalid"], {"force": forced})
        args = ["upgrade", inventory, "--to", OLD_DRIVER, "--profiles", OLD_PROFILES,
                "--state-dir", str(tmp_path / "state"), "--resume", "--dry"]
        code = main(args)
        err = capsys.readouterr().err
        assert code == (0 if forced else 2), err
        assert forced or "5703" in _error_lines(err)[0]
        for path in runs.iterdir():
            path.unlink()


def test_a_forced_target_accepts_its_own_advisory_rules_at_validation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Forced to an affected target, the upgraded hosts carry the very security.* findings the
    operator accepted: validation must not roll them back for those (seen in the Slurm lab test,
    which moves a host back to the old driver with --force)."""
    import gpuhost.upgrade.hoststeps as hoststeps

    seen: list[tuple[str, ...]] = []
    real = hoststeps.StepSettings

    def recording(**kwargs: object) -> object:
        seen.append(tuple(kwargs["accept_audit"]))  # type: ignore[arg-type]
        return real(**kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(hoststeps, "StepSettings", recording)  # imported when the run starts
    main(_upgrade(tmp_path, OLD_DRIVER, "--force", "--accept-audit", "driver.not-loaded"))
    capsys.readouterr()
    assert seen == [("driver.not-loaded", "security.cuda-toolkit", "security.driver")]


def test_a_target_whose_cuda_toolkit_is_affected_warns_and_is_accepted_at_validation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The built-in nvidia-repo-580-cuda13.0 pins CUDA 13.0, which bulletin 5755 names (fixed in
    13.1.0): the plan warns (no refusal, no --force needed: the toolkit's bulletins concern its
    own tools and libraries, not the driver stack the upgrade moves) and validation accepts
    security.cuda-toolkit, which every host of that profile carries. Before, the plan said
    nothing and validation rolled every upgraded host back for it (the Rocky and Ubuntu labs)."""
    import gpuhost.upgrade.hoststeps as hoststeps

    target = "nvidia-repo-580-cuda13.0"
    profile = load_profiles()[target]
    assert any(
        f.rule == "security.cuda-toolkit"
        for cuda in profile.cuda_versions
        for f in security_findings(load_advisories(), cuda=cuda)
    ), "premise: the shipped bulletins name the profile's CUDA toolkit"
    seen: list[tuple[str, ...]] = []
    real = hoststeps.StepSettings

    def recording(**kwargs: object) -> object:
        seen.append(tuple(kwargs["accept_audit"]))  # type: ignore[arg-type]
        return real(**kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(hoststeps, "StepSettings", recording)
    inventory = tmp_path / "inv.py"
    repo = {
        "gpuhost_cuda_repo_url": "https://repo.invalid/compute/cuda/repos/debian12/x86_64/",
        "gpuhost_cuda_repo_key": "https://repo.invalid/key.pub",
        "gpuhost_cuda_repo_key_sha256": "0" * 64,
    }
    inventory.write_text(f"gpu = [('n1.invalid', {repo!r})]\n", encoding="utf-8")
    args = ["upgrade", str(inventory), "--to", target, "--state-dir", str(tmp_path / "st")]
    main(args)
    err = capsys.readouterr().err
    assert not _error_lines(err) or "refusing" not in _error_lines(err)[0], err
    assert any(
        line.startswith(f"warning: --to '{target}'") and "5755" in line
        for line in err.splitlines()
    ), err
    assert seen and "security.cuda-toolkit" in seen[0]
