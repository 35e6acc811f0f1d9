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


SPACE = FIXTURE.with_name("apt-install-space-driver-and-toolkit.txt")


def test_apt_install_space_and_df_from_a_lab_capture() -> None:
    """The capture: gpuhost's AptInstallSpace command for nvidia-driver + nvidia-cuda-toolkit on a
    fresh lab host (Debian 12, apt 2.6; nothing installed, nothing cached)."""
    from gpuhost.facts.apt_pins import AptInstallSpace

    space = AptInstallSpace().process(SPACE.read_text().splitlines())
    assert space == {
        "download": 1869 * 1000**2,
        "added": 6348 * 1000**2,
        "free": {"/var/cache/apt/archives": [12500787200, "/"], "/usr": [12500787200, "/"]},
    }


def test_apt_space_lines_partly_cached_and_freeing() -> None:
    from gpuhost.parsers.packages import parse_apt_space

    text = ("Need to get 20.5 MB/1,869 MB of archives.\n"
            "After this operation, 512 kB disk space will be freed.\n")
    assert parse_apt_space(text) == (20_500_000, -512_000)
    assert parse_apt_space("0 upgraded, 0 newly installed\n") == (0, 0)
