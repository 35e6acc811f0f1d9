"""The package-manager interface and what both implementations share (shell text, pure)."""

from __future__ import annotations

import shlex
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from gpuhost.parsers.marked import SECTION
from gpuhost.parsers.packages import UNREADABLE

# Process states that can hold a lock (running, sleeping, in I/O, stopped); a zombie cannot.
PGREP_LIVE = "-r R,S,D,T,t"
LOCK_WAIT_S = 600  # then the host fails, naming what still runs


def quoted(names: Iterable[str]) -> str:
    return " ".join(shlex.quote(name) for name in names)


#: the most of a package manager's own small file (its lock list, a module's state) gpuhost reads
SMALL_FILE_BYTES = 1024 * 1024


def small_file_command(path: str) -> str:
    """Shell text printing the file at ``path`` when it is a regular file (or a link to one) of
    at most ``SMALL_FILE_BYTES``; nothing when there is none; else one line ``UNREADABLE PATH
    WHY``. A FIFO (``cat`` would wait for a writer for ever), a device (a link to /dev/zero:
    endless output) or a huge file never reaches ``cat``."""
    f = shlex.quote(path)
    mark = shlex.quote(f"{UNREADABLE} {path}")
    return (
        f'{{ if [ -f {f} ]; then if [ "$(wc -c < {f})" -le {SMALL_FILE_BYTES} ]; then cat {f}; '
        f"else echo {mark}' is over {SMALL_FILE_BYTES} bytes'; fi; "
        f"elif [ -e {f} ] || [ -L {f} ]; then echo {mark}' is not a regular file'; fi; }} "
        "2>/dev/null; true"
    )


def regular_or_absent(path: str) -> str:
    """Shell text that fails, with one line on stderr, when ``path`` exists and is not a regular
    file: what is written to it next must not block on a FIFO or fill a device."""
    f = shlex.quote(path)
    said = shlex.quote(f"{path}: not a regular file; expected the file or none")
    absent = f"{{ [ ! -e {f} ] && [ ! -L {f} ]; }}"
    return f"{{ {absent} || [ -f {f} ] || {{ echo {said} >&2; false; }}; }}"


@dataclass(frozen=True)
class PackageManager(ABC):
    """One host's package manager. ``options``: extra options put after the tool's name in
    every command that reads or changes the package state (a private configuration: a bundle's
    reference host, an installroot in tests)."""

    options: tuple[str, ...] = ()

    family: ClassVar[str] = ""  # "apt" or "dnf" (gpuhost.oskey)
    database: ClassVar[str] = ""  # "dpkg"/"rpm": the audit's PackageFacts.manager, probe section
    lock_word: ClassVar[str] = ""  # "held" / "version-locked", for messages
    lock_owner: ClassVar[str] = ""  # "dpkg's" / "rpm's": whose lock a running tool takes
    audit_tool: ClassVar[str] = ""  # the tool ``unfinished_command`` runs
    tools: ClassVar[str] = ""  # pgrep -x pattern of the processes taking the manager's lock
    #: a process of that name that never takes the lock while it runs (its command line)
    not_waited: ClassVar[str] = ""
    archive_dirs: ClassVar[tuple[str, ...]] = ()  # where package files stay after an install
    file_suffix: ClassVar[str] = ""  # ".deb" / ".rpm"

    def configured(self, *options: str) -> PackageManager:
        """The same manager with ``options`` added to every command."""
        return type(self)(options=self.options + tuple(options))

    # -- names and versions ------------------------------------------------------------------

    @abstractmethod
    def exact(self, name: str, version: str) -> str:
        """The install argument for ``name`` at exactly ``version`` (apt ``name=version``,
        dnf ``name-[epoch:]version[-release]``)."""

    @abstractmethod
    def package_file(self, name: str, version: str, arch: str) -> str:
        """The file name the repository and the package cache give that package."""

    # -- changes -----------------------------------------------------------------------------

    @abstractmethod
    def install(self, specs: Sequence[str], *, recommends: bool = False,
                downgrades: bool = False, change_held: bool = False) -> str:
        """Install ``specs`` (names, exact specs or local file paths), non-interactively,
        keeping the admin's changed config files."""

    @abstractmethod
    def install_files(self, paths: Sequence[str]) -> str:
        """Install local package files (the rollback's cache): downgrades and held/locked
        packages allowed, the admin's config files kept; no repository needed."""

    @abstractmethod
    def remove(self, names: Sequence[str], *, change_held: bool = False) -> str:
        """Remove ``names`` (config files kept where the manager keeps them)."""

    @abstractmethod
    def refresh(self) -> str:
        """Read the repositories' metadata anew."""

    @abstractmethod
    def download(self, specs: Sequence[str], dest: str = ".") -> str:
        """Download the package files of ``specs`` into ``dest`` (nothing installed)."""

    @abstractmethod
    def hold(self, locks: Sequence[str]) -> str:
        """Hold (apt: package names) or version-lock (dnf: lock patterns, ``lock_pattern``)."""

    @abstractmethod
    def unhold(self, names: Sequence[str]) -> str:
        """Release the holds/locks of ``names`` (also where the package is not installed)."""

    @abstractmethod
    def hold_hint(self, names: Sequence[str]) -> str:
        """The command a user runs by hand to hold ``names`` (an audit finding's fix)."""

    @abstractmethod
    def hold_kept(self, held: Sequence[str], install: str) -> str:
        """``install`` run with ``held`` released for it and held again afterwards, whether it
        succeeded or not (its exit status is the command's)."""

    # -- reading -----------------------------------------------------------------------------

    @abstractmethod
    def holds_command(self) -> str:
        """Print the holds/locks: apt one held name a line; dnf the lock file's lines. Reads
        local state only (never repository metadata)."""

    @abstractmethod
    def installed_command(self, names: Sequence[str] = ()) -> str:
        """``NAME<TAB>VERSION<TAB>STATUS`` of the installed packages (``names`` only when
        given; unknown names left out). ``parsers.packages.parse_installed``."""

    @abstractmethod
    def snapshot_packages_command(self) -> str:
        """``NAME<TAB>VERSION<TAB>ARCH<TAB>STATUS`` of every installed package."""

    @abstractmethod
    def file_identity_command(self, path: str) -> str:
        """Print ``NAME VERSION`` of the package file at ``path`` (shell text, not quoted)."""

    @abstractmethod
    def unfinished_command(self) -> str:
        """Print what an interrupted package run left half-done (nothing when all is well)."""

    @abstractmethod
    def finish_command(self) -> str:
        """Finish what an interrupted run left half-done (fails when it cannot)."""

    # -- the package manager's lock ----------------------------------------------------------

    def running_command(self, tools: str | None = None) -> str:
        """``pgrep -a`` of the live ``tools`` processes (default: this manager's), those of
        ``not_waited`` left out: ``PID command line`` lines, nothing when none runs."""
        # pgrep warns on stderr about a pattern longer than a process name; the regex still matches
        pgrep = f"pgrep -a {PGREP_LIVE} -x '{tools or self.tools}' 2>/dev/null"
        return f"{pgrep} | grep -v '{self.not_waited}'" if self.not_waited else pgrep

    def wait_command(self, timeout_s: int = LOCK_WAIT_S, poll_s: int = 2,
                     tools: str | None = None) -> str:
        """Shell that returns once none of ``tools`` (default: this manager's) runs, so the
        next command finds the lock free; after ``timeout_s`` it fails with one line on stderr
        naming what still runs (``pgrep -a``: PID and command line)."""
        tries = max(1, timeout_s // poll_s)
        running = self.running_command(tools)
        return (
            f'i=0; while [ -n "$({running})" ]; do i=$((i+1)); if [ $i -gt {tries} ]; then '
            f'echo "{self.family}/{self.database} still running after {timeout_s}s '
            f"({self.lock_owner} lock is taken): "
            f"$({running} | head -n 3 | tr '\\n' ';')\" >&2; "
            f"exit 1; fi; sleep {poll_s}; done"
        )

    def settle_command(self, timeout_s: int = LOCK_WAIT_S, tolerant: bool = False) -> str:
        """Wait for the package manager left running, then finish what it left half-done, if
        anything. ``tolerant``: what cannot be finished does not fail the command (a rollback
        replaces it next)."""
        finish = f"{self.finish_command()} >/dev/null 2>&1 || true" if tolerant else (
            self.finish_command())
        return (
            f"{self.wait_command(timeout_s)}; "
            f'[ -z "$({self.unfinished_command()})" ] || {finish}'
        )

    def state_command(self, tools: str | None = None) -> str:
        """The processes of the package manager running now, then what is unfinished: one
        command, two ``SECTION`` parts (``running``, ``unfinished``)."""
        return (
            f"echo '{SECTION}running'; command -v pgrep >/dev/null 2>&1 && "
            f"{self.running_command(tools)}; "
            f"echo '{SECTION}unfinished'; command -v {self.audit_tool} >/dev/null 2>&1 && "
            f"{self.unfinished_command()}; true"
        )
