"""operations/precompiled.py: the commands that pair the next boot's kernel with the NVIDIA module
packages of the pinned driver and hold the kernel with them (facts as objects: the
kernels and apt records are dataclasses, so these cases are Python rather than JSON fixtures).

Records follow the lab's stand-in of Ubuntu's archive (tests/lab/ubuntu_archive.py), which
test_precompiled_apt.py checks against real apt."""

from __future__ import annotations

from typing import Any

import pytest
from provision_harness import run_case
from pyinfra.api import OperationError

from gpuhost.deploys.spec import package_plan
from gpuhost.desired import DesiredState
from gpuhost.facts.host_facts import KernelInfo
from gpuhost.operations import precompiled
from gpuhost.parsers.apt_records import AptRecord, Relation

DRIVER, NEWER = "580.178.04", "580.199.02"
K100, K101 = "6.8.0-100-generic", "6.8.0-101-generic"
RUNNING = "6.18.44-fc-v657"  # a kernel the archive has no modules for (the lab's)
META = "linux-modules-nvidia-580-server-open-generic"
APT = (
    'DEBIAN_FRONTEND=noninteractive apt-get -y -o Dpkg::Options::="--force-confdef" '
    '-o Dpkg::Options::="--force-confold" install --no-install-recommends --allow-downgrades '
)
KERNEL_METAS = ["linux-generic", "linux-headers-generic", "linux-image-generic"]
HOLD = "apt-mark hold " + " ".join(sorted([*KERNEL_METAS, META]))


def _plan(driver: str = DRIVER, os_key: str = "ubuntu-24.04") -> Any:
    spec = DesiredState(
        profile="ubuntu-archive-580-server", source="ubuntu-archive", os=(os_key,),
        driver_version=driver, driver_branch="580", kernel_module="open",
        cuda_versions=("13.0",), cuda_default="13.0",
    )
    return package_plan(spec, os_key).precompiled


def _module(kernel: str, version: str, driver: str) -> dict[str, list[AptRecord]]:
    abi = f"linux-modules-nvidia-580-server-open-{kernel}"
    need = Relation("nvidia-kernel-common-580-server", ">=", driver)
    return {
        abi: [AptRecord(abi, version, [[Relation(f"linux-image-{kernel}")], [need]])],
        META: [AptRecord(META, version, [[Relation(abi, "=", version)], [need]])],
    }


def _records(*parts: dict[str, list[AptRecord]]) -> dict[str, list[AptRecord]]:
    out: dict[str, list[AptRecord]] = {}
    for part in parts:
        for name, records in part.items():
            out.setdefault(name, []).extend(records)
    for records in out.values():  # apt lists newest first
        records.sort(key=lambda r: r.version, reverse=True)
    return out


RELEASE = _module(K100, "6.8.0-100.100", "580.95.05")
SECURITY = _module(K100, "6.8.0-100.100+1", DRIVER)
UPDATES = _module(K101, "6.8.0-101.101", NEWER)
IMAGE = {
    "linux-image-generic": [
        AptRecord("linux-image-generic", "6.8.0.101.101", [[Relation(f"linux-image-{K101}")]]),
        AptRecord("linux-image-generic", "6.8.0.100.100", [[Relation(f"linux-image-{K100}")]]),
    ],
    **{name: [AptRecord(name, "6.8.0.101.101"), AptRecord(name, "6.8.0.100.100")]
       for name in ("linux-generic", "linux-headers-generic")},
}


def _track_key(installed: dict[str, list[str]], flavour_meta: str = META) -> str:
    """The fact key of the records read to find the kernel's track: the installed image
    metapackages and the modules metapackage of each one's track (and of the flavour)."""
    images = [n for n in installed if precompiled.IMAGE_META_RE.match(n)]
    metas = [f"linux-modules-nvidia-580-server-open-{n.removeprefix('linux-image-')}"
             for n in images]
    return "packages=" + ",".join(sorted({*images, *metas, flavour_meta}))


def _facts(installed: dict[str, list[str]], holds: list[str], records: dict[str, str | Any],
           next_boot: str = K100) -> dict[str, Any]:
    """The facts of a case; the track is read from IMAGE's records (and any in ``records``)."""
    kernels = KernelInfo(running=RUNNING, next_boot=next_boot, boot=[next_boot])
    every = _records(IMAGE, *[r for r in records.values() if isinstance(r, dict)])
    return {
        "gpuhost.facts.kernel.Kernels": {"": kernels},
        "deb.DebPackages": {"": installed},
        "gpuhost.facts.apt_pins.AptHolds": {"": holds},
        "gpuhost.facts.precompiled.PackageRecords": {_track_key(installed): every, **records},
    }


def _first_records(kernel: str = K100) -> str:
    """The fact key of the first records read: the metapackages and both kernels' modules."""
    names = {META, *KERNEL_METAS, f"linux-modules-nvidia-580-server-open-{kernel}",
             f"linux-modules-nvidia-580-server-open-{RUNNING}"}
    return "packages=" + ",".join(sorted(names))


BASE = {name: ["6.8.0.100.100"] for name in KERNEL_METAS}


def test_provision_installs_the_next_boot_kernels_module_the_driver_satisfies() -> None:
    """The -security rebuild of 6.8.0-100's module (needs 580.178.04), not the -updates
    metapackage (6.8.0-101, needs 580.199.02): then the kernel and module metapackages held."""
    records = _records(RELEASE, SECURITY, UPDATES, IMAGE)
    facts = _facts(BASE, [], {_first_records(): records})
    commands, _ = run_case(precompiled.modules_paired, {
        "args": {"plan": _plan(), "driver_version": DRIVER}, "facts": facts})
    assert commands == [
        APT + f"linux-modules-nvidia-580-server-open-{K100}=6.8.0-100.100+1 "
        f"{META}=6.8.0-100.100+1",
        HOLD,
    ]


def test_paired_and_held_is_no_change() -> None:
    installed = {**BASE, META: ["6.8.0-100.100+1"],
                 f"linux-modules-nvidia-580-server-open-{K100}": ["6.8.0-100.100+1"]}
    facts = _facts(installed, [*KERNEL_METAS, META], {
        _first_records(): _records(RELEASE, SECURITY, UPDATES)})
    commands, noops = run_case(precompiled.modules_paired, {
        "args": {"plan": _plan(), "driver_version": DRIVER}, "facts": facts})
    assert commands == []
    assert noops == [f"NVIDIA modules paired with kernel {K100}"]


def test_a_next_boot_kernel_without_a_module_for_the_driver_fails_in_one_line() -> None:
    """Someone installed 6.8.0-101 by hand (it is the next boot's): its only module package
    needs 580.199.02; the host fails naming the kernel, the package and the driver it needs."""
    facts = _facts(BASE, [], {_first_records(K101): _records(UPDATES)}, next_boot=K101)
    with pytest.raises(OperationError) as info:
        run_case(precompiled.modules_paired, {
            "args": {"plan": _plan(), "driver_version": DRIVER}, "facts": facts})
    assert str(info.value) == (
        f"no NVIDIA module package for kernel {K101} with driver {DRIVER}: "
        f"linux-modules-nvidia-580-server-open-{K101}: it needs driver {NEWER} or newer; the "
        "next boot would have no NVIDIA module: boot a kernel whose module package this driver "
        "satisfies, or provision a profile with a newer driver"
    )


def test_upgrade_moves_the_kernel_with_its_module_in_one_command() -> None:
    """gpuhost upgrade (move_kernel) at driver 580.199.02: the kernel metapackages and the
    pairing of 6.8.0-101 in one apt command (held ones released for it and held again)."""
    installed = {**BASE, META: ["6.8.0-100.100+1"]}
    second = "packages=" + ",".join(sorted([META, f"linux-modules-nvidia-580-server-open-{K101}"]))
    records = _records(RELEASE, SECURITY, UPDATES, IMAGE)
    facts = _facts(installed, [*KERNEL_METAS, META], {_first_records(): records,
                                                       second: records})
    commands, _ = run_case(precompiled.modules_paired, {
        "args": {"plan": _plan(NEWER), "driver_version": NEWER, "move_kernel": True},
        "facts": facts})
    held = " ".join(sorted([*KERNEL_METAS, META]))
    assert commands == [
        f"apt-mark unhold {held} && {{ {APT}"
        + " ".join(f"{m}=6.8.0.101.101" for m in ("linux-generic", "linux-image-generic",
                                                  "linux-headers-generic")) + " "
        f"linux-modules-nvidia-580-server-open-{K101}=6.8.0-101.101 {META}=6.8.0-101.101; "
        f"rc=$?; apt-mark hold {held}; exit $rc; }}",
        HOLD,
    ]


def test_upgrade_keeps_a_kernel_the_driver_cannot_pair() -> None:
    """move_kernel at the profile's driver: 6.8.0-101 needs 580.199.02, so the kernel stays and
    nothing changes (the note says why)."""
    installed = {**BASE, META: ["6.8.0-100.100+1"],
                 f"linux-modules-nvidia-580-server-open-{K100}": ["6.8.0-100.100+1"]}
    second = "packages=" + ",".join(sorted([META, f"linux-modules-nvidia-580-server-open-{K101}"]))
    records = _records(RELEASE, SECURITY, UPDATES, IMAGE)
    facts = _facts(installed, [*KERNEL_METAS, META], {_first_records(): records,
                                                       second: records})
    commands, noops = run_case(precompiled.modules_paired, {
        "args": {"plan": _plan(), "driver_version": DRIVER, "move_kernel": True},
        "facts": facts})
    assert commands == []
    assert noops == [f"NVIDIA modules paired with kernel {K100}; kernel {K101} is not taken: "
                     f"no NVIDIA module package for kernel {K101} with driver {DRIVER}: "
                     f"linux-modules-nvidia-580-server-open-{K101}: it needs driver {NEWER} "
                     "or newer"]


@pytest.mark.parametrize(("release", "flavour"), [
    ("6.8.0-101-generic", "generic"), ("5.15.0-1050-aws", "aws"),
    ("6.8.0-1015-nvidia-64k", "nvidia-64k"), ("6.18.44-fc-v657", None), ("", None)])
def test_kernel_flavour(release: str, flavour: str | None) -> None:
    assert precompiled.kernel_flavour(release) == flavour


def test_unattended_upgrades_leave_the_kernel_metapackages() -> None:
    facts = {**_facts(BASE, [], {}),
             "gpuhost.facts.files.SmallFile": {"path=" + precompiled.KERNEL_BLACKLIST_FILE: None}}
    commands, _ = run_case(precompiled.kernel_excluded, {"args": {"plan": _plan()},
                                                         "facts": facts})
    upload = next(c for c in commands if isinstance(c, dict))
    assert upload["upload"] == precompiled.KERNEL_BLACKLIST_FILE
    assert '    "^linux-image-generic$";' in upload["lines"]
    assert f'    "^{META}$";' in upload["lines"]
    assert '    "^linux-image-virtual-hwe-24[.]04$";' in upload["lines"]


def test_a_driver_change_removes_the_old_versions_firmware_package() -> None:
    """Seen on the lab's Ubuntu host: after gpuhost upgrade to 580.199.02 the held
    nvidia-firmware-580-server-580.178.04 stayed (a versioned name is another package), and the
    upgrade's validation failed on it ('is 580.178.04, expected 580.199.02')."""
    plan = package_plan(DesiredState(
        profile="t", source="ubuntu-archive", os=("ubuntu-24.04",), driver_version=NEWER,
        driver_branch="580", kernel_module="open", cuda_versions=("13.0",),
        cuda_default="13.0"), "ubuntu-24.04")
    assert plan.versioned == {f"nvidia-firmware-580-server-{NEWER}": "nvidia-firmware-580-server-"}
    installed = {f"nvidia-firmware-580-server-{DRIVER}": ["x"],
                 f"nvidia-firmware-580-server-{NEWER}": ["y"], "nvidia-utils-580-server": ["y"]}
    commands, _ = run_case(precompiled.stale_versions_removed, {
        "args": {"versioned": plan.versioned}, "facts": {"deb.DebPackages": {"": installed}}})
    assert commands == ["DEBIAN_FRONTEND=noninteractive apt-get remove -y -q "
                        f"--allow-change-held-packages nvidia-firmware-580-server-{DRIVER}"]
    del installed[f"nvidia-firmware-580-server-{DRIVER}"]
    commands, noops = run_case(precompiled.stale_versions_removed, {
        "args": {"versioned": plan.versioned}, "facts": {"deb.DebPackages": {"": installed}}})
    assert commands == [] and noops == ["no package of another driver version's name"]


def test_a_move_to_the_unsuffixed_names_removes_the_old_branchs_leftovers() -> None:
    """580 -> 595 from NVIDIA's Ubuntu repository: the per-branch packages no unsuffixed one
    replaces (nvidia-kernel-source-580-open, nvidia-firmware-580-<version>) are removed after
    the install, held or not; the new set and other sources' names are left alone."""
    patterns = ["/^(nvidia-kernel-source|libnvidia-compute)-[0-9]+(-open)?$/",
                "/^nvidia-firmware-[0-9]+-[0-9][0-9.]*$/"]
    installed = {"nvidia-kernel-source-580-open": ["x"], "nvidia-firmware-580-580.178.04": ["x"],
                 "nvidia-kernel-source-open": ["y"], "nvidia-firmware": ["y"],
                 "libnvidia-compute-580-server": ["z"]}
    commands, _ = run_case(precompiled.superseded_removed, {
        "args": {"patterns": patterns, "keep": ["nvidia-kernel-source-open"]},
        "facts": {"deb.DebPackages": {"": installed}}})
    assert commands == ["DEBIAN_FRONTEND=noninteractive apt-get remove -y -q "
                        "--allow-change-held-packages nvidia-firmware-580-580.178.04 "
                        "nvidia-kernel-source-580-open"]
    commands, noops = run_case(precompiled.superseded_removed, {
        "args": {"patterns": patterns, "keep": []},
        "facts": {"deb.DebPackages": {"": {"nvidia-firmware": ["y"]}}}})
    assert commands == [] and noops == ["no package of another driver branch"]


# A 22.04 host on the HWE kernel (linux-generic-hwe-22.04: 6.8 kernels) that also kept the GA
# metapackages (5.15 kernels), as a host moved from GA to HWE does. ubuntu-drivers names the
# modules metapackage after the image metapackage that brings the running kernel
# (UbuntuDrivers/detect.py get_linux_modules_metapackage: linux-modules-nvidia-<flavour>-
# <linux-image-META without linux-image->), so the HWE kernel's is
# linux-modules-nvidia-580-server-open-generic-hwe-22.04, which follows 6.8 kernels; the GA
# one (-open-generic) follows 5.15's and must be neither installed nor moved for it.
HWE = "generic-hwe-22.04"
META_HWE = f"linux-modules-nvidia-580-server-open-{HWE}"
GA515, GA515_NEXT = "5.15.0-200-generic", "5.15.0-201-generic"
HWE_METAS = [f"linux-{HWE}", f"linux-image-{HWE}", f"linux-headers-{HWE}"]


def _meta_records(meta: str, kernel: str, version: str, driver: str) -> dict[str, list[AptRecord]]:
    """The ABI module package of ``kernel`` and the modules metapackage ``meta`` naming it."""
    abi = f"linux-modules-nvidia-580-server-open-{kernel}"
    need = Relation("nvidia-kernel-common-580-server", ">=", driver)
    return {abi: [AptRecord(abi, version, [[Relation(f"linux-image-{kernel}")], [need]])],
            meta: [AptRecord(meta, version, [[Relation(abi, "=", version)], [need]])]}


def _image(track: str, *kernels: tuple[str, str]) -> dict[str, list[AptRecord]]:
    """The track's metapackages, newest first: (version, kernel release) each."""
    image = f"linux-image-{track}"
    out = {image: [AptRecord(image, v, [[Relation(f"linux-image-{k}")]]) for v, k in kernels]}
    for name in (f"linux-{track}", f"linux-headers-{track}"):
        out[name] = [AptRecord(name, v) for v, _ in kernels]
    return out


JAMMY_HWE = _records(
    _meta_records(META_HWE, K100, "6.8.0-100.100~22.04.1+1", DRIVER),
    _meta_records(META_HWE, K101, "6.8.0-101.101~22.04.1", NEWER),
    _meta_records(META, GA515, "5.15.0-200.200+1", DRIVER),
    _meta_records(META, GA515_NEXT, "5.15.0-201.201", NEWER),
    _image(HWE, ("6.8.0.101.101~22.04.1", K101), ("6.8.0.100.100~22.04.1", K100)),
    _image("generic", ("5.15.0.201.201", GA515_NEXT), ("5.15.0.200.200", GA515)),
)
JAMMY_INSTALLED = {**{m: ["6.8.0.100.100~22.04.1"] for m in HWE_METAS},
                   **{m: ["5.15.0.200.200"] for m in KERNEL_METAS}}


def _jammy_facts(installed: dict[str, list[str]], holds: list[str],
                 more: dict[str, Any]) -> dict[str, Any]:
    first = {META_HWE, *KERNEL_METAS, *HWE_METAS, f"linux-modules-nvidia-580-server-open-{K100}",
             f"linux-modules-nvidia-580-server-open-{RUNNING}"}
    records = {"packages=" + ",".join(sorted(first)): JAMMY_HWE, **more}
    facts = _facts(installed, holds, records)
    facts["gpuhost.facts.precompiled.PackageRecords"][_track_key(installed)] = JAMMY_HWE
    return facts


def test_an_hwe_kernel_gets_the_modules_metapackage_of_its_own_track() -> None:
    """22.04 on the HWE kernel 6.8.0-100: the module of that kernel with the -generic-hwe-22.04
    metapackage, GA and HWE kernel metapackages and that metapackage held; the GA modules
    metapackage (which would follow 5.15 kernels) is not installed."""
    facts = _jammy_facts(JAMMY_INSTALLED, [], {})
    commands, _ = run_case(precompiled.modules_paired, {
        "args": {"plan": _plan(os_key="ubuntu-22.04"), "driver_version": DRIVER},
        "facts": facts})
    assert commands == [
        APT + f"linux-modules-nvidia-580-server-open-{K100}=6.8.0-100.100~22.04.1+1 "
        f"{META_HWE}=6.8.0-100.100~22.04.1+1",
        "apt-mark hold " + " ".join(sorted([*KERNEL_METAS, *HWE_METAS, META_HWE])),
    ]


def test_upgrade_moves_the_hwe_track_and_leaves_the_ga_kernel() -> None:
    """gpuhost upgrade at 580.199.02 on that host: the HWE metapackages to 6.8.0-101 with its
    module in one command; linux-generic (5.15) stays where it is, held."""
    installed = {**JAMMY_INSTALLED, META_HWE: ["6.8.0-100.100~22.04.1+1"]}
    held = sorted([*KERNEL_METAS, *HWE_METAS, META_HWE])
    second = "packages=" + ",".join(sorted([META_HWE,
                                            f"linux-modules-nvidia-580-server-open-{K101}"]))
    facts = _jammy_facts(installed, held, {second: JAMMY_HWE})
    commands, _ = run_case(precompiled.modules_paired, {
        "args": {"plan": _plan(NEWER, "ubuntu-22.04"), "driver_version": NEWER,
                 "move_kernel": True}, "facts": facts})
    moved = " ".join(sorted([*HWE_METAS, META_HWE]))  # released for the command, held again
    assert commands == [
        f"apt-mark unhold {moved} && {{ {APT}"
        + " ".join(f"{m}=6.8.0.101.101~22.04.1" for m in HWE_METAS) + " "
        f"linux-modules-nvidia-580-server-open-{K101}=6.8.0-101.101~22.04.1 "
        f"{META_HWE}=6.8.0-101.101~22.04.1; rc=$?; apt-mark hold {moved}; exit $rc; }}",
        "apt-mark hold " + " ".join(held),
    ]


def test_tracks_are_the_image_metapackages_that_bring_the_kernel() -> None:
    """Read from the installed version's record (apt-cache show lists every version): GA and
    HWE both at 6.8.0-100 on a fresh 24.04 give both tracks, HWE first (as ubuntu-drivers
    orders them); a track whose installed version brings another kernel is not one."""
    records = _records(_image("generic-hwe-24.04", ("6.8.0.101.101", K101),
                              ("6.8.0.100.100", K100)), IMAGE)
    installed = {"linux-image-generic": ["6.8.0.100.100"],
                 "linux-image-generic-hwe-24.04": ["6.8.0.100.100"],
                 f"linux-image-{K100}": ["6.8.0-100.100"], "linux-image-extra-virtual": ["1"]}
    assert precompiled.kernel_tracks(K100, installed, records) == ["generic-hwe-24.04", "generic"]
    installed["linux-image-generic-hwe-24.04"] = ["6.8.0.101.101"]
    assert precompiled.kernel_tracks(K100, installed, records) == ["generic"]
    assert precompiled.kernel_tracks(K101, installed, records) == ["generic-hwe-24.04"]
    assert precompiled.kernel_tracks(K101, {f"linux-image-{K101}": ["x"]}, records) == []


def test_a_track_without_its_own_modules_metapackage_takes_the_flavours() -> None:
    """linux-image-virtual brings a -generic kernel; where the sources offer no
    linux-modules-nvidia-...-virtual, the generic modules metapackage serves it (and where
    they offer one, that one)."""
    plan = _plan()
    offered = _records(SECURITY)
    assert precompiled.choose_meta(plan, ["virtual"], "generic", offered) == META
    virtual = "linux-modules-nvidia-580-server-open-virtual"
    offered[virtual] = [AptRecord(virtual, "6.8.0-100.100+1")]
    assert precompiled.choose_meta(plan, ["virtual"], "generic", offered) == virtual
