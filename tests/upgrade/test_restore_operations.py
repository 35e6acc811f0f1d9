"""The rollback deploy's operations (``gpuhost.upgrade.restore``) against given facts: the exact
commands, as tests/provision/test_provision_operations.py does for provision's operations."""

from __future__ import annotations

from gpuhost.upgrade import restore
from tests.provision.provision_harness import run_case

STATES = "gpuhost.facts.apt_pins.InstalledPackageStates"


def test_packages_the_upgrade_added_are_removed_half_installed_ones_included() -> None:
    # what a failed upgrade to an open-module profile leaves: the new module package's DKMS
    # build failed (iF); pyinfra's DebPackages lists only ii/hi and missed it
    case = {
        "args": {"keep": ["nvidia-driver", "nvidia-kernel-dkms", "nvidia-smi"]},
        "facts": {STATES: {"": {
            "nvidia-driver": "hi", "nvidia-kernel-dkms": "hi", "nvidia-smi": "hi",
            "nvidia-kernel-open-dkms": "iF", "nvidia-fabricmanager-580": "iU", "vim": "ii",
        }}},
    }
    commands, _ = run_case(restore.stack_packages_removed, case)
    assert commands == [
        "DEBIAN_FRONTEND=noninteractive apt-get remove -y -q --allow-change-held-packages "
        "nvidia-fabricmanager-580 nvidia-kernel-open-dkms"
    ]


def test_nothing_beyond_the_snapshot_is_a_noop() -> None:
    case = {
        "args": {"keep": ["nvidia-driver", "nvidia-smi"]},
        "facts": {STATES: {"": {"nvidia-driver": "hi", "nvidia-smi": "hi", "vim": "ii"}}},
    }
    commands, noops = run_case(restore.stack_packages_removed, case)
    assert commands == [] and noops == ["no stack package beyond the snapshot's"]
