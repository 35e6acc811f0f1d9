"""The rollback's desired state built from a snapshot (``upgrade.restore.restore_plan``, pure)."""

from __future__ import annotations

import base64

from gpuhost.upgrade.hoststeps import REMOVABLE_NEW_FILES, RESTORED_CATEGORIES
from gpuhost.upgrade.restore import restore_plan

SNAPSHOT = {
    "id": "20250101T000000Z",
    "packages": {
        "nvidia-driver": {"version": "535.261.03-1", "arch": "amd64"},
        "nvidia-smi": {"version": "535.261.03-1", "arch": "amd64"},
    },
    "holds": ["nvidia-driver", "nvidia-smi"],
    "package_cache": {"files": {"nvidia-driver": "nvidia-driver_535.261.03-1_amd64.deb"}},
    "files": {
        "/etc/apt/preferences.d/gpuhost": {
            "category": "apt_preferences",
            "content": "Package: nvidia-driver\nPin: version 535.261.03-*\n",
            "mode": "644",
        },
        "/etc/gpuhost/profile": {
            "category": "gpuhost",
            "content_b64": base64.b64encode(b"profile: debian12-nonfree-535\n").decode(),
            "mode": "600",
        },
        "/etc/default/grub": {"category": "grub", "content": "GRUB_TIMEOUT=5\n"},
    },
}


def test_the_plan_has_the_snapshots_versions_cache_files_and_holds() -> None:
    now = {
        "/etc/apt/preferences.d/gpuhost": {"category": "apt_preferences"},
        "/etc/modprobe.d/gpuhost-nvidia.conf": {"category": "modprobe"},  # gpuhost's, new
        "/etc/modprobe.d/local.conf": {"category": "modprobe"},  # the admin's, new: kept
        "/etc/default/grub.d/x.cfg": {"category": "grub"},  # not a restored category
    }
    plan = restore_plan(SNAPSHOT, now, RESTORED_CATEGORIES, REMOVABLE_NEW_FILES)
    assert plan.snapshot_id == "20250101T000000Z"
    assert plan.versions == {"nvidia-driver": "535.261.03-1", "nvidia-smi": "535.261.03-1"}
    assert plan.cached == {"nvidia-driver": "nvidia-driver_535.261.03-1_amd64.deb"}
    assert plan.holds == ("nvidia-driver", "nvidia-smi")
    assert plan.files == {
        "/etc/apt/preferences.d/gpuhost": (
            b"Package: nvidia-driver\nPin: version 535.261.03-*\n",
            "644",
        ),
        "/etc/gpuhost/profile": (b"profile: debian12-nonfree-535\n", "600"),
    }
    assert plan.remove_files == ("/etc/modprobe.d/gpuhost-nvidia.conf",)
