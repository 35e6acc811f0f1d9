"""The base image: one debootstrap of Debian 12, cached as a zstd tarball keyed by its recipe.

The tarball lives in the machine cache (``GPUHOST_LAB_CACHE``, default /var/cache/gpuhost-lab), so
it survives fresh clones of the repository; it is rebuilt only when RECIPE below changes.  Its
extracted tree is the read-only lower layer every host's overlay shares.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from .config import cache_dir
from .system import LabError, file_lock, run, unmount_all

MIRROR = os.environ.get("GPUHOST_LAB_MIRROR", "http://deb.debian.org/debian")
SECURITY_MIRROR = os.environ.get(
    "GPUHOST_LAB_SECURITY_MIRROR", "http://deb.debian.org/debian-security"
)
COMPONENTS = "main contrib non-free non-free-firmware"

DEBIAN_SOURCES = f"""\
Types: deb
URIs: {MIRROR}
Suites: bookworm bookworm-updates
Components: {COMPONENTS}
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: {SECURITY_MIRROR}
Suites: bookworm-security
Components: {COMPONENTS}
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""

# What the hosts need: sshd and python3 for pyinfra/testinfra, real systemd as PID 1, gnupg and
# ca-certificates for apt keys and signed-by repositories, procps/kmod/iputils for common checks.
RECIPE: dict[str, object] = {
    "suite": "bookworm",
    "variant": "minbase",
    "mirror": MIRROR,
    "include": [
        "openssh-server", "python3", "systemd", "systemd-sysv", "dbus", "iproute2", "sudo",
        "ca-certificates", "gnupg", "apt-utils", "procps", "kmod", "iputils-ping", "less",
    ],
    "files": {
        "etc/apt/sources.list.d/debian.sources": DEBIAN_SOURCES,
        "etc/apt/sources.list": "# see /etc/apt/sources.list.d/debian.sources\n",
        # apt's proxy is the lab gateway (apt-cacher-ng on the bridge, named in each host's
        # /etc/hosts); the lab's own repository on the same address is fetched directly.
        "etc/apt/apt.conf.d/01lab-proxy": (
            'Acquire::http::Proxy "http://lab-gateway:3142";\n'
            'Acquire::http::Proxy::lab-gateway "DIRECT";\n'
        ),
        "etc/apt/apt.conf.d/02lab-no-translations": 'Acquire::Languages "none";\n',
        # lab hosts have no DNS: names of the lab are in each host's /etc/hosts
        "etc/resolv.conf": "# gpuhost lab host: no DNS, see /etc/hosts\n",
        "etc/ssh/sshd_config.d/lab.conf": (
            "HostKey /etc/ssh/ssh_host_ed25519_key\n"
            "PermitRootLogin prohibit-password\n"
            "PasswordAuthentication no\n"
            "UseDNS no\n"
        ),
        "etc/machine-id": "",
    },
    # units that would change hosts behind a test's back
    "mask": ["apt-daily.timer", "apt-daily-upgrade.timer", "apt-daily.service",
             "apt-daily-upgrade.service", "e2scrub_all.timer", "fstrim.timer"],
    "remove": ["etc/ssh/ssh_host_*", "var/lib/dbus/machine-id", "var/cache/apt/*.bin",
               "var/lib/apt/lists/*"],
}

TAR_OPTS = ["--numeric-owner", "--xattrs", "--xattrs-include=*"]


def recipe_hash() -> str:
    return hashlib.sha256(json.dumps(RECIPE, sort_keys=True).encode()).hexdigest()[:16]


def tarball_path() -> Path:
    return cache_dir() / f"base-{recipe_hash()}.tar.zst"


def root_path() -> Path:
    return cache_dir() / "roots" / recipe_hash()


def _log(msg: str) -> None:
    print(f"lab: {msg}", file=sys.stderr, flush=True)


def _customize(root: Path) -> None:
    files = RECIPE["files"]
    assert isinstance(files, dict)
    for rel in RECIPE["remove"]:  # type: ignore[attr-defined]
        for path in root.glob(rel):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():
            path.unlink()
        path.write_text(text)
    for unit in RECIPE["mask"]:  # type: ignore[attr-defined]
        link = root / "etc/systemd/system" / unit
        link.unlink(missing_ok=True)
        link.symlink_to("/dev/null")
    run(["chroot", str(root), "apt-get", "clean"])
    (root / "var/lib/apt/lists/partial").mkdir(parents=True, exist_ok=True)


def _build(tarball: Path) -> None:
    work = cache_dir() / f"build-{recipe_hash()}-{os.getpid()}"
    root = work / "root"
    log = cache_dir() / f"build-{recipe_hash()}.log"
    _log(f"building base image {tarball.name} with debootstrap (about a minute, once) ...")
    shutil.rmtree(work, ignore_errors=True)
    root.mkdir(parents=True)
    cmd = [
        "debootstrap", f"--variant={RECIPE['variant']}",
        "--include=" + ",".join(RECIPE["include"]),  # type: ignore[arg-type]
        str(RECIPE["suite"]), str(root), MIRROR,
    ]
    try:
        with open(log, "w") as fh:
            rc = subprocess.call(cmd, stdout=fh, stderr=subprocess.STDOUT)
        if rc != 0:
            tail = log.read_text().splitlines()[-15:]
            raise LabError(
                f"debootstrap failed (exit {rc}); log {log}, last lines:\n" + "\n".join(tail)
            )
        unmount_all(root)
        _customize(root)
        partial = tarball.with_suffix(".partial")
        with open(partial, "wb") as out:
            tar = subprocess.Popen(["tar", *TAR_OPTS, "-C", str(root), "-cf", "-", "."],
                                   stdout=subprocess.PIPE)
            assert tar.stdout is not None
            zst = subprocess.run(["zstd", "-q", "-T0", "-3"], stdin=tar.stdout, stdout=out)
            tar.stdout.close()
            if tar.wait() != 0 or zst.returncode != 0:
                raise LabError(f"could not write {partial} (tar {tar.returncode}, "
                               f"zstd {zst.returncode})")
        partial.rename(tarball)
    finally:
        unmount_all(work)
        shutil.rmtree(work, ignore_errors=True)


def _extract(tarball: Path, dest: Path) -> None:
    partial = dest.with_name(dest.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    zst = subprocess.Popen(["zstd", "-q", "-dc", str(tarball)], stdout=subprocess.PIPE)
    assert zst.stdout is not None
    tar = subprocess.run(["tar", *TAR_OPTS, "-C", str(partial), "-xf", "-"], stdin=zst.stdout)
    zst.stdout.close()
    if zst.wait() != 0 or tar.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        raise LabError(f"could not extract {tarball}: remove it to rebuild the base image")
    partial.rename(dest)


def ensure_base(rebuild: bool = False) -> Path:
    """Return the extracted base root, building and extracting it first when needed.

    A file lock in the cache keeps two labs from building or extracting at the same time.
    """
    cache_dir().mkdir(parents=True, exist_ok=True)
    tarball, root = tarball_path(), root_path()
    with file_lock(cache_dir() / "build.lock", "base image build"):
        if rebuild:
            tarball.unlink(missing_ok=True)
        if not tarball.exists():
            _build(tarball)
            shutil.rmtree(root, ignore_errors=True)
        if not root.exists():
            _extract(tarball, root)
    return root
