"""Guards stop a host with one message naming host, field, what was found and what is accepted."""

from __future__ import annotations

import pytest

from gpuhost.deploys import guards
from gpuhost.deploys.spec import package_plan
from gpuhost.errors import DeployError


@pytest.fixture(scope="module")
def profiles():
    return guards.load_profile_table()


def test_unknown_profile_lists_accepted_names(profiles) -> None:
    with pytest.raises(DeployError) as info:
        guards.check_profile("gpu7", {"gpuhost_profile": "debian12"}, profiles)
    assert str(info.value).startswith("gpu7: gpuhost_profile: 'debian12' is not a known profile")
    assert "debian12-nonfree-535" in str(info.value)


def test_unsupported_os_names_the_accepted_ones(profiles) -> None:
    spec = guards.check_profile("gpu7", {"gpuhost_profile": "debian12-nonfree-535"}, profiles)
    with pytest.raises(DeployError, match=r"gpu7: OS: ubuntu-22.04 .* accepted: debian-12"):
        guards.check_os("gpu7", spec, "ubuntu-22.04")


def test_secure_boot_needs_a_signing_key() -> None:
    with pytest.raises(DeployError, match="Secure Boot is enabled"):
        guards.check_secure_boot("gpu7", {"uefi": True, "enabled": True}, None)
    guards.check_secure_boot("gpu7", {"uefi": True, "enabled": True}, "/root/mok.priv")


def test_os_key_from_pyinfra_distribution_fact() -> None:
    fact = {"name": "Debian", "major": 12, "release_meta": {"ID": "debian", "VERSION_ID": "12"}}
    assert guards.os_key(fact) == "debian-12"


def test_debian_plan_pins_the_whole_coupled_set(profiles) -> None:
    spec = guards.check_profile("h", {"gpuhost_profile": "debian12-nonfree-535"}, profiles)
    plan = package_plan(spec, "debian-12")
    assert set(plan.driver_install) <= set(plan.coupled)
    assert {"nvidia-driver", "nvidia-smi", "libnvidia-ml1", "nvidia-kernel-dkms"} <= set(
        plan.pins[spec.driver_version]
    )
