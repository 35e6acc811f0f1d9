"""Guards stop a host with one message naming host, field, what was found and what is accepted."""

from __future__ import annotations

import pytest
from old_profiles import OLD_PROFILES

from gpuhost import oskey
from gpuhost.deploys import guards
from gpuhost.deploys.spec import package_plan
from gpuhost.errors import DeployError
from gpuhost.facts.host_facts import SecureBoot
from gpuhost.facts.kernel import SecureBootState


@pytest.fixture(scope="module")
def profiles():
    return guards.load_profile_table(OLD_PROFILES)


def test_unknown_profile_lists_accepted_names(profiles) -> None:
    with pytest.raises(DeployError) as info:
        guards.check_profile("gpu7", {"gpuhost_profile": "debian12"}, profiles)
    assert str(info.value).startswith("gpu7: gpuhost_profile: 'debian12' is not a known profile")
    assert "debian12-nonfree-535" in str(info.value)


def test_unsupported_os_names_the_accepted_ones(profiles) -> None:
    spec = guards.check_profile("gpu7", {"gpuhost_profile": "debian12-nonfree-535"}, profiles)
    with pytest.raises(DeployError, match=r"gpu7: OS: ubuntu-22.04 .* accepted: debian-12"):
        guards.check_os("gpu7", spec, "ubuntu-22.04")


def test_os_key_from_pyinfra_distribution_fact() -> None:
    fact = {"name": "Debian", "major": 12, "release_meta": {"ID": "debian", "VERSION_ID": "12"}}
    assert oskey.from_distro(fact) == "debian-12"


def test_debian_plan_pins_the_whole_coupled_set(profiles) -> None:
    spec = guards.check_profile("h", {"gpuhost_profile": "debian12-nonfree-535"}, profiles)
    plan = package_plan(spec, "debian-12")
    assert set(plan.driver_install) <= set(plan.coupled)
    assert {"nvidia-driver", "nvidia-smi", "libnvidia-ml1", "nvidia-kernel-dkms"} <= set(
        plan.pins[spec.driver_version]
    )


# --- a profile that would change the driver of a provisioned host --------------------------------


def _spec(version: str = "550.127.05", module: str = "proprietary"):
    from gpuhost.desired import DesiredState

    return DesiredState(
        profile="lab-new",
        source="nvidia-cuda-repo",
        os=("debian-12",),
        driver_version=version,
        driver_branch="550",
        kernel_module=module,
    )


def _marker(version: str = "550.54.15", module: str = "proprietary"):
    from gpuhost.parsers.profile_marker import ProfileMarker

    return ProfileMarker(profile="lab-old", schema=1, driver_version=version, kernel_module=module)


def test_another_driver_version_in_the_marker_is_refused_with_the_upgrade_command() -> None:
    with pytest.raises(DeployError) as info:
        guards.check_driver_unchanged("h1", _spec(), _marker(), {"nvidia-driver-550": "550.54.15"})
    message = str(info.value)
    assert message.startswith(
        "h1: profile lab-new asks for NVIDIA driver 550.127.05 (proprietary kernel module) but "
        "this host has 550.54.15 (provisioned with profile lab-old); 550.54.15 installed "
        "(nvidia-driver-550): provision never replaces the driver"
    )
    assert "nothing was changed" in message
    assert "`gpuhost upgrade INVENTORY --to lab-new`" in message


def test_another_kernel_module_flavour_is_a_driver_change() -> None:
    with pytest.raises(DeployError, match=r"has 550.54.15 with the proprietary kernel module \("):
        guards.check_driver_unchanged("h1", _spec("550.54.15", "open"), _marker(), {})


def test_a_driver_installed_without_a_marker_is_refused() -> None:
    with pytest.raises(
        DeployError, match=r"this host has 535.261.03 installed \(nvidia-driver\): "
    ):
        guards.check_driver_unchanged("h1", _spec(), None, {"nvidia-driver": "535.261.03"})


@pytest.mark.parametrize(
    ("marker", "installed"),
    [
        (None, {}),  # a fresh host
        (None, {"nvidia-driver-550": "550.127.05"}),  # a run that stopped before the marker
        (_marker("550.127.05"), {"nvidia-driver-550": "550.127.05"}),  # same driver
    ],
)
def test_the_same_driver_passes(marker, installed) -> None:
    guards.check_driver_unchanged("h1", _spec(), marker, installed)


def test_secure_boot_fact_reads_the_audit_probe_section() -> None:
    """Provision's fact runs the probe's secure-boot code and parser: one reading of the state."""
    from gpuhost.probe.script import STATIC_SECTIONS

    fact = SecureBootState()
    assert fact.command() == next(s.code for s in STATIC_SECTIONS if s.name == "secure-boot")
    assert fact.process(["efi=no"]) == SecureBoot(False, False, "no EFI (legacy boot)")
    on = ["efi=yes", "mokutil=SecureBoot enabled"]
    assert fact.process(on) == SecureBoot(True, True, "mokutil")
    assert fact.process(["efi=yes", "efivar=   6   0   0   0   1"]).enabled is True


@pytest.mark.parametrize("marker", [_marker("550.127.05"), None])
def test_one_coupled_package_at_another_version_is_drift_provision_repairs(marker) -> None:
    """driver.packages-mixed (fix: gpuhost provision): the host's driver is the profile's, one
    library was moved by hand; provision must not refuse it."""
    installed = {"nvidia-driver": "550.127.05", "nvidia-smi": "550.127.05",
                 "libnvidia-ml1": "550.54.15"}
    guards.check_driver_unchanged("h1", _spec(), marker, installed)


def test_most_packages_at_another_driver_is_still_a_driver_change() -> None:
    installed = {"nvidia-driver": "550.54.15", "nvidia-smi": "550.54.15",
                 "libnvidia-ml1": "550.127.05"}
    with pytest.raises(DeployError, match=r"this host has 550.54.15 installed "
                                          r"\(nvidia-driver, nvidia-smi\): provision never"):
        guards.check_driver_unchanged("h1", _spec(), None, installed)
