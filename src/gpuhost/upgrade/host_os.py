"""The package manager of a host the upgrade, rollback and snapshot commands reach: chosen once
from its /etc/os-release (the audit probe's ``OS_RELEASE_CODE``), never from which tool exists."""

from __future__ import annotations

from typing import Protocol

from gpuhost import pkgmgr
from gpuhost.errors import HostError
from gpuhost.facts.probe_parsers import parse_os_release
from gpuhost.pkgmgr import PackageManager
from gpuhost.probe.script import OS_RELEASE_CODE


class _Result(Protocol):
    @property
    def stdout(self) -> str: ...


class _Remote(Protocol):
    host: str

    def run(self, command: str, timeout: float | None = None) -> _Result: ...


def host_manager(remote: _Remote) -> PackageManager:
    """apt or dnf for the host, by its os-release ``ID`` (``ID_LIKE`` for a derivative); a host
    of no known family is one HostError naming what it says it is."""
    info = parse_os_release(remote.run(OS_RELEASE_CODE, timeout=60).stdout)
    manager = pkgmgr.for_family(info.family)
    if manager is None:
        raise HostError(
            remote.host,
            f"/etc/os-release: ID={info.id or 'none'} ID_LIKE={info.id_like or 'none'} is no OS "
            "gpuhost knows a package manager for; expected a Debian/Ubuntu (apt) or "
            "RHEL/Rocky/AlmaLinux (dnf) host",
        )
    return manager
