"""Facts about the kernel side of a GPU host: Secure Boot, kernels and their headers, nouveau."""

from __future__ import annotations

from typing import TypedDict

from pyinfra.api import FactBase
from typing_extensions import override

from gpuhost.facts.host_facts import SecureBoot
from gpuhost.facts.probe_parsers import parse_secure_boot
from gpuhost.probe.script import SECURE_BOOT_CODE


class SecureBootState(FactBase[SecureBoot]):
    """Whether the host booted with UEFI Secure Boot (unsigned modules will not load): the audit
    probe's ``secure-boot`` section and parser, so provision and audit read it the same way.

    .. code:: python

        SecureBoot(enabled=False, efi=False, source="no EFI (legacy boot)")
    """

    @staticmethod
    @override
    def default() -> SecureBoot:
        return SecureBoot()

    @override
    def command(self) -> str:
        return SECURE_BOOT_CODE

    @override
    def process(self, output: list[str]) -> SecureBoot:
        return parse_secure_boot("\n".join(output))


class KernelDict(TypedDict):
    version: str
    running: bool
    headers_installed: bool
    headers_available: bool


def parse_kernels(lines: list[str]) -> list[KernelDict]:
    """Lines ``VERSION running|installed headers:yes|no available:yes|no`` → one dict per kernel,
    the running kernel first."""
    kernels: dict[str, KernelDict] = {}
    for line in lines:
        parts = line.split()
        if len(parts) != 4:
            continue
        version, role, headers, available = parts
        entry = kernels.get(version)
        running = role == "running" or (entry is not None and entry["running"])
        kernels[version] = {
            "version": version,
            "running": running,
            "headers_installed": headers == "headers:yes",
            "headers_available": available == "available:yes",
        }
    return sorted(kernels.values(), key=lambda k: (not k["running"], k["version"]))


class Kernels(FactBase[list[KernelDict]]):
    """The running kernel and every kernel image in /boot (the next boot's), with whether their
    headers are installed (``/lib/modules/V/build``) and installable (``linux-headers-V``):

    .. code:: python

        [{"version": "6.1.0-56-amd64", "running": True, "headers_installed": False,
          "headers_available": True}]
    """

    @staticmethod
    @override
    def default() -> list:
        return []

    @override
    def command(self) -> str:
        return (
            "r=$(uname -r); "
            "for k in $r $(ls /boot 2>/dev/null | sed -n 's/^vmlinuz-//p'); do "
            'role=installed; [ "$k" = "$r" ] && role=running; '
            "h=no; [ -e /lib/modules/$k/build ] && h=yes; "
            "a=no; LC_ALL=C apt-cache show linux-headers-$k >/dev/null 2>&1 && a=yes; "
            'echo "$k $role headers:$h available:$a"; done'
        )

    @override
    def process(self, output: list[str]) -> list[KernelDict]:
        return parse_kernels(output)
