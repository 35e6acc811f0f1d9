"""A local APT repository laid out like NVIDIA's CUDA repository for Debian 12.

THE PACKAGES ARE EMPTY STAND-INS generated here with dpkg-deb: they carry the names, versions and
Depends/Provides/Conflicts of NVIDIA's packages and one marker file each
(/usr/share/gpuhost-lab/<package>.version), nothing else - except where gpuhost reads a file or
runs a program of the real package, which the stand-in then carries, answering in the real format:
the CUDA toolkits (``_cuda_toolkit``: /usr/local/cuda-X.Y with version.json, an nvcc answering
``--version``, the ``cuda`` update-alternatives entry for /usr/local/cuda); ``nvidia-smi`` (Debian's
layout, which NVIDIA's debian12 packages share: /usr/lib/nvidia/current/nvidia-smi, linked from
/usr/bin/nvidia-smi; without a GPU it fails like the real one without a loaded module, exit 9, and
on GPU-shaped hosts the lab's GPU emulator is diverted into its place, tests/lab/gpu);
``nvidia-container-toolkit-base`` (/usr/bin/nvidia-ctk: ``--version`` in the real format, the
subcommands provision runs succeed and change nothing, ``cdi generate`` writes a spec naming
the installed libcuda1's version); the fabric manager
(/usr/bin/nv-fabricmanager ``--version``, /usr/share/nvidia/nvswitch/fabricmanager.cfg and
nvidia-fabricmanager.service, whose daemon stays up only while the loaded driver -
/proc/driver/nvidia/version - has its own version, and exits with the real daemon's words
otherwise).  They let tests exercise repository layout,
signed-by trust, pinning, holds, upgrades and gpuhost's whole provision/audit/check loop that this
machine cannot download.  Real NVIDIA packages come from Debian non-free (driver 535.261.03 in
bookworm, 535.309.01 in bookworm-security).

Layout (flat, like developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/):
  <root>/compute/cuda/repos/debian12/x86_64/{*.deb,Packages,Packages.gz,Release,Release.gpg,InRelease}
  <root>/gpuhost-lab-repo.gpg   the signing key (binary keyring, for signed-by)
  <root>/gpuhost-lab-repo.asc   the same key, armored
Hosts use:  deb [signed-by=/usr/share/keyrings/gpuhost-lab-repo.gpg] <repo_url> /
"""

from __future__ import annotations

import contextlib
import gzip
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .system import run

REPO_SUBDIR = "compute/cuda/repos/debian12"
KEY_NAME = "gpuhost-lab-repo"
#: NVIDIA's directory name per Debian architecture
REPO_ARCH_DIR = {"amd64": "x86_64", "arm64": "sbsa"}


@dataclass(frozen=True)
class StandIn:
    name: str
    version: str
    depends: str = ""
    provides: str = ""
    conflicts: str = ""
    section: str = "multiverse/devel"
    extra: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # path under / -> text ("#!": mode 755)
    links: dict[str, str] = field(default_factory=dict)  # path under / -> symlink target
    scripts: dict[str, str] = field(default_factory=dict)  # postinst/prerm -> shell text


DRIVER_550 = ["550.54.14-1", "550.54.15-1", "550.127.05-1"]
DRIVER_560 = ["560.35.03-1", "560.35.05-1"]
#: R580 LTSB: 580.178.04 is the built-in NVIDIA-repository profiles' driver (profiles.yaml,
#: NVIDIA bulletin 5861's R580 fix); 580.159.03-1 was their driver before that bulletin;
#: 580.105.08-1 is a version third-party scripts install (nvidia-fabricmanager-580=580.105.08-1,
#: docs/nvidia-repo-packages.md), so the pin has an older release of the branch to pass over
DRIVER_580 = ["580.105.08-1", "580.159.03-1", "580.178.04-1"]
#: every driver branch of the repository, oldest first; the newest is what cuda-drivers follows
BRANCHES = {"550": DRIVER_550, "560": DRIVER_560, "580": DRIVER_580}
#: 12-9 and 13-0: the built-in profiles' toolkits (nvidia-repo-580-cuda12.9 / -cuda13.0, which
#: installs both side by side); releases 12.9.0/12.9.1 and 13.0.0/13.0.2 (13.0.2-1: the version
#: `apt install cuda=13.0.2-1` in public Dockerfiles)
TOOLKIT = {"12-4": ["12.4.0-1", "12.4.1-1"], "12-6": ["12.6.0-1", "12.6.2-1"],
           "12-9": ["12.9.0-1", "12.9.1-1"], "13-0": ["13.0.0-1", "13.0.2-1"],
           # nvidia-repo-595-cuda13.2's toolkit: releases 13.2.0 and 13.2.1 (data/matrix.yaml)
           "13-2": ["13.2.0-1", "13.2.1-1"]}
#: four-field versions like NVIDIA's (9.5.1.17-1, 9.10.2.21-1 are real package versions): a
#: three-field profile value ("9.5.1") must select 9.5.1.17-1, never 9.10.2.21-1
CUDNN = ["9.1.0.70-1", "9.3.0.75-1", "9.5.1.17-1", "9.10.2.21-1"]
#: libcudnn9-cuda-13 (CUDA 13 builds): 9.16.0.29-1 and 9.19.0.56-1 are versions public
#: Dockerfiles install; 9.17.0.29-1 (nvidia-repo-580-cuda13.0's cuDNN 9.17.0) takes the build
#: number of the 9.17.0 wheel - the .deb's was not seen (docs/nvidia-repo-packages.md);
#: 9.24.1.1-1 (nvidia-repo-595-cuda13.2's cuDNN 9.24.1) the build number of NVIDIA's
#: redistrib_9.24.1.json (data/matrix.yaml), the .deb's not seen either
CUDNN_13 = ["9.16.0.29-1", "9.17.0.29-1", "9.19.0.56-1", "9.24.1.1-1"]
#: 1.19.1: the version the built-in NVIDIA-repository profiles pin (profiles.yaml)
CONTAINER_TOOLKIT = ["1.16.2-1", "1.17.0-1", "1.19.1-1"]

#: Debian's (and NVIDIA's debian12) place of the nvidia-smi binary; /usr/bin/nvidia-smi links to it
SMI_PATH = "/usr/lib/nvidia/current/nvidia-smi"
#: what the real nvidia-smi prints when no NVIDIA kernel module is loaded (exit 9, nvidia-smi(1))
SMI_NO_DRIVER = (
    "#!/bin/sh\n"
    "# gpuhost lab stand-in for nvidia-smi: this host has no GPU and no NVIDIA kernel module,\n"
    "# so it answers as the real binary does then. On GPU-shaped lab hosts the GPU emulator\n"
    "# (tests/lab/gpu) is diverted into this path and answers instead.\n"
    "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\"\n"
    "exit 9\n"
)
FM_CONFIG = "/usr/share/nvidia/nvswitch/fabricmanager.cfg"

#: Debian-style driver binaries of NVIDIA's debian12 repository: one name for every branch, at the
#: driver's version (the names Debian's own non-free archive carries at 535.x, so a lab host sees
#: both: the pins must pick these). Relations as in Debian's nvidia-graphics-drivers packaging,
#: reduced to what matters for resolution ("= v" ties), without the X/GL/Vulkan libraries.
#: {name: (depends, provides, conflicts)} with {v} = the version, {u} = its upstream part
DEBIAN_STYLE_DRIVER = {
    "firmware-nvidia-gsp": ("", "", ""),
    "nvidia-kernel-support": ("", "", ""),
    "nvidia-kernel-dkms": (
        "firmware-nvidia-gsp (= {v}), nvidia-kernel-support (= {v})", "nvidia-kernel-{u}",
        "nvidia-kernel-open-dkms"),
    # NVIDIA's name for the open flavour (Debian's archive: nvidia-open-kernel-dkms)
    "nvidia-kernel-open-dkms": (
        "firmware-nvidia-gsp (= {v}), nvidia-kernel-support (= {v})", "nvidia-kernel-{u}",
        "nvidia-kernel-dkms"),
    "libnvidia-ptxjitcompiler1": ("", "", ""),
    "libcuda1": ("libnvidia-ptxjitcompiler1 (= {v})", "libcuda1-any, libcuda.so.1", ""),
    "libnvidia-ml1": ("", "libnvidia-ml.so.1", ""),
    "libnvidia-cfg1": ("", "libnvidia-cfg1-any, libnvidia-cfg.so.1", ""),
    "nvidia-smi": ("libnvidia-ml1 (= {v})", "", ""),  # + SMI_PATH (_driver)
    "nvidia-driver-libs": ("libcuda1 (= {v})", "", ""),
    "nvidia-driver-bin": ("", "", ""),
    "nvidia-driver": (
        "nvidia-driver-libs (= {v}), nvidia-driver-bin (= {v}), "
        "nvidia-kernel-dkms (= {v}) | nvidia-kernel-{u}", "", ""),
}
#: what cuda-drivers-<branch> depends on, each "= v" (an assumption: which of these NVIDIA's
#: metapackage Depends rather than Recommends was not read; docs/nvidia-repo-packages.md)
CUDA_DRIVERS_DEPENDS = [
    "nvidia-driver", "nvidia-smi", "libcuda1", "libnvidia-ml1", "libnvidia-cfg1",
]


def _upstream(version: str) -> str:
    return version.rsplit("-", 1)[0]


def _cuda_toolkit(series: str, v: str) -> StandIn:
    """``cuda-toolkit-X-Y``: the toolkit directory as the probe and checks read it, and the
    ``cuda`` alternative NVIDIA's packages register for /usr/local/cuda (priority from the version,
    so auto mode picks the newest toolkit, as users see after installing a second one)."""
    upstream = _upstream(v)
    dot = series.replace("-", ".")
    home = f"/usr/local/cuda-{dot}"
    priority = "".join(f"{int(part):02d}" for part in upstream.split(".")[:2])
    nvcc = (
        "#!/bin/sh\n"
        "# gpuhost lab stand-in: answers --version in nvcc's format, compiles nothing\n"
        'cat <<"EOF"\n'
        "nvcc: NVIDIA (R) Cuda compiler driver\n"
        "Copyright (c) 2005-2024 NVIDIA Corporation\n"
        "Built on gpuhost lab stand-in\n"
        f"Cuda compilation tools, release {dot}, V{upstream}\n"
        f"Build cuda_{dot}.r{dot}/compiler.0\n"
        "EOF\n"
    )
    return StandIn(
        f"cuda-toolkit-{series}", v,
        depends=f"cuda-toolkit-config-common (>= {upstream})",
        files={
            f"{home}/version.json": f'{{\n   "cuda" : {{\n      "name" : "CUDA SDK",\n'
            f'      "version" : "{upstream}"\n   }}\n}}\n',
            f"{home}/bin/nvcc": nvcc,
        },
        scripts={
            "postinst": f"#!/bin/sh\nset -e\nupdate-alternatives --install /usr/local/cuda cuda "
            f"{home} {priority}\n",
            "prerm": f"#!/bin/sh\nset -e\nupdate-alternatives --remove cuda {home}\n",
        },
    )


def _fabric_manager(name: str, v: str, conflicts: str, ml: str = "libnvidia-ml1") -> StandIn:
    """NVIDIA Fabric Manager: ``nv-fabricmanager --version`` in the real format ("Fabric Manager
    version is : X"), its config file and its unit as NVIDIA ships them (not enabled by the
    package: NVIDIA's instructions enable and start it).  The daemon stays up only while the loaded
    driver has its version; otherwise it exits 1 with the real daemon's mismatch message."""
    u = _upstream(v)
    daemon = (
        "#!/bin/sh\n"
        "# gpuhost lab stand-in for NVIDIA's nv-fabricmanager: programs no NVSwitch\n"
        f"FM_VERSION={u}\n"
        'case "$1" in\n'
        '  -v|--version) echo "Fabric Manager version is : $FM_VERSION"; exit 0 ;;\n'
        "esac\n"
        # the loaded module's version: the first X.Y[.Z] with X >= 100 of the NVRM line (the
        # proprietary and the open module word it differently)
        "loaded=$(grep -o '[0-9]\\{3,\\}\\.[0-9]\\{1,\\}\\(\\.[0-9]\\{1,\\}\\)\\{0,1\\}' "
        "/proc/driver/nvidia/version 2>/dev/null | head -n 1)\n"
        'if [ -z "$loaded" ]; then\n'
        '  echo "fabric manager: NVIDIA GPU driver is not loaded (no /proc/driver/nvidia/version)"'
        " >&2\n"
        "  exit 1\n"
        "fi\n"
        'if [ "$loaded" != "$FM_VERSION" ]; then\n'
        '  echo "fabric manager NVIDIA GPU driver interface version $FM_VERSION don\'t match with '
        'driver version $loaded. Please update with matching NVIDIA driver package." >&2\n'
        "  exit 1\n"
        "fi\n"
        "exec sleep infinity\n"
    )
    unit = (
        "[Unit]\n"
        "Description=NVIDIA fabric manager service (gpuhost lab stand-in)\n"
        "After=network-online.target\n\n"
        "[Service]\n"
        "User=root\n"
        "Type=simple\n"
        f"ExecStart=/usr/bin/nv-fabricmanager -c {FM_CONFIG}\n"
        "LimitCORE=infinity\n\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )
    config = ("# gpuhost lab stand-in of NVIDIA's fabricmanager.cfg\n"
              "LOG_LEVEL=4\nLOG_FILE_NAME=/var/log/fabricmanager.log\nFABRIC_MODE=0\n")
    return StandIn(
        name, v, depends=f"{ml} (= {v})", conflicts=conflicts,
        files={"/usr/bin/nv-fabricmanager": daemon, FM_CONFIG: config,
               "/lib/systemd/system/nvidia-fabricmanager.service": unit},
        scripts={"postinst": "#!/bin/sh\nset -e\n"
                 "[ -d /run/systemd/system ] && systemctl daemon-reload || true\n"},
    )


def _driver(branch: str, v: str) -> list[StandIn]:
    u = _upstream(v)
    pkgs = [StandIn(name, v, depends=dep.format(v=v, u=u), provides=prov.format(v=v, u=u),
                    conflicts=conf)
            for name, (dep, prov, conf) in DEBIAN_STYLE_DRIVER.items() if name != "nvidia-smi"]
    dep, _, _ = DEBIAN_STYLE_DRIVER["nvidia-smi"]
    pkgs.append(StandIn("nvidia-smi", v, depends=dep.format(v=v, u=u),
                        files={SMI_PATH: SMI_NO_DRIVER}, links={"/usr/bin/nvidia-smi": SMI_PATH}))
    depends = [f"{name} (= {v})" for name in CUDA_DRIVERS_DEPENDS]
    depends.append(f"nvidia-kernel-dkms (= {v}) | nvidia-kernel-open-dkms (= {v})")
    others = [b for b in BRANCHES if b != branch]
    pkgs += [
        StandIn(f"cuda-drivers-{branch}", v, depends=", ".join(depends),
                conflicts=", ".join(f"cuda-drivers-{o}" for o in others)),
        _fabric_manager(f"nvidia-fabricmanager-{branch}", v,
                        ", ".join(f"nvidia-fabricmanager-{o}" for o in others)
                        + ", nvidia-fabricmanager"),
    ]
    if int(branch) >= 580:
        # from 580 NVIDIA's scripts install fabric manager without the branch suffix
        # (package_sets.yaml): both names exist, sharing files, so they conflict
        pkgs.append(_fabric_manager("nvidia-fabricmanager", v, ", ".join(
            f"nvidia-fabricmanager-{b}" for b in BRANCHES)))
    if branch != "550":  # the compute-only metapackage exists from branch 560
        pkgs.append(StandIn("nvidia-driver-cuda", v, depends=(
            f"nvidia-smi (= {v}), libcuda1 (= {v}), nvidia-kernel-{u}")))
    return pkgs


def _nvidia_ctk(v: str) -> str:
    """/usr/bin/nvidia-ctk of nvidia-container-toolkit-base: ``--version`` as the real CLI prints
    it; the subcommands gpuhost's provision runs (``runtime configure``, ``system
    create-dev-char-symlinks``) succeed and change nothing (no container runtime in lab hosts);
    ``cdi generate --output=PATH`` writes a minimal spec naming the installed libcuda1's version
    (the real one names the driver's versioned library files), and fails without a driver."""
    return (
        "#!/bin/sh\n"
        "# gpuhost lab stand-in for NVIDIA's nvidia-ctk\n"
        'case "$1" in\n'
        f'  -v|--version|version) printf "NVIDIA Container Toolkit CLI version {_upstream(v)}'
        '\\ncommit: gpuhost-lab-stand-in\\n"; exit 0 ;;\n'
        # cdi generate: a spec naming the installed libcuda1's version as the real generator
        # names the driver's library files (its default output, stdout, is not used by gpuhost)
        '  cdi) [ "$2" = generate ] || exit 0; out=/dev/stdout\n'
        '    for a in "$@"; do case "$a" in --output=*) out="${a#--output=}" ;; esac; done\n'
        # libcuda1: NVIDIA's debian12 name; libnvidia-compute[-<branch>]: its Ubuntu names;
        # nvidia-driver-cuda-libs: its RPM name (tests/lab/rpmrepo.py)
        "    v=$(cat /usr/share/gpuhost-lab/libcuda1.version "
        "/usr/share/gpuhost-lab/libnvidia-compute*.version "
        "/usr/share/gpuhost-lab/nvidia-driver-cuda-libs.version 2>/dev/null | head -n 1); "
        "v=${v%-*}\n"
        '    [ -n "$v" ] || { echo "nvidia-ctk: failed to generate CDI spec: no driver '
        '(gpuhost lab stand-in)" >&2; exit 1; }\n'
        '    mkdir -p "$(dirname "$out")"\n'
        "    l=/usr/lib/x86_64-linux-gnu/libcuda.so.$v\n"
        "    printf 'cdiVersion: 0.5.0\\nkind: nvidia.com/gpu\\ncontainerEdits:\\n  mounts:\\n"
        "  - hostPath: %s\\n    containerPath: %s\\n' \"$l\" \"$l\" > \"$out\"; exit 0 ;;\n"
        "  runtime|system|config|hook|info) exit 0 ;;\n"
        "esac\n"
        'echo "nvidia-ctk: unknown command ${1:-(none)} (gpuhost lab stand-in)" >&2\n'
        "exit 1\n"
    )


def stand_ins() -> list[StandIn]:
    """Every package of the repository: names, versions and relations as in NVIDIA's repo."""
    pkgs: list[StandIn] = []
    for branch, versions in BRANCHES.items():
        for v in versions:
            pkgs += _driver(branch, v)
    # cuda-drivers / nvidia-open follow the newest branch at each release: installing one (or
    # `cuda`) moves the driver to the newest branch
    for branch in ("560", "580"):
        newest = BRANCHES[branch][-1]
        pkgs.append(StandIn("cuda-drivers", newest,
                            depends=f"cuda-drivers-{branch} (= {newest})"))
        pkgs.append(StandIn("nvidia-open", newest, depends=(
            f"cuda-drivers-{branch} (= {newest}), nvidia-kernel-open-dkms (= {newest})")))
    return pkgs + common_stand_ins()


def common_stand_ins() -> list[StandIn]:
    """The packages NVIDIA's repository carries alike for every OS: CUDA toolkits (and the
    ``cuda`` metapackage, which depends on that OS's ``cuda-drivers``), cuDNN, the container
    toolkit."""
    pkgs: list[StandIn] = []
    for series, versions in TOOLKIT.items():
        for v in versions:
            pkgs.append(_cuda_toolkit(series, v))
            pkgs.append(StandIn("cuda-toolkit-config-common", _upstream(v)))
    for series in ("12-6", "13-0"):
        for v in TOOLKIT[series]:
            pkgs.append(StandIn("cuda", v, depends=f"cuda-toolkit-{series} (= {v}), cuda-drivers"))
    for v in CUDNN:
        pkgs.append(StandIn("libcudnn9-cuda-12", v, section="multiverse/libs"))
    for v in CUDNN_13:
        pkgs.append(StandIn("libcudnn9-cuda-13", v, section="multiverse/libs"))
    for v in CONTAINER_TOOLKIT:
        # the four packages share one version but depend on each other only with ">=" (NVIDIA's
        # architecture overview), so apt could move the libraries alone without the pins
        pkgs += [
            StandIn("libnvidia-container1", v),
            StandIn("libnvidia-container-tools", v, depends=f"libnvidia-container1 (>= {v})"),
            StandIn("nvidia-container-toolkit-base", v,
                    files={"/usr/bin/nvidia-ctk": _nvidia_ctk(v)}),
            StandIn("nvidia-container-toolkit", v,
                    depends=f"nvidia-container-toolkit-base (= {v}), "
                    f"libnvidia-container-tools (>= {v}), libnvidia-container-tools (<< 2.0.0)"),
        ]
    return pkgs


def _build_deb(pkg: StandIn, arch: str, out: Path, work: Path) -> None:
    root = work / f"{pkg.name}_{pkg.version}"
    (root / "DEBIAN").mkdir(parents=True)
    marker = root / "usr/share/gpuhost-lab" / f"{pkg.name}.version"
    marker.parent.mkdir(parents=True)
    marker.write_text(pkg.version + "\n")
    for path, text in pkg.files.items():
        dest = root / path.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text)
        dest.chmod(0o755 if text.startswith("#!") else 0o644)
    for path, target in pkg.links.items():
        dest = root / path.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.symlink_to(target)
    for name, text in pkg.scripts.items():
        script = root / "DEBIAN" / name
        script.write_text(text)
        script.chmod(0o755)
    fields = {
        "Package": pkg.name,
        "Version": pkg.version,
        "Architecture": arch,
        "Maintainer": "gpuhost test lab <lab@invalid>",
        "Section": pkg.section,
        "Priority": "optional",
        "Depends": pkg.depends,
        "Provides": pkg.provides,
        "Conflicts": pkg.conflicts,
        **pkg.extra,
        "Description": f"EMPTY STAND-IN for NVIDIA's {pkg.name} (gpuhost test lab)\n"
        " Generated by tests/lab/aptrepo.py: a version marker file, and only what gpuhost reads\n"
        " or runs of the real package (that module's docstring).",
    }
    control = "".join(f"{k}: {v}\n" for k, v in fields.items() if v)
    (root / "DEBIAN/control").write_text(control)
    run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-z1", "--build", str(root),
         str(out / f"{pkg.name}_{pkg.version}_{arch}.deb")])


@contextlib.contextmanager
def signing(root: Path) -> Iterator[Callable[[Path], None]]:
    """A new signing key for the repositories under ``root``, exported there as KEY_NAME.gpg
    (binary, for signed-by) and KEY_NAME.asc; yields ``sign(folder)``, which writes the
    folder's InRelease and Release.gpg from its Release."""
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gpuhost-lab-key-") as tmp:
        gnupg = Path(tmp) / "gnupg"
        gnupg.mkdir(mode=0o700)
        gpg = ["gpg", "--homedir", str(gnupg), "--batch", "--quiet", "--pinentry-mode",
               "loopback", "--passphrase", ""]

        def sign(folder: Path) -> None:
            run([*gpg, "--clearsign", "--output", str(folder / "InRelease"),
                 str(folder / "Release")])
            run([*gpg, "--armor", "--detach-sign", "--output", str(folder / "Release.gpg"),
                 str(folder / "Release")])

        try:
            run([*gpg, "--quick-gen-key", "gpuhost lab repository <lab@invalid>", "ed25519",
                 "sign", "never"])
            run([*gpg, "--output", str(root / f"{KEY_NAME}.gpg"), "--export"])
            run([*gpg, "--armor", "--output", str(root / f"{KEY_NAME}.asc"), "--export"])
            yield sign
        finally:
            subprocess.run(["gpgconf", "--homedir", str(gnupg), "--kill", "all"],
                           capture_output=True, check=False)


def build_debs(pkgs: list[StandIn], arch: str, out: Path) -> None:
    """The stand-ins as .deb files in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gpuhost-lab-debs-") as tmp:
        for pkg in pkgs:
            _build_deb(pkg, arch, out, Path(tmp))


def publish_flat(repo: Path, pkgs: list[StandIn], arch: str, sign: Callable[[Path], None],
                 label: str = "gpuhost lab stand-in CUDA repository") -> None:
    """A flat, signed repository of ``pkgs`` in ``repo`` (NVIDIA's layout: ``deb URL /``)."""
    build_debs(pkgs, arch, repo)
    packages = run(["apt-ftparchive", "packages", "."], timeout=60, cwd=repo).stdout
    (repo / "Packages").write_text(packages)
    with gzip.open(repo / "Packages.gz", "wt") as fh:
        fh.write(packages)
    release = run(
        ["apt-ftparchive", "-o", "APT::FTPArchive::Release::Origin=gpuhost-lab",
         "-o", f"APT::FTPArchive::Release::Label={label}",
         "-o", f"APT::FTPArchive::Release::Architectures={arch}", "release", "."],
        cwd=repo,
    ).stdout
    (repo / "Release").write_text(release)
    sign(repo)


def build(root: Path, arch: str) -> Path:
    """(Re)build the debian12 repository under ``root``; return the flat repository directory.
    (The lab builds every OS shape's repository with ``shapes.build_repos``.)"""
    shutil.rmtree(root, ignore_errors=True)
    repo = root / REPO_SUBDIR / REPO_ARCH_DIR.get(arch, arch)
    repo.mkdir(parents=True)
    with signing(root) as sign:
        publish_flat(repo, stand_ins(), arch, sign)
    return repo
