"""Stand-ins of NVIDIA's CUDA repositories for Ubuntu (compute/cuda/repos/ubuntu2204|ubuntu2404).

EMPTY STAND-INS like tests/lab/aptrepo.py's (read its docstring): NVIDIA's Ubuntu names, versions
and relations, a version marker file each, and only the files gpuhost reads or runs.  NVIDIA's
Ubuntu repositories carry Ubuntu-style driver binaries (the packaging of Ubuntu's
nvidia-graphics-drivers-<branch> source), not the Debian-style ones of its debian12 repository:

* up to branch 580 every name carries the branch: ``libnvidia-compute-580``, ``nvidia-utils-580``
  (/usr/bin/nvidia-smi), ``nvidia-compute-utils-580`` (nvidia-persistenced and its unit),
  ``libnvidia-cfg1-580``, ``nvidia-dkms-580`` / ``nvidia-dkms-580-open``,
  ``nvidia-kernel-common-580``, ``nvidia-kernel-source-580[-open]``,
  ``nvidia-firmware-580-<version>``, the ``nvidia-driver-580[-open]`` and ``cuda-drivers-580``
  metapackages; fabric manager as ``nvidia-fabricmanager-<branch>`` and, from 580,
  ``nvidia-fabricmanager``;
* from branch 590 the names lose the branch (``libnvidia-compute``, ``nvidia-utils``,
  ``nvidia-dkms-open``, ``nvidia-firmware`` without a version, ...; ``cuda-drivers-<branch>`` is
  gone) and NVIDIA publishes ``nvidia-driver-pinning-<branch>`` /
  ``nvidia-driver-pinning-<version>`` (driver installation guide, "Version locking packages for
  Ubuntu / Debian", "Ubuntu 590 and later packages"); ``nvidia-persistenced`` and
  ``nvidia-modprobe`` are packages of their own at the driver's version (every name installed at
  615.71.09-1ubuntu1 by a public image build, 595.71.05-1ubuntu1 and nvidia-modprobe
  610.57.04-1ubuntu1 on Ubuntu 22.04/24.04: docs/nvidia-repo-packages.md [S16], [S17]).

Relations read from packages.ubuntu.com (Ubuntu's builds of the same packaging, 2026-11):
``libnvidia-compute-<b>`` depends on the virtual ``nvidia-kernel-common-<b>-<upstream>`` that
``nvidia-kernel-common-<b>`` provides; ``nvidia-utils-<b>`` on ``libnvidia-compute-<b> (>= u)`` and
that virtual name; ``nvidia-compute-utils-<b>`` on ``libnvidia-compute-<b>``; ``nvidia-dkms-<b>`` on
``nvidia-firmware-<b>-<u>``, ``nvidia-kernel-common-<b> (>= u) (<= u-1)`` and
``nvidia-kernel-source-<b> (>= u) (<= u-1)`` (here ``(<= v)``: under NVIDIA's ``-1ubuntu1``
revisions ``u-1`` would exclude the package's own siblings); ``nvidia-driver-<b>`` on its
libraries ``(= v)``.  Assumed (not read): the open/proprietary DKMS packages conflict with each
other; the unsuffixed names keep the same relations without the branch (the DKMS packages
ranged on ``nvidia-firmware`` too), ``nvidia-compute-utils`` depends on ``nvidia-persistenced``
(unversioned), and each conflicts with the per-branch name it replaces (same files);
``cuda-drivers[-<b>]`` depends on the compute set ``(= v)``; the pinning packages' content (no
stored source shows it: here an apt preferences file pinning the branch or version at 1001,
which is what their name says).  ``dkms`` itself is not a dependency here, as in the debian12
stand-ins: nothing is compiled in a lab host.  Revisions: :func:`revision`.
"""

from __future__ import annotations

from .aptrepo import (
    SMI_NO_DRIVER,
    StandIn,
    _fabric_manager,
    common_stand_ins,
)

#: 570: an older branch (a name other branches' blocked patterns must keep out); 580: the R580
#: LTSB releases of the debian12 stand-ins (580.178.04 is the built-in profiles' driver) and
#: 580.199.02, A MADE-UP later R580 release: the OS's own apt-get dist-upgrade then has a newer
#: driver of the profile's branch to take, which gpuhost's pins must refuse; 590: 590.44.01 and
#: 590.48.01 (the version of nvidia-driver-pinning-590.48.01 in ubuntu2404/sbsa, platforms.md
#: 2b); 595: 595.71.05 (seen installed from ubuntu2204/2404, NVIDIA/gpu-driver-container PR 899)
#: and 595.91.07 (R595's fix of NVIDIA bulletin 5861, profile nvidia-repo-595-cuda13.2); 610:
#: 610.57.04 (seen there as nvidia-modprobe 610.57.04-1ubuntu1, PR 899): a newer branch under
#: the same unsuffixed names, which a 595 host's dist-upgrade must not take
BRANCHES = {"570": ["570.124.06"],
            "580": ["580.105.08", "580.159.03", "580.178.04", "580.199.02"],
            "590": ["590.44.01", "590.48.01"],
            "595": ["595.71.05", "595.91.07"],
            "610": ["610.57.04"]}
#: the first branch whose Ubuntu packages carry no branch suffix
UNSUFFIXED_FROM = 590
PERSISTENCED_UNIT = (
    "[Unit]\n"
    "Description=NVIDIA Persistence Daemon (gpuhost lab stand-in)\n"
    "Wants=syslog.target\n\n"
    "[Service]\n"
    "Type=forking\n"
    "ExecStart=/usr/bin/nvidia-persistenced --verbose\n"
    "ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced\n\n"
    "[Install]\n"
    "WantedBy=multi-user.target\n"
)
PERSISTENCED_NO_DRIVER = (
    "#!/bin/sh\n"
    "# gpuhost lab stand-in for nvidia-persistenced: no GPU here (the GPU emulator is diverted\n"
    "# into this path on GPU-shaped hosts)\n"
    'echo "nvidia-persistenced failed to initialize. Check syslog for more details." >&2\n'
    "exit 1\n"
)
PERSISTENCED_FILES = {"/usr/bin/nvidia-persistenced": PERSISTENCED_NO_DRIVER,
                      "/lib/systemd/system/nvidia-persistenced.service": PERSISTENCED_UNIT}


def _names(branch: str) -> dict[str, str]:
    """Name of each driver piece in this branch (``-580`` suffixed up to 580, bare from 590)."""
    s = "" if unsuffixed(branch) else f"-{branch}"
    pieces = ["libnvidia-compute", "libnvidia-cfg1", "nvidia-utils", "nvidia-compute-utils",
              "nvidia-kernel-common", "nvidia-kernel-source", "nvidia-dkms", "nvidia-driver",
              "nvidia-headless-no-dkms", "nvidia-open", "cuda-drivers"]
    names = {p: f"{p}{s}" for p in pieces}
    names["nvidia-kernel-source-open"] = f"nvidia-kernel-source{s}-open"
    names["nvidia-dkms-open"] = f"nvidia-dkms{s}-open"
    names["nvidia-driver-open"] = f"nvidia-driver{s}-open"
    return names


def unsuffixed(branch: str) -> bool:
    return int(branch) >= UNSUFFIXED_FROM


def revision(branch: str) -> str:
    """The Debian revision of a branch's packages: ``-1ubuntu1`` as seen for 580.126.16,
    580.159.04, 595.71.05 and 615.71.09; ``-0ubuntu1`` as seen for 570.124.06 (NVIDIA's local
    repository) and 590.48.01 (nvidia-driver-pinning-590.48.01, ubuntu2404/sbsa)."""
    return "0ubuntu1" if branch in ("570", "590") else "1ubuntu1"


def _firmware(branch: str, u: str) -> str:
    """The GSP firmware package: ``nvidia-firmware-580-<version>`` (the version in the name, as
    Ubuntu's packaging) up to 580, ``nvidia-firmware`` from 590 (installed at 615.71.09-1ubuntu1
    by a public image build on NVIDIA's Ubuntu repository)."""
    return "nvidia-firmware" if unsuffixed(branch) else f"nvidia-firmware-{branch}-{u}"


def _others(piece: str, branch: str) -> str:
    """Conflicts with the same piece of the other branches (they ship the same files)."""
    own = _names(branch)[piece]
    return ", ".join(sorted({_names(b)[piece] for b in BRANCHES} - {own}))


def _driver(branch: str, u: str) -> list[StandIn]:
    v = f"{u}-{revision(branch)}"
    n = _names(branch)
    firmware = _firmware(branch, u)
    common_virtual = f"{n['nvidia-kernel-common']}-{u}"
    # Ubuntu's builds bound these "(>= u) (<= u-1)" under revisions below -1 (0ubuntu0.24.04.1);
    # under NVIDIA's -1ubuntu1 that bound would exclude the package's own siblings, so the
    # upper bound here is the version itself (NVIDIA's own bound was not read)
    ranged = f"(>= {u}), {{}} (<= {v})"
    compute = [n["libnvidia-compute"], n["libnvidia-cfg1"], n["nvidia-utils"],
               n["nvidia-compute-utils"]]

    def dkms(piece: str, source: str, other: str) -> StandIn:
        return StandIn(
            n[piece], v, conflicts=f"{n[other]}, {_others(piece, branch)}",
            depends=(f"{firmware}{' ' + ranged.format(firmware) if unsuffixed(branch) else ''}, "
                     f"{n['nvidia-kernel-common']} "
                     + ranged.format(n["nvidia-kernel-common"]) + f", {source} "
                     + ranged.format(source)),
            section="restricted/kernel")

    pkgs = [
        StandIn(n["nvidia-kernel-common"], v, provides=common_virtual,
                conflicts=_others("nvidia-kernel-common", branch)),
        StandIn(firmware, v),
        StandIn(n["nvidia-kernel-source"], v, conflicts=n["nvidia-kernel-source-open"]),
        StandIn(n["nvidia-kernel-source-open"], v, conflicts=n["nvidia-kernel-source"]),
        dkms("nvidia-dkms", n["nvidia-kernel-source"], "nvidia-dkms-open"),
        dkms("nvidia-dkms-open", n["nvidia-kernel-source-open"], "nvidia-dkms"),
        StandIn(n["libnvidia-compute"], v, depends=common_virtual,
                conflicts=_others("libnvidia-compute", branch), section="restricted/libs"),
        StandIn(n["libnvidia-cfg1"], v, conflicts=_others("libnvidia-cfg1", branch),
                section="restricted/libs"),
        StandIn(n["nvidia-utils"], v,
                depends=f"{n['libnvidia-compute']} (>= {u}), {common_virtual}",
                conflicts=_others("nvidia-utils", branch), files={"/usr/bin/nvidia-smi":
                                                                  SMI_NO_DRIVER}),
        # nvidia-persistenced: in nvidia-compute-utils-<b> up to 580 (Ubuntu's packaging), its
        # own package from 590, which nvidia-compute-utils depends on (assumed, unversioned)
        StandIn(n["nvidia-compute-utils"], v, conflicts=_others("nvidia-compute-utils", branch),
                depends=n["libnvidia-compute"] + (", nvidia-persistenced"
                                                  if unsuffixed(branch) else ""),
                files={} if unsuffixed(branch) else PERSISTENCED_FILES),
        # one name for every branch, at each driver's version (NVIDIA's driver container holds
        # nvidia-modprobe=<driver version>; 610.57.04-1ubuntu1 was pulled in beside 595.71.05)
        StandIn("nvidia-modprobe", v),
        StandIn(n["nvidia-headless-no-dkms"], v,
                depends=", ".join(f"{name} (= {v})" for name in compute)),
        StandIn(n["nvidia-driver"], v, depends=", ".join(
            f"{name} (= {v})" for name in [*compute, n["nvidia-dkms"]])),
        StandIn(n["nvidia-driver-open"], v, depends=", ".join(
            f"{name} (= {v})" for name in [*compute, n["nvidia-dkms-open"]])),
    ]
    metas = ", ".join(f"{name} (= {v})" for name in compute)
    # cuda-drivers-<b> / nvidia-open-<b> up to 580; from 590 only the unsuffixed "latest" ones
    pkgs.append(StandIn(n["cuda-drivers"], v, depends=f"{metas}, {n['nvidia-dkms']} (= {v})"
                        f" | {n['nvidia-dkms-open']} (= {v})"))
    pkgs.append(StandIn(n["nvidia-open"], v, depends=f"{metas}, {n['nvidia-dkms-open']} (= {v})"))
    if not unsuffixed(branch):
        pkgs.append(_fabric_manager(f"nvidia-fabricmanager-{branch}", v,
                                    "nvidia-fabricmanager", ml=n["libnvidia-compute"]))
    else:
        pkgs += [
            StandIn("nvidia-persistenced", v, files=PERSISTENCED_FILES, conflicts=", ".join(
                f"nvidia-compute-utils-{b}" for b in BRANCHES if not unsuffixed(b))),
            StandIn(f"nvidia-driver-pinning-{branch}", v, files={
                f"/etc/apt/preferences.d/nvidia-driver-pinning-{branch}": _pinning(f"{branch}.*")}),
            StandIn(f"nvidia-driver-pinning-{u}", v, files={
                f"/etc/apt/preferences.d/nvidia-driver-pinning-{u}": _pinning(f"{u}-*")}),
        ]
    if int(branch) >= 580:
        pkgs.append(_fabric_manager("nvidia-fabricmanager", v, ", ".join(
            f"nvidia-fabricmanager-{b}" for b in BRANCHES if not unsuffixed(b)),
            ml=n["libnvidia-compute"]))
    return pkgs


def _pinning(version: str) -> str:
    return ("# gpuhost lab stand-in of NVIDIA's driver pinning package (its real content was not\n"
            "# read: this pins what the package name says)\n"
            "Package: src:nvidia-graphics-drivers *nvidia* libnvidia* cuda-drivers*\n"
            f"Pin: version {version}\nPin-Priority: 1001\n")


def stand_ins() -> list[StandIn]:
    """Every package of one NVIDIA Ubuntu repository (ubuntu2204 and ubuntu2404 alike)."""
    pkgs: list[StandIn] = []
    for branch, versions in BRANCHES.items():
        for u in versions:
            pkgs += _driver(branch, u)
    return pkgs + common_stand_ins()
