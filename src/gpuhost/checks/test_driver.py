"""The NVIDIA driver: loaded, at the profile's version, same in kernel and user space."""

from __future__ import annotations

import pytest

from gpuhost.checks.checklib import HostFacts, fail_with, need_gpus, need_spec
from gpuhost.checks_support import gpu
from gpuhost.checks_support.expected import Expected


def test_driver_loaded(facts: HostFacts) -> None:
    """The NVIDIA kernel module is loaded (/proc/driver/nvidia/version)."""
    if facts.module is None:
        pytest.fail(
            f"{facts.name}: the NVIDIA kernel module is not loaded "
            "(/proc/driver/nvidia/version is absent): check `dkms status`, "
            "`modprobe nvidia` and the kernel log",
            pytrace=False,
        )


def test_driver_version_matches_profile(facts: HostFacts, expected: Expected) -> None:
    """The loaded module is the profile's driver version: the audit's profile.driver finding
    (its fix says reboot when the installed packages already are the profile's)."""
    spec, plan = need_spec(expected)
    if facts.module is None:
        pytest.fail(
            f"{facts.name}: profile {spec.profile} wants driver {spec.driver_version}, but no "
            "NVIDIA kernel module is loaded",
            pytrace=False,
        )
    problems = gpu.profile_driver_problems(
        facts.smi, facts.module, spec, facts.packages(plan.coupled), ("profile.driver",)
    )
    fail_with(problems, f"{facts.name}: driver version ({facts.module.raw})")


def test_kernel_module_flavour(facts: HostFacts, expected: Expected) -> None:
    """The loaded module is the flavour (open/proprietary) the profile installs: the audit's
    profile.kernel-module finding."""
    spec, _plan = need_spec(expected)
    if facts.module is None:
        pytest.fail(f"{facts.name}: no NVIDIA kernel module is loaded", pytrace=False)
    problems = gpu.profile_driver_problems(
        facts.smi, facts.module, spec, ids=("profile.kernel-module",)
    )
    fail_with(problems, f"{facts.name}: kernel module flavour")


def test_nvidia_smi_lists_gpus(facts: HostFacts, inventory_data: dict) -> None:
    """nvidia-smi works and lists the GPUs (the count and models in gpuhost_gpus, when given)."""
    report = need_gpus(facts)
    wanted = [str(g) for g in inventory_data.get("gpuhost_gpus") or []]
    if wanted:
        found = [g.name or "?" for g in report.gpus]
        assert len(found) == len(wanted), (
            f"{facts.name}: nvidia-smi lists {len(found)} GPU(s) ({', '.join(found)}), "
            f"inventory data gpuhost_gpus names {len(wanted)}"
        )


def test_userspace_matches_kernel_module(facts: HostFacts) -> None:
    """nvidia-smi (user space) reports the same driver version as the loaded module."""
    report = need_gpus(facts)
    module = facts.module.version if facts.module else None
    assert report.driver_version == module, (
        f"{facts.name}: nvidia-smi says driver {report.driver_version}, the loaded kernel "
        f"module is {module}: reboot (or reload the module) after a driver change"
    )
