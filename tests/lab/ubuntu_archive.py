"""A local stand-in of Ubuntu's own archive (restricted): the "-server" NVIDIA driver with
Canonical's precompiled kernel modules, and kernels, in three pockets (release, -security,
-updates), one version of each package per pocket, as the real archive keeps them.

THE PACKAGES ARE EMPTY STAND-INS built with dpkg-deb (tests/lab/aptrepo.py's builder): names,
versions and Depends/Provides as read on packages.ubuntu.com and in the sources of
src/gpuhost/data/package_sets.yaml (ubuntu-archive), a version marker file each
(/usr/share/gpuhost-lab/<package>.version), and only what gpuhost reads:

- a kernel image ``linux-image-<abi>-<flavour>`` carries ``/boot/vmlinuz-<release>`` (a marker,
  what the audit and provision read as "installed kernel"; the newest is the next boot's, as
  gpuhost's kernel parser picks it without a /vmlinuz link) and ``/lib/modules/<release>/``;
- ``linux-modules-nvidia-580-server[-open]-<release>`` a marker under
  ``/lib/modules/<release>/kernel/nvidia-580srv/``;
- ``nvidia-utils-580-server`` /usr/bin/nvidia-smi answering as without a loaded module, and
  ``nvidia-compute-utils-580-server`` nvidia-persistenced and its unit (tests/lab/
  nvidia_ubuntu.py's, which the lab's GPU emulator takes the place of).

Relations copied from the real archive (packages.ubuntu.com, 2026-11): the module packages carry
the kernel's version, the ABI package depends on the kernel image and on
``nvidia-kernel-common-580-server (>= D)`` with D the driver of the pocket it was built in, the
flavour metapackage on its ABI package ``(= version)`` and the same driver;
``nvidia-kernel-common-580-server`` provides the virtual ``nvidia-kernel-common-580-server-<D>``
that the userspace libraries depend on; the firmware package's name carries the version. The
relations of nvidia-headless-no-dkms / libnvidia-compute / nvidia-utils were not read: assumed
(the compute packages at one version, through the virtual name).

The kernels are Ubuntu-named (``6.8.0-100-generic`` on 24.04, ``5.15.0-200-generic`` on 22.04),
in tracks (``SERIES``) as Ubuntu ships them: the GA kernel (``linux-generic``), and on 22.04 also
the HWE kernel (``linux-generic-hwe-22.04``: 6.8.0-100-generic, package versions ending
``~22.04.1``, as jammy's 6.8 kernels carry), whose precompiled modules come with the metapackage
``linux-modules-nvidia-580-server[-open]-generic-hwe-22.04`` (ubuntu-drivers names the modules
metapackage after the kernel image metapackage: UbuntuDrivers/detect.py
get_linux_modules_metapackage; ``ubuntu-drivers list`` prints e.g.
``linux-modules-nvidia-460-server-generic-hwe-20.04`` on a 20.04 HWE host), while
``...-generic`` follows the GA kernels. The HWE track sits in the same pockets as GA here (the
real one arrived in -updates/-security; only the pairing is modelled). They are not this
machine's kernels: lab hosts run this machine's kernel, which is not in Ubuntu's
VERSION-ABI-FLAVOUR form (``uname -r``: 6.18.44-fc-v657 here), and "the next boot's kernel" is
read from /boot, which the stand-in images fill. So the running kernel never has a module
package (as on a host booted into a kernel the archive dropped); the /boot kernels do.

Pockets (``POCKETS``), for each track:
  release    driver 580.95.05, kernel ABI 100 (22.04: 200; its HWE track 100) and its modules
             (need >= 580.95.05)
  -security  driver 580.178.04 (the built-in profile ubuntu-archive-580-server's), the same
             kernel's modules rebuilt (+1) needing >= 580.178.04
  -updates   driver 580.199.02 (NOT a real release: a version newer than the profile's, which the
             lab's second profile pins), kernel ABI 101 (22.04: 201; HWE 101) whose modules need
             it: the kernel `apt-get dist-upgrade` would take and whose module the pinned driver
             refuses

The Ubuntu lab shape (tests/lab/shape_ubuntu.py) serves them: its archive builder puts
:func:`stand_ins` into the pockets of both releases, in the component restricted (layout there).
:func:`build` builds the same archive without a lab, for real apt with ``-o Dir=`` (tests/
provision/test_precompiled_apt.py); :func:`sources_text` is its deb822 entry.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from .aptrepo import KEY_NAME, SMI_NO_DRIVER, StandIn, signing
from .nvidia_ubuntu import PERSISTENCED_NO_DRIVER, PERSISTENCED_UNIT

COMPONENT = "restricted"
BRANCH = "580"
#: OS version -> (codename, the kernel version of its GA track)
RELEASES = {"22.04": ("jammy", "5.15.0"), "24.04": ("noble", "6.8.0")}
FLAVOUR = "generic"


@dataclass(frozen=True)
class Track:
    """One kernel track of a release: its image metapackage's suffix, kernel version and the
    release pocket's ABI, and the suffix of its package versions (``~22.04.1`` for HWE)."""

    name: str  # "generic", "generic-hwe-22.04"
    kversion: str
    abi0: int
    suffix: str = ""


#: OS version -> its kernel tracks, GA first
SERIES = {
    "22.04": (Track(FLAVOUR, "5.15.0", 200), Track(f"{FLAVOUR}-hwe-22.04", "6.8.0", 100,
                                                   "~22.04.1")),
    "24.04": (Track(FLAVOUR, "6.8.0", 100),),
}
#: pocket suffix -> the driver (upstream) of that pocket, and the kernel ABI offset it carries
#: (None: the pocket rebuilds the release kernel's modules only)
POCKETS = {"": ("580.95.05", 0), "-security": ("580.178.04", None), "-updates": ("580.199.02", 1)}
SECURITY_DRIVER = POCKETS["-security"][0]
UPDATES_DRIVER = POCKETS["-updates"][0]


@dataclass(frozen=True)
class Archive:
    """What a lab host needs to use the archive."""

    root: Path  # served over http: <url>/ubuntu is the archive
    codename: str
    suites: tuple[str, ...]
    key_path: Path
    #: what a fresh Ubuntu host has: the kernel metapackage at the release pocket's version
    base_packages: tuple[str, ...]
    kernels: tuple[str, ...]  # the kernel releases, release pocket's first


def _revision(upstream: str, os_version: str) -> str:
    return f"{upstream}-0ubuntu0.{os_version}.1"


def driver_packages(upstream: str, os_version: str) -> list[StandIn]:
    """The -server driver's binaries at one version (those gpuhost installs or pins)."""
    v = _revision(upstream, os_version)
    b = BRANCH
    common = f"nvidia-kernel-common-{b}-server-{upstream}"  # virtual, provided by kernel-common
    compute = (f"libnvidia-compute-{b}-server (= {v}), nvidia-compute-utils-{b}-server (= {v}), "
               f"nvidia-kernel-common-{b}-server (= {v}), nvidia-firmware-{b}-server-{upstream}")
    return [
        StandIn(f"nvidia-kernel-common-{b}-server", v, provides=common),
        StandIn(f"nvidia-firmware-{b}-server-{upstream}", v),
        StandIn(f"nvidia-kernel-source-{b}-server", v),
        StandIn(f"nvidia-kernel-source-{b}-server-open", v),
        StandIn(f"libnvidia-compute-{b}-server", v, depends=common),
        StandIn(f"libnvidia-cfg1-{b}-server", v, depends=common),
        StandIn(f"libnvidia-extra-{b}-server", v, depends=common),
        StandIn(f"nvidia-compute-utils-{b}-server", v,
                depends=f"{common}, libnvidia-compute-{b}-server (= {v})",
                files={"/usr/bin/nvidia-persistenced": PERSISTENCED_NO_DRIVER,
                       "/lib/systemd/system/nvidia-persistenced.service": PERSISTENCED_UNIT}),
        StandIn(f"nvidia-utils-{b}-server", v, depends=common,
                files={"/usr/bin/nvidia-smi": SMI_NO_DRIVER}),
        StandIn(f"nvidia-headless-no-dkms-{b}-server", v, depends=compute),
        StandIn(f"nvidia-headless-no-dkms-{b}-server-open", v, depends=compute),
    ]


def kernel_packages(track: Track, abi: int) -> list[StandIn]:
    """One kernel release of ``track``: its image and headers, and the track's metapackages."""
    release = f"{track.kversion}-{abi}-{FLAVOUR}"
    kv = f"{track.kversion}-{abi}.{abi}{track.suffix}"
    mv = f"{track.kversion}.{abi}.{abi}{track.suffix}"
    t = track.name
    return [
        StandIn(f"linux-image-{release}", kv, section="kernel", files={
            f"/boot/vmlinuz-{release}": f"gpuhost lab stand-in kernel image {release}\n",
            f"/lib/modules/{release}/modules.gpuhost-lab": f"{release}\n"}),
        StandIn(f"linux-headers-{release}", kv, section="devel"),
        StandIn(f"linux-image-{t}", mv, depends=f"linux-image-{release}", section="kernel"),
        StandIn(f"linux-headers-{t}", mv, depends=f"linux-headers-{release}", section="kernel"),
        StandIn(f"linux-{t}", mv, section="kernel", depends=(
            f"linux-image-{t} (= {mv}), linux-headers-{t} (= {mv})")),
    ]


def module_packages(release: str, version: str, driver: str, track: str = FLAVOUR
                    ) -> list[StandIn]:
    """linux-modules-nvidia-580-server[-open]-<release> (+ objects, signatures) at the kernel
    package ``version``, and the track's modules metapackages at it, needing ``driver``."""
    b = BRANCH
    need = f"nvidia-kernel-common-{b}-server (>= {driver})"
    image = f"linux-image-{release} | linux-image-unsigned-{release}"
    marker = f"/lib/modules/{release}/kernel/nvidia-{b}srv/"
    objects = f"linux-objects-nvidia-{b}-server-{release}"
    signatures = f"linux-signatures-nvidia-{release}"
    return [
        StandIn(objects, version, section="kernel"),
        StandIn(signatures, version, section="kernel"),
        StandIn(f"linux-modules-nvidia-{b}-server-{release}", version, section="kernel",
                depends=f"{image}, {objects} (= {version}), {signatures} (= {version}), {need}",
                files={marker + "nvidia.gpuhost-lab": f"proprietary {driver}\n"}),
        StandIn(f"linux-modules-nvidia-{b}-server-open-{release}", version, section="kernel",
                depends=f"{image}, {need}",
                files={marker + "nvidia-open.gpuhost-lab": f"open {driver}\n"}),
        StandIn(f"linux-modules-nvidia-{b}-server-{track}", version, section="kernel",
                depends=f"linux-modules-nvidia-{b}-server-{release} (= {version}), {need}"),
        StandIn(f"linux-modules-nvidia-{b}-server-open-{track}", version, section="kernel",
                depends=f"linux-modules-nvidia-{b}-server-open-{release} (= {version}), {need}"),
    ]


def pocket_packages(os_version: str) -> dict[str, list[StandIn]]:
    """Pocket suffix -> its packages (one version of each name per pocket)."""
    out: dict[str, list[StandIn]] = {}
    for pocket, (driver, offset) in POCKETS.items():
        pkgs = driver_packages(driver, os_version)
        for track in SERIES[os_version]:
            abi0 = track.abi0
            if offset is None:  # the release kernel's modules rebuilt for this pocket's driver
                abi, version = abi0, f"{track.kversion}-{abi0}.{abi0}{track.suffix}+1"
            else:
                abi = abi0 + offset
                version = f"{track.kversion}-{abi}.{abi}{track.suffix}"
                pkgs += kernel_packages(track, abi)
            release = f"{track.kversion}-{abi}-{FLAVOUR}"
            pkgs += module_packages(release, version, driver, track.name)
        out[pocket] = pkgs
    return out


def track_of(os_version: str, name: str = FLAVOUR) -> Track:
    """The release's kernel track ``name`` (``generic``, ``generic-hwe-22.04``)."""
    return next(t for t in SERIES[os_version] if t.name == name)


def kernel_releases(os_version: str, track: str = FLAVOUR) -> tuple[str, ...]:
    """The track's kernel releases (uname -r form), the release pocket's first."""
    t = track_of(os_version, track)
    return tuple(f"{t.kversion}-{t.abi0 + o}-{FLAVOUR}" for _, o in POCKETS.values()
                 if o is not None)


def sources_text(url: str, codename: str, key_path: str) -> str:
    """The deb822 ``ubuntu.sources`` entry for the stand-in (``url``: where ``<root>`` is
    served; ``key_path``: the keyring on the host)."""
    suites = " ".join(codename + p for p in POCKETS)
    return (f"Types: deb\nURIs: {url.rstrip('/')}/ubuntu\nSuites: {suites}\n"
            f"Components: {COMPONENT}\nSigned-By: {key_path}\n")


def stand_ins(codename: str) -> dict[str, list[StandIn]]:
    """Suite -> its stand-ins, for the Ubuntu shape's archive (shape_ubuntu.ARCHIVE_STAND_INS)."""
    os_version = next(v for v, (c, _) in RELEASES.items() if c == codename)
    return {codename + pocket: pkgs for pocket, pkgs in pocket_packages(os_version).items()}


def build(root: Path, arch: str, os_version: str, track: str = FLAVOUR) -> Archive:
    """(Re)build the archive under ``root`` as the Ubuntu shape serves it (its builder, these
    stand-ins, a new lab key), for tests that use it without a lab (real apt, -o Dir=); a fresh
    host of it is on ``track``'s release pocket kernel."""
    from .shape_ubuntu import build_archive  # it imports this module

    shutil.rmtree(root, ignore_errors=True)
    with signing(root) as sign:
        build_archive(root, arch, sign)
    return described(root, os_version, track)


def described(root: Path, os_version: str, track: str = FLAVOUR) -> Archive:
    """The archive built under ``root`` (every release is in it) as a host of ``os_version`` on
    ``track`` uses it."""
    codename = RELEASES[os_version][0]
    t = track_of(os_version, track)
    mv = f"{t.kversion}.{t.abi0}.{t.abi0}{t.suffix}"
    return Archive(
        root=root,
        codename=codename,
        suites=tuple(codename + p for p in POCKETS),
        key_path=root / f"{KEY_NAME}.gpg",
        base_packages=(f"linux-{track}={mv}", f"linux-image-{track}={mv}",
                       f"linux-headers-{track}={mv}"),
        kernels=kernel_releases(os_version, track),
    )
