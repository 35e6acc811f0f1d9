"""One OS key ("debian-12") for the package data, made in one place (facts.host_facts.OsInfo.key)
and reached from /etc/os-release (audit, checks) and from pyinfra's LinuxDistribution (deploys)."""

from __future__ import annotations

import pytest

from gpuhost.checks_support.expected import os_key as key_from_os_release
from gpuhost.deploys.guards import os_key as key_from_distro

CASES = [
    ('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n', "debian-12"),
    ('NAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="22.04"\n', "ubuntu-22.04"),
    ('NAME="Rocky Linux"\nID="rocky"\nVERSION_ID="9.4"\n', "rocky-9.4"),
    ("ID=Debian\n", "debian"),
]


@pytest.mark.parametrize(("os_release", "expected"), CASES)
def test_os_release_and_pyinfra_distro_give_the_same_key(os_release: str, expected: str) -> None:
    meta = {}
    for line in os_release.splitlines():
        key, _, value = line.partition("=")
        meta[key] = value.strip('"')
    distro = {"name": meta.get("NAME", ""), "major": None, "release_meta": meta}
    assert key_from_os_release(os_release) == expected
    assert key_from_distro(distro) == expected


def test_no_id() -> None:
    assert key_from_os_release("NAME=x\n") is None
    assert key_from_distro({"name": None, "major": None, "release_meta": {}}) == "unknown"
