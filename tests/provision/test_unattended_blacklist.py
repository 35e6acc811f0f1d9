"""The unattended-upgrades drop-in: apt itself reads it, and its patterns (matched as
unattended-upgrades does, ``re.match`` on the package name) hit exactly the planned packages."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from old_profiles import OLD_PROFILES

from gpuhost.deploys import guards
from gpuhost.deploys.spec import package_plan
from gpuhost.operations.unattended import render_blacklist


@pytest.fixture(scope="module")
def planned() -> list[str]:
    spec = guards.check_profile(
        "h", {"gpuhost_profile": "debian12-nonfree-535"}, guards.load_profile_table(OLD_PROFILES)
    )
    plan = package_plan(spec, "debian-12")
    assert {"nvidia-driver", "nvidia-persistenced", "nvidia-cuda-toolkit"} <= set(
        plan.never_upgraded
    )
    return plan.never_upgraded


def _patterns(text: str) -> list[str]:
    return re.findall(r'^\s+"(.*)";$', text, flags=re.MULTILINE)


def test_patterns_match_exactly_the_planned_names(planned) -> None:
    patterns = _patterns(render_blacklist(planned + ["libstdc++6", "a.b"]))
    assert len(patterns) == len(set(planned)) + 2

    def blocked(name: str) -> bool:
        return any(re.match(p, name) for p in patterns)

    assert all(blocked(n) for n in planned)
    assert blocked("libstdc++6") and blocked("a.b") and not blocked("aXb")
    assert not blocked("nvidia-driver-full-extra") and not blocked("libcuda1-i386")
    assert not blocked("linux-image-amd64")


def test_bad_names_are_refused() -> None:
    with pytest.raises(ValueError, match=r"not Debian package names: Bad\*"):
        render_blacklist(["nvidia-driver", "Bad*"])


@pytest.mark.skipif(shutil.which("apt-config") is None, reason="apt-config (apt) not installed")
def test_apt_reads_the_drop_in(planned, tmp_path) -> None:
    """apt-config only reads the file given with -c; nothing on this machine changes."""
    path = tmp_path / "51gpuhost-unattended-upgrades"
    path.write_text(render_blacklist(planned))
    proc = subprocess.run(
        ["apt-config", "-c", str(path), "dump", "Unattended-Upgrade::Package-Blacklist"],
        capture_output=True,
        text=True,
        check=True,
    )
    read = re.findall(r'^Unattended-Upgrade::Package-Blacklist:: "(.*)";$', proc.stdout, re.M)
    assert read == _patterns(path.read_text())
