"""Built-in profiles never pin an NVIDIA Container Toolkit that a container-escape advisory lists.

The advisory facts below are NVIDIA's (CVE records, security bulletins); data/advisories.yaml
(``gpuhost matrix advisories-sync``) carries them for the audit too. This test keeps its own copy
so that a profile edit cannot pass by a data edit alone.
"""

from __future__ import annotations

import pytest
from packaging.version import Version

from gpuhost.matrix.profiles import Profile, load_profiles

#: (advisory, first fixed release, source): every release below the fixed one is affected
ADVISORIES = [
    # CVE record: "all versions up to and including 1.16.1"
    ("CVE-2024-0132", "1.16.2", "https://www.cve.org/CVERecord?id=CVE-2024-0132"),
    # CVE record: "all versions up to and including 1.17.3"
    ("CVE-2025-23359", "1.17.4", "https://www.cve.org/CVERecord?id=CVE-2025-23359"),
    # CVE record: "all versions up to and including 1.17.7"
    ("CVE-2025-23266", "1.17.8", "https://www.cve.org/CVERecord?id=CVE-2025-23266"),
    # NVIDIA security bulletin 5850 (June 2026, CSAF): fixed in 1.19.1
    ("CVE-2026-24260", "1.19.1", "https://nvidia.custhelp.com/app/answers/detail/a_id/5850"),
]

BUILTIN = load_profiles()
NVIDIA_REPO = sorted(n for n, p in BUILTIN.items() if p.source == "nvidia-cuda-repo")


def affected_by(version: str) -> list[str]:
    """The advisories whose affected range holds this container toolkit version."""
    return [cve for cve, fixed, _src in ADVISORIES if Version(version) < Version(fixed)]


def test_affected_by_the_advisory_ranges() -> None:
    assert affected_by("1.12.0")[:3] == ["CVE-2024-0132", "CVE-2025-23359", "CVE-2025-23266"]
    assert affected_by("1.16.2") == ["CVE-2025-23359", "CVE-2025-23266", "CVE-2026-24260"]
    assert affected_by("1.17.7") == ["CVE-2025-23266", "CVE-2026-24260"]
    assert affected_by("1.18.2") == ["CVE-2026-24260"]
    assert affected_by("1.19.1") == []


def test_there_are_nvidia_repository_profiles() -> None:
    assert len(NVIDIA_REPO) >= 2, NVIDIA_REPO


@pytest.mark.parametrize("name", NVIDIA_REPO)
def test_nvidia_repository_profile_pins_an_unaffected_toolkit(name: str) -> None:
    profile: Profile = BUILTIN[name]
    assert profile.container_toolkit, f"{name}: no container toolkit version pinned"
    assert not affected_by(profile.container_toolkit), (
        f"{name}: container toolkit {profile.container_toolkit} is affected by "
        f"{', '.join(affected_by(profile.container_toolkit))}"
    )


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_no_builtin_profile_pins_an_affected_toolkit(name: str) -> None:
    version = BUILTIN[name].container_toolkit
    assert version is None or not affected_by(version), (name, version)
