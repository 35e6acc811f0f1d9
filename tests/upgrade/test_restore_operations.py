"""The rollback deploy's operations (``gpuhost.upgrade.restore``) against given facts: the exact
commands, as tests/provision/test_provision_operations.py does for provision's operations."""

from __future__ import annotations

import pytest

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


GA_MOVE = (  # kept (held), added by the upgrade, what the rollback removes
    ["linux-modules-nvidia-580-server-open-6.8.0-100-generic",
     "linux-modules-nvidia-580-server-open-generic", "linux-image-6.8.0-100-generic",
     "linux-image-generic", "linux-generic", "nvidia-utils-580-server"],
    ["linux-image-6.8.0-101-generic", "linux-headers-6.8.0-101-generic",
     "linux-modules-nvidia-580-server-open-6.8.0-101-generic", "linux-firmware", "linux-base"],
    "linux-headers-6.8.0-101-generic linux-image-6.8.0-101-generic "
    "linux-modules-nvidia-580-server-open-6.8.0-101-generic",
)
# A 22.04 HWE (or cloud) kernel's headers are two packages: linux-headers-<release> depends on
# its source's shared headers, linux-hwe-6.8-headers-<abi> (GCP: linux-gcp-6.8-headers-<abi>;
# names as apt lists them on 22.04 hosts, e.g. linux-hwe-6.8-headers-6.8.0-40 beside
# linux-headers-6.8.0-40-generic). The rollback removed the first and left the second.
HWE_MOVE = (
    ["linux-modules-nvidia-580-server-open-6.8.0-100-generic", "linux-image-6.8.0-100-generic",
     "linux-headers-6.8.0-100-generic", "linux-hwe-6.8-headers-6.8.0-100",
     "linux-generic-hwe-22.04"],
    ["linux-image-6.8.0-101-generic", "linux-headers-6.8.0-101-generic",
     "linux-hwe-6.8-headers-6.8.0-101", "linux-gcp-6.8-headers-6.8.0-1026", "linux-libc-dev"],
    "linux-gcp-6.8-headers-6.8.0-1026 linux-headers-6.8.0-101-generic "
    "linux-hwe-6.8-headers-6.8.0-101 linux-image-6.8.0-101-generic",
)


@pytest.mark.parametrize(("keep", "added", "removed"), [GA_MOVE, HWE_MOVE],
                         ids=["ga", "hwe-shared-headers"])
def test_a_kernel_moved_with_precompiled_modules_is_removed_with_them(
    keep: list[str], added: list[str], removed: str
) -> None:
    """Ubuntu's archive: gpuhost upgrade moved the kernel to 6.8.0-101 with its module
    (operations/precompiled.py); the rollback's older driver cannot have that module, so the
    kernel the upgrade added goes too (kept, it would be the next boot's, without a module),
    its source's shared headers included (HWE_MOVE). A host without precompiled modules keeps
    its kernels (the test above)."""
    present = {name: "hi" for name in keep}
    present.update({name: "ii" for name in added})
    commands, _ = run_case(restore.stack_packages_removed,
                           {"args": {"keep": keep}, "facts": {STATES: {"": present}}})
    assert commands == ["DEBIAN_FRONTEND=noninteractive apt-get remove -y -q "
                        "--allow-change-held-packages " + removed]
