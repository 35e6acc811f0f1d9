"""gpuhost.desired: the one desired-state model; the provision marker is its serialisation."""

from __future__ import annotations

import pytest

from gpuhost.desired import DesiredState
from gpuhost.matrix import load_profiles
from gpuhost.operations.marker import render_marker
from gpuhost.parsers.profile_marker import parse_profile_marker

PROFILES = load_profiles()
GPU_SETS = ([], ["NVIDIA A100-SXM4-80GB"], ["NVIDIA H100 80GB HBM3"], ["Tesla T4"])


@pytest.mark.parametrize("name", sorted(PROFILES))
@pytest.mark.parametrize("gpus", GPU_SETS, ids=lambda g: g[0] if g else "no-gpus")
@pytest.mark.parametrize("fabric", [False, True])
def test_marker_round_trips(name: str, gpus: list[str], fabric: bool) -> None:
    state = DesiredState.from_profile(PROFILES[name], gpus, {"gpuhost_fabric_manager": fabric})
    marker = parse_profile_marker(render_marker(state.to_marker()))
    assert marker is not None and not marker.legacy
    assert DesiredState.from_marker(marker) == state


def test_fields_follow_the_profile() -> None:
    profile = next(p for _, p in sorted(PROFILES.items()) if p.cudnn and p.container_toolkit)
    state = DesiredState.from_profile(profile, ["NVIDIA A100-SXM4-80GB"])
    assert (state.profile, state.source, state.driver_version) == (
        profile.name,
        profile.source,
        profile.driver_version,
    )
    assert state.driver_branch == str(profile.driver_branch)
    assert state.cudnn == profile.cudnn and state.container_toolkit == profile.container_toolkit
    assert state.cuda_versions == profile.cuda_versions and state.os == profile.os
    assert state.kernel_module in ("open", "proprietary")
    assert state.clock_policy == profile.clocks.policy


@pytest.mark.parametrize(
    ("mode", "graphics", "memory", "policy"),
    [("off", None, None, "none"), ("auto", None, None, "max"), ("auto", 1410, 1593, "explicit")],
)
def test_clock_policy(mode: str, graphics: int | None, memory: int | None, policy: str) -> None:
    state = DesiredState("p", "debian-nonfree", ("debian-12",), "535.261.03", "535")
    state = DesiredState(
        **{**state.__dict__, "clocks_mode": mode, "graphics_mhz": graphics, "memory_mhz": memory}
    )
    assert state.clock_policy == policy


def test_legacy_or_versionless_marker_is_no_state() -> None:
    legacy = parse_profile_marker("debian12-nonfree-535\n")
    assert legacy is not None and DesiredState.from_marker(legacy) is None
    bare = parse_profile_marker('{"schema": 1, "profile": "p", "driver": {}, "cuda": {}}')
    assert bare is not None and DesiredState.from_marker(bare) is None


def test_marker_written_before_the_os_field_reads() -> None:
    text = (
        '{"schema": 1, "profile": "p", "source": "debian-nonfree", "driver": {"version": '
        '"535.261.03", "branch": "535", "kernel_module": "proprietary"}, "cuda": {"versions": []}}'
    )
    marker = parse_profile_marker(text)
    assert marker is not None and marker.os == ()
    state = DesiredState.from_marker(marker)
    assert state is not None and state.os == () and state.driver_version == "535.261.03"
