"""Precompiled NVIDIA kernel modules (Ubuntu's archive): the kernel and its modules move together.

Canonical builds ``linux-modules-nvidia-<branch>-server[-open]-<kernel>`` for every Ubuntu kernel.
Such a package carries the KERNEL's version and depends on ``nvidia-kernel-common-<branch>-server
(>= D)``, D being the driver the archive had when that kernel was built. With the driver pinned, a
newer kernel's module package can need a driver the pins refuse: ``apt-get dist-upgrade`` then
installs the new kernel and keeps its module package back, and the next boot has no NVIDIA module
(shown with apt 2.6 by tests/provision/test_precompiled_apt.py against the lab's stand-in
archive).

So gpuhost pairs them:

1. the module packages of the next boot's kernel (and of the running one, where the archive still
   offers them) are installed at the newest version the pinned driver satisfies, with the flavour
   metapackage (``linux-modules-nvidia-580-server-open-generic``) at the version naming that
   kernel;
2. the kernel metapackages (``linux-generic``, ``linux-image-generic``, ``linux-headers-generic``,
   the HWE ones, ``-virtual``) and the module metapackage are held: ``apt-get upgrade``,
   ``dist-upgrade`` and unattended-upgrades (which skips held packages, and which gpuhost's
   drop-in also tells to leave them) never bring a kernel gpuhost has not paired;
3. ``gpuhost upgrade`` (``move_kernel``) moves the kernel metapackages to the newest kernel
   whose module package the target driver satisfies, in the same apt command as that module:
   apt installs both or neither.

Holding the kernel keeps kernel security updates out until gpuhost moves the kernel: the price
of never booting without the GPU; ``gpuhost upgrade`` to the same or a newer profile takes the
newest kernel the driver can pair.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass

from pyinfra import host
from pyinfra.api import OperationError, operation
from pyinfra.facts.deb import DebPackages

from gpuhost.desired import PrecompiledModules
from gpuhost.errors import VersionError
from gpuhost.facts.apt_pins import AptHolds
from gpuhost.facts.kernel import Kernels
from gpuhost.facts.precompiled import PackageRecords
from gpuhost.operations import unattended
from gpuhost.operations._facts import fact
from gpuhost.operations.apt_pin import hold_kept
from gpuhost.parsers.apt_records import AptRecord
from gpuhost.pkgmgr import APT
from gpuhost.versions import parse_version, upstream_of_package_version

#: Ubuntu's (and Debian's) kernel release: version, ABI, flavour (``6.8.0-101-generic``)
KERNEL_RELEASE_RE = re.compile(r"^\d+\.\d+\.\d+-\d+-(?P<flavour>[a-z][a-z0-9-]*)$")
DRIVER_COMMON = "nvidia-kernel-common-"
KERNEL_BLACKLIST_FILE = "/etc/apt/apt.conf.d/51gpuhost-unattended-kernel"
KERNEL_HEADER = (
    "// Written by gpuhost: the kernel comes only with its NVIDIA module package (precompiled\n"
    "// modules need the driver they were built for); gpuhost upgrade moves both together.\n"
)


def kernel_flavour(release: str) -> str | None:
    """``6.8.0-101-generic`` → ``generic``; None for a release not in that form."""
    match = KERNEL_RELEASE_RE.match(release)
    return match["flavour"] if match else None


def kernel_packages(plan: PrecompiledModules, kernel: str) -> list[str]:
    """The module packages of one kernel release, the modules themselves first."""
    return [name.format(kernel=kernel) for name in plan.kernel]


def module_metapackage(plan: PrecompiledModules, flavour: str) -> str:
    return plan.flavour.format(kernel_flavour=flavour)


def kernel_metapackages(plan: PrecompiledModules, flavour: str) -> list[str]:
    """The kernel metapackages of ``flavour`` (a generic kernel also comes from ``-virtual``)."""
    flavours = [flavour, "virtual"] if flavour == "generic" else [flavour]
    names = [t.format(kernel_flavour=f) for f in flavours for t in plan.kernel_metapackages]
    return list(dict.fromkeys(names))


def driver_needed(record: AptRecord) -> str | None:
    """The driver a module package needs: its ``nvidia-kernel-common-* (>= D)`` (upstream)."""
    for group in record.depends:
        for rel in group:
            if rel.name.startswith(DRIVER_COMMON) and rel.op in (">=", ">>", "="):
                try:
                    return upstream_of_package_version(rel.version)
                except VersionError:
                    return rel.version
    return None


def _satisfied(record: AptRecord, driver: str) -> bool:
    needed = driver_needed(record)
    if needed is None:
        return True
    try:
        return parse_version(needed, field="Depends") <= parse_version(driver, field="driver")
    except VersionError:
        return False


def _names(record: AptRecord) -> set[str]:
    return {rel.name for group in record.depends for rel in group}


def best_record(
    records: Sequence[AptRecord], driver: str, depends_on: str | None = None
) -> AptRecord | None:
    """The newest record (apt lists them newest first) whose driver need ``driver`` meets and,
    with ``depends_on``, that depends on that package."""
    for record in records:
        if _satisfied(record, driver) and (depends_on is None or depends_on in _names(record)):
            return record
    return None


@dataclass(frozen=True)
class Pairing:
    """What pairs one kernel with the driver: ``install`` (``name=version``) or a ``problem``."""

    kernel: str
    install: list[str]
    problem: str | None = None


def pair_kernel(
    plan: PrecompiledModules,
    kernel: str,
    meta: str,
    driver: str,
    records: Mapping[str, Sequence[AptRecord]],
) -> Pairing:
    """The module packages (and the flavour metapackage's version naming them) that give
    ``kernel`` an NVIDIA module for ``driver`` (pure)."""
    names = kernel_packages(plan, kernel)
    main = names[0]
    offered = records.get(main) or []
    chosen = best_record(offered, driver)
    if chosen is None:
        if not offered:
            why = "the configured sources offer no such package"
        else:
            needs = sorted({driver_needed(r) or "?" for r in offered})
            why = f"it needs driver {' or '.join(needs)} or newer"
        return Pairing(kernel, [], f"no NVIDIA module package for kernel {kernel} with driver "
                       f"{driver}: {main}: {why}")
    install = [f"{main}={chosen.version}"]
    for name in names[1:]:  # linux-objects/linux-signatures: the same build where offered
        versions = [r.version for r in records.get(name) or []]
        if chosen.version in versions:
            install.append(f"{name}={chosen.version}")
        elif versions:
            install.append(name)
    record = best_record(records.get(meta) or [], driver, depends_on=main)
    if record is not None:
        install.append(f"{meta}={record.version}")
    return Pairing(kernel, install, None)


def newest_kernel(records: Mapping[str, Sequence[AptRecord]], image_meta: str) -> str | None:
    """The kernel release the newest ``linux-image-<flavour>`` offered depends on."""
    for record in (records.get(image_meta) or [])[:1]:
        for name in sorted(_names(record)):
            release = name.removeprefix("linux-image-")
            if name.startswith("linux-image-") and kernel_flavour(release):
                return release
    return None


def _missing(install: list[str], installed: Mapping[str, list[str]]) -> list[str]:
    """``name=version`` entries whose package is not installed at that version."""
    out = []
    for item in install:
        name, _, version = item.partition("=")
        have = installed.get(name) or []
        if (version and version not in have) or (not version and not have):
            out.append(item)
    return out


@operation()
def modules_paired(
    plan: PrecompiledModules, driver_version: str, move_kernel: bool = False
) -> Generator:
    """Give the next boot's kernel (and the running one) the NVIDIA module packages of
    ``driver_version``; hold the kernel metapackages and the module metapackage with it. With
    ``move_kernel`` (``gpuhost upgrade``), first move the kernel metapackages to the newest
    kernel the driver can pair, in the same apt command as its module.

    + plan: the package plan's precompiled modules (templates)
    + driver_version: the driver the module packages must suit (pinned by the profile)
    + move_kernel: move the kernel too (only when its module pairs)
    """
    kernels = fact(Kernels)
    target = kernels.next_boot or kernels.running
    flavour = kernel_flavour(target or "")
    if not target or flavour is None:
        raise OperationError(
            f"cannot tell the next boot's kernel (running {kernels.running or 'unknown'}, "
            f"/boot: {', '.join(kernels.boot) or 'none'}): precompiled NVIDIA modules are "
            "packaged per kernel release (VERSION-ABI-FLAVOUR, e.g. 6.8.0-101-generic)"
        )
    meta = module_metapackage(plan, flavour)
    installed = fact(DebPackages)
    metas = [m for m in kernel_metapackages(plan, flavour) if m in installed]
    wanted, note = _wanted(plan, meta, metas, target, kernels.running, driver_version, move_kernel)
    todo = _missing(wanted, installed)
    holds = set(fact(AptHolds))
    keep = sorted(set(metas + [meta]) - holds)
    if not todo:
        if keep and meta in installed:
            yield APT.hold(keep)
        else:
            host.noop(f"NVIDIA modules paired with kernel {target}{note}")
        return
    release = sorted({item.partition("=")[0] for item in todo} & holds)
    install = APT.install(todo, downgrades=True)
    yield hold_kept(release, install) if release else install
    yield APT.hold(sorted(set(metas + [meta])))


def _wanted(
    plan: PrecompiledModules,
    meta: str,
    metas: list[str],
    target: str,
    running: str | None,
    driver: str,
    move_kernel: bool,
) -> tuple[list[str], str]:
    """What to install (``name`` or ``name=version``) and a note on a kernel kept back; the
    host fails when the next boot's kernel has no module package for the driver."""
    flavour = kernel_flavour(target) or ""
    kernels = [k for k in dict.fromkeys([target, running or target]) if k]
    names = {meta, f"linux-image-{flavour}", *metas}
    names.update(n for k in kernels for n in kernel_packages(plan, k))
    records = fact(PackageRecords, packages=sorted(names))
    note = ""
    if move_kernel and _executing():
        newest = newest_kernel(records, f"linux-image-{flavour}")
        if newest and newest != target:
            more = fact(PackageRecords, packages=sorted({meta, *kernel_packages(plan, newest)}))
            moved = pair_kernel(plan, newest, meta, driver, more)
            if moved.problem is None:  # the metapackages at their newest, naming that kernel
                newest_metas = [f"{m}={records[m][0].version}" if records.get(m) else m
                                for m in metas]
                return newest_metas + moved.install, ""
            note = f"; kernel {newest} is not taken: {moved.problem}"
    pairing = pair_kernel(plan, target, meta, driver, records)
    if pairing.problem is not None:
        raise OperationError(
            f"{pairing.problem}; the next boot would have no NVIDIA module: boot a kernel whose "
            "module package this driver satisfies, or provision a profile with a newer driver"
        )
    wanted = list(pairing.install)
    if running and running != target:
        extra = pair_kernel(plan, running, meta, driver, records)
        wanted += [i for i in extra.install if not i.startswith(meta + "=")]
    return wanted, note


def _executing() -> bool:
    return bool(host.state.is_executing)


@operation()
def kernel_excluded(plan: PrecompiledModules) -> Generator:
    """unattended-upgrades' drop-in naming the kernel and module metapackages (of the next
    boot's kernel flavour): it skips held packages already; this says so in its own terms."""
    kernels = fact(Kernels)
    flavour = kernel_flavour(kernels.next_boot or kernels.running or "")
    if flavour is None:
        host.noop("kernel flavour unknown: no kernel drop-in for unattended-upgrades")
        return
    names = [module_metapackage(plan, flavour), *kernel_metapackages(plan, flavour)]
    yield from unattended.excluded._inner(
        packages=names, path=KERNEL_BLACKLIST_FILE, what="kernel metapackages",
        header=KERNEL_HEADER,
    )


def stale_versions(installed: Mapping[str, object], versioned: Mapping[str, str]) -> list[str]:
    """Installed packages of another version of a versioned name (pure): ``versioned`` maps
    the profile's name to the prefix all its versions share."""
    return sorted(
        name
        for name in installed
        for keep, prefix in versioned.items()
        if name.startswith(prefix) and name != keep and name[len(prefix):][:1].isdigit()
    )


@operation()
def stale_versions_removed(versioned: dict[str, str]) -> Generator:
    """Remove what a driver change leaves under another name: a package whose name carries the
    driver version (``nvidia-firmware-580-server-580.178.04`` after a move to 580.199.02) is not
    replaced by the new version's package, and nothing depends on it any more; held with the
    driver before, so released for the removal.

    + versioned: {the profile's name: the prefix every version's name shares}
    """
    stale = stale_versions(fact(DebPackages), versioned)
    if not stale:
        host.noop("no package of another driver version's name")
        return
    yield APT.remove(stale, change_held=True)


def superseded(installed: Mapping[str, object], patterns: Sequence[str],
               keep: Sequence[str]) -> list[str]:
    """Installed packages matching one of the apt name ``patterns`` (``/regex/``), except
    ``keep`` (pure)."""
    regexes = [re.compile(p.strip("/")) for p in patterns]
    return sorted(
        name for name in installed
        if name not in keep and any(r.search(name) for r in regexes)
    )


@operation()
def superseded_removed(patterns: list[str], keep: list[str]) -> Generator:
    """Remove what another driver branch installed and this one neither replaces nor needs (a
    per-branch package whose files do not clash with the new set's, such as
    ``nvidia-kernel-source-580-open`` after a move to 595's unsuffixed names); held with the
    driver before, so released for the removal.

    + patterns: apt name patterns of the other branches' packages (data: superseded_patterns)
    + keep: the profile's own package names (never removed)
    """
    stale = superseded(fact(DebPackages), patterns, keep)
    if not stale:
        host.noop("no package of another driver branch")
        return
    yield APT.remove(stale, change_held=True)
