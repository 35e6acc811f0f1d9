"""NVIDIA Fabric Manager on NVSwitch systems: installed at the driver's version and running."""

from __future__ import annotations

from typing import Any

import pytest

from gpuhost.checks.checklib import HostFacts, fail_with, need_spec
from gpuhost.checks_support import packages as pk
from gpuhost.checks_support import pci
from gpuhost.checks_support.expected import Expected
from gpuhost.facts.probe_parsers import parse_fabricmanager_version

SERVICE = "nvidia-fabricmanager"


def test_fabric_manager(host: Any, facts: HostFacts, expected: Expected) -> None:
    """On a host with NVSwitches, fabric manager is part of the profile, installed at the
    driver's version, enabled and running (without it CUDA reports no usable GPU)."""
    spec, plan = need_spec(expected)
    switches = pci.nvswitches(facts.run(pci.SYSFS_COMMAND))
    if not switches and not spec.fabric_manager:
        pytest.skip(
            f"no NVSwitch on {facts.name} (no PCI device of vendor 10de, class 0680): "
            "fabric manager does not apply"
        )
    if switches and not spec.fabric_manager:
        pytest.fail(
            f"{facts.name} has {len(switches)} NVSwitch(es) ({', '.join(switches[:4])}) but the "
            f"profile {spec.profile} resolves to no fabric manager: set fabric_manager: auto in "
            "the profile and gpuhost_fabric_manager: true in inventory data, then provision",
            pytrace=False,
        )
    packages = facts.packages(plan.fabric_manager)
    problems = [f"{n} is not installed" for n in pk.missing(packages, plan.fabric_manager)]
    problems += [
        f"{p} is not at driver {spec.driver_version}"
        for p in pk.off_version(packages, plan.fabric_manager, spec.driver_version)
    ]
    version = parse_fabricmanager_version(facts.run("nv-fabricmanager --version 2>&1; true"))
    if version != spec.driver_version:
        problems.append(
            f"nv-fabricmanager reports {version or '(not installed)'}, the driver is "
            f"{spec.driver_version}: they must match exactly"
        )
    service = host.service(SERVICE)
    if not service.is_running:
        problems.append(f"{SERVICE} is not running (see: journalctl -u {SERVICE})")
    if not service.is_enabled:
        problems.append(f"{SERVICE} is not enabled at boot")
    fail_with(problems, f"{facts.name}: fabric manager")
