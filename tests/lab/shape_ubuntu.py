"""Ubuntu-shaped lab hosts: ``tests/lab/lab up N --os ubuntu-22.04|ubuntu-24.04``.

The lab's Debian 12 base with what makes a host Ubuntu to gpuhost (and to pyinfra's
LinuxDistribution fact, which reads /etc/os-release):

* Ubuntu's ``/etc/os-release`` (here /usr/lib/os-release, which it links to, as on Ubuntu) and
  ``/etc/lsb-release`` for jammy / noble (the fields and values Ubuntu 22.04.5 / 24.04.3 ship);
* apt sources in Ubuntu's layout: ``/etc/apt/sources.list.d/ubuntu.sources`` (deb822, the file
  Ubuntu 24.04 installs; 22.04 installs a one-line sources.list, which apt reads alike) with the
  release, ``-updates`` and ``-security`` suites and the main/restricted/universe/multiverse
  components, signed by ``/usr/share/keyrings/ubuntu-archive-keyring.gpg``.  No Ubuntu archive is
  reachable here: the URI is a STAND-IN archive the lab serves (``<repo>/ubuntu``, signed with the
  lab key, copied to Ubuntu's keyring path), empty unless a shape's ``archive_stand_ins`` fills it
  (one version per pocket, as Ubuntu's archive keeps);
* the Debian 12 archive stays in the host's sources under a lab name
  (``gpuhost-lab-debian.sources``), through the lab's apt proxy, for what the host really is
  (its libc, python3, the running kernel's headers).

What this proves and what only a real Ubuntu machine shows is in docs/testing.md ("Ubuntu-shaped
lab hosts").  NVIDIA's ubuntu2204/ubuntu2404 repositories: tests/lab/nvidia_ubuntu.py.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import aptrepo, nvidia_ubuntu, ubuntu_archive
from .image import DEBIAN_SOURCES
from .shapes import Shape
from .system import run

ARCHIVE_DIR = "ubuntu"  # the stand-in archive under the lab's served root
COMPONENTS = ["main", "restricted", "universe", "multiverse"]
ARCHIVE_KEYRING = "/usr/share/keyrings/ubuntu-archive-keyring.gpg"

#: (VERSION_ID, codename, VERSION, PRETTY_NAME) of each release
RELEASES = {
    "22.04": ("jammy", "22.04.5 LTS (Jammy Jellyfish)", "Ubuntu 22.04.5 LTS"),
    "24.04": ("noble", "24.04.3 LTS (Noble Numbat)", "Ubuntu 24.04.3 LTS"),
}


def os_release(version_id: str) -> str:
    codename, version, pretty = RELEASES[version_id]
    return (
        f'PRETTY_NAME="{pretty}"\nNAME="Ubuntu"\nVERSION_ID="{version_id}"\n'
        f'VERSION="{version}"\nVERSION_CODENAME={codename}\nID=ubuntu\nID_LIKE=debian\n'
        'HOME_URL="https://www.ubuntu.com/"\nSUPPORT_URL="https://help.ubuntu.com/"\n'
        'BUG_REPORT_URL="https://bugs.launchpad.net/ubuntu/"\n'
        'PRIVACY_POLICY_URL="https://www.ubuntu.com/legal/terms-and-policies/privacy-policy"\n'
        f"UBUNTU_CODENAME={codename}\n"
    )


def lsb_release(version_id: str) -> str:
    codename, _, pretty = RELEASES[version_id]
    return (f"DISTRIB_ID=Ubuntu\nDISTRIB_RELEASE={version_id}\nDISTRIB_CODENAME={codename}\n"
            f'DISTRIB_DESCRIPTION="{pretty}"\n')


def ubuntu_sources(state: dict[str, Any], codename: str) -> str:
    url = f"http://{state['gateway']}:{aptrepo_port(state)}/{ARCHIVE_DIR}/"
    return (
        "# gpuhost lab: Ubuntu's layout; the URI is the lab's STAND-IN of Ubuntu's archive\n"
        f"Types: deb\nURIs: {url}\nSuites: {codename} {codename}-updates\n"
        f"Components: {' '.join(COMPONENTS)}\nSigned-By: {ARCHIVE_KEYRING}\n\n"
        f"Types: deb\nURIs: {url}\nSuites: {codename}-security\n"
        f"Components: {' '.join(COMPONENTS)}\nSigned-By: {ARCHIVE_KEYRING}\n"
    )


def aptrepo_port(state: dict[str, Any]) -> str:
    """The port of the lab's repository server (from its URL in the lab state)."""
    return str(state["repo_url"]).split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1]


def _host_files(version_id: str) -> Callable[[dict[str, Any]], dict[str, str | bytes]]:
    codename = RELEASES[version_id][0]

    def files(state: dict[str, Any]) -> dict[str, str | bytes]:
        return {
            "/usr/lib/os-release": os_release(version_id),
            "/etc/lsb-release": lsb_release(version_id),
            "/etc/apt/sources.list.d/debian.sources": "",
            "/etc/apt/sources.list.d/gpuhost-lab-debian.sources": (
                "# gpuhost lab: the Debian 12 archive this Ubuntu-shaped host really runs on\n"
                + DEBIAN_SOURCES),
            "/etc/apt/sources.list.d/ubuntu.sources": ubuntu_sources(state, codename),
            ARCHIVE_KEYRING: Path(state["repo_key_path"]).read_bytes(),
        }

    return files


#: codename -> {suite: stand-ins}: the stand-in archive's packages (the -server driver, kernels
#: and Canonical's precompiled modules of the ubuntu-archive profiles: tests/lab/ubuntu_archive.py)
ARCHIVE_STAND_INS: dict[str, Callable[[str], dict[str, list[aptrepo.StandIn]]]] = {
    codename: ubuntu_archive.stand_ins for codename, _, _ in RELEASES.values()
}


def build_archive(root: Path, arch: str, sign: Callable[[Path], None]) -> None:
    """The stand-in Ubuntu archive: dists/<suite>/{Release,InRelease}, per component
    binary-<arch>/Packages(.gz), pool/ with the stand-ins of ARCHIVE_STAND_INS."""
    base = root / ARCHIVE_DIR
    for codename, _, _ in RELEASES.values():
        packages = ARCHIVE_STAND_INS[codename](codename) if codename in ARCHIVE_STAND_INS else {}
        for suite in (codename, f"{codename}-updates", f"{codename}-security"):
            pool = base / "pool" / suite
            aptrepo.build_debs(packages.get(suite, []), arch, pool)
            dist = base / "dists" / suite
            for component in COMPONENTS:
                folder = dist / component / f"binary-{arch}"
                folder.mkdir(parents=True, exist_ok=True)
                index = ""
                if component == "restricted":
                    index = run(["apt-ftparchive", "packages", f"pool/{suite}"], timeout=60,
                                cwd=base).stdout
                (folder / "Packages").write_text(index)
                with gzip.open(folder / "Packages.gz", "wt") as fh:
                    fh.write(index)
            release = run(
                ["apt-ftparchive", "-o", "APT::FTPArchive::Release::Origin=Ubuntu",
                 "-o", "APT::FTPArchive::Release::Label=Ubuntu (gpuhost lab stand-in)",
                 "-o", f"APT::FTPArchive::Release::Suite={suite}",
                 "-o", f"APT::FTPArchive::Release::Codename={codename}",
                 "-o", f"APT::FTPArchive::Release::Architectures={arch}",
                 "-o", f"APT::FTPArchive::Release::Components={' '.join(COMPONENTS)}",
                 "release", "."], cwd=dist).stdout
            (dist / "Release").write_text(release)
            sign(dist)


SHAPES = [
    Shape("ubuntu-22.04", "Ubuntu 22.04 (jammy) on the Debian 12 base", "ubuntu2204",
          stand_ins=nvidia_ubuntu.stand_ins, host_files=_host_files("22.04"),
          extra_repos=build_archive),
    Shape("ubuntu-24.04", "Ubuntu 24.04 (noble) on the Debian 12 base", "ubuntu2404",
          stand_ins=nvidia_ubuntu.stand_ins, host_files=_host_files("24.04"),
          extra_repos=build_archive),
]
