"""The kernel and its precompiled NVIDIA modules move together: real apt (this machine's apt 2.6,
``apt-get -s``, nothing installed) against the lab's stand-in of Ubuntu's archive
(tests/lab/ubuntu_archive.py: release, -security and -updates pockets; -updates offers a kernel
whose module package needs a newer driver than the profile pins), with gpuhost's own
preferences file and holds for ubuntu-archive-580-server, and a dpkg status of a host that
provision left on the release pocket's kernel.

platforms.md section 4 found the hole with a hand-made index: with the driver pinned and held,
``apt-get dist-upgrade`` installs the new kernel and keeps its module package back. These tests
show it on the stand-in archive, then that gpuhost's holds keep the kernel, that the pairing
gpuhost computes from ``apt-cache show`` installs the next boot's module at the version the
pinned driver satisfies, and that moving to a newer driver takes the new kernel and its module
in one apt command.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from lab import ubuntu_archive as ua

from gpuhost.deploys.spec import package_plan
from gpuhost.desired import DesiredState
from gpuhost.operations.apt_pin import render_preferences
from gpuhost.operations.precompiled import (
    choose_meta,
    image_metapackages,
    kernel_metapackages,
    kernel_tracks,
    module_metapackage,
    newest_kernel,
    pair_kernel,
)
from gpuhost.parsers.apt_records import parse_apt_show

pytestmark = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("apt-get", "apt-ftparchive", "dpkg-deb", "gpg")),
    reason="needs apt-get, apt-ftparchive, dpkg-deb and gpg (Debian/Ubuntu packages apt, "
    "apt-utils, dpkg, gpg)",
)

OS_VERSION = "24.04"
PROFILE_DRIVER = ua.SECURITY_DRIVER  # ubuntu-archive-580-server's 580.178.04
K100, K101 = ua.kernel_releases(OS_VERSION)
FLAVOUR_META = "linux-modules-nvidia-580-server-open-generic"


def _spec(driver: str) -> DesiredState:
    return DesiredState(
        profile="ubuntu-archive-580-server", source="ubuntu-archive", os=("ubuntu-24.04",),
        driver_version=driver, driver_branch="580", kernel_module="open",
        cuda_versions=("13.0",), cuda_default="13.0",
    )


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> ua.Archive:
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                          check=True).stdout.strip()
    return ua.build(tmp_path_factory.mktemp("ubuntu-archive"), arch, OS_VERSION)


class AptRoot:
    """apt with its own configuration, lists and dpkg status (``-o Dir=``), no lock."""

    def __init__(self, path: Path, archive: ua.Archive) -> None:
        self.path = path
        for sub in ("etc/apt/preferences.d", "etc/apt/sources.list.d", "etc/apt/apt.conf.d",
                    "var/lib/dpkg", "var/lib/apt/lists/partial", "var/cache/apt/archives/partial"):
            (path / sub).mkdir(parents=True, exist_ok=True)
        (path / "etc/apt/sources.list.d/ubuntu.sources").write_text(ua.sources_text(
            f"file:{archive.root}", archive.codename, str(archive.key_path)))
        self.records = self._index(archive)

    def _index(self, archive: ua.Archive) -> dict[tuple[str, str], str]:
        out = {}
        for packages in sorted(archive.root.glob("ubuntu/dists/*/restricted/binary-*/Packages")):
            for stanza in packages.read_text().split("\n\n"):
                fields = dict(
                    line.split(": ", 1) for line in stanza.splitlines() if ": " in line
                    and not line.startswith(" ")
                )
                if "Package" in fields:
                    out[(fields["Package"], fields["Version"])] = stanza.strip()
        return out

    def install_state(self, installed: dict[str, str], held: set[str], prefs: str) -> None:
        """The dpkg status of ``installed`` (name -> version), ``held`` on hold; gpuhost's
        preferences file; then apt-get update."""
        stanzas = []
        for name, version in sorted(installed.items()):
            stanza = self.records[(name, version)]
            state = "hold" if name in held else "install"
            kept = [line for line in stanza.splitlines()
                    if line.split(":", 1)[0] in ("Package", "Version", "Architecture", "Depends",
                                                 "Provides", "Maintainer", "Description")]
            kept.insert(1, f"Status: {state} ok installed")
            stanzas.append("\n".join(kept))
        (self.path / "var/lib/dpkg/status").write_text("\n\n".join(stanzas) + "\n")
        (self.path / "etc/apt/preferences.d/gpuhost-nvidia").write_text(prefs)
        self.run("apt-get", "update", "-q")

    def run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = [tool, "-o", f"Dir={self.path}", "-o",
               f"Dir::State::status={self.path}/var/lib/dpkg/status",
               "-o", "Debug::NoLocking=1", *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, env={"LC_ALL": "C",
                              "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}, timeout=120)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)}: rc {proc.returncode}\n{proc.stdout}\n"
                                 f"{proc.stderr}")
        return proc


def _revision(upstream: str) -> str:
    return f"{upstream}-0ubuntu0.{OS_VERSION}.1"


def _host(driver: str, modules_version: str, kernel_meta: str = "6.8.0.100.100") -> dict:
    """A host provision left at ``driver`` on kernel 6.8.0-100 with its open modules."""
    v = _revision(driver)
    out = {name: v for name in (
        "nvidia-kernel-common-580-server", f"nvidia-firmware-580-server-{driver}",
        "libnvidia-compute-580-server", "libnvidia-cfg1-580-server",
        "nvidia-compute-utils-580-server", "nvidia-utils-580-server",
        "nvidia-headless-no-dkms-580-server-open")}
    out.update({
        f"linux-image-{K100}": "6.8.0-100.100", f"linux-headers-{K100}": "6.8.0-100.100",
        "linux-image-generic": kernel_meta, "linux-headers-generic": kernel_meta,
        "linux-generic": kernel_meta,
        f"linux-modules-nvidia-580-server-open-{K100}": modules_version,
        FLAVOUR_META: modules_version,
    })
    return out


def _gpuhost_state(driver: str) -> tuple[str, set[str], list[str]]:
    """gpuhost's preferences file, the driver holds and the kernel holds for ``driver``."""
    plan = package_plan(_spec(driver), "ubuntu-24.04")
    assert plan.precompiled is not None
    prefs = render_preferences(plan.pins, plan.blocked, plan.blocked_patterns)
    kernel = [module_metapackage(plan.precompiled, "generic"),
              *kernel_metapackages(plan.precompiled, "generic")]
    return prefs, set(plan.coupled), kernel


def _installs(output: str) -> list[str]:
    return [line.split()[1] for line in output.splitlines() if line.startswith("Inst ")]


def test_driver_holds_alone_give_a_new_kernel_without_its_module(
    archive: ua.Archive, tmp_path: Path
) -> None:
    """The hole (platforms.md section 4), on the stand-in archive: the driver pinned and held,
    the kernel free; dist-upgrade takes 6.8.0-101 and keeps back the module metapackage whose
    new version needs driver 580.199.02."""
    apt = AptRoot(tmp_path, archive)
    prefs, held, _ = _gpuhost_state(PROFILE_DRIVER)
    apt.install_state(_host(PROFILE_DRIVER, "6.8.0-100.100+1"), held, prefs)
    out = apt.run("apt-get", "-s", "dist-upgrade").stdout
    installs = _installs(out)
    assert f"linux-image-{K101}" in installs, out
    assert not any(name.startswith("linux-modules-nvidia") for name in installs), out
    assert FLAVOUR_META in out.split("kept back:")[1], out


def test_gpuhost_holds_keep_the_kernel_with_its_module(archive: ua.Archive, tmp_path: Path) -> None:
    """With the kernel and module metapackages held too (what provision now does), neither
    upgrade nor dist-upgrade installs a kernel: the next boot keeps 6.8.0-100 and its module."""
    apt = AptRoot(tmp_path, archive)
    prefs, held, kernel = _gpuhost_state(PROFILE_DRIVER)
    apt.install_state(_host(PROFILE_DRIVER, "6.8.0-100.100+1"), held | set(kernel), prefs)
    for command in ("upgrade", "dist-upgrade"):
        out = apt.run("apt-get", "-s", command).stdout
        assert not any(name.startswith("linux-") for name in _installs(out)), out


def test_pairing_takes_the_module_build_the_pinned_driver_satisfies(
    archive: ua.Archive, tmp_path: Path
) -> None:
    """From apt-cache show (every pocket's version): the profile's driver gets the -security
    rebuild of 6.8.0-100's module; the release pocket's driver the release build; apt installs
    the choice with gpuhost's pins in place."""
    apt = AptRoot(tmp_path, archive)
    prefs, held, kernel = _gpuhost_state(PROFILE_DRIVER)
    host = _host(PROFILE_DRIVER, "6.8.0-100.100+1")
    del host[f"linux-modules-nvidia-580-server-open-{K100}"], host[FLAVOUR_META]
    apt.install_state(host, held, prefs)
    plan = package_plan(_spec(PROFILE_DRIVER), "ubuntu-24.04").precompiled
    assert plan is not None
    names = [FLAVOUR_META, f"linux-modules-nvidia-580-server-open-{K100}"]
    records = parse_apt_show(apt.run("apt-cache", "show", *names).stdout)
    pairing = pair_kernel(plan, K100, FLAVOUR_META, PROFILE_DRIVER, records)
    assert pairing.problem is None
    assert pairing.install == [f"linux-modules-nvidia-580-server-open-{K100}=6.8.0-100.100+1",
                               f"{FLAVOUR_META}=6.8.0-100.100+1"]
    older = pair_kernel(plan, K100, FLAVOUR_META, ua.POCKETS[""][0], records)
    assert older.install[0].endswith("=6.8.0-100.100")
    out = apt.run("apt-get", "-s", "install", *pairing.install).stdout
    assert set(_installs(out)) == {name.partition("=")[0] for name in pairing.install}, out


def test_a_kernel_the_driver_cannot_pair_is_not_taken(archive: ua.Archive, tmp_path: Path) -> None:
    """Moving the kernel with the profile's driver: the newest kernel (6.8.0-101, -updates) needs
    580.199.02, so gpuhost's pairing refuses it (one line naming the driver it needs), as apt
    refuses the same install."""
    apt = AptRoot(tmp_path, archive)
    prefs, held, _ = _gpuhost_state(PROFILE_DRIVER)
    apt.install_state(_host(PROFILE_DRIVER, "6.8.0-100.100+1"), held, prefs)
    plan = package_plan(_spec(PROFILE_DRIVER), "ubuntu-24.04").precompiled
    assert plan is not None
    records = parse_apt_show(apt.run("apt-cache", "show", "linux-image-generic").stdout)
    assert newest_kernel(records, "linux-image-generic") == K101
    names = [FLAVOUR_META, f"linux-modules-nvidia-580-server-open-{K101}"]
    more = parse_apt_show(apt.run("apt-cache", "show", *names).stdout)
    refused = pair_kernel(plan, K101, FLAVOUR_META, PROFILE_DRIVER, more)
    assert refused.problem == (
        f"no NVIDIA module package for kernel {K101} with driver {PROFILE_DRIVER}: "
        f"linux-modules-nvidia-580-server-open-{K101}: it needs driver {ua.UPDATES_DRIVER} "
        "or newer"
    )
    out = apt.run("apt-get", "-s", "install", "linux-generic", FLAVOUR_META, check=False)
    assert out.returncode != 0
    assert f"nvidia-kernel-common-580-server (>= {ua.UPDATES_DRIVER})" in out.stdout


def test_a_newer_driver_moves_kernel_and_module_in_one_command(
    archive: ua.Archive, tmp_path: Path
) -> None:
    """gpuhost upgrade to the -updates driver: once the driver is at 580.199.02 (its own apt
    command, pins rewritten), the kernel metapackages and the pairing of 6.8.0-101 go in one
    apt command, which installs the new kernel with its module."""
    apt = AptRoot(tmp_path, archive)
    prefs, held, kernel = _gpuhost_state(ua.UPDATES_DRIVER)
    host = _host(PROFILE_DRIVER, "6.8.0-100.100+1")
    for name, version in list(host.items()):
        if version == _revision(PROFILE_DRIVER):
            del host[name]
    upd = _revision(ua.UPDATES_DRIVER)
    host.update({n.replace(PROFILE_DRIVER, ua.UPDATES_DRIVER): upd for n in _host(
        PROFILE_DRIVER, "6.8.0-100.100+1") if n.startswith(("nvidia-", "libnvidia-"))})
    apt.install_state(host, held | set(kernel), prefs)
    plan = package_plan(_spec(ua.UPDATES_DRIVER), "ubuntu-24.04").precompiled
    assert plan is not None
    names = [FLAVOUR_META, f"linux-modules-nvidia-580-server-open-{K101}"]
    records = parse_apt_show(apt.run("apt-cache", "show", *names).stdout)
    moved = pair_kernel(plan, K101, FLAVOUR_META, ua.UPDATES_DRIVER, records)
    assert moved.problem is None
    metas = ["linux-generic", "linux-image-generic", "linux-headers-generic"]
    out = apt.run("apt-get", "-s", "install", "--allow-change-held-packages", *metas,
                  *moved.install).stdout
    installs = _installs(out)
    assert {f"linux-image-{K101}", f"linux-modules-nvidia-580-server-open-{K101}",
            FLAVOUR_META, "linux-generic"} <= set(installs), out


def test_a_pin_to_a_version_apt_cannot_see_is_one_line_before_any_package_moves(
    archive: ua.Archive, tmp_path: Path
) -> None:
    """Issue 33's question for apt (dnf: tests/provision/test_dnf_offered.py): gpuhost's
    preferences pin a version the archive does not have (580.999.99) and a name it lacks.
    Real apt then has no candidate for either (priority -1 for every version it has), and
    provision's install step (``apt_pin.installed``, in the execute stage: the pins are written
    and the lists read by then) reads that through the AptPolicy fact and stops with one line,
    nothing installed. This is the execute stage's second line: provision's apt guard
    (deploys/apt_offered.py, tests/provision/test_apt_offered.py) refuses such a pin while the
    run is prepared, before the source, the preferences file and the kernel headers; the step
    still judges it for what the guard does not see (a bundle, whose manifest was checked
    instead; sources that changed between the two)."""
    from gpuhost.facts.apt_pins import AptPolicy
    from gpuhost.operations import apt_pin
    from tests.provision.provision_harness import run_case

    apt = AptRoot(tmp_path, archive)
    driver = "nvidia-headless-no-dkms-580-server-open"
    prefs = render_preferences({"580.999.99": [driver, "nvidia-no-such-package"]})
    (tmp_path / "var/lib/dpkg/status").write_text("")  # a fresh host: nothing installed
    (tmp_path / "etc/apt/preferences.d/gpuhost-nvidia").write_text(prefs)
    apt.run("apt-get", "update", "-q")
    names = sorted([driver, "nvidia-no-such-package"])
    out = apt.run("apt-cache", "policy", *names, check=False).stdout
    policy = AptPolicy().process(out.splitlines())
    assert policy[driver]["candidate"] is None and policy[driver]["installed"] is None, out
    case = {"args": {"packages": names, "version": "580.999.99"},
            "facts": {"gpuhost.facts.apt_pins.AptPolicy": {f"packages={','.join(names)}": policy}}}
    with pytest.raises(Exception, match=r"^version 580\.999\.99 is not offered by the configured "
                       r"repositories for nvidia-headless-no-dkms-580-server-open \(candidate "
                       r"none\), nvidia-no-such-package \(candidate none\); nothing was installed"):
        run_case(apt_pin.installed, case)


# ---------------------------------------------------------------- 22.04 on the HWE kernel

HWE = "generic-hwe-22.04"
HWE_META = f"linux-modules-nvidia-580-server-open-{HWE}"


@pytest.fixture(scope="module")
def jammy_hwe(archive: ua.Archive) -> ua.Archive:
    """The same stand-in archive (it holds every release), as a 22.04 HWE host uses it."""
    return ua.described(archive.root, "22.04", HWE)


def _jammy_hwe_host(archive: ua.Archive) -> dict[str, str]:
    """A fresh 22.04 host on the HWE kernel with the profile's driver, no NVIDIA module yet."""
    kernel = archive.kernels[0]
    image = ua.track_of("22.04", HWE)
    kv = f"{image.kversion}-{image.abi0}.{image.abi0}{image.suffix}"
    v = f"{PROFILE_DRIVER}-0ubuntu0.22.04.1"
    out = {name: v for name in (
        "nvidia-kernel-common-580-server", f"nvidia-firmware-580-server-{PROFILE_DRIVER}",
        "libnvidia-compute-580-server", "nvidia-compute-utils-580-server")}
    out.update({f"linux-image-{kernel}": kv, f"linux-headers-{kernel}": kv})
    out.update(item.split("=") for item in archive.base_packages)
    return out


def test_an_hwe_host_gets_its_tracks_modules_metapackage(
    jammy_hwe: ua.Archive, tmp_path: Path
) -> None:
    """22.04 on linux-generic-hwe-22.04 (kernel 6.8.0-100): gpuhost reads the track from the
    installed image metapackage's record (real apt-cache show and dpkg status) and takes
    -generic-hwe-22.04's modules metapackage, which apt installs with no other kernel; the GA
    one (-generic, what the kernel flavour alone names) would bring jammy's 5.15 kernel with
    it. With gpuhost's holds of the HWE metapackages, dist-upgrade then moves no kernel."""
    apt = AptRoot(tmp_path, jammy_hwe)
    spec = DesiredState(
        profile="ubuntu-archive-580-server", source="ubuntu-archive", os=("ubuntu-22.04",),
        driver_version=PROFILE_DRIVER, driver_branch="580", kernel_module="open",
        cuda_versions=("13.0",), cuda_default="13.0")
    plan = package_plan(spec, "ubuntu-22.04")
    assert plan.precompiled is not None
    host = _jammy_hwe_host(jammy_hwe)
    prefs = render_preferences(plan.pins, plan.blocked, plan.blocked_patterns)
    apt.install_state(host, set(plan.coupled), prefs)
    kernel = jammy_hwe.kernels[0]
    images = image_metapackages(host)
    metas = [module_metapackage(plan.precompiled, t) for t in (HWE, "generic")]
    records = parse_apt_show(apt.run("apt-cache", "show", *images, *metas).stdout)
    tracks = kernel_tracks(kernel, {n: [v] for n, v in host.items()}, records)
    assert tracks == [HWE]
    assert choose_meta(plan.precompiled, tracks, "generic", records) == HWE_META
    ga = apt.run("apt-get", "-s", "install", f"{FLAVOUR_META}=5.15.0-200.200+1").stdout
    assert any(n.startswith("linux-image-5.15.0-") for n in _installs(ga)), ga
    more = parse_apt_show(apt.run("apt-cache", "show", HWE_META,
                                  f"linux-modules-nvidia-580-server-open-{kernel}").stdout)
    pairing = pair_kernel(plan.precompiled, kernel, HWE_META, PROFILE_DRIVER, more)
    assert pairing.install[-1] == f"{HWE_META}=6.8.0-100.100~22.04.1+1", pairing
    out = apt.run("apt-get", "-s", "install", *pairing.install).stdout
    assert set(_installs(out)) == {n.partition("=")[0] for n in pairing.install}, out
    held = set(kernel_metapackages(plan.precompiled, "generic", HWE)) & set(host)
    assert held == {f"linux-{HWE}", f"linux-image-{HWE}", f"linux-headers-{HWE}"}
    apt.install_state(host, set(plan.coupled) | held, prefs)
    out = apt.run("apt-get", "-s", "dist-upgrade").stdout
    assert not any(n.startswith("linux-") for n in _installs(out)), out


def test_a_rollback_restores_a_tracks_metapackage_with_its_image_and_headers(
    archive: ua.Archive, tmp_path: Path
) -> None:
    """After gpuhost upgrade moved the track (linux-generic & co. at 6.8.0.101.101, held), the
    rollback installs the snapshot's cached files of the recorded versions (pkgmgr's
    install_files: --allow-downgrades --allow-change-held-packages). The snapshot records the
    track's three metapackages (host_state: linux-<track> for every installed
    linux-image-<track>, so linux-aws on an AWS kernel too); with them apt downgrades all three.
    Restored without linux-<track> (what a snapshot of an AWS host recorded before:
    KERNEL_META_RE knew generic, virtual and lowlatency only), apt 2.6 refuses the whole
    restore: the held linux-<track> needs the new image and headers metapackages."""
    from gpuhost.upgrade.host_state import MARK, parse_host_state

    before = _host(PROFILE_DRIVER, "6.8.0-100.100+1")
    rows = [f"{n}\t{v}\tamd64\thi " for n, v in sorted(before.items())]
    state = parse_host_state("\n".join([f"{MARK} packages", *rows, f"{MARK} end"]))
    metas = ["linux-generic", "linux-image-generic", "linux-headers-generic"]
    assert set(metas) <= set(state.packages)
    apt = AptRoot(tmp_path, archive)
    prefs, held, kernel = _gpuhost_state(PROFILE_DRIVER)
    after = {**before, **{m: "6.8.0.101.101" for m in metas},
             f"linux-image-{K101}": "6.8.0-101.101", f"linux-headers-{K101}": "6.8.0-101.101"}
    apt.install_state(after, held | set(kernel), prefs)
    pool = sorted(archive.root.rglob("*.deb"))

    def restore(names: list[str]) -> subprocess.CompletedProcess[str]:
        files = [next(str(p) for p in pool if p.name.startswith(f"{n}_{before[n]}_"))
                 for n in names]
        return apt.run("apt-get", "-s", "install", "--allow-downgrades",
                       "--allow-change-held-packages", *files, check=False)

    whole = restore(metas)
    assert whole.returncode == 0 and set(_installs(whole.stdout)) == set(metas), whole.stdout
    assert "Remv" not in whole.stdout
    part = restore(metas[1:])
    assert part.returncode != 0 and "generated breaks" in part.stderr, part.stdout + part.stderr


def test_the_track_of_an_installed_version_the_archive_no_longer_lists(
    jammy_hwe: ua.Archive, tmp_path: Path
) -> None:
    """kernel_tracks reads the installed version's record. The archive keeps one version per
    pocket, so a host's linux-image-generic-hwe-22.04 may be at a version no pocket lists any
    more: apt 2.6's apt-cache show still prints that version's record from the dpkg status
    (with its Depends), so the track is still found."""
    apt = AptRoot(tmp_path, jammy_hwe)
    host = _jammy_hwe_host(jammy_hwe)
    image, listed = f"linux-image-{HWE}", host[f"linux-image-{HWE}"]
    apt.install_state(host, set(), "")
    gone = listed.replace("~22.04.1", "~22.04.0")  # older than every listed one
    status = apt.path / "var/lib/dpkg/status"
    stanzas = status.read_text().split("\n\n")
    ours = next(i for i, st in enumerate(stanzas) if st.startswith(f"Package: {image}\n"))
    assert f"\nVersion: {listed}\n" in stanzas[ours]
    stanzas[ours] = stanzas[ours].replace(f"\nVersion: {listed}\n", f"\nVersion: {gone}\n")
    status.write_text("\n\n".join(stanzas))
    records = parse_apt_show(apt.run("apt-cache", "show", image).stdout)
    assert gone in [r.version for r in records[image]]
    kernel = jammy_hwe.kernels[0]
    assert kernel_tracks(kernel, {image: [gone]}, records) == [HWE]
