"""Invariants of src/gpuhost/data/package_sets.yaml that pinning depends on.

A package the deploy installs but does not pin can drift; a name that is coupled in one source but
held as a companion in another makes the audit (which reads every source's coupled names at once)
report hosts as mixed. These tests read the real data file.
"""

from __future__ import annotations

import re

import pytest

from gpuhost.audit.coupled import is_coupled
from gpuhost.deploys.spec import package_plan, package_sets, supported_os
from gpuhost.desired import DesiredState

ENTRIES = [
    (source, os_key)
    for source in sorted(package_sets()["sources"])
    for os_key in supported_os(source)
]
CONTAINER_TOOLKIT = {
    "nvidia-container-toolkit",
    "nvidia-container-toolkit-base",
    "libnvidia-container-tools",
    "libnvidia-container1",
}


def _entry(source: str, os_key: str) -> dict:
    return package_sets()["sources"][source][os_key]


def _spec(source: str, module: str, branch: str = "550", **extra: object) -> DesiredState:
    return DesiredState(
        profile="t",
        source=source,
        os=("debian-12",),
        driver_version=f"{branch}.54.15",
        driver_branch=branch,
        kernel_module=module,
        cuda_versions=("12.4",),
        cuda_default="12.4",
        cudnn="9.1.0.70",
        container_toolkit="1.16.2",
        fabric_manager=True,
        **extra,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(("source", "os_key"), ENTRIES)
@pytest.mark.parametrize("module", ["proprietary", "open"])
def test_every_installed_driver_package_is_pinned_to_the_driver_version(
    source: str, os_key: str, module: str
) -> None:
    plan = package_plan(_spec(source, module), os_key)
    pinned = set(plan.pins["550.54.15"])
    assert set(plan.driver_install) <= pinned, set(plan.driver_install) - pinned
    assert set(plan.fabric_manager) <= pinned
    assert not any("{" in name for name in plan.never_upgraded)


@pytest.mark.parametrize(("source", "os_key"), ENTRIES)
def test_coupled_companions_and_blocked_are_disjoint(source: str, os_key: str) -> None:
    entry = _entry(source, os_key)
    coupled = set(entry["coupled"])
    assert not coupled & set(entry.get("companions") or [])
    assert not coupled & set(entry.get("blocked") or [])


def test_no_companion_is_coupled_in_another_source() -> None:
    """The audit marks a package coupled when any source couples it (audit/coupled.py)."""
    for source, os_key in ENTRIES:
        for name in _entry(source, os_key).get("companions") or []:
            assert not is_coupled(name), f"{source}/{os_key}: companion {name} is coupled elsewhere"


@pytest.mark.parametrize(("source", "os_key"), ENTRIES)
def test_blocked_patterns_are_apt_regexes(source: str, os_key: str) -> None:
    for pattern in _entry(source, os_key).get("blocked_patterns") or []:
        assert pattern.startswith("/") and pattern.endswith("/"), pattern
        re.compile(pattern[1:-1])


@pytest.mark.parametrize("os_key", supported_os("nvidia-cuda-repo"))
def test_cuda_repo_has_a_kernel_module_package_for_both_flavours(os_key: str) -> None:
    proprietary = package_plan(_spec("nvidia-cuda-repo", "proprietary"), os_key).driver_install
    opened = package_plan(_spec("nvidia-cuda-repo", "open"), os_key).driver_install
    assert set(proprietary) != set(opened)
    assert not any("open" in name for name in proprietary)


@pytest.mark.parametrize("os_key", supported_os("nvidia-cuda-repo"))
def test_cuda_repo_pins_the_container_toolkit_packages_together(os_key: str) -> None:
    plan = package_plan(_spec("nvidia-cuda-repo", "open"), os_key)
    assert set(plan.container_toolkit) == CONTAINER_TOOLKIT
    assert set(plan.pins["1.16.2"]) >= CONTAINER_TOOLKIT


@pytest.mark.parametrize("os_key", supported_os("nvidia-cuda-repo"))
def test_cuda_repo_sources_name_where_the_names_were_read(os_key: str) -> None:
    assert "https://" in _entry("nvidia-cuda-repo", os_key)["source"]


def test_cuda_repo_debian12_pins_the_debian_style_driver_libraries() -> None:
    plan = package_plan(_spec("nvidia-cuda-repo", "open"), "debian-12")
    pinned = set(plan.pins["550.54.15"])
    assert {"libcuda1", "nvidia-smi", "libnvidia-ml1", "libnvidia-cfg1"} <= set(plan.driver_install)
    assert {"nvidia-driver", "nvidia-kernel-dkms", "nvidia-kernel-open-dkms"} <= pinned
    assert "nvidia-kernel-open-dkms" in plan.driver_install
    assert {"cuda", "cuda-drivers", "nvidia-open"} <= set(plan.blocked)
    assert plan.apt_components == ["main", "contrib"]


@pytest.mark.parametrize("os_key", ["ubuntu-22.04", "ubuntu-24.04"])
def test_cuda_repo_ubuntu_pins_the_branch_libraries(os_key: str) -> None:
    plan = package_plan(_spec("nvidia-cuda-repo", "proprietary", branch="580"), os_key)
    pinned = set(plan.pins["580.54.15"])
    assert {"libnvidia-compute-580", "nvidia-utils-580", "nvidia-dkms-580"} <= set(
        plan.driver_install
    )
    assert {"nvidia-dkms-580-open", "libnvidia-gl-580", "nvidia-kernel-common-580"} <= pinned
    assert plan.persistenced == "nvidia-compute-utils-580"
    assert plan.apt_components == []


def _apt_match(pattern: str, name: str) -> bool:
    return re.search(pattern[1:-1], name) is not None


VARIANTS = [
    (source, os_key, branch)
    for source, os_key in ENTRIES
    for branch in (_entry(source, os_key).get("from_branch") or {})
]


@pytest.mark.parametrize(("source", "os_key", "branch"), VARIANTS)
def test_branch_variants_keep_the_entry_invariants(source: str, os_key: str, branch: int) -> None:
    """A from_branch variant obeys what every entry obeys: coupled, companions and blocked
    disjoint, companions coupled nowhere, blocked patterns apt regexes that block no name the
    variant installs or pins."""
    variant = _entry(source, os_key)["from_branch"][branch]
    coupled = set(variant["coupled"])
    assert not coupled & set(variant["companions"])
    assert not coupled & set(variant["blocked"])
    for name in variant["companions"]:
        assert not is_coupled(name), name
    plan = package_plan(_spec(source, "open", branch=str(branch)), os_key)
    kept = set(plan.driver_install) | set(plan.pins[f"{branch}.54.15"]) | set(plan.companions)
    for pattern in plan.blocked_patterns:
        re.compile(pattern[1:-1])
        assert not [name for name in kept if _apt_match(pattern, name)], pattern


@pytest.mark.parametrize("os_key", ["ubuntu-22.04", "ubuntu-24.04"])
@pytest.mark.parametrize("branch", ["590", "610"])
def test_cuda_repo_ubuntu_from_590_uses_the_unsuffixed_names(os_key: str, branch: str) -> None:
    """From 590 NVIDIA's Ubuntu packages carry no branch (the driver installation guide's rename
    table): the same compute set without the suffix, pinned to the exact version, every
    suffixed name of the older branches and NVIDIA's pinning packages blocked."""
    plan = package_plan(_spec("nvidia-cuda-repo", "open", branch=branch), os_key)
    assert plan.driver_install == [
        "libnvidia-compute", "nvidia-utils", "nvidia-compute-utils", "libnvidia-cfg1",
        "nvidia-dkms-open",
    ]
    assert set(plan.driver_install) <= set(plan.pins[f"{branch}.54.15"])
    # nvidia-persistenced is its own package from 590, like nvidia-modprobe at the driver's
    # version (companions: names Debian's archive has at other versions), nvidia-firmware has no
    # version in its name any more, so it is pinned with the driver
    assert plan.persistenced == "nvidia-persistenced"
    assert {"nvidia-kernel-common", "nvidia-persistenced", "nvidia-modprobe"} <= set(
        plan.companions)
    assert "nvidia-firmware" in plan.pins[f"{branch}.54.15"]
    # what a move from the per-branch names leaves behind is removed, the new set never
    from gpuhost.operations.precompiled import superseded

    left = ["nvidia-kernel-source-580-open", "nvidia-firmware-580-580.178.04",
            "libnvidia-compute-580", "nvidia-utils-580-server", "nvidia-firmware", *plan.coupled]
    keep = plan.never_upgraded + plan.driver_install
    assert superseded(dict.fromkeys(left), plan.superseded, keep) == [
        "libnvidia-compute-580", "nvidia-firmware-580-580.178.04", "nvidia-kernel-source-580-open"]
    assert {"cuda", "cuda-drivers", "nvidia-open"} <= set(plan.blocked)
    for name in ("libnvidia-compute-580", "nvidia-utils-580", "nvidia-dkms-580-open",
                 "cuda-drivers-580", "nvidia-driver-pinning-590",
                 "nvidia-driver-pinning-590.48.01", "nvidia-kernel-common-580"):
        assert any(_apt_match(p, name) for p in plan.blocked_patterns), name


@pytest.mark.parametrize("os_key", ["ubuntu-22.04", "ubuntu-24.04"])
def test_cuda_repo_ubuntu_580_keeps_the_unsuffixed_590_names_out(os_key: str) -> None:
    plan = package_plan(_spec("nvidia-cuda-repo", "open", branch="580"), os_key)
    assert "nvidia-dkms-580-open" in plan.driver_install
    assert {"libnvidia-compute", "nvidia-utils", "nvidia-dkms-open"} <= set(plan.blocked)
    assert plan.persistenced == "nvidia-compute-utils-580"


def test_a_branch_below_every_variant_gets_the_entry_itself() -> None:
    from gpuhost.deploys.spec import for_branch

    entry = {"install": ["a-{branch}"], "from_branch": {590: {"install": ["a"]}}}
    assert for_branch(entry, "580")["install"] == ["a-{branch}"]
    assert for_branch(entry, "590")["install"] == ["a"]
    assert for_branch(entry, "610")["install"] == ["a"]
