"""Facts for Secure Boot module signing and CDI specs: the audit probe's ``module-signing`` and
``cdi`` sections and parsers, so provision, upgrade and audit read them the same way."""

from __future__ import annotations

from pyinfra.api import FactBase
from typing_extensions import override

from gpuhost.parsers.cdi import CdiSpec, list_specs_command, parse_cdi_specs
from gpuhost.parsers.signing import (
    DkmsRelease,
    SigningFacts,
    parse_dkms_release,
    parse_signing_output,
)
from gpuhost.pkgmgr import APT
from gpuhost.probe.script import module_signing_code


class ModuleSigning(FactBase[SigningFacts]):
    """DKMS's signing settings, the signing certificate (``cert``, else the one DKMS is set to
    use) with its MOK enrollment, whether ``key`` is readable, and the signature of the nvidia
    module of the running kernel.

    .. code:: python

        SigningFacts(read=True, cert_path="/var/lib/dkms/mok.pub", enrollment="enrolled", ...)
    """

    @staticmethod
    @override
    def default() -> SigningFacts:
        return SigningFacts()

    @override
    def command(self, key: str | None = None, cert: str | None = None) -> str:
        return module_signing_code(key, cert)

    @override
    def process(self, output: list[str]) -> SigningFacts:
        return parse_signing_output("\n".join(output))


class DkmsVersion(FactBase[DkmsRelease]):
    """The host's DKMS release (``dkms --version``: ``dkms-2.8.7``), else the version apt would
    install with the driver (its candidate): DKMS 2 and 3 read their signing settings from
    different places (docs/provision.md, Secure Boot).

    .. code:: python

        DkmsRelease(installed="2.8.7", candidate="2.8.7-2ubuntu2.2")
    """

    @staticmethod
    @override
    def default() -> DkmsRelease:
        return DkmsRelease()

    @override
    def command(self) -> str:
        # apt's candidate (the seam's policy command); dnf hosts have no DKMS 2 to tell apart
        return (
            'command -v dkms >/dev/null 2>&1 && echo "installed=$(dkms --version 2>/dev/null)"; '
            f"command -v apt-cache >/dev/null 2>&1 && {APT.policy_command(['dkms'])} 2>/dev/null "
            "| sed -n 's/^ *Candidate: */candidate=/p'; true"
        )

    @override
    def process(self, output: list[str]) -> DkmsRelease:
        return parse_dkms_release("\n".join(output))


class CdiSpecs(FactBase[list[CdiSpec]]):
    """Every CDI spec file in /etc/cdi and /var/run/cdi, with the driver versions it names."""

    @staticmethod
    @override
    def default() -> list[CdiSpec]:
        return []

    @override
    def command(self) -> str:
        return list_specs_command()

    @override
    def process(self, output: list[str]) -> list[CdiSpec]:
        return parse_cdi_specs("\n".join(output))
