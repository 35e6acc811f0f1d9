"""Facts about the kernel side of a GPU host: Secure Boot, kernels and their headers, nouveau."""

from __future__ import annotations

from pyinfra.api import FactBase
from typing_extensions import override

from gpuhost.facts.host_facts import KernelInfo, SecureBoot
from gpuhost.facts.probe_parsers import parse_kernels, parse_secure_boot
from gpuhost.probe.script import (
    HEADERS_AVAILABLE_CODE,
    KERNELS_CODE,
    SECURE_BOOT_CODE,
    UNAME_CODE,
)


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


def kernel_fact_command() -> str:
    """The audit probe's ``uname`` and ``kernels`` sections, then which headers apt offers."""
    return f"{UNAME_CODE}; {KERNELS_CODE}; {HEADERS_AVAILABLE_CODE}"


def parse_kernel_fact(output: list[str]) -> KernelInfo:
    """:func:`kernel_fact_command`'s lines: ``uname -r``, ``uname -m``, then key=value lines for
    the probe's kernel parser (the same one the audit uses)."""
    return parse_kernels("\n".join(output[:2]), "\n".join(output[2:]))


class Kernels(FactBase[KernelInfo]):
    """The running kernel and every kernel image in /boot (the next boot's), with whether their
    headers are installed (``/lib/modules/V/build``) and installable (``linux-headers-V``): the
    audit probe's kernel sections and parser, plus one apt-cache call.

    .. code:: python

        KernelInfo(running="6.1.0-56-amd64", arch="x86_64", boot=["6.1.0-56-amd64"],
                   headers=[], headers_available=["6.1.0-56-amd64"], ...)
    """

    @staticmethod
    @override
    def default() -> KernelInfo:
        return KernelInfo()

    @override
    def command(self) -> str:
        return kernel_fact_command()

    @override
    def process(self, output: list[str]) -> KernelInfo:
        return parse_kernel_fact(output)
