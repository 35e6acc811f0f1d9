"""The provision marker parser: what provision writes reads back; legacy names; bad files."""

from __future__ import annotations

import json

import pytest
from old_profiles import OLD_PROFILES

from gpuhost.deploys.guards import spec_from_profile
from gpuhost.errors import ParseError
from gpuhost.matrix import load_profiles
from gpuhost.operations.marker import render_marker
from gpuhost.parsers.profile_marker import parse_profile_marker


def test_what_provision_writes_reads_back_with_its_versions() -> None:
    profile = load_profiles(OLD_PROFILES)["nvidia-repo-550-cuda12.4"]
    spec = spec_from_profile(profile, ["NVIDIA A100-SXM4-80GB"], fabric_manager=True)
    marker = parse_profile_marker(render_marker(spec.to_marker()))
    assert marker is not None and not marker.legacy
    assert marker.profile == "nvidia-repo-550-cuda12.4" and marker.schema == 1
    assert marker.driver_version == spec.driver_version == "550.54.15"
    assert marker.kernel_module == spec.kernel_module in ("open", "proprietary")
    assert marker.cuda_versions == ("12.4",) and marker.cuda_default == "12.4"
    assert marker.cudnn == "9.5.1" and marker.container_toolkit == spec.container_toolkit
    assert marker.fabric_manager is True and marker.persistence is True
    assert json.loads(json.dumps(marker.to_dict()))["cuda_versions"] == ["12.4"]


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("debian12-nonfree-535\n", "debian12-nonfree-535"),
        ("# written by hand\nprofile = p2\n", "p2"),
        ("profile: p3\n", "p3"),
    ],
)
def test_legacy_plain_name(text: str, name: str) -> None:
    marker = parse_profile_marker(text)
    assert marker is not None and marker.legacy and marker.profile == name
    assert marker.driver_version is None and marker.cuda_versions == ()


def test_empty_file_is_no_marker() -> None:
    assert parse_profile_marker("") is None and parse_profile_marker("\n \n") is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{not json", "not valid JSON"),
        ('{"schema": 2, "profile": "p"}', "schema: found 2; expected 1"),
        ('{"schema": 1}', "profile: found None"),
        ('{"schema": 1, "profile": "p", "driver": {"version": 535}}', "driver.version: found 535"),
        ('{"schema": 1, "profile": "p", "cuda": {"versions": "11.8"}}', "cuda.versions"),
        ('{"schema": 1, "profile": "p", "driver": "535"}', "driver: found '535'"),
        ('{"schema": 1, "profile": "p", "persistence": "yes"}', "persistence"),
        ("two words here\n", "found 'two words here'"),
        ("# only a comment\n", "only comments"),
    ],
)
def test_bad_markers_are_one_clear_parse_error(text: str, says: str) -> None:
    with pytest.raises(ParseError, match="/etc/gpuhost/profile") as info:
        parse_profile_marker(text)
    assert says in str(info.value)
