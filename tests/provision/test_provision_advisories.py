"""``gpuhost provision`` of a profile whose driver or container toolkit NVIDIA's security
bulletins name installs it (Debian's own driver must stay installable) but prints one warning
line per run and profile, naming the bulletins and the fixed version, before any host is
contacted. The hosts are ``.invalid`` names: the run reports them unreachable (exit 1)."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.robustness.conftest import ROOT, gpuhost

OLD_PROFILES = str(Path(__file__).parents[1] / "data" / "old_profiles.yaml")


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning:")]


def test_one_warning_per_run_naming_the_bulletins(tmp_path: Path) -> None:
    inv = tmp_path / "inv.py"
    inv.write_text(
        "old = [('n1.invalid', {'gpuhost_profile': 'debian12-nonfree-535'}),\n"
        "       ('n2.invalid', {'gpuhost_profile': 'debian12-nonfree-535'})]\n"
        "new = [('n3.invalid', {'gpuhost_profile': 'debian12-nonfree-535-security'})]\n",
        encoding="utf-8",
    )
    run = gpuhost("provision", str(inv), "--profiles", OLD_PROFILES)
    assert run.code == 1 and "Traceback" not in run.err, run.err  # the hosts are unreachable
    warnings = _warnings(run.err)
    # one line per profile (two hosts on the old one), none per host; R535 itself gets no fix
    # in bulletin 5861 (September 2026), which the -security profile is warned of
    assert len(warnings) == 2, run.err
    line = warnings[0]
    assert warnings[1].startswith("warning: profile debian12-nonfree-535-security: R535 gets no")
    assert line.startswith("warning: profile debian12-nonfree-535: driver 535.261.03")
    assert all(b in line for b in ("5703", "5747", "5821")) and ">= 535.309.01" in line
    assert "debian12-nonfree-535-security" not in line
    assert run.out.count("unreachable") == 3  # every host was still tried


def test_a_profile_at_its_branch_fix_is_warned_only_of_the_branch_end(tmp_path: Path) -> None:
    inv = tmp_path / "inv.py"
    inv.write_text(
        "hosts = [('n1.invalid', {'gpuhost_profile': 'debian12-nonfree-535-security'})]\n",
        encoding="utf-8",
    )
    run = gpuhost("provision", str(inv), "--dry")
    (line,) = _warnings(run.err)
    assert "R535 gets no fix in NVIDIA security bulletin(s) 5861" in line, run.err
    assert "is affected" not in run.err, run.err


def base_repo_data() -> dict[str, str]:
    """The inventory data installing from NVIDIA's CUDA repository needs (never fetched here)."""
    url = "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/"
    return {
        "gpuhost_cuda_repo_url": url,
        "gpuhost_cuda_repo_key": url + "3bf863cc.pub",
        "gpuhost_cuda_repo_key_sha256": "a" * 64,
    }


def test_the_toolkit_bulletin_warns_too(tmp_path: Path) -> None:
    """A built-in NVIDIA-repo profile (fixed driver) with container toolkit 1.16.2 instead."""
    builtin = yaml.safe_load((ROOT / "src/gpuhost/data/profiles.yaml").read_text("utf-8"))
    base = builtin["profiles"]["nvidia-repo-580-cuda12.9"]
    site = tmp_path / "site.yaml"
    site.write_text(
        yaml.safe_dump(
            {"schema": 1, "profiles": {"old-ctk": {**base, "container_toolkit": "1.16.2"}}}
        ),
        encoding="utf-8",
    )
    inv = tmp_path / "inv.py"
    repo = base_repo_data()
    inv.write_text(
        f"hosts = [('n1.invalid', {{'gpuhost_profile': 'old-ctk', **{repo!r}}})]\n",
        encoding="utf-8",
    )
    run = gpuhost("provision", str(inv), "--dry", "--profiles", str(site))
    warnings = _warnings(run.err)
    assert len(warnings) == 1, run.err
    line = warnings[0]
    assert line.startswith("warning: profile old-ctk: NVIDIA Container Toolkit 1.16.2")
    assert "5850" in line and "fixed in 1.19.1" in line and "driver 580" not in line
