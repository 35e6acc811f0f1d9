"""The one dnf/yum versionlock reader (audit probe and apt_pin's RPM holds)."""

from __future__ import annotations

import pytest

from gpuhost.parsers.packages import parse_versionlock, parse_versionlock_entry

# versionlock.list as `dnf versionlock add` writes it (name-epoch:version-release.arch)
LIST = """\
# Added lock on Mon Nov 23 10:00:00 2026
nvidia-driver-3:550.54.15-1.el9.*
nvidia-driver-cuda-3:550.54.15-1.el9.x86_64
cuda-toolkit-12-4-12.4.1-1.x86_64
!kmod-nvidia-latest-dkms-3:560.35.03-1.el9.*
0:libnvidia-container1-1.17.8-1.x86_64
nvidia-driver-3:550.54.15-1.el9.*
"""


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("nvidia-driver-3:550.54.15-1.el9.*", ("nvidia-driver", "550.54.15")),
        ("cuda-toolkit-12-4-12.4.1-1.x86_64", ("cuda-toolkit-12-4", "12.4.1")),
        ("!kmod-nvidia-latest-dkms-3:560.35.03-1.el9.*", ("kmod-nvidia-latest-dkms", "560.35.03")),
        ("0:libnvidia-container1-1.17.8-1.x86_64", ("libnvidia-container1", "1.17.8")),
        ("  not-a-lock  ", ("not-a-lock", "")),
    ],
)
def test_entry(entry: str, expected: tuple[str, str]) -> None:
    assert parse_versionlock_entry(entry) == expected


def test_list_names_in_order_once() -> None:
    assert parse_versionlock(LIST) == [
        "nvidia-driver",
        "nvidia-driver-cuda",
        "cuda-toolkit-12-4",
        "kmod-nvidia-latest-dkms",
        "libnvidia-container1",
    ]
    assert parse_versionlock("") == []
