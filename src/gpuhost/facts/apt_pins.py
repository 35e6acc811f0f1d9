"""Facts about apt pinning and holds: what ``apt-mark`` holds and what apt would install."""

from __future__ import annotations

from typing import TypedDict

from pyinfra.api import FactBase
from typing_extensions import override

from gpuhost.parsers.marked import SECTION, split_sections
from gpuhost.parsers.packages import (
    parse_apt_mark_showhold,
    parse_apt_policy,
    parse_apt_space,
    parse_df_available,
    parse_dpkg_audit,
    parse_dpkg_query,
    parse_pgrep_processes,
)
from gpuhost.probe.script import APT_HOLDS_CODE


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
        return APT_HOLDS_CODE

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
        return "LC_ALL=C apt-cache policy " + " ".join(sorted(packages))

    @override
    def process(self, output: list[str]) -> dict[str, dict[str, str | None]]:
        return {
            policy.name: {"installed": policy.installed, "candidate": policy.candidate}
            for policy in parse_apt_policy("\n".join(output))
        }


# Process names (``pgrep -x``) of the tools that take dpkg's and apt's locks: a ``gpuhost``
# run stopped by Ctrl-C, apt's daily timer or an admin leaves one running on the host.
PACKAGE_TOOLS = "apt-get|apt|aptitude|dpkg|unattended-upgr"
# Process states that can hold a lock (running, sleeping, in I/O, stopped); a zombie cannot.
PGREP_LIVE = "-r R,S,D,T,t"
# unattended-upgrades' shutdown helper has the same process name ("unattended-upgr", 15
# characters) but runs the whole boot on every host with the package (Ubuntu installs it by
# default: unattended-upgrades.service) and takes dpkg's lock only at shutdown: never waited for.
NOT_WAITED = "unattended-upgrade-shutdown"


def running_tools_command(tools: str = PACKAGE_TOOLS) -> str:
    """``pgrep -a`` of the live ``tools`` processes, the shutdown helper left out (prints
    ``PID command line`` lines; nothing when none runs)."""
    return f"pgrep -a {PGREP_LIVE} -x '{tools}' 2>/dev/null | grep -v '{NOT_WAITED}'"


class DpkgStateDict(TypedDict):
    running: list[str]  # "PID command line" of apt/dpkg processes running now, in PID order
    unfinished: list[str]  # packages ``dpkg --audit`` lists (half-installed, ...), sorted


def dpkg_state_command(tools: str = PACKAGE_TOOLS) -> str:
    """apt/dpkg processes (``tools``) running now, then what ``dpkg --audit`` reports: one
    command."""
    return (
        f"echo '{SECTION}running'; command -v pgrep >/dev/null 2>&1 && "
        f"{running_tools_command(tools)}; "
        f"echo '{SECTION}unfinished'; command -v dpkg >/dev/null 2>&1 && "
        "LC_ALL=C dpkg --audit 2>/dev/null; true"
    )


def parse_dpkg_state(lines: list[str]) -> DpkgStateDict:
    """:func:`dpkg_state_command`'s output (pure): its two sections through the pgrep and
    ``dpkg --audit`` parsers."""
    sections = split_sections(lines)
    return {
        "running": parse_pgrep_processes(sections.get("running", [])),
        "unfinished": parse_dpkg_audit(sections.get("unfinished", [])),
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
        names = " ".join(f"'{p}'" for p in packages)
        return (
            "LC_ALL=C apt-get install --assume-no --no-install-recommends --allow-downgrades "
            f"--allow-change-held-packages -o Debug::NoLocking=1 {names} 2>&1 | "
            f"grep -E '^(Need to get|After this operation)'; echo '{DF_MARK}'; "
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
    """Entries of ``dnf versionlock list`` (``name-epoch:version-release.*``)."""

    tool = "dnf"

    @override
    def command(self) -> str:
        return "LC_ALL=C dnf -q versionlock list 2>/dev/null || true"

    @override
    def process(self, output: list[str]) -> list[str]:
        return sorted(
            line.strip()
            for line in output
            if line.strip() and not line.startswith(("Last metadata", "Updating"))
        )


#: dpkg-query's tab-separated package, version and status (``parse_dpkg_query``'s format)
DPKG_QUERY_STATUS = "dpkg-query -W -f='${Package}\\t${Version}\\t${db:Status-Abbrev}\\n'"


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
