"""Rollback as a deploy: the operations that put a host back on a snapshot's exact state, run
in-process like the install (``deploy_batch``), with provision's own apt operations where they
fit (``apt_pin.held``, the wait of ``apt_pin.dpkg_settled``).

The snapshot's desired state travels to the deploy in the host's data (``RESTORE_KEY``, a
``RestorePlan``); each operation compares the host's facts with it and yields commands only for
what differs, so a rollback that is re-run (``--resume``) changes nothing twice:

1. apt/dpkg left running are waited for, a half-done dpkg finished where it can (as provision's
   ``dpkg_settled``, but a package that cannot be configured is left to step 4);
2. holds of stack packages are released (the snapshot's holds come back in step 6);
3. the snapshot's files (apt pins and sources, modprobe, the provision marker, units) are put
   back byte for byte; files gpuhost wrote since (``REMOVABLE_NEW_FILES``) are removed;
4. every package not at the snapshot's version is installed from the on-host package cache
   (``package_cache``: the repository may have dropped that version);
5. stack packages the upgrade added are removed;
6. the snapshot's holds are set (provision's ``apt_pin.held``); systemd re-reads its units;
7. ``/usr/local/cuda`` (the ``cuda`` alternatives group where the toolkits made one) points where
   it pointed, unless that toolkit is gone (the link is then left as it is, and the rollback's
   line says so).
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from io import BytesIO
from typing import Any

from pyinfra import host
from pyinfra.api import FileUploadCommand, StringCommand, deploy, operation
from pyinfra.facts.deb import DebPackages
from pyinfra.facts.files import Sha256File
from pyinfra.operations import systemd

from gpuhost import pkgmgr
from gpuhost.errors import ConfigError
from gpuhost.facts.apt_pins import (
    AptHolds,
    DnfState,
    DnfVersionLocks,
    DpkgState,
    InstalledPackageStates,
    RpmPackageStates,
)
from gpuhost.facts.cuda_link import CudaDefaultLink
from gpuhost.facts.dnf import RpmVersions
from gpuhost.operations import apt_pin
from gpuhost.operations._facts import fact
from gpuhost.operations.env import cuda_link_restore
from gpuhost.parsers.cuda import CudaLink
from gpuhost.parsers.packages import parse_versionlock_entry
from gpuhost.pkgmgr import PackageManager
from gpuhost.upgrade import package_cache
from gpuhost.upgrade.host_state import (
    file_bytes,
    file_category,
    file_path_problem,
    is_kernel_package,
    is_stack_package,
    mode_problem,
    pairs_kernel,
)

RESTORE_KEY = "_gpuhost_restore"


@dataclass(frozen=True)
class RestorePlan:
    """What a host must be after the rollback (built from the snapshot, pure data)."""

    snapshot_id: str
    versions: dict[str, str]  # package -> exact Debian version
    cached: dict[str, str]  # package -> file in the snapshot's package cache
    files: dict[str, tuple[bytes, str]] = field(default_factory=dict)  # path -> (bytes, mode)
    remove_files: tuple[str, ...] = ()
    holds: tuple[str, ...] = ()
    family: str = "apt"  # the host's package manager (gpuhost.oskey), from its OS
    #: /usr/local/cuda as the snapshot recorded it (CudaLink.record()); None: not recorded
    cuda_link: dict[str, str | None] | None = None

    @property
    def manager(self) -> PackageManager:
        return pkgmgr.for_family(self.family) or pkgmgr.APT


def restore_plan(
    doc: Mapping[str, Any],
    files_now: Mapping[str, Mapping[str, Any]],
    categories: tuple[str, ...],
    removable: tuple[str, ...],
) -> RestorePlan:
    """The plan for snapshot ``doc`` on a host whose recorded files are ``files_now`` (path ->
    record with ``category``): the snapshot's files of ``categories``, and files of those
    categories it did not have whose path starts with ``removable`` (pure). A file's category
    is its path's (``file_category``), never what a document says; a path snapshots do not
    record or a mode rollback may not apply is a ConfigError (``validate_document`` refuses
    them first)."""
    saved: Mapping[str, Any] = doc.get("files") or {}
    for path, record in saved.items():
        problem = file_path_problem(path) or mode_problem(record.get("mode"))
        if problem:
            raise ConfigError(f"snapshot {doc.get('id')!r:.40}: files: {path!r:.120}: {problem}")
    files = {
        path: (file_bytes(dict(record)), str(record.get("mode") or "644"))
        for path, record in sorted(saved.items())
        if file_category(path) in categories
    }
    remove = tuple(
        path
        for path in sorted(files_now)
        if path not in saved
        and file_path_problem(path) is None
        and file_category(path) in categories
        and path.startswith(removable)
    )
    cache = doc.get("package_cache") or {}
    return RestorePlan(
        snapshot_id=str(doc["id"]),
        versions={n: str(r["version"]) for n, r in doc["packages"].items()},
        cached=dict(cache.get("files") or {}),
        files=files,
        remove_files=remove,
        holds=tuple(str(p) for p in doc.get("holds", [])),
        cuda_link=doc.get("cuda_link"),
    )


@operation()
def dpkg_waited(family: str = "apt") -> Generator:
    """Like provision's ``apt_pin.dpkg_settled`` (the same fact, wait and finish), except that
    a package the package manager cannot finish does not stop the rollback: it is what the
    failed upgrade left (a DKMS build that fails), and the snapshot's version replaces it next."""
    manager = pkgmgr.for_family(family) or pkgmgr.APT
    state = fact(DpkgState if manager.family == "apt" else DnfState)
    if not state["running"] and not state["unfinished"]:
        host.noop(
            f"no {manager.family}/{manager.database} running, "
            f"{manager.database} has no half-installed package"
        )
        return
    yield f"{manager.wait_command()}; {manager.finish_command()} || true"


@operation()
def stack_unheld(keep: list[str], family: str = "apt") -> Generator:
    """Release the holds/locks of stack packages (held or held-not-installed) not in ``keep``."""
    manager = pkgmgr.for_family(family) or pkgmgr.APT
    holds = fact(AptHolds) if manager.family == "apt" else [
        parse_versionlock_entry(line)[0] for line in fact(DnfVersionLocks)
    ]
    if manager.family != "apt":  # the snapshot's locks are lines of the lock file
        keep = [parse_versionlock_entry(line)[0] for line in keep]
    release = sorted({p for p in holds if is_stack_package(p) and p not in keep})
    if not release:
        host.noop("no stack package held beyond the snapshot's holds")
        return
    yield manager.unhold(release)


@operation()
def file_restored(path: str, content: bytes, mode: str = "644") -> Generator:
    """``path`` holds exactly ``content`` (compared by SHA-256) with ``mode``."""
    import hashlib

    if fact(Sha256File, path=path) == hashlib.sha256(content).hexdigest():
        host.noop(f"{path} as in the snapshot")
        return
    q = shlex.quote(path)
    yield StringCommand(f'mkdir -p "$(dirname {q})"')
    yield FileUploadCommand(BytesIO(content), path)
    yield StringCommand(f"chmod {shlex.quote(mode)} {q}")


@operation()
def file_removed(path: str) -> Generator:
    if fact(Sha256File, path=path) is None:
        host.noop(f"{path} absent")
        return
    yield f"rm -f {shlex.quote(path)}"


@operation()
def cached_installed(
    snapshot_id: str, versions: dict[str, str], cached: dict[str, str], family: str = "apt"
) -> Generator:
    """Every package of ``versions`` at its exact version, installed from the snapshot's package
    cache (downgrades and held packages allowed; the admin's config files kept)."""
    manager = pkgmgr.for_family(family) or pkgmgr.APT
    if manager.family == "apt":
        installed = fact(DebPackages)
    else:  # {name: [epoch:version-release]}: the snapshot's form
        installed = {n: [v] for n, v in fact(RpmVersions, packages=sorted(versions)).items()}
    differ = {
        name: cached[name]
        for name, version in versions.items()
        if name in cached and version not in (installed.get(name) or [])
    }
    if not differ:
        host.noop(f"{len(versions)} packages at the snapshot's versions")
        return
    yield package_cache.install_command(snapshot_id, differ, manager)


@operation()
def stack_packages_removed(keep: list[str], family: str = "apt") -> Generator:
    """Remove installed stack packages that are not in ``keep`` (what the upgrade added), the
    half-installed ones a failed install leaves (a DKMS build that failed: ``iF``) included."""
    manager = pkgmgr.for_family(family) or pkgmgr.APT
    present = fact(InstalledPackageStates if manager.family == "apt" else RpmPackageStates)
    # a snapshot that records the kernel (precompiled modules: host_state.pairs_kernel) gets the
    # kernels the upgrade added removed too: kept, the newest would boot without a module
    kernels = pairs_kernel(keep)
    added = sorted(
        p for p in present
        if (is_stack_package(p) or (kernels and is_kernel_package(p))) and p not in keep
    )
    if not added:
        host.noop("no stack package beyond the snapshot's")
        return
    yield manager.remove(added, change_held=True)


def recorded_link(record: Mapping[str, Any]) -> CudaLink:
    """A snapshot's ``cuda_link`` record as a ``CudaLink`` (pure; checked by
    ``snapshot.validate_document``)."""
    return CudaLink(kind=str(record.get("kind") or "absent"), link=record.get("link"),
                    alternative=record.get("alternative"), mode=record.get("mode"))


@operation()
def cuda_link_restored(recorded: dict[str, Any] | None) -> Generator:
    """``/usr/local/cuda`` (and the ``cuda`` alternatives group) as the snapshot recorded it,
    after its packages are back (``env.cuda_link_restore``: never a link to a toolkit that is
    gone, never a directory touched). Idempotent: as recorded, nothing to do."""
    if recorded is None:
        host.noop("the snapshot has no record of /usr/local/cuda (taken before gpuhost kept it)")
        return
    want = recorded_link(recorded)
    now = fact(CudaDefaultLink, directory=want.default or "")
    commands, note = cuda_link_restore(want, now)
    if note:
        # pyinfra logs a noop's reason only at debug level (print_noop_info is off outside its
        # own CLI): the line that the link was left as it is goes to the host's rollback log
        logging.getLogger("pyinfra").warning("[%s] %s", host.name, note)
    if not commands:
        host.noop(note or "/usr/local/cuda as in the snapshot")
        return
    yield from commands


@deploy("gpuhost rollback")
def restored() -> None:
    """Put the current host back on the ``RestorePlan`` in its data (see the module doc)."""
    plan: RestorePlan = host.data.get(RESTORE_KEY)
    keep = sorted(plan.versions)
    family = plan.family
    dpkg_waited(
        name="Wait for the package manager, try to finish what the upgrade left half-done",
        family=family,
    )
    stack_unheld(name="Release holds of stack packages", keep=list(plan.holds), family=family)
    for path, (content, mode) in sorted(plan.files.items()):
        file_restored(name=f"Restore {path}", path=path, content=content, mode=mode)
    for path in plan.remove_files:
        file_removed(name=f"Remove {path}", path=path)
    cached_installed(
        name="Install the snapshot's package versions from the package cache",
        snapshot_id=plan.snapshot_id,
        versions=plan.versions,
        cached=plan.cached,
        family=family,
    )
    stack_packages_removed(
        name="Remove stack packages the upgrade added", keep=keep, family=family
    )
    if family == "apt":
        apt_pin.held(name="Hold the snapshot's holds", packages=list(plan.holds))
    else:
        apt_pin.lock_lines(name="Lock the snapshot's locks", lines=list(plan.holds))
    systemd.daemon_reload(name="Reload systemd units")
    cuda_link_restored(name="/usr/local/cuda as in the snapshot", recorded=plan.cuda_link)
