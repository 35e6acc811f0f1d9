"""The host's profile: known, resolvable for its OS, and the one it was provisioned with."""

from __future__ import annotations

import pytest

from gpuhost.checks.checklib import HostFacts, need_spec
from gpuhost.checks_support.expected import Expected
from gpuhost.operations.marker import MARKER_PATH


def test_profile_resolves(expected: Expected) -> None:
    """The host has a profile (inventory data gpuhost_profile or the provision marker) that the
    profile data resolves to versions and package names for the host's OS."""
    spec, _plan = need_spec(expected)
    assert spec.profile == expected.profile


def test_profile_marker_matches(expected: Expected, facts: HostFacts) -> None:
    """/etc/gpuhost/profile exists and names the profile the inventory gives (a host provisioned
    with another profile, or never provisioned, fails here)."""
    marker = facts.marker
    if not marker.present:
        pytest.fail(
            f"{facts.name}: {MARKER_PATH} does not exist: the host was not provisioned by "
            f"gpuhost (expected profile: {expected.profile or 'none'}); run gpuhost provision",
            pytrace=False,
        )
    if marker.problem:
        pytest.fail(f"{facts.name}: {marker.problem}", pytrace=False)
    assert marker.profile == expected.profile, (
        f"{facts.name}: provisioned with profile {marker.profile!r} ({MARKER_PATH}) but "
        f"{expected.origin} says {expected.profile!r}: provision the host again with "
        f"{expected.profile!r} or correct the inventory"
    )
