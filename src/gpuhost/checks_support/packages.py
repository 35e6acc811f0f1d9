"""Installed packages against the profile: versions and holds/locks (the host's package manager,
by its OS: apt holds on Debian/Ubuntu, dnf versionlocks on RHEL/Rocky/Alma)."""

from __future__ import annotations

from collections.abc import Iterable

from gpuhost.errors import VersionError
from gpuhost.parsers.packages import (
    Package,
    parse_apt_mark_showhold,
    parse_versionlock,
)
from gpuhost.pkgmgr import APT, PackageManager
from gpuhost.versions import upstream_of_package_version

HOLDS_COMMAND = APT.holds_command()  # the audit probe's and provision's command


def dpkg_command(names: Iterable[str], manager: PackageManager = APT) -> str:
    """Status of the named packages; names the package manager never heard of are left out."""
    return manager.installed_command(sorted(set(names)))


def parse_holds(text: str, manager: PackageManager) -> set[str]:
    """The held (apt) or version-locked (dnf) package names from ``holds_command``'s output."""
    if manager.family == "apt":
        return parse_apt_mark_showhold(text)
    return set(parse_versionlock(text))


def installed(packages: Iterable[Package]) -> dict[str, Package]:
    return {p.name: p for p in packages if p.installed}


def upstream(version: str | None) -> str | None:
    if version is None:
        return None
    try:
        return upstream_of_package_version(version)
    except VersionError:
        return version


def missing(packages: Iterable[Package], required: Iterable[str]) -> list[str]:
    """Required package names that are not installed."""
    have = installed(packages)
    return sorted(name for name in set(required) if name not in have)


def off_version(packages: Iterable[Package], names: Iterable[str], version: str) -> list[str]:
    """``name version`` of each installed package among ``names`` whose upstream version is not
    ``version``."""
    wanted = set(names)
    return sorted(
        f"{p.name} {p.version}"
        for p in installed(packages).values()
        if p.name in wanted and upstream(p.version) != version
    )


def not_held(packages: Iterable[Package], held: set[str], names: Iterable[str]) -> list[str]:
    """Installed packages among ``names`` that apt may upgrade (no hold)."""
    wanted = set(names)
    return sorted(
        p.name for p in installed(packages).values() if p.name in wanted and p.name not in held
    )
