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
   offers them) are installed at the newest version the pinned driver satisfies, with the
   modules metapackage of the kernel's track at the version naming that kernel. The track is
   what ubuntu-drivers names it after: the installed kernel image metapackage that brings that
   kernel, without ``linux-image-`` (``generic``; ``generic-hwe-22.04`` on a 22.04 host on the
   HWE kernel, whose modules metapackage ``linux-modules-nvidia-580-server-open-generic-hwe-22.04``
   follows the 6.x kernels, where ``...-open-generic`` would follow 5.15's);
2. the kernel metapackages (``linux-generic``, ``linux-image-generic``, ``linux-headers-generic``,
   the HWE ones, ``-virtual``) and the module metapackage are held: ``apt-get upgrade``,
   ``dist-upgrade`` and unattended-upgrades (which skips held packages, and which gpuhost's
   drop-in also tells to leave them) never bring a kernel gpuhost has not paired;
3. ``gpuhost upgrade`` (``move_kernel``) moves the track's kernel metapackages to the newest
   kernel of that track whose module package the target driver satisfies, in the same apt
   command as that module: apt installs both or neither.

Holding the kernel keeps kernel security updates out until gpuhost moves the kernel: the price
of never booting without the GPU; ``gpuhost upgrade`` to the same or a newer profile takes the
newest kernel the driver can pair.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterable, Mapping, Sequence
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
#: a kernel image metapackage (``linux-image-generic-hwe-22.04``): neither a release's image
#: (``linux-image-6.8.0-101-generic``, ``linux-image-unsigned-...``) nor ``linux-image-extra-*``
IMAGE_META_RE = re.compile(r"^linux-image-(?!unsigned-|extra-)(?P<track>[a-z][a-z0-9.+-]*)$")
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


def module_metapackage(plan: PrecompiledModules, track: str) -> str:
    """The modules metapackage following the kernels of ``track`` (``generic-hwe-22.04``)."""
    return plan.flavour.format(kernel_track=track)


def track_metapackages(track: str) -> list[str]:
    """The kernel metapackages of one track."""
    return [f"linux-{track}", f"linux-image-{track}", f"linux-headers-{track}"]


def kernel_metapackages(plan: PrecompiledModules, flavour: str, track: str = "") -> list[str]:
    """The kernel metapackages of ``flavour`` (GA and HWE; a generic kernel also comes from
    ``-virtual``) and of ``track``: those that can bring a kernel of that flavour."""
    flavours = [flavour, "virtual"] if flavour == "generic" else [flavour]
    names = [t.format(kernel_flavour=f) for f in flavours for t in plan.kernel_metapackages]
    return list(dict.fromkeys(names + (track_metapackages(track) if track else [])))


def image_metapackages(installed: Iterable[str]) -> list[str]:
    """The kernel image metapackages among ``installed`` names."""
    return sorted(name for name in installed if IMAGE_META_RE.match(name))


def kernel_tracks(
    release: str, installed: Mapping[str, Sequence[str]], records: Mapping[str, Sequence[AptRecord]]
) -> list[str]:
    """The tracks whose installed image metapackage depends on kernel ``release``'s image, the
    one ubuntu-drivers takes first (the greatest name: ``generic-hwe-24.04`` before ``generic``
    while both bring the same kernel) (pure)."""
    images = {f"linux-image-{release}", f"linux-image-unsigned-{release}"}
    tracks = []
    for name in image_metapackages(installed):
        versions = installed.get(name) or []
        record = next((r for r in records.get(name) or [] if r.version in versions), None)
        if record is not None and _names(record) & images:
            tracks.append(name.removeprefix("linux-image-"))
    return sorted(tracks, reverse=True)


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


@dataclass(frozen=True)
class NextBoot:
    """The kernel precompiled modules are paired with, and the names that follow it."""

    release: str  # the next boot's kernel (or the running one): 6.8.0-101-generic
    running: str | None
    flavour: str  # generic
    #: the track of the installed image metapackage that brings ``release`` (``generic-hwe-22.04``;
    #: the flavour when none does: a kernel installed by its own name)
    track: str
    meta: str  # the modules metapackage (of the track; the flavour's where the track has none)


def choose_meta(plan: PrecompiledModules, tracks: Sequence[str], flavour: str,
                records: Mapping[str, Sequence[AptRecord]]) -> str:
    """The modules metapackage of the first track the sources offer one for; the flavour's when
    none (a ``virtual`` kernel: Canonical's generic modules serve it) (pure)."""
    for track in tracks:
        if records.get(module_metapackage(plan, track)):
            return module_metapackage(plan, track)
    return module_metapackage(plan, flavour)


def _next_boot(plan: PrecompiledModules) -> NextBoot | None:
    kernels = fact(Kernels)
    release = kernels.next_boot or kernels.running
    flavour = kernel_flavour(release or "")
    if not release or flavour is None:
        return None
    images = image_metapackages(fact(DebPackages))
    tracks: list[str] = []
    meta = module_metapackage(plan, flavour)
    if images:
        metas = [module_metapackage(plan, name.removeprefix("linux-image-")) for name in images]
        records = fact(PackageRecords, packages=sorted({*images, *metas, meta}))
        tracks = kernel_tracks(release, fact(DebPackages), records)
        meta = choose_meta(plan, tracks, flavour, records)
    return NextBoot(release, kernels.running, flavour, (tracks or [flavour])[0], meta)


@operation()
def modules_paired(
    plan: PrecompiledModules, driver_version: str, move_kernel: bool = False
) -> Generator:
    """Give the next boot's kernel (and the running one) the NVIDIA module packages of
    ``driver_version``; hold the kernel metapackages and the module metapackage with it. With
    ``move_kernel`` (``gpuhost upgrade``), first move the kernel's track to the newest kernel
    the driver can pair, in the same apt command as its module.

    + plan: the package plan's precompiled modules (templates)
    + driver_version: the driver the module packages must suit (pinned by the profile)
    + move_kernel: move the kernel too (only when its module pairs)
    """
    boot = _next_boot(plan)
    if boot is None:
        kernels = fact(Kernels)
        raise OperationError(
            f"cannot tell the next boot's kernel (running {kernels.running or 'unknown'}, "
            f"/boot: {', '.join(kernels.boot) or 'none'}): precompiled NVIDIA modules are "
            "packaged per kernel release (VERSION-ABI-FLAVOUR, e.g. 6.8.0-101-generic)"
        )
    installed = fact(DebPackages)
    metas = [m for m in kernel_metapackages(plan, boot.flavour, boot.track) if m in installed]
    wanted, note = _wanted(plan, boot, metas, driver_version, move_kernel)
    todo = _missing(wanted, installed)
    holds = set(fact(AptHolds))
    paired = boot.meta in installed or any(i.startswith(boot.meta + "=") for i in wanted)
    held = sorted(set(metas + ([boot.meta] if paired else [])))
    if not todo:
        if set(held) - holds:
            yield APT.hold(sorted(set(held) - holds))
        else:
            host.noop(f"NVIDIA modules paired with kernel {boot.release}{note}")
        return
    release = sorted({item.partition("=")[0] for item in todo} & holds)
    install = APT.install(todo, downgrades=True)
    yield hold_kept(release, install) if release else install
    yield APT.hold(held)


def _wanted(
    plan: PrecompiledModules, boot: NextBoot, metas: list[str], driver: str, move_kernel: bool
) -> tuple[list[str], str]:
    """What to install (``name`` or ``name=version``) and a note on a kernel kept back; the
    host fails when the next boot's kernel has no module package for the driver."""
    kernels = [k for k in dict.fromkeys([boot.release, boot.running or boot.release]) if k]
    image = f"linux-image-{boot.track}"
    names = {boot.meta, image, *metas}
    names.update(n for k in kernels for n in kernel_packages(plan, k))
    records = fact(PackageRecords, packages=sorted(names))
    note = ""
    if move_kernel and _executing():
        newest = newest_kernel(records, image)
        if newest and newest != boot.release:
            more = fact(PackageRecords,
                        packages=sorted({boot.meta, *kernel_packages(plan, newest)}))
            moved = pair_kernel(plan, newest, boot.meta, driver, more)
            if moved.problem is None:  # the track's metapackages at their newest, naming it
                track = [m for m in track_metapackages(boot.track) if m in metas]
                return [f"{m}={records[m][0].version}" if records.get(m) else m
                        for m in track] + moved.install, ""
            note = f"; kernel {newest} is not taken: {moved.problem}"
    pairing = pair_kernel(plan, boot.release, boot.meta, driver, records)
    if pairing.problem is not None:
        raise OperationError(
            f"{pairing.problem}; the next boot would have no NVIDIA module: boot a kernel whose "
            "module package this driver satisfies, or provision a profile with a newer driver"
        )
    wanted = list(pairing.install)
    if boot.running and boot.running != boot.release:
        extra = pair_kernel(plan, boot.running, boot.meta, driver, records)
        wanted += [i for i in extra.install if not i.startswith(boot.meta + "=")]
    return wanted, note


def _executing() -> bool:
    return bool(host.state.is_executing)


@operation()
def kernel_excluded(plan: PrecompiledModules) -> Generator:
    """unattended-upgrades' drop-in naming the kernel and module metapackages (of the next
    boot's kernel flavour and track): it skips held packages already; this says so in its own
    terms."""
    boot = _next_boot(plan)
    if boot is None:
        host.noop("kernel flavour unknown: no kernel drop-in for unattended-upgrades")
        return
    names = [boot.meta, *kernel_metapackages(plan, boot.flavour, boot.track)]
    yield from unattended.excluded._inner(
        packages=list(dict.fromkeys(names)), path=KERNEL_BLACKLIST_FILE,
        what="kernel metapackages", header=KERNEL_HEADER,
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
