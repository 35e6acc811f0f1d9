"""Installed packages against the profile: versions and holds (Debian/Ubuntu: dpkg + apt-mark)."""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from gpuhost.errors import VersionError
from gpuhost.parsers.packages import Package
from gpuhost.probe.script import APT_HOLDS_CODE
from gpuhost.versions import upstream_of_package_version

DPKG_FORMAT = "${Package}\\t${Version}\\t${db:Status-Abbrev}\\n"
HOLDS_COMMAND = APT_HOLDS_CODE  # the audit probe's and provision's command


def dpkg_command(names: Iterable[str]) -> str:
    """Status of the named packages; names dpkg never heard of are left out (stderr dropped)."""
    quoted = " ".join(shlex.quote(n) for n in sorted(set(names)))
    return f"LC_ALL=C dpkg-query -W -f='{DPKG_FORMAT}' {quoted} 2>/dev/null; true"


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
