"""Facts for precompiled kernel modules (Ubuntu's archive): the package records apt offers, so
an operation can tell which version of a module package a driver satisfies."""

from __future__ import annotations

from pyinfra.api import FactBase
from typing_extensions import override

from gpuhost.parsers.apt_records import AptRecord, parse_apt_show
from gpuhost.pkgmgr import APT

# apt-cache show prints every version apt knows of each name (newest first); a name it does not
# know is an error on stderr (exit 100) while the others still print
APT_SHOW_CODE = APT.show_command("{names}")


class PackageRecords(FactBase[dict[str, list[AptRecord]]]):
    """Every version apt offers of ``packages`` with its Depends (names apt does not know are
    absent):

    .. code:: python

        {"linux-modules-nvidia-580-server-open-generic": [
            AptRecord(name=..., version="6.8.0-101.101", depends=[[Relation(...)], ...])]}
    """

    @staticmethod
    @override
    def default() -> dict:
        return {}

    @override
    def requires_command(self, packages: list[str]) -> str:
        return "apt-cache"

    @override
    def command(self, packages: list[str]) -> str:
        return APT_SHOW_CODE.format(names=" ".join(f"'{p}'" for p in sorted(set(packages))))

    @override
    def process(self, output: list[str]) -> dict[str, list[AptRecord]]:
        return parse_apt_show("\n".join(output))
