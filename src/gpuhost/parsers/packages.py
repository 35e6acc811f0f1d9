"""Parse package-manager output: ``dpkg-query -W``, ``dpkg -l``, ``apt-mark showhold``,
``apt-cache policy``, ``rpm -qa``.

``parse_dpkg_query`` reads the probe's format
``dpkg-query -W -f='${Package}\\t${Version}\\t${db:Status-Abbrev}\\n'`` and also human
``dpkg -l`` tables (including "rc" residuals and columns cut by a pager with ">").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpuhost.errors import ParseError
from gpuhost.parsers._common import is_blank, require_text
from gpuhost.parsers.smi_model import _ToDict

DPKG_EXPECTED = "dpkg-query -W -f='${Package}\\t${Version}\\t${db:Status-Abbrev}\\n' or dpkg -l"
RPM_EXPECTED = "rpm -qa --qf '%{NAME}\\t%{VERSION}-%{RELEASE}\\n'"
PACKAGE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9+.\-]*(?::[a-z0-9_\-]+)?$")
STATUS_RE = re.compile(r"^[uirhpUIRHP][ncHUFWtiNCUFWTI ]?[ R]?$")
DPKG_TABLE_ROW_RE = re.compile(
    r"^(?P<status>[uirhp][ncHUFWti][ R]?)\s+(?P<name>\S+)\s+(?P<version>\S+)(?:\s+(?P<rest>.*))?$"
)
DPKG_TABLE_HEADER_RE = re.compile(r"^(Desired=|\| Status=|\|/ Err\?|\|\|/ Name|\+\+\+-)")
ARCH_RE = re.compile(r"[a-z0-9]+")
RPM_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_+.\-]*$")
POLICY_PACKAGE_RE = re.compile(r"^(\S+):$")
POLICY_FIELD_RE = re.compile(r"^\s+(Installed|Candidate):\s+(\S+)\s*$")
POLICY_VERSION_RE = re.compile(r"^\s+(?:\*\*\*\s+)?(\S+)\s+-?\d+\s*$")
POLICY_SOURCE_RE = re.compile(r"^\s+-?\d+\s+(\S+)(?:\s+(\S+))?")
# dnf/yum versionlock entry without its arch: [epoch:]name-[epoch:]version-release
VERSIONLOCK_RE = re.compile(
    r"^(?:\d+:)?(?P<name>[A-Za-z0-9_+.-]+?)-(?:\d+:)?(?P<version>\d[^-:]*)-(?P<rel>[^-]+)$"
)
VERSIONLOCK_ARCHES = (".x86_64", ".aarch64", ".noarch", ".ppc64le", ".i686", ".*")


@dataclass(frozen=True)
class Package(_ToDict):
    """One package. ``status`` is dpkg's abbreviation ("ii", "rc", "hi", ...) or "" for rpm;
    ``installed`` is True for files on disk ("ii", "hi", "iU", ...), False for residuals ("rc")
    and not-installed entries ("un")."""

    name: str
    version: str | None
    status: str = "ii"
    arch: str | None = None

    @property
    def installed(self) -> bool:
        return len(self.status) >= 2 and self.status[1] in "iUFWt" and self.status[0] != "u"

    @property
    def held(self) -> bool:
        return self.status[:1] == "h"


@dataclass(frozen=True)
class AptPolicy:
    """``apt-cache policy`` of one package.

    ``candidate_origin`` is the archive line of the candidate (e.g. an NVIDIA CUDA repository);
    ``installed_priority`` is the pin priority of the installed version (>= 1000: pinned).
    """

    name: str
    installed: str | None
    candidate: str | None
    candidate_origin: str | None = None
    installed_priority: int | None = None

    @property
    def upgrade_pending(self) -> bool:
        return bool(self.installed and self.candidate and self.installed != self.candidate)

    @property
    def pinned(self) -> bool:
        return self.installed_priority is not None and self.installed_priority >= 1000


def _split_arch(name: str) -> tuple[str, str | None]:
    if ":" in name:
        base, arch = name.split(":", 1)
        return base, arch
    return name, None


def _version(value: str) -> str | None:
    """None for "<none>" and for a version cut by a pager (ending in ">")."""
    value = value.strip()
    return None if value in ("", "<none>") or value.endswith(">") else value


def parse_dpkg_query(text: str) -> list[Package]:
    """Packages from ``dpkg-query -W -f=...`` (tab separated) or a ``dpkg -l`` table.

    Empty output (no matching packages) → []. A line that fits neither format raises ParseError
    naming the line.
    """
    text = require_text(text, DPKG_EXPECTED)
    packages: list[Package] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip() or DPKG_TABLE_HEADER_RE.match(line):
            continue
        if "\t" in line:
            cells = line.split("\t")
            name = cells[0].strip()
            status = cells[2].strip() if len(cells) > 2 else "ii"
            if len(cells) < 2 or not PACKAGE_NAME_RE.match(name) or not STATUS_RE.match(status):
                raise ParseError(
                    f"expected {DPKG_EXPECTED}, found on line {number}: {line[:100]!r}"
                )
            base, arch = _split_arch(name)
            packages.append(Package(base, _version(cells[1]), status.strip() or "ii", arch))
            continue
        row = DPKG_TABLE_ROW_RE.match(line.rstrip())
        if row is None or not PACKAGE_NAME_RE.match(row.group("name").rstrip(">")):
            raise ParseError(f"expected {DPKG_EXPECTED}, found on line {number}: {line[:100]!r}")
        base, arch = _split_arch(row.group("name").rstrip(">"))
        rest = (row.group("rest") or "").split()
        if arch is None and rest and ARCH_RE.fullmatch(rest[0]):
            arch = rest[0]
        status = row.group("status").strip()
        packages.append(Package(base, _version(row.group("version")), status, arch))
    return packages


APT_SIZE_RE = re.compile(r"^([\d.,]+) ?([kMG]?B)$")
APT_UNITS = {"B": 1, "kB": 1000, "MB": 1000**2, "GB": 1000**3}


def _apt_size(text: str) -> int:
    match = APT_SIZE_RE.match(text.strip())
    if match is None:
        raise ParseError(f"expected an apt size like '1869 MB', found {text.strip()[:40]!r}")
    return int(float(match.group(1).replace(",", "")) * APT_UNITS[match.group(2)])


def parse_apt_space(text: str) -> tuple[int, int]:
    """(bytes to download, bytes the install adds on disk; negative: frees) from apt-get's
    summary (``LC_ALL=C apt-get install --assume-no ...``): ``Need to get 1869 MB of archives.``
    (or ``Need to get 20 MB/1869 MB of archives.`` when some are cached: the first number is
    what is still to fetch) and ``After this operation, 6348 MB of additional disk space will be
    used.`` (or ``... will be freed.``). Missing lines count 0 (pure)."""
    download = added = 0
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("Need to get ") and line.endswith(" of archives."):
            download = _apt_size(line[len("Need to get ") : -len(" of archives.")].split("/")[0])
        elif line.startswith("After this operation, ") and " disk space will be " in line:
            size = " ".join(line[len("After this operation, ") :].split()[:2])
            added = _apt_size(size) * (-1 if line.endswith("freed.") else 1)
    return download, added


def parse_df_available(text: str) -> list[tuple[int, str]]:
    """(available bytes, mount point) per path of ``df -P -B1 PATH...``, in argument order
    (pure)."""
    rows = []
    for number, line in enumerate(text.splitlines()[1:], start=2):
        cells = line.split()
        if len(cells) < 6 or not cells[3].isdigit():
            raise ParseError(f"expected df -P -B1 output, found on line {number}: {line[:80]!r}")
        rows.append((int(cells[3]), " ".join(cells[5:])))
    return rows


def parse_dpkg_audit(lines: list[str]) -> list[str]:
    """Package names from ``dpkg --audit`` (each listed package is an indented line: name, maybe
    ``:arch``, then its description; headers and notes are not indented), sorted (pure)."""
    names = set()
    for line in lines:
        if line.startswith(" ") and line.strip():
            token = line.split()[0]
            if PACKAGE_NAME_RE.match(token):
                names.add(_split_arch(token)[0])
    return sorted(names)


def parse_dnf_check(lines: list[str]) -> list[str]:
    """Package names from ``dnf check --duplicates`` (``NEVRA is a duplicate with NEVRA``, one
    problem a line; what a dnf transaction cut off midway leaves), sorted (pure)."""
    names = set()
    for line in lines:
        token = line.strip().split(" ", 1)[0]
        if " is a duplicate with " in line and token:
            names.add(parse_versionlock_entry(token.rsplit(".", 1)[0] + ".*")[0])
    return sorted(names)


def parse_pgrep_processes(lines: list[str]) -> list[str]:
    """``pgrep -a`` output (``PID command line`` per line) as ``"PID command line"`` strings in
    PID order; lines that do not start with a PID are left out (pure)."""
    found: list[tuple[int, str]] = []
    for line in lines:
        pid, _, command = line.strip().partition(" ")
        if pid.isdigit():
            found.append((int(pid), f"{pid} {command.strip()}".strip()))
    return [text for _pid, text in sorted(found)]


def parse_apt_mark_showhold(text: str) -> set[str]:
    """Held package names (architecture qualifiers like ":amd64" removed). Empty → set()."""
    text = require_text(text, "apt-mark showhold output (one package per line)")
    held: set[str] = set()
    for number, line in enumerate(text.split("\n"), start=1):
        name = line.strip()
        if not name:
            continue
        if not PACKAGE_NAME_RE.match(name):
            raise ParseError(
                f"expected apt-mark showhold output (one package per line), "
                f"found on line {number}: {line[:100]!r}"
            )
        held.add(_split_arch(name)[0])
    return held


def parse_rpm_qa(text: str) -> list[Package]:
    """Packages from ``rpm -qa --qf '%{NAME}\\t%{VERSION}-%{RELEASE}\\n'``. Empty → []."""
    text = require_text(text, RPM_EXPECTED)
    packages: list[Package] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        cells = line.strip().split("\t")
        if len(cells) != 2 or not RPM_NAME_RE.match(cells[0]) or not cells[1].strip():
            raise ParseError(f"expected {RPM_EXPECTED}, found on line {number}: {line[:100]!r}")
        packages.append(Package(cells[0], cells[1].strip(), status="ii"))
    return packages


def parse_apt_policy(text: str) -> list[AptPolicy]:
    """``apt-cache policy PKG...`` → one AptPolicy per package block, in output order.

    "(none)" becomes None. Lines apt prints for unknown packages ("N: Unable to locate ...") and
    anything before the first ``name:`` line are ignored.
    """
    blocks: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for line in text.splitlines():
        package = POLICY_PACKAGE_RE.match(line)
        if package:
            current = {"name": package.group(1), "table": [], "installed": None, "candidate": None}
            blocks.append(current)
            continue
        if current is None:
            continue
        field_match = POLICY_FIELD_RE.match(line)
        if field_match:
            value = field_match.group(2)
            current[field_match.group(1).lower()] = None if value == "(none)" else value
            continue
        version = POLICY_VERSION_RE.match(line)
        if version:
            priority = int(line.split()[-1])
            current["table"].append(
                {"version": version.group(1), "priority": priority, "origin": None}
            )
            continue
        source = POLICY_SOURCE_RE.match(line)
        if source and current["table"] and current["table"][-1]["origin"] is None:
            suite = source.group(2)
            origin = f"{source.group(1)} {suite}" if suite else source.group(1)
            current["table"][-1]["origin"] = origin
    policies = []
    for block in blocks:
        by_version = {row["version"]: row for row in block["table"]}
        candidate = by_version.get(block["candidate"] or "")
        installed = by_version.get(block["installed"] or "")
        policies.append(
            AptPolicy(
                name=block["name"],
                installed=block["installed"],
                candidate=block["candidate"],
                candidate_origin=candidate["origin"] if candidate else None,
                installed_priority=installed["priority"] if installed else None,
            )
        )
    return policies


def is_blank_listing(text: str) -> bool:
    return is_blank(text)


def parse_versionlock_entry(entry: str) -> tuple[str, str]:
    """One dnf/yum versionlock entry → (package name, upstream version).

    ``nvidia-driver-3:550.54.15-1.el9.*`` → ``("nvidia-driver", "550.54.15")``; an exclude
    (``!``) reads the same; an entry of another shape → (the entry, "")."""
    entry = entry.strip().lstrip("!")
    for suffix in VERSIONLOCK_ARCHES:
        if entry.endswith(suffix):
            entry = entry[: -len(suffix)]
            break
    match = VERSIONLOCK_RE.match(entry)
    if match is None:
        return (entry, "")
    return (match.group("name"), match.group("version"))


#: the line ``pkgmgr.base.small_file_command`` prints instead of a file it will not read (a FIFO,
#: a device, a folder, one over its size limit): the file's state is unknown, never "empty"
UNREADABLE = "##gpuhost-unreadable:"


def refuse_unread(text: str, what: str) -> None:
    """A ParseError naming the file when ``text`` says it was not read (``UNREADABLE``): its
    state is unknown; a parser that went on would take the marker for a comment: "empty"."""
    for line in text.splitlines():
        if line.startswith(UNREADABLE):
            raise ParseError(f"{what}: {line.removeprefix(UNREADABLE).strip()}")


def parse_versionlock(text: str) -> list[str]:
    """dnf/yum versionlock.list (one entry a line, ``#`` comments) → package names, in order.
    A file that was not read (``UNREADABLE``) is a ParseError: its locks are unknown."""
    refuse_unread(text, "versionlock")
    names: list[str] = []
    for line in text.splitlines():
        if not line.strip() or line.strip().startswith("#"):
            continue
        name = parse_versionlock_entry(line)[0]
        if name not in names:
            names.append(name)
    return names


def parse_name_versions(text: str) -> dict[str, list[str]]:
    """``NAME<TAB>VERSION`` lines (dnf repoquery's ``%{name}\\t%{evr}``, rpm's query) →
    {name: [version, ...]} in the order read; other lines are left out (pure)."""
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        name, sep, version = line.strip().partition("\t")
        if sep and name and version and " " not in name:
            found.setdefault(name, [])
            if version.strip() not in found[name]:
                found[name].append(version.strip())
    return found


OFFERED_RC = "##GPUHOST-OFFERED-RC"  # the last line of pkgmgr's Dnf.offered_command


@dataclass(frozen=True)
class Offered:
    """What ``Dnf.offered_command`` (or ``Apt.offered_command``) printed: {name: [EVR, ...]}
    and, when dnf (apt) failed or its output was cut before its exit status, ``error``: the
    package manager's own message."""

    versions: dict[str, list[str]]
    error: str | None = None


def parse_offered(text: str) -> Offered:
    """``NAME<TAB>EVR`` lines, dnf's messages and the ``OFFERED_RC <status>`` line (pure): a
    status other than 0, or none, is an error carrying dnf's last message line."""
    lines = text.splitlines()
    status = next((line.split()[-1] for line in reversed(lines)
                   if line.startswith(OFFERED_RC + " ")), None)
    said = [line.strip() for line in lines if line.strip() and "\t" not in line
            and not line.startswith(OFFERED_RC)]
    versions = parse_name_versions("\n".join(line for line in lines if "\t" in line))
    if status == "0":
        return Offered(versions)
    why = said[-1] if said else "no message"
    return Offered(versions, f"dnf exited {status}: {why}" if status else f"cut short: {why}")


#: the markers of pkgmgr's ``Apt.offered_command``: ``apt-get update``'s status, then
#: ``apt-cache madison``'s; ``PRIVATE_DIR`` stands for its private folder in the files it writes
APT_UPDATE_RC = "##GPUHOST-APT-UPDATE-RC"
APT_OFFERED_RC = "##GPUHOST-APT-OFFERED-RC"
PRIVATE_DIR = "@GPUHOST_PRIVATE@"


def _status(lines: list[str], mark: str) -> str | None:
    return next((line.split()[-1] for line in lines if line.startswith(mark + " ")), None)


def _fetch_failures(lines: list[str]) -> list[str]:
    """apt-get update's own lines saying a source was not read (it exits 0 after "W: Failed
    to fetch", using old lists or none)."""
    return [line[3:].strip() for line in lines
            if line.startswith("E: ") or line.startswith("W: Failed to fetch")]


def parse_apt_offered(text: str) -> Offered:
    """``Apt.offered_command``'s output (pure): {name: [version, ...]} from madison's
    ``name | version | URI ... Packages`` rows (a name no source has: no row), and ``error``
    when apt-get update failed or could not read a source (its first such line), or the output
    was cut short. Versions are kept with an error: apt uses the sources it did read."""
    lines = text.splitlines()
    updated, listed = _status(lines, APT_UPDATE_RC), _status(lines, APT_OFFERED_RC)
    versions: dict[str, list[str]] = {}
    for line in lines:
        cells = [cell.strip() for cell in line.split("|")]
        if len(cells) == 3 and cells[2].endswith("Packages") and cells[1] not in versions.get(
                cells[0], []):
            versions.setdefault(cells[0], []).append(cells[1])
    failed = _fetch_failures(lines)
    if updated is None or listed is None:
        return Offered(versions, f"cut short: {failed[0] if failed else 'no message'}")
    if updated != "0" or failed:
        why = failed[0] if failed else "no message"
        return Offered(versions, f"apt-get update exited {updated}: {why}")
    if listed != "0":
        said = [line for line in lines if line.startswith(("E: ", "W: "))]
        return Offered(versions, f"apt-cache exited {listed}: {said[-1] if said else 'no message'}")
    return Offered(versions)


def parse_dnf_module_file(text: str) -> dict[str, str]:
    """``/etc/dnf/modules.d/<module>.module`` (``[module]`` then ``key=value`` lines) →
    {"name", "stream", "profiles", "state"} as written; {} for an empty or missing file; a
    ParseError for one that was not read (``UNREADABLE``)."""
    refuse_unread(text, "dnf module state")
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.lstrip().startswith(("#", ";", "[")):
            values[key.strip()] = value.strip()
    return values


def parse_dnf_module_list(text: str, module: str) -> list[str]:
    """The streams of ``module`` in ``dnf module list`` output (``Name Stream Profiles
    Summary`` rows, ``[e]``/``[d]``/``[x]`` marks dropped), in order, each once (pure)."""
    streams: list[str] = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == module:
            stream = fields[1]
            if stream not in streams:
                streams.append(stream)
    return streams
