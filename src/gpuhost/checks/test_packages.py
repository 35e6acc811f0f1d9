"""The driver's packages: installed at the profile's version and held against upgrades."""

from __future__ import annotations

import pytest

from gpuhost.checks.checklib import HostFacts, fail_with, need_spec
from gpuhost.checks_support import packages as pk
from gpuhost.checks_support.expected import Expected
from gpuhost.parsers.packages import Package


def _some_installed(facts: HostFacts, names: list[str], profile: str) -> list[Package]:
    """The packages' status; FAIL when none is installed (nothing to judge is not a pass)."""
    __tracebackhide__ = True
    packages = facts.packages(names)
    if not pk.installed(packages):
        pytest.fail(
            f"{facts.name}: none of the driver packages of profile {profile} is "
            f"installed ({', '.join(sorted(set(names))[:6])}, ...)",
            pytrace=False,
        )
    return packages


def test_driver_packages_installed(facts: HostFacts, expected: Expected) -> None:
    """Every package the profile installs for the driver is installed."""
    spec, plan = need_spec(expected)
    names = plan.driver_install + plan.fabric_manager
    fail_with(
        pk.missing(facts.packages(names), names),
        f"{facts.name}: driver packages of profile {spec.profile} not installed",
    )


def test_coupled_packages_at_profile_version(facts: HostFacts, expected: Expected) -> None:
    """Every installed package built from the driver's source is at the profile's version."""
    spec, plan = need_spec(expected)
    names = plan.coupled + plan.fabric_manager
    packages = _some_installed(facts, names, spec.profile)
    fail_with(
        pk.off_version(packages, names, spec.driver_version),
        f"{facts.name}: packages not at driver {spec.driver_version} (profile {spec.profile})",
    )


def test_coupled_packages_held(facts: HostFacts, expected: Expected) -> None:
    """Every installed driver package (coupled and companions) is held (apt) or version-locked
    (dnf): the package manager cannot move one."""
    spec, plan = need_spec(expected)
    manager = facts.manager
    if manager is None:
        pytest.skip(
            f"{facts.name}: /etc/os-release names no OS gpuhost knows a package manager for; "
            "holds and locks are apt's and dnf's"
        )
    names = plan.coupled + plan.companions + plan.fabric_manager
    packages = _some_installed(facts, names, spec.profile)
    loose = pk.not_held(packages, facts.holds, names)
    fail_with(
        loose,
        f"{facts.name}: driver packages not {manager.lock_word} "
        f"(fix: {manager.hold_hint(loose or ['NAME'])}, or gpuhost provision)",
    )
