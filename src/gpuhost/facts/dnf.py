"""Facts of a dnf host (RHEL family): installed and offered versions, the module stream. Their
commands are the package-manager seam's (``gpuhost.pkgmgr.DNF``), parsed by
``gpuhost.parsers.packages``."""

from __future__ import annotations

import shlex

from pyinfra.api import FactBase
from typing_extensions import override

from gpuhost.parsers.packages import (
    Offered,
    parse_dnf_module_file,
    parse_dnf_module_list,
    parse_dpkg_query,
    parse_name_versions,
    parse_offered,
)
from gpuhost.pkgmgr import DNF


class RpmVersions(FactBase[dict[str, str]]):
    """{package: ``[epoch:]version-release``} of the installed packages among ``packages``."""

    @staticmethod
    @override
    def default() -> dict:
        return {}

    @override
    def requires_command(self, packages: list[str]) -> str:
        return "rpm"

    @override
    def command(self, packages: list[str]) -> str:
        return DNF.installed_command(sorted(packages))

    @override
    def process(self, output: list[str]) -> dict[str, str]:
        return {p.name: p.version for p in parse_dpkg_query("\n".join(output)) if p.version}


class DnfOffered(FactBase[dict[str, list[str]]]):
    """{package: [``epoch:version-release``, ...]} of every version the enabled repositories
    offer of ``packages`` (locks ignored; module filtering applied, as an install sees it)."""

    @staticmethod
    @override
    def default() -> dict:
        return {}

    @override
    def requires_command(self, packages: list[str]) -> str:
        return "dnf"

    @override
    def command(self, packages: list[str]) -> str:
        return f"{DNF.available_command(sorted(packages))} 2>/dev/null; true"

    @override
    def process(self, output: list[str]) -> dict[str, list[str]]:
        return parse_name_versions("\n".join(output))


class DnfModuleState(FactBase[dict[str, str]]):
    """The module's state file: ``{"stream": "580-open", "state": "enabled", ...}``; {} when
    the module was never enabled or reset (local, no repository needed)."""

    @staticmethod
    @override
    def default() -> dict:
        return {}

    @override
    def command(self, module: str) -> str:
        return DNF.module_state_command(module)

    @override
    def process(self, output: list[str]) -> dict[str, str]:
        return parse_dnf_module_file("\n".join(output))


class DnfModuleStreams(FactBase[list[str]]):
    """The streams of ``module`` the enabled repositories offer (``dnf module list``), and
    with ``repo_url`` that repository folder's too (read for this query alone)."""

    @staticmethod
    @override
    def default() -> list:
        return []

    @override
    def requires_command(self, module: str, repo_url: str = "",
                         setopts: list[str] | None = None) -> str:
        return "dnf"

    @override
    def command(self, module: str, repo_url: str = "", setopts: list[str] | None = None) -> str:
        # the module's name first, so that process() knows which rows to read
        streams = DNF.streams_command(module, repo_url, setopts or ())
        return f"echo {shlex.quote(MODULE_MARK + module)}; {streams}; true"

    @override
    def process(self, output: list[str]) -> list[str]:
        first = output[0] if output else ""
        module = first[len(MODULE_MARK) :] if first.startswith(MODULE_MARK) else ""
        return parse_dnf_module_list("\n".join(output[1:]), module) if module else []


MODULE_MARK = "##GPUHOST-MODULE "


class RpmHas(FactBase[bool]):
    """Whether ``spec`` (``kernel-devel-5.14.0-427.el9.x86_64``) is installed or provided by an
    installed package."""

    @staticmethod
    @override
    def default() -> bool:
        return False

    @override
    def requires_command(self, spec: str) -> str:
        return "rpm"

    @override
    def command(self, spec: str) -> str:
        return DNF.has_command(spec)

    @override
    def process(self, output: list[str]) -> bool:
        return "installed" in (line.strip() for line in output)


class DnfOfferedAnyStream(FactBase[Offered]):
    """``Offered``: every version the enabled repositories, plus the repository folder
    ``repo_url`` when given (read for this query alone), offer of ``packages``, whatever module
    stream is enabled (``setopts``: dnf settings for the query, the run's proxy); ``error``
    when dnf could not read them. What provision's guard and the
    upgrade's preflight judge before anything changes (``deploys.nvidia_dnf.offered_problem``)."""

    @staticmethod
    @override
    def default() -> Offered:
        return Offered({}, "dnf not found")

    @override
    def requires_command(self, packages: list[str], repo_url: str = "",
                         setopts: list[str] | None = None) -> str:
        return "dnf"

    @override
    def command(self, packages: list[str], repo_url: str = "",
                setopts: list[str] | None = None) -> str:
        return DNF.offered_command(sorted(packages), repo_url, setopts or ())

    @override
    def process(self, output: list[str]) -> Offered:
        return parse_offered("\n".join(output))
