"""The audit's expectation is the desired state provision installs (gpuhost.desired), not a
model of its own: the state provision records in the marker is exactly what the audit expects."""

from __future__ import annotations

import dataclasses

import pytest

from gpuhost.audit.expected import compares_kernel_module, expected_state, installs_cuda
from gpuhost.desired import DesiredState
from gpuhost.matrix import load_profiles
from gpuhost.operations.marker import render_marker
from gpuhost.parsers.profile_marker import parse_profile_marker

PROFILES = load_profiles()
GPU_SETS = ([], ["NVIDIA H100 80GB HBM3"], ["Tesla T4"])


@pytest.mark.parametrize("name", sorted(PROFILES))
@pytest.mark.parametrize("gpus", GPU_SETS, ids=lambda g: g[0] if g else "no-gpus")
def test_audit_expects_what_provision_recorded(name: str, gpus: list[str]) -> None:
    data = {"gpuhost_profile": name, "gpuhost_fabric_manager": True}
    provisioned = DesiredState.from_profile(PROFILES[name], gpus, data)
    marker = parse_profile_marker(render_marker(provisioned.to_marker()))
    if not installs_cuda(provisioned.source):  # Ubuntu's archive: no toolkit is installed
        provisioned = dataclasses.replace(provisioned, cuda_versions=(), cuda_default=None)
    assert expected_state(PROFILES[name], data, marker) == provisioned


def test_auto_kernel_module_without_a_marker_of_this_profile_is_not_compared() -> None:
    name = next(n for n, p in sorted(PROFILES.items()) if p.kernel_module == "auto")
    other = next(n for n in sorted(PROFILES) if n != name)
    state = expected_state(PROFILES[name], {}, None)
    assert state.kernel_module == "auto" and not compares_kernel_module(state)
    theirs = DesiredState.from_profile(PROFILES[other], ["NVIDIA H100 80GB HBM3"])
    foreign = parse_profile_marker(render_marker(theirs.to_marker()))
    assert not compares_kernel_module(expected_state(PROFILES[name], {}, foreign))


def test_host_data_without_cuda_expects_no_cuda() -> None:
    profile = next(p for _, p in sorted(PROFILES.items()) if p.cuda_versions)
    state = expected_state(profile, {"gpuhost_install_cuda": False}, None)
    full = expected_state(profile, {}, None)
    assert (state.cuda_versions, state.cuda_default) == ((), None)
    assert dataclasses.replace(full, cuda_versions=(), cuda_default=None) == state
