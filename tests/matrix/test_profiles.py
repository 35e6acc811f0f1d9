"""Profiles: built-ins verify; user files merge over them; errors name file and field."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from old_profiles import OLD_PROFILES

from gpuhost.errors import ConfigError, UnknownNameError
from gpuhost.matrix import Matrix, load_profiles, verdict, verify_profile
from gpuhost.matrix.profiles import get_profile, kernel_module_for

AS_OF = dt.date(2026, 11, 22)


def test_required_builtin_profiles(matrix: Matrix) -> None:
    profiles = load_profiles()
    assert sorted(profiles) == [
        "debian12-nonfree-535-security",
        "nvidia-repo-580-cuda12.9",
        "nvidia-repo-580-cuda13.0",
        "nvidia-repo-595-cuda13.2",
        "ubuntu-archive-580-server",
    ]
    # the 590+ one: NVIDIA's unsuffixed Ubuntu names, Ubuntu only, the two packages of their own
    # at the driver's version pinned exactly (data/package_sets.yaml from_branch 590)
    r595 = profiles["nvidia-repo-595-cuda13.2"]
    assert (r595.driver_version, r595.driver_branch, tuple(r595.os)) == (
        "595.91.07", 595, ("ubuntu-22.04", "ubuntu-24.04"))
    assert r595.companions == dict.fromkeys(
        ["nvidia-persistenced", "nvidia-modprobe", "nvidia-kernel-common"], "595.91.07-1ubuntu1")
    ubuntu = profiles["ubuntu-archive-580-server"]
    assert (ubuntu.source, tuple(ubuntu.os)) == ("ubuntu-archive", ("ubuntu-22.04", "ubuntu-24.04"))
    deb = profiles["debian12-nonfree-535-security"]
    assert (deb.driver_version, deb.driver_branch, deb.source) == (
        "535.309.01",
        535,
        "debian-nonfree",
    )
    assert deb.kernel_module == "proprietary" and deb.cuda_versions == ("11.8",)
    assert deb.packages["cuda"] == "nvidia-cuda-toolkit"
    assert deb.cudnn is None and deb.container_toolkit is None
    repo = profiles["nvidia-repo-580-cuda12.9"]
    assert (repo.driver_version, repo.cuda_default) == ("580.178.04", "12.9")
    assert repo.packages["fabric_manager"] == "nvidia-fabricmanager-580"
    # the sets NVIDIA's bulletins cover left the built-ins for the tests' own file
    old = load_profiles(OLD_PROFILES)
    assert old["debian12-nonfree-535"].driver_version == "535.261.03"
    assert old["nvidia-repo-550-cuda12.4"].driver_version == "550.54.15"


@pytest.mark.parametrize("name", sorted(load_profiles()))
def test_every_builtin_profile_verifies(matrix: Matrix, name: str) -> None:
    findings = verify_profile(matrix, load_profiles()[name], as_of=AS_OF)
    assert verdict(findings) != "error", findings


def test_profile_for_the_wrong_hardware_fails(matrix: Matrix) -> None:
    deb = load_profiles()["debian12-nonfree-535-security"]
    rules = {f.rule for f in verify_profile(matrix, deb, ["B200"], as_of=AS_OF)}
    assert {"cuda.arch-unsupported", "driver.arch-too-old"} <= rules
    open_profile = load_profiles()["nvidia-repo-580-cuda13.0"]
    rules = {f.rule for f in verify_profile(matrix, open_profile, ["V100"], as_of=AS_OF)}
    assert {"kernel-module.arch", "cuda.arch-unsupported"} <= rules


def test_auto_kernel_module(matrix: Matrix) -> None:
    repo = load_profiles()["nvidia-repo-580-cuda12.9"]
    assert kernel_module_for(matrix, repo, ["H100"]) == "open"
    assert kernel_module_for(matrix, repo, ["H100", "V100"]) == "proprietary"


def test_user_file_merges_over_builtins(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(
        "profiles:\n"
        "  mine:\n"
        "    description: test\n"
        "    os: [debian-12]\n"
        "    source: nvidia-cuda-repo\n"
        "    driver: {version: '580.95.05', branch: 580, kernel_module: open}\n"
        "    cuda: {versions: ['13.0'], default: '13.0'}\n"
        "  debian12-nonfree-535-security:\n"
        "    description: replaced\n"
        "    os: [debian-12]\n"
        "    source: debian-nonfree\n"
        "    driver: {version: '535.309.01', branch: 535}\n"
        "    cuda: {versions: ['11.8'], default: '11.8'}\n"
    )
    profiles = load_profiles(str(f))
    assert profiles["mine"].origin == str(f)
    assert profiles["debian12-nonfree-535-security"].description == "replaced"
    assert "nvidia-repo-580-cuda12.9" in profiles


def test_user_file_errors_name_file_and_field(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(
        "profiles:\n"
        "  bad:\n"
        "    description: x\n"
        "    os: [debian-12]\n"
        "    source: somewhere\n"
        "    driver: {version: '55O.54', branch: 550}\n"
        "    cuda: {versions: [12.4], default: '12.4'}\n"
        "    colour: blue\n"
    )
    with pytest.raises(ConfigError) as exc:
        load_profiles(str(f))
    msg = str(exc.value)
    assert msg.startswith(str(f))
    for part in (
        "profiles.bad.source",
        "profiles.bad.driver.version",
        "profiles.bad.cuda.versions[0]",
        "profiles.bad.colour",
    ):
        assert part in msg


@pytest.mark.parametrize("content", ["", "profiles: [1]\n", "profiles:\n  x: 3\n", "a: [\n"])
def test_malformed_profile_files(tmp_path: Path, content: str) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(content)
    with pytest.raises(ConfigError):
        load_profiles(str(f))


def test_unknown_profile_name() -> None:
    with pytest.raises(UnknownNameError, match="debian12-nonfree-535"):
        get_profile(load_profiles(), "nope")
