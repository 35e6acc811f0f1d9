"""Signed stand-in RPM repositories for Rocky-shaped lab hosts (tests/lab/shape_rhel.py).

Test equipment.

THE PACKAGES ARE EMPTY STAND-INS built here with rpmbuild, like the apt stand-ins of
tests/lab/aptrepo.py: NVIDIA's RPM names, epochs, versions and exact Requires/Provides/Conflicts,
one marker file each (/usr/share/gpuhost-lab/<name>.version holding VERSION-RELEASE), and only
what gpuhost reads or runs of the real package: ``nvidia-smi`` where NVIDIA's nvidia-driver-cuda
puts it (/usr/bin/nvidia-smi; it hands over to the lab's GPU emulator on GPU-shaped hosts and
otherwise fails like the real one without a module, exit 9), ``nvidia-persistenced`` the same
way with its unit, the CUDA toolkits, ``nvidia-ctk`` and the fabric manager daemon (the texts of
tests/lab/aptrepo.py).

Sources of the relations (read 2026-11-28):
* NVIDIA/yum-packaging-nvidia-driver nvidia-driver.spec (d06f50a): ``Epoch: 3``; nvidia-driver
  Requires nvidia-driver-libs = 3:V and nvidia-kmod-common = 3:V; -libs and -cuda-libs Require
  libnvidia-ml = 3:V-R, -cuda-libs also libnvidia-cfg = 3:V-R; nvidia-driver-cuda Requires
  nvidia-driver-cuda-libs, nvidia-kmod-common and nvidia-persistenced = 3:V and carries
  /usr/bin/nvidia-smi; libnvidia-fbc Requires nvidia-driver-cuda-libs = 3:V-R; xorg-x11-nvidia
  Requires nvidia-driver = 3:V.  RHEL's own
  libraries they also Require (libglvnd, egl-*, vulkan-loader, ocl-icd, opencl-filesystem) are
  left out: they would be stand-ins of stand-ins.
* NVIDIA/yum-packaging-nvidia-kmod-common: nvidia-kmod-common Requires nvidia-kmod = 3:V.
* NVIDIA/yum-packaging-dkms-nvidia dkms-open-nvidia.spec (090ba0e): kmod-nvidia-open-dkms,
  Epoch 3, Provides nvidia-kmod = 3:V, Requires nvidia-kmod-common = 3:V and dkms (EPEL),
  Conflicts kmod-nvidia-latest-dkms; kmod-nvidia-latest-dkms (dkms-nvidia.spec) the same the
  other way round.
* NVIDIA/gpu-driver-container rhel9/precompiled/Dockerfile: the fabric manager is
  ``nvidia-fabricmanager`` from branch 580, ``nvidia-fabric-manager`` below it.
* Assumptions (not read): cuda-drivers, cuda-drivers-<branch> and nvidia-open Require the
  driver at 3:V as below; nvidia-persistenced, -modprobe, -settings, -xconfig carry epoch 3 and
  the driver's version (NVIDIA's version-locking page lists them at 3:V).

Layout, under the lab's served folder (``http://<gateway>:8088/``):
  compute/cuda/repos/rhel9/x86_64    the RHEL 8/9 layout: module ``nvidia-driver`` (modules.yaml
                                     made by ``modules_yaml`` below, added with modifyrepo_c)
  compute/cuda/repos/rhel10/x86_64   the RHEL 10 layout: no modules
  rocky/9/{BaseOS,AppStream,CRB,extras}/x86_64/os, epel/9/Everything/x86_64
                                     what NVIDIA's RPMs need from the OS: kernel-devel for the
                                     running kernel and kernel-headers (AppStream),
                                     epel-release (extras), dkms (EPEL), rocky-release
  gpuhost-lab-rpm.asc                the lab's RPM signing key (one per lab)

The unsigned RPMs are built once per definition in the machine cache (``rpms-<hash>``); each lab
copies them, signs them with its own key (rpmsign) and makes the repository metadata.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import aptrepo
from .config import REPO_PORT, cache_dir
from .system import LabError, file_lock, run

KEY_FILE = "gpuhost-lab-rpm.asc"
KEY_UID = "gpuhost lab RPM repositories <lab-rpm@invalid>"
CUDA = {"el9": "compute/cuda/repos/rhel9/x86_64", "el10": "compute/cuda/repos/rhel10/x86_64"}
ROCKY = {"baseos": "rocky/9/BaseOS/x86_64/os", "appstream": "rocky/9/AppStream/x86_64/os",
         "crb": "rocky/9/CRB/x86_64/os", "extras": "rocky/9/extras/x86_64/os",
         "epel": "epel/9/Everything/x86_64"}
EPOCH = 3
#: driver releases per branch, oldest first: 580 as the apt stand-in's (tests/lab/aptrepo.py
#: DRIVER_580: 580.178.04 is the built-in profiles' driver), one 570 (the fabric manager's old
#: name) and one 590 (what an unlocked host would move to)
BRANCHES = {"570": ["570.195.03"], "580": ["580.105.08", "580.159.03", "580.178.04"],
            "590": ["590.48.01"]}
#: the packages of one driver release that belong to the ``nvidia-driver`` module's streams
#: (every one of them: NVIDIA's public genmodules.py misses libnvidia-ml and older kmods,
#: platforms.md section 3, findings 3 and 7); the fabric manager is not modular
STREAM_COMMON = ["nvidia-driver", "nvidia-driver-libs", "nvidia-driver-cuda",
                 "nvidia-driver-cuda-libs", "libnvidia-ml", "libnvidia-cfg", "libnvidia-fbc",
                 "nvidia-persistenced", "nvidia-modprobe", "nvidia-settings", "nvidia-xconfig",
                 "nvidia-kmod-common", "xorg-x11-nvidia", "cuda-drivers"]
KMOD = {"dkms": "kmod-nvidia-latest-dkms", "open": "kmod-nvidia-open-dkms"}
#: toolkits, cuDNN and the container toolkit at the versions the built-in profiles pin
#: (src/gpuhost/data/profiles.yaml: CUDA 13.0 and 12.9, cuDNN 9.17.0 / 9.10.2, toolkit 1.19.1)
#: plus an older and a newer release where an upgrade must pass one over
TOOLKIT = {"12-9": ["12.9.0", "12.9.1"], "13-0": ["13.0.0", "13.0.2"]}
CUDNN = {"libcudnn9-cuda-12": ["9.5.1.17", "9.10.2.21"],
         "libcudnn9-cuda-13": ["9.16.0.29", "9.17.0.29", "9.19.0.56"]}
CONTAINER_TOOLKIT = ["1.17.0", "1.19.1"]
SMI = "/usr/bin/nvidia-smi"
PERSISTENCED = "/usr/bin/nvidia-persistenced"
UNIT_DIR = "/usr/lib/systemd/system"
EMULATOR = "/usr/lib/gpuhost-lab-gpu/gpuemu.py"


@dataclass(frozen=True)
class Rpm:
    """One stand-in package; ``requires`` etc. in RPM syntax, ``post``/``preun`` shell text."""

    name: str
    version: str
    epoch: int | None = None
    requires: tuple[str, ...] = ()
    provides: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    files: dict[str, str] = field(default_factory=dict)  # path -> text ("#!": mode 755)
    links: dict[str, str] = field(default_factory=dict)  # path -> symlink target
    post: str = ""
    preun: str = ""
    arch: str = "x86_64"


def _hand_over(name: str, fallback: str) -> str:
    """A binary that is the GPU emulator on GPU-shaped hosts (tests/lab/gpu), else ``fallback``."""
    return (f"#!/bin/sh\n# gpuhost lab stand-in for NVIDIA's {name}\n"
            f"if [ -f /etc/gpuhost-lab-gpu/model.json ] && [ -f {EMULATOR} ]; then\n"
            f'  exec /usr/bin/python3 {EMULATOR} {name} "$@"\nfi\n{fallback}')


PERSISTENCED_UNIT = (
    "[Unit]\nDescription=NVIDIA Persistence Daemon (gpuhost lab stand-in)\n"
    "Wants=syslog.target\n\n[Service]\nType=forking\n"
    f"ExecStart={PERSISTENCED} --verbose\nExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced\n"
)
SYSTEMD_RELOAD = "[ -d /run/systemd/system ] && systemctl daemon-reload || :\n"


def _driver(branch: str, v: str) -> list[Rpm]:
    """One driver release: NVIDIA's package names, epoch 3, exact Requires (module docstring)."""
    e = f"{EPOCH}:{v}"
    er = f"{e}-1%{{?dist}}"
    pkgs = [
        Rpm("nvidia-driver", v, EPOCH, (f"nvidia-driver-libs = {e}", f"nvidia-kmod-common = {e}"),
            provides=("nvidia-drivers",)),
        Rpm("nvidia-driver-libs", v, EPOCH, (f"libnvidia-ml = {er}",)),
        Rpm("nvidia-driver-cuda-libs", v, EPOCH, (f"libnvidia-ml = {er}", f"libnvidia-cfg = {er}")),
        Rpm("libnvidia-ml", v, EPOCH, provides=(f"cuda-nvml = {er}",)),
        Rpm("libnvidia-cfg", v, EPOCH),
        Rpm("libnvidia-fbc", v, EPOCH, (f"nvidia-driver-cuda-libs = {er}",)),
        Rpm("nvidia-driver-cuda", v, EPOCH,
            (f"nvidia-driver-cuda-libs = {e}", f"nvidia-kmod-common = {e}",
             f"nvidia-persistenced = {e}"),
            files={SMI: _hand_over("nvidia-smi", aptrepo.SMI_NO_DRIVER.split("\n", 4)[-1])}),
        Rpm("nvidia-persistenced", v, EPOCH, files={
            PERSISTENCED: _hand_over("nvidia-persistenced", (
                'echo "nvidia-persistenced failed to initialize. Check syslog for more '
                'details." >&2\nexit 1\n')),
            f"{UNIT_DIR}/nvidia-persistenced.service": PERSISTENCED_UNIT}, post=SYSTEMD_RELOAD),
        Rpm("nvidia-modprobe", v, EPOCH),
        Rpm("nvidia-settings", v, EPOCH),
        Rpm("nvidia-xconfig", v, EPOCH),
        Rpm("xorg-x11-nvidia", v, EPOCH, (f"nvidia-driver = {e}",)),
        Rpm("nvidia-kmod-common", v, EPOCH, (f"nvidia-kmod = {e}",), arch="noarch"),
        Rpm(KMOD["dkms"], v, EPOCH, (f"nvidia-kmod-common = {e}", "dkms"),
            (f"nvidia-kmod = {e}",), (KMOD["open"],)),
        Rpm(KMOD["open"], v, EPOCH, (f"nvidia-kmod-common = {e}", "dkms"),
            (f"nvidia-kmod = {e}",), (KMOD["dkms"],)),
        Rpm("cuda-drivers", v, None, (f"nvidia-driver = {e}", f"nvidia-driver-cuda = {e}")),
        Rpm(f"cuda-drivers-{branch}", v, None, (f"cuda-drivers = {v}",)),
        Rpm("nvidia-open", v, EPOCH, (f"{KMOD['open']} = {e}", f"nvidia-driver-cuda = {e}",
                                      f"nvidia-driver = {e}")),
    ]
    # what NVIDIA's driver container locks beside the fabric manager on NVSwitch systems
    # (gpu-driver-container rhel9/install.sh): the driver's version, not modular
    pkgs += [Rpm(name, v) for name in ("libnvidia-nscq", "nvidia-imex", "libnvsdm")]
    fm_name = "nvidia-fabricmanager" if int(branch) >= 580 else "nvidia-fabric-manager"
    fm = aptrepo._fabric_manager(fm_name, f"{v}-1", "")
    pkgs.append(Rpm(fm_name, v, None, files={
        path.replace("/lib/systemd/system", UNIT_DIR): text for path, text in fm.files.items()},
        post=SYSTEMD_RELOAD))
    return pkgs


def _toolkits() -> list[Rpm]:
    pkgs = []
    for series, versions in TOOLKIT.items():
        for v in versions:
            deb = aptrepo._cuda_toolkit(series, f"{v}-1")
            # /usr/local/cuda through alternatives, as NVIDIA's RPMs do (update-alternatives)
            pkgs.append(Rpm(deb.name, v, files=deb.files, post=deb.scripts["postinst"],
                            preun=deb.scripts["prerm"]))
    pkgs += [Rpm(name, v) for name, versions in CUDNN.items() for v in versions]
    for v in CONTAINER_TOOLKIT:
        pkgs += [
            Rpm("libnvidia-container1", v),
            Rpm("libnvidia-container-tools", v, requires=(f"libnvidia-container1 >= {v}",)),
            Rpm("nvidia-container-toolkit-base", v,
                files={"/usr/bin/nvidia-ctk": aptrepo._nvidia_ctk(v)}),
            Rpm("nvidia-container-toolkit", v, requires=(
                f"nvidia-container-toolkit-base = {v}", f"libnvidia-container-tools >= {v}",
                "libnvidia-container-tools < 2.0.0")),
        ]
    return pkgs


def cuda_packages() -> list[Rpm]:
    """Every package of NVIDIA's repository stand-in (both layouts carry the same set)."""
    pkgs = [p for branch, versions in BRANCHES.items() for v in versions
            for p in _driver(branch, v)]
    return pkgs + _toolkits()


def kernel_release() -> str:
    return os.uname().release


def os_packages() -> dict[str, list[Rpm]]:
    """What NVIDIA's RPMs need from Rocky and EPEL, per repository id (ROCKY)."""
    uname = kernel_release()
    kver = uname.split("-", 1)[0]
    epel = (f"[epel]\nname=Extra Packages for Enterprise Linux 9 - $basearch\n"
            f"baseurl=http://lab-gateway:{REPO_PORT}/{ROCKY['epel']}/\nenabled=1\n"
            "gpgcheck=1\ngpgkey=file:///etc/pki/rpm-gpg/RPM-GPG-KEY-EPEL-9\n")
    dkms = ("#!/bin/sh\n# gpuhost lab stand-in for dkms: builds nothing (lab hosts share this "
            "machine's kernel)\n"
            'case "$1" in --version|-V) echo "dkms-3.1.6"; exit 0 ;; esac\nexit 0\n')
    return {
        # the running kernel's headers under the name dnf resolves kernel-devel-$(uname -r) to
        # (this machine's kernel release has dashes a version may not have: a provided name)
        "appstream": [
            # the headers tree, and the /lib/modules/<release>/build link gpuhost's kernel fact
            # reads (on RHEL kernel-core owns the link; the lab host has no kernel package)
            Rpm("kernel-devel", kver, provides=(f"kernel-devel-{uname}",),
                files={f"/usr/src/kernels/{uname}/Makefile": "# gpuhost lab stand-in\n"},
                links={f"/usr/lib/modules/{uname}/build": f"/usr/src/kernels/{uname}"}),
            Rpm("kernel-headers", kver),
        ],
        # in the Rocky image's rpmdb from the start (rocky.PREINSTALLED): the release package,
        # and bash for the /bin/sh every scriptlet needs (Debian's files, registered only)
        "baseos": [
            Rpm("rocky-release", "9.6", provides=(
                "system-release", "system-release(releasever) = 9", "redhat-release = 9.6"),
                arch="noarch"),
            Rpm("bash", "5.1.8", provides=("/bin/sh", "/bin/bash", "/usr/bin/sh")),
        ],
        "extras": [Rpm("epel-release", "9", files={"/etc/yum.repos.d/epel.repo": epel},
                       arch="noarch")],
        "crb": [],
        "epel": [Rpm("dkms", "3.1.6", files={"/usr/sbin/dkms": dkms}, arch="noarch")],
    }


# ------------------------------------------------------------------ building


def _spec(group: list[Rpm], tree: Path) -> str:
    """One spec for packages that share version and epoch: the first is the main package."""
    first = group[0]
    lines = ["%global debug_package %{nil}", "%global __os_install_post %{nil}",
             "%define _build_id_links none", f"Name: {first.name}", f"Version: {first.version}",
             "Release: 1%{?dist}", "License: none", "AutoReqProv: no",
             f"Summary: EMPTY STAND-IN for {first.name} (gpuhost test lab)"]
    if first.epoch is not None:
        lines.append(f"Epoch: {first.epoch}")
    body: list[str] = []
    for i, p in enumerate(group):
        tag = "" if i == 0 else f" -n {p.name}"
        head = [] if i == 0 else [f"%package{tag}", f"Summary: EMPTY STAND-IN for {p.name}",
                                  "AutoReqProv: no"]
        head += [f"BuildArch: {p.arch}"] if p.arch == "noarch" else []
        head += [f"Requires: {r}" for r in p.requires]
        head += [f"Provides: {r}" for r in p.provides]
        head += [f"Conflicts: {r}" for r in p.conflicts]
        (lines if i == 0 else body).extend(head)
        body += [f"%description{tag}", "Generated by tests/lab/rpmrepo.py: NVIDIA's name, epoch "
                 "and relations, a version marker and only what gpuhost reads or runs.", ""]
        if p.post:
            body += [f"%post{tag}", p.post.removeprefix("#!/bin/sh\n"), ""]
        if p.preun:
            body += [f"%preun{tag}", p.preun.removeprefix("#!/bin/sh\n"), ""]
        body += [f"%files{tag}", f"/usr/share/gpuhost-lab/{p.name}.version", *p.files, *p.links,
                 ""]
    install = ["%install", f"cp -a {tree}/. %{{buildroot}}/", ""]
    return "\n".join(lines + [""] + body + install) + "\n"


def _build_group(group: list[Rpm], dist: str, out: Path, work: Path) -> None:
    first = group[0]
    tree = work / f"tree-{first.name}-{first.version}"
    for p in group:
        marker = tree / "usr/share/gpuhost-lab" / f"{p.name}.version"
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(f"{p.version}-1.{dist}\n")
        for path, text in p.files.items():
            dest = tree / path.lstrip("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text)
            dest.chmod(0o755 if text.startswith("#!") else 0o644)
        for path, target in p.links.items():
            dest = tree / path.lstrip("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.symlink_to(target)
    spec = work / f"{first.name}-{first.version}.spec"
    spec.write_text(_spec(group, tree))
    run(["rpmbuild", "-bb", "--quiet", "--define", f"_topdir {work / 'rpmbuild'}",
         "--define", f"dist .{dist}", "--define", f"_rpmdir {out}",
         "--define", "_build_name_fmt %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm",
         "--define", "_binary_payload w1.gzdio", str(spec)], timeout=120)


def _groups(pkgs: list[Rpm]) -> list[list[Rpm]]:
    """Packages grouped by (version, epoch), each group without a name twice."""
    groups: list[list[Rpm]] = []
    for p in pkgs:
        home = next((g for g in groups if (g[0].version, g[0].epoch) == (p.version, p.epoch)
                     and all(x.name != p.name for x in g)), None)
        if home is None:
            groups.append([p])
        else:
            home.append(p)
    return groups


def _definition() -> dict[str, Any]:
    return {"cuda": [asdict(p) for p in cuda_packages()],
            "os": {k: [asdict(p) for p in v] for k, v in os_packages().items()}}


def cached_rpms() -> Path:
    """The unsigned RPMs of every repository, built once per definition: <cache>/rpms-<hash>/
    {el9,el10,<ROCKY id>}/*.rpm."""
    digest = hashlib.sha256(json.dumps(_definition(), sort_keys=True).encode()).hexdigest()[:16]
    done = cache_dir() / f"rpms-{digest}"
    with file_lock(cache_dir() / "rpms.lock", "stand-in RPM build"):
        if done.is_dir():
            return done
        partial = done.with_name(done.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        with tempfile.TemporaryDirectory(prefix="gpuhost-lab-rpms-") as tmp:
            jobs = [(dist, cuda_packages(), dist) for dist in CUDA]
            jobs += [(repo, pkgs, "el9") for repo, pkgs in os_packages().items()]
            for name, pkgs, dist in jobs:
                out = partial / name
                out.mkdir(parents=True)
                for group in _groups(pkgs):
                    _build_group(group, dist, out, Path(tmp) / name)
        partial.rename(done)
        return done


def _nevras(paths: list[Path]) -> list[tuple[str, str]]:
    """(name, 'name-epoch:version-release.arch') of RPM files, as modulemd artifacts name them."""
    out = run(["rpm", "-qp", "--nosignature", "--qf",
               "%{NAME}\t%{EPOCHNUM}:%{VERSION}-%{RELEASE}.%{ARCH}\n", *map(str, paths)]).stdout
    return [(name, f"{name}-{evra}") for name, evra in
            (line.split("\t") for line in out.splitlines())]


def modules_yaml(rpms: list[Path]) -> str:
    """modulemd v2 documents of module ``nvidia-driver`` for the driver RPMs ``rpms``: streams
    ``<branch>-dkms``/``<branch>-open`` (one branch) and ``latest-dkms``/``open-dkms`` (every
    branch), each listing every release's packages of its flavour as artifacts; default stream
    latest-dkms (NVIDIA's modulemd-defaults).  No precompiled streams (``<branch>``, ``latest``):
    the lab has no precompiled kmods."""
    by_version: dict[str, list[tuple[str, str]]] = {}
    for name, nevra in _nevras(rpms):
        if name in STREAM_COMMON or name in KMOD.values() or name == "nvidia-open" \
                or name.startswith("cuda-drivers-"):
            version = nevra.rsplit(":", 1)[1].split("-")[0]
            by_version.setdefault(version, []).append((name, nevra))
    streams: dict[str, list[str]] = {}
    for version, entries in sorted(by_version.items()):
        branch = version.split(".")[0]
        for flavour in KMOD:
            other = KMOD["open" if flavour == "dkms" else "dkms"]
            arts = [n for name, n in entries if name != other
                    and (flavour == "open" or name != "nvidia-open")]
            for stream in (f"{branch}-{flavour}", f"{'latest' if flavour == 'dkms' else 'open'}"
                           "-dkms"):
                streams.setdefault(stream, []).extend(arts)
    docs = []
    for n, (stream, arts) in enumerate(sorted(streams.items())):
        kmod = KMOD["open" if stream.endswith("-open") or stream == "open-dkms" else "dkms"]
        docs.append({"document": "modulemd", "version": 2, "data": {
            "name": "nvidia-driver", "stream": stream, "version": 20261128 + n,
            "context": hashlib.sha256(stream.encode()).hexdigest()[:8], "arch": "x86_64",
            "summary": "Nvidia driver for Linux (gpuhost lab stand-in)",
            "description": f"Stream {stream} of the gpuhost lab's stand-in NVIDIA repository.",
            "license": {"module": ["MIT"]},
            "profiles": {"default": {"rpms": ["nvidia-driver", "nvidia-driver-cuda",
                                              "nvidia-settings", kmod]},
                         "fm": {"rpms": ["cuda-drivers", kmod]}},
            "artifacts": {"rpms": sorted(arts)}}})
    docs.append({"document": "modulemd-defaults", "version": 1, "data": {
        "module": "nvidia-driver", "stream": "latest-dkms",
        "profiles": {s: ["default"] for s in sorted(streams)}}})
    return "".join(yaml.safe_dump(d, sort_keys=False, explicit_start=True, explicit_end=True)
                   for d in docs)


def build(served: Path, gateway: str) -> dict[str, Any]:
    """Copy the cached RPMs under ``served``, sign them with a new key of this lab, make every
    repository's metadata (rhel9 with modules.yaml); returns lab.json's record of them."""
    cached = cached_rpms()
    dirs = {**{d: served / p for d, p in CUDA.items()}, **{r: served / p for r, p in ROCKY.items()}}
    with tempfile.TemporaryDirectory(prefix="gpuhost-lab-rpmsign-") as tmp:
        gnupg = Path(tmp) / "gnupg"
        gnupg.mkdir(mode=0o700)
        env_gpg = ["gpg", "--homedir", str(gnupg), "--batch", "--quiet", "--pinentry-mode",
                   "loopback", "--passphrase", ""]
        try:
            run([*env_gpg, "--quick-gen-key", KEY_UID, "rsa3072", "sign", "never"])
            run([*env_gpg, "--armor", "--output", str(served / KEY_FILE), "--export"])
            for name, dest in dirs.items():
                shutil.rmtree(dest, ignore_errors=True)
                dest.mkdir(parents=True)
                for rpm in (cached / name).glob("*.rpm"):
                    shutil.copyfile(rpm, dest / rpm.name)
            rpms = sorted(p for d in dirs.values() for p in d.glob("*.rpm"))
            run(["rpmsign", "--addsign", "--define", f"_gpg_name {KEY_UID}",
                 "--define", f"_gpg_path {gnupg}", "--define", "__gpg /usr/bin/gpg",
                 *map(str, rpms)], timeout=600)
        finally:
            subprocess.run(["gpgconf", "--homedir", str(gnupg), "--kill", "all"],
                           capture_output=True, check=False)
    for dest in dirs.values():
        run(["createrepo_c", "--quiet", "--no-database", str(dest)], timeout=300)
    rhel9 = dirs["el9"]
    with tempfile.TemporaryDirectory(prefix="gpuhost-lab-modules-") as tmp:
        modules = Path(tmp) / "modules.yaml"
        modules.write_text(modules_yaml(sorted(rhel9.glob("*.rpm"))))
        run(["modifyrepo_c", "--mdtype=modules", str(modules), str(rhel9 / "repodata")])
    base = f"http://{gateway}:{REPO_PORT}"
    for dist, path in CUDA.items():  # NVIDIA's repository file, as `dnf config-manager` takes it
        name = f"cuda-rh{dist}-x86_64"
        (dirs[dist] / f"cuda-rh{dist}.repo").write_text(
            f"[{name}]\nname={name}\nbaseurl={base}/{path}\nenabled=1\ngpgcheck=1\n"
            f"gpgkey={base}/{KEY_FILE}\n")
    if not (rhel9 / "repodata/repomd.xml").exists():
        raise LabError(f"no repodata in {rhel9}")
    return {"key_path": str(served / KEY_FILE), "key_url": f"{base}/{KEY_FILE}",
            "cuda_rhel9_url": f"{base}/{CUDA['el9']}/",
            "cuda_rhel10_url": f"{base}/{CUDA['el10']}/"}
