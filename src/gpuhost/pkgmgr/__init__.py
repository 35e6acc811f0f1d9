"""The package-manager seam: every command gpuhost runs against a host's package manager.

One interface (:class:`~gpuhost.pkgmgr.base.PackageManager`), two implementations:
:class:`~gpuhost.pkgmgr.apt.Apt` (apt/dpkg: Debian, Ubuntu) and :class:`~gpuhost.pkgmgr.dnf.Dnf`
(dnf/rpm: RHEL, Rocky, AlmaLinux). A host's manager is chosen once, from its OS
(:func:`for_os`, :func:`for_key`: the family of ``gpuhost.oskey``), never from which binary
exists (a RHEL host may have ``dpkg-query``). Every method returns shell text (pure); the
operations, facts, the probe, upgrade, rollback, bundles and checks run it, and parse its output
with ``gpuhost.parsers.packages``. ``tests/test_architecture.py`` fails on an apt/dpkg/dnf/rpm
command string anywhere else in the package.

Covered: install (an exact version: apt's ``name=version``, rpm's ``name-[epoch:]version``),
hold/versionlock and release, reading the holds/locks (dnf: the lock file, never ``dnf
versionlock list``, which needs repository metadata), the installed versions (verify), download
(the upgrade's package cache, bundles), waiting for the package manager's lock and finishing
half-done installs, remove, metadata refresh.
"""

from __future__ import annotations

from gpuhost import oskey
from gpuhost.pkgmgr.apt import Apt
from gpuhost.pkgmgr.base import PackageManager
from gpuhost.pkgmgr.dnf import Dnf

APT = Apt()
DNF = Dnf()
_BY_FAMILY: dict[str, PackageManager] = {oskey.APT: APT, oskey.DNF: DNF}

__all__ = [
    "APT", "DNF", "Apt", "Dnf", "PackageManager", "by_os_shell", "for_database", "for_family",
    "for_key", "for_os",
]


def for_family(family: str | None) -> PackageManager | None:
    """The manager of a family (``apt``/``dnf``); None for an unknown family."""
    return _BY_FAMILY.get(family or "")


def for_database(database: str | None) -> PackageManager | None:
    """The manager whose package database is ``database`` (``dpkg``/``rpm``: the audit's
    ``PackageFacts.manager``)."""
    return next((m for m in _BY_FAMILY.values() if m.database == database), None)


def for_os(os_id: str | None, id_like: str | None = None) -> PackageManager | None:
    """The manager of the OS with os-release ``ID`` (``ID_LIKE`` only for an unknown ID)."""
    return for_family(oskey.family(os_id, id_like))


def for_key(key: str) -> PackageManager | None:
    """The manager of an OS key (``rocky-9`` → dnf, ``ubuntu-24.04`` → apt)."""
    return for_family(oskey.family_of_key(key))


def by_os_shell(commands: dict[str, str]) -> str:
    """Shell that runs ``commands[family]`` for the host's family, read from /etc/os-release on
    the host (``ID``, then ``ID_LIKE`` as ``gpuhost.oskey.family``): a command that must pick
    a manager before gpuhost knows the host (the reboot's driver version)."""
    arms = [(oskey.ids_of(name), command) for name, command in commands.items()]
    by_id = " ".join(f"{'|'.join(ids)}) {command};;" for ids, command in arms)
    by_like = " ".join(
        "|".join(f'*" {i} "*' for i in ids) + f") {command};;" for ids, command in arms
    )
    return (
        '(. /etc/os-release 2>/dev/null || . /usr/lib/os-release 2>/dev/null; '
        f'case "$ID" in {by_id} *) case " $ID_LIKE " in {by_like} esac;; esac)'
    )
