"""Facts about package pins, holds and locks: what apt holds and would install, what dnf's
versionlock file locks; their commands are the package-manager seam's (``gpuhost.pkgmgr``)."""

from __future__ import annotations

from typing import TypedDict

from pyinfra.api import FactBase
from typing_extensions import override

from gpuhost.parsers.marked import split_sections
from gpuhost.parsers.packages import (
    Offered,
    parse_apt_mark_showhold,
    parse_apt_offered,
    parse_apt_policy,
    parse_apt_space,
    parse_df_available,
    parse_dnf_check,
    parse_dpkg_audit,
    parse_dpkg_query,
    parse_pgrep_processes,
    refuse_unread,
)
from gpuhost.pkgmgr import APT, DNF
from gpuhost.pkgmgr.base import PGREP_LIVE


class _PackageLockList(FactBase[list[str]]):
    """A sorted list of lines from a package tool (``tool``); [] where the tool is missing."""

    tool: str

    @staticmethod
    @override
    def default() -> list:
        return []

    @override
    def requires_command(self) -> str:
        return self.tool


class AptHolds(_PackageLockList):
    """Packages marked held (``apt-mark showhold``'s list), sorted:
    ``["libnvidia-ml1", "nvidia-smi"]``; the audit probe's command and parser."""

    tool = "dpkg-query"

    @override
    def command(self) -> str:
        return APT.holds_command()

    @override
    def process(self, output: list[str]) -> list[str]:
        return sorted(parse_apt_mark_showhold("\n".join(output)))


class AptPolicy(FactBase[dict[str, dict[str, str | None]]]):
    """Installed and candidate version of each package, as apt's pins resolve them
    (parsed by :func:`gpuhost.parsers.packages.parse_apt_policy`; "(none)" is None):

    .. code:: python

        {"nvidia-smi": {"installed": "535.261.03-1", "candidate": "535.261.03-1"}}
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
        return APT.policy_command(packages)

    @override
    def process(self, output: list[str]) -> dict[str, dict[str, str | None]]:
        return {
            policy.name: {"installed": policy.installed, "candidate": policy.candidate}
            for policy in parse_apt_policy("\n".join(output))
        }


# Process names (``pgrep -x``) of the tools that take dpkg's and apt's locks: a ``gpuhost``
# run stopped by Ctrl-C, apt's daily timer or an admin leaves one running on the host.
PACKAGE_TOOLS = APT.tools
__all__ = ["PGREP_LIVE", "PACKAGE_TOOLS"]


class DpkgStateDict(TypedDict):
    running: list[str]  # "PID command line" of apt/dpkg processes running now, in PID order
    unfinished: list[str]  # packages ``dpkg --audit`` lists (half-installed, ...), sorted


def dpkg_state_command(tools: str = PACKAGE_TOOLS) -> str:
    """apt/dpkg processes (``tools``) running now, then what ``dpkg --audit`` reports: one
    command."""
    return APT.state_command(tools)


def parse_dpkg_state(lines: list[str], family: str = "apt") -> DpkgStateDict:
    """:func:`dpkg_state_command`'s output (pure): its two sections through the pgrep and
    ``dpkg --audit`` (dnf: ``dnf check --duplicates``) parsers."""
    sections = split_sections(lines)
    unfinished = parse_dpkg_audit if family == "apt" else parse_dnf_check
    return {
        "running": parse_pgrep_processes(sections.get("running", [])),
        "unfinished": unfinished(sections.get("unfinished", [])),
    }


class DpkgState(FactBase[DpkgStateDict]):
    """Whether package work is under way or left half-done on the host, read in one command:
    ``running``, the apt/dpkg processes (``PACKAGE_TOOLS``) as ``"PID command line"``, and
    ``unfinished``, the packages ``dpkg --audit`` reports as not fully installed (unpacked,
    half-configured, half-installed, awaiting triggers); both [] where the tool is missing.

    .. code:: python

        {"running": ["4711 apt-get install -y nvidia-driver"], "unfinished": ["nvidia-smi"]}
    """

    @staticmethod
    @override
    def default() -> DpkgStateDict:
        return {"running": [], "unfinished": []}

    @override
    def command(self) -> str:
        return dpkg_state_command()

    @override
    def process(self, output: list[str]) -> DpkgStateDict:
        return parse_dpkg_state(output)


class DnfState(DpkgState):
    """:class:`DpkgState` of a dnf host: dnf/rpm processes (``Dnf.tools``) and the duplicated
    packages ``dnf check --duplicates`` reports (an interrupted transaction)."""

    @override
    def command(self) -> str:
        return DNF.state_command()

    @override
    def process(self, output: list[str]) -> DpkgStateDict:
        return parse_dpkg_state(output, "dnf")


SPACE_PATHS = ("/var/cache/apt/archives", "/usr")
DF_MARK = "##GPUHOST-DF"


class AptInstallSpace(FactBase[dict[str, object]]):
    """What installing ``packages`` (``name`` or ``name=version``) would take, as apt computes
    it without changing anything, and the free space where it goes:

    .. code:: python

        {"download": 1869000000, "added": 6348000000,
         "free": {"/var/cache/apt/archives": [12500787200, "/"], "/usr": [12500787200, "/"]}}
    """

    @staticmethod
    @override
    def default() -> dict:
        return {}

    @override
    def requires_command(self, packages: list[str]) -> str:
        return "apt-get"

    @override
    def command(self, packages: list[str]) -> str:
        return (
            f"{APT.space_command(packages)}; echo '{DF_MARK}'; "
            f"df -P -B1 {' '.join(SPACE_PATHS)} 2>/dev/null || true"
        )

    @override
    def process(self, output: list[str]) -> dict[str, object]:
        mark = output.index(DF_MARK) if DF_MARK in output else len(output)
        download, added = parse_apt_space("\n".join(output[:mark]))
        free = parse_df_available("\n".join(output[mark + 1 :]))
        return {
            "download": download,
            "added": added,
            "free": {path: list(row) for path, row in zip(SPACE_PATHS, free, strict=False)},
        }


class DnfVersionLocks(_PackageLockList):
    """The lines of dnf's versionlock file (``name-[epoch:]version-release.*`` as dnf writes
    them, ``name-[epoch:]version-*`` as gpuhost does), comments left out, sorted. Read from the
    file, never from ``dnf versionlock list``: that needs every repository's metadata and, with
    one unreachable, fails and read as "no locks" (``gpuhost.pkgmgr.dnf``)."""

    tool = "cat"

    @override
    def command(self) -> str:
        return DNF.holds_command()

    @override
    def process(self, output: list[str]) -> list[str]:
        refuse_unread("\n".join(output), "dnf's version locks")  # never "no locks"
        return sorted(
            line.strip() for line in output if line.strip() and not line.strip().startswith("#")
        )


#: dpkg-query's tab-separated package, version and status (``parse_dpkg_query``'s format)
DPKG_QUERY_STATUS = APT.installed_command()


class InstalledPackageStates(FactBase[dict[str, str]]):
    """``{package: dpkg status}`` of every package with files on disk, half-installed and
    half-configured ones included (``iU``, ``iF``, ``hF``...: what a failed install leaves),
    which pyinfra's ``DebPackages`` (``ii``/``hi`` only) leaves out."""

    @override
    @staticmethod
    def default() -> dict:
        return {}

    @override
    def requires_command(self) -> str:
        return "dpkg-query"

    @override
    def command(self) -> str:
        return DPKG_QUERY_STATUS

    @override
    def process(self, output: list[str]) -> dict[str, str]:
        packages = parse_dpkg_query("\n".join(output))
        return {p.name: p.status for p in packages if p.installed}


class RpmPackageStates(InstalledPackageStates):
    """:class:`InstalledPackageStates` of an rpm host (every installed package reads ``ii``:
    rpm's database holds installed packages only)."""

    @override
    def requires_command(self) -> str:
        return "rpm"

    @override
    def command(self) -> str:
        return DNF.installed_command()


class AptOffered(FactBase[Offered]):
    """``Offered``: every version apt sees of ``packages`` with the sources ``files`` and
    keyrings ``keys`` in a private configuration (``Apt.offered_command``: the host's apt
    state untouched), ``settings`` apt options (the run's proxy); ``error`` when apt could not
    read a source. What provision's guard on an apt host judges before any change
    (``deploys.apt_offered``)::

        Offered(versions={"nvidia-driver": ["580.178.04-1", "580.159.03-1"]}, error=None)
    """

    @staticmethod
    @override
    def default() -> Offered:
        return Offered({}, "apt-get not found")

    @override
    def requires_command(self, packages: list[str], files: tuple[tuple[str, str], ...] = (),
                         keys: tuple[tuple[str, str], ...] = (),
                         settings: tuple[str, ...] = ()) -> str:
        return "apt-get"

    @override
    def command(self, packages: list[str], files: tuple[tuple[str, str], ...] = (),
                keys: tuple[tuple[str, str], ...] = (), settings: tuple[str, ...] = ()) -> str:
        return APT.offered_command(packages, files, keys, settings)

    @override
    def process(self, output: list[str]) -> Offered:
        return parse_apt_offered("\n".join(output))
