"""Packages installed by name, whatever the host's package manager (chosen by its OS, never by
which tool exists): hardening's nftables, mokutil, what a deploy needs besides the NVIDIA stack."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from pyinfra import host
from pyinfra.api import OperationError, operation
from pyinfra.facts.deb import DebPackages
from pyinfra.facts.rpm import RpmPackages
from pyinfra.facts.server import LinuxDistribution

from gpuhost import oskey, pkgmgr
from gpuhost.operations._facts import fact
from gpuhost.pkgmgr import PackageManager


def host_manager() -> PackageManager:
    """The current host's package manager, by its os-release (pyinfra's LinuxDistribution)."""
    distro: Any = fact(LinuxDistribution)
    meta = distro.get("release_meta") or {}
    key, family = oskey.from_release_meta(meta, distro.get("name"), distro.get("major"))
    manager = pkgmgr.for_family(family)
    if manager is None:
        raise OperationError(
            f"OS {key}: no package manager gpuhost knows (expected a Debian/Ubuntu or "
            "RHEL/Rocky/AlmaLinux host)"
        )
    return manager


@operation()
def present(packages: list[str], refresh: bool = False) -> Generator:
    """Every package of ``packages`` installed (any version; recommends/weak dependencies
    left out); ``refresh``: the metadata is read anew first when something is missing.

    + packages: package names
    + refresh: read the repositories' metadata before installing
    """
    manager = host_manager()
    installed = fact(DebPackages) if manager.family == "apt" else fact(RpmPackages)
    missing = [name for name in packages if name not in installed]
    if not missing:
        host.noop(f"{', '.join(packages)} installed")
        return
    if refresh:
        yield manager.refresh()
    yield manager.install(missing)
