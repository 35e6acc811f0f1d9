"""``dpkg --audit`` read into package names.

Fixture: tests/fixtures/parsers/dpkg-audit-interrupted-install.txt, captured with ``LC_ALL=C
dpkg --audit`` on a gpuhost lab host (Debian 12, dpkg 1.21) while the controller of a
``gpuhost upgrade`` 535.261.03 -> 535.309.01 had just been stopped and apt was still unpacking
(the lock note at the top is dpkg's own).
"""

from __future__ import annotations

from pathlib import Path

from gpuhost.parsers.packages import parse_dpkg_audit

FIXTURE = Path(__file__).parents[1] / "fixtures" / "parsers" / "dpkg-audit-interrupted-install.txt"


def test_every_listed_package_and_nothing_from_the_prose() -> None:
    names = parse_dpkg_audit(FIXTURE.read_text().splitlines())
    assert len(names) == 19
    assert names[:3] == ["firmware-nvidia-gsp", "libc-bin", "libegl-nvidia0"]  # arch dropped
    assert {"nvidia-smi", "nvidia-kernel-dkms", "nvidia-alternative"} <= set(names)
    assert not {"Another", "The", "They", "dselect", "menu"} & set(names)


def test_a_content_dpkg_says_nothing() -> None:
    assert parse_dpkg_audit([]) == []
    assert parse_dpkg_audit([""]) == []
