"""Issue 20, "the known-good set depends on the day you provision": the companions the driver
pulls in (nvidia-modprobe, nvidia-persistenced, ...) are pinned to exact Debian versions that the
profile data names and the marker records, so two hosts provisioned a month apart are equal."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhost.datafiles import package_sets
from gpuhost.deploys.spec import package_plan
from gpuhost.desired import DesiredState
from gpuhost.errors import ConfigError
from gpuhost.matrix.profiles import load_profiles
from gpuhost.operations.apt_pin import exact_problems, render_preferences
from gpuhost.operations.marker import render_marker
from gpuhost.parsers.profile_marker import parse_profile_marker
from tests.old_profiles import OLD_PROFILES
from tests.schema_check import assert_valid

PROFILES = load_profiles(OLD_PROFILES)
DEBIAN = sorted(n for n, p in PROFILES.items() if p.source == "debian-nonfree")


@pytest.mark.parametrize("name", DEBIAN)
def test_debian_profiles_pin_every_companion_of_the_data_the_driver_pulls_in(name: str) -> None:
    profile = PROFILES[name]
    plan = package_plan(DesiredState.from_profile(profile, []), "debian-12")
    data_companions = package_sets()["sources"]["debian-nonfree"]["debian-12"]["companions"]
    # what `apt-get -s install --no-install-recommends` of the driver pulls in on Debian 12
    # (lab host, 2026-11-23); nvidia-settings is a companion of the data but never installed
    pulled = {
        "nvidia-modprobe",
        "nvidia-persistenced",
        "nvidia-support",
        "nvidia-kernel-common",
        "nvidia-installer-cleanup",
        "glx-alternative-nvidia",
    }
    assert set(plan.exact) == pulled and pulled <= set(data_companions)
    assert plan.persistenced in plan.exact
    assert set(plan.exact) <= set(plan.never_upgraded)
    text = render_preferences(plan.pins, exact=plan.exact)
    modprobe = plan.exact["nvidia-modprobe"]
    assert f"Package: nvidia-modprobe\nPin: version {modprobe}\nPin-Priority: 1001" in text


def test_the_old_profile_takes_bookworms_modprobe_the_security_one_its_own() -> None:
    old = PROFILES["debian12-nonfree-535"].companions["nvidia-modprobe"]
    new = PROFILES["debian12-nonfree-535-security"].companions["nvidia-modprobe"]
    assert (old, new) == ("535.161.07-1~deb12u1", "535.309.01-0+deb12u1")


@pytest.mark.parametrize("name", DEBIAN)
def test_marker_records_the_companions(name: str) -> None:
    state = DesiredState.from_profile(PROFILES[name], [])
    doc = state.to_marker()
    assert doc["companions"] == PROFILES[name].companions != {}
    assert_valid(doc, "provision-marker")
    marker = parse_profile_marker(render_marker(doc))
    assert marker is not None and DesiredState.from_marker(marker) == state


def test_marker_written_before_companions_reads_without_them() -> None:
    doc = DesiredState.from_profile(PROFILES[DEBIAN[0]], []).to_marker()
    del doc["companions"]
    marker = parse_profile_marker(render_marker(doc))
    state = DesiredState.from_marker(marker) if marker else None
    assert state is not None and state.companions == ()


def test_exact_problems_names_packages_at_other_versions() -> None:
    exact = {"nvidia-modprobe": "535.161.07-1~deb12u1", "nvidia-support": "20220217+3~deb12u1"}
    installed = {"nvidia-modprobe": "535.309.01-0+deb12u1", "nvidia-support": None}
    assert exact_problems(exact, installed) == [
        "nvidia-modprobe 535.309.01-0+deb12u1 (expected 535.161.07-1~deb12u1)"
    ]


def _user_profile(tmp_path: Path, companions: str) -> str:
    path = tmp_path / "p.yaml"
    path.write_text(
        "schema: 1\nprofiles:\n  mine:\n"
        '    description: "x"\n    os: [debian-12]\n    source: debian-nonfree\n'
        '    driver: {version: "535.309.01", branch: 535, kernel_module: proprietary}\n'
        '    cuda: {versions: ["11.8"], default: "11.8"}\n'
        f"    companions: {companions}\n",
        encoding="utf-8",
    )
    return str(path)


def test_a_companion_version_that_is_not_a_string_is_one_config_error(tmp_path: Path) -> None:
    path = _user_profile(tmp_path, "{nvidia-modprobe: 535}")
    with pytest.raises(ConfigError, match=r"profiles\.mine\.companions: expected a mapping"):
        load_profiles(path)


def test_a_companion_that_follows_the_driver_version_is_refused(tmp_path: Path) -> None:
    path = _user_profile(tmp_path, '{nvidia-smi: "535.309.01-0+deb12u1"}')
    state = DesiredState.from_profile(load_profiles(path)["mine"], [])
    with pytest.raises(ConfigError, match="companions nvidia-smi already follow"):
        package_plan(state, "debian-12")
