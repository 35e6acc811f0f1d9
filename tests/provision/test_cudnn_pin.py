"""cuDNN versions: profiles name three fields (9.5.1, as cudnn_version.h does), NVIDIA's
libcudnn9-cuda-12 packages have four (9.5.1.17-1). The pin, the install's version check and the
audit's header comparison must all accept the package of a three-field profile value."""

from __future__ import annotations

import pytest

from gpuhost.audit.rules.profile import _cudnn_matches
from gpuhost.deploys.spec import cudnn_pin, package_plan
from gpuhost.desired import DesiredState
from gpuhost.operations.apt_pin import render_preferences, version_glob
from gpuhost.versions import extends_version


def _spec(cudnn: str) -> DesiredState:
    return DesiredState(profile="t", source="nvidia-cuda-repo", os=("debian-12",),
                     driver_version="550.54.15", driver_branch="550",
                     kernel_module="proprietary", cuda_versions=("12.4",), cuda_default="12.4",
                     cudnn=cudnn, container_toolkit="1.16.2")


def test_three_field_cudnn_pins_every_build_of_that_release() -> None:
    plan = package_plan(_spec("9.5.1"), "debian-12")
    assert plan.pins["9.5.1.*"] == ["libcudnn9-cuda-12"]
    text = render_preferences(plan.pins)
    record = "Package: libcudnn9-cuda-12\nPin: version 9.5.1.*\nPin-Priority: 1001"
    assert record in text
    # the rest of that package's versions stay at -1, right after the 1001 record
    assert record + "\n\nPackage: libcudnn9-cuda-12\nPin: version *\nPin-Priority: -1" in text


@pytest.mark.parametrize(("package", "pinned"), [
    ("9.5.1.17-1", True), ("9.5.1.3-2", True),
    ("9.10.2.21-1", False), ("9.5.10.1-1", False), ("9.5.0.50-1", False), ("9.5.1-1", False),
])
def test_the_glob_apt_gets_matches_only_builds_of_the_release(package: str, pinned: bool) -> None:
    # apt reads a trailing "*" of "Pin: version" as a prefix match (and a "*" inside the version
    # as nothing: "9.5.1.*-*" pinned no package on a lab host)
    pattern = version_glob(cudnn_pin("9.5.1"))
    assert pattern == "9.5.1.*"
    assert package.startswith(pattern[:-1]) is pinned


def test_four_field_cudnn_and_other_versions_pin_themselves() -> None:
    assert cudnn_pin("9.1.0.70") == "9.1.0.70"
    plan = package_plan(_spec("9.1.0.70"), "debian-12")
    assert plan.pins["9.1.0.70"] == ["libcudnn9-cuda-12"]
    assert "550.54.15" in plan.pins and "1.16.2" in plan.pins


@pytest.mark.parametrize(("upstream", "wanted", "ok"), [
    ("9.5.1.17", "9.5.1", True), ("9.5.1", "9.5.1", True), ("9.1.0.70", "9.1.0.70", True),
    ("9.10.2.21", "9.1", False), ("9.5.10.1", "9.5.1", False), (None, "9.5.1", False),
    ("550.54.15", "550.54.15", True), ("550.54.151", "550.54.15", False),
])
def test_install_accepts_a_package_extending_the_profile_version(
    upstream: str | None, wanted: str, ok: bool
) -> None:
    assert extends_version(upstream, wanted) is ok


@pytest.mark.parametrize(("header", "profile", "ok"), [
    ("9.5.1", "9.5.1", True), ("9.1.0", "9.1.0.70", True), ("9.5.1", "9.5", True),
    ("9.5.1", "9.10.2", False), ("9.1.0", "9.1.1.5", False), (None, "9.5.1", False),
])
def test_audit_compares_cudnn_header_and_profile_by_prefix(
    header: str | None, profile: str, ok: bool
) -> None:
    assert _cudnn_matches(header, profile) is ok
