"""Kernel prerequisites for an out-of-tree NVIDIA module: headers, nouveau out of the way."""

from __future__ import annotations

from collections.abc import Generator

from pyinfra import host
from pyinfra.api import operation

from gpuhost.facts.host_facts import KernelInfo
from gpuhost.facts.kernel import Kernels
from gpuhost.operations._files import put_text
from gpuhost.pkgmgr import APT

NOUVEAU_BLACKLIST = "/etc/modprobe.d/gpuhost-blacklist-nouveau.conf"
NOUVEAU_CONTENT = (
    "# Written by gpuhost: the NVIDIA driver cannot load while nouveau holds the GPU.\n"
    "blacklist nouveau\n"
    "options nouveau modeset=0\n"
)
REBUILD_INITRAMFS = (
    "if command -v update-initramfs >/dev/null 2>&1; then update-initramfs -u -k all; "
    "elif command -v dracut >/dev/null 2>&1; then dracut -f --regenerate-all; "
    "else echo 'gpuhost: no initramfs tool on this host, nothing to rebuild'; fi"
)


def headers_to_install(kernels: KernelInfo) -> tuple[list[str], list[str]]:
    """(packages to install, kernels without an installable headers package) for the running
    kernel and every kernel image in /boot."""
    wanted = [k for k in [kernels.running, *kernels.boot] if k]
    lacking = [k for k in dict.fromkeys(wanted) if k not in kernels.headers]
    install = [f"linux-headers-{k}" for k in lacking if k in kernels.headers_available]
    missing = [k for k in lacking if k not in kernels.headers_available]
    return install, missing


@operation()
def headers() -> Generator:
    """Headers for the running kernel and every kernel in /boot, so DKMS builds the module for the
    kernel running now and the one booted next (Debian/Ubuntu package names)."""
    install, missing = headers_to_install(host.get_fact(Kernels))
    note = f"; no headers package for {', '.join(missing)}" if missing else ""
    if not install:
        host.noop(f"kernel headers present{note}")
        return
    yield APT.install(sorted(install))


@operation()
def nouveau_blacklisted() -> Generator:
    """Blacklist nouveau; rebuild the initramfs only when the blacklist file changed."""
    commands = list(put_text(NOUVEAU_BLACKLIST, NOUVEAU_CONTENT))
    if not commands:
        host.noop("nouveau already blacklisted")
        return
    yield from commands
    yield REBUILD_INITRAMFS
