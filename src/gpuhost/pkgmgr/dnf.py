"""dnf/rpm (RHEL, Rocky, AlmaLinux 8, 9, 10): the commands of the package-manager seam.

Version locks live in dnf's versionlock plugin's lock file (``LOCK_LIST``). gpuhost reads and
writes that file itself instead of ``dnf versionlock list/add/delete``: the plugin loads every
repository's metadata for each of its subcommands, so with a repository unreachable (and RHEL's
``skip_if_unavailable=False``) ``list`` fails and reads as "no locks", and ``add`` of a name the
repository lacks writes nothing and exits 0 (dnf-plugins-core 4.3.1's versionlock.py, checked
with dnf 4.14; docs/nvidia-repo-packages.md).
A line gpuhost writes is what ``dnf versionlock add --raw`` writes: the pattern as given
(``lock_pattern``), which the plugin matches like its own ``name-E:V-R.*`` lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from gpuhost.parsers.packages import OFFERED_RC
from gpuhost.pkgmgr.base import (
    PackageManager,
    quoted,
    regular_or_absent,
    small_file_command,
)

LOCK_LIST = "/etc/dnf/plugins/versionlock.list"
#: dnf's default ``reposdir`` (dnf.conf(5))
REPOS_DIRS = ("/etc/yum.repos.d", "/etc/yum/repos.d", "/etc/distro.repos.d")
OFFERED_REPO = "gpuhost-offered"  # the query-only repository id of ``offered_command``
# rpm's query format: name, [epoch:]version-release, arch ("(none)" epochs left out)
_EVR = "%|EPOCH?{%{EPOCH}:}:{}|%{VERSION}-%{RELEASE}"
# dnf's options for every change: no questions, no weak dependencies unless asked
_NO_WEAK = "--setopt=install_weak_deps=False"
_NO_LOCKS = "--disableplugin=versionlock"
_NO_REPOS = "'--disablerepo=*'"  # quoted: the shell must not expand the *


def split_epoch(version: str) -> tuple[str | None, str]:
    """``3:580.95.05`` → ("3", "580.95.05"); no epoch → (None, version)."""
    epoch, sep, rest = version.partition(":")
    return (epoch, rest) if sep and epoch.isdigit() else (None, version)


@dataclass(frozen=True)
class Dnf(PackageManager):
    """``root``: a folder every file path is read under (an installroot in tests)."""

    root: str = ""

    family: ClassVar[str] = "dnf"
    database: ClassVar[str] = "rpm"
    lock_word: ClassVar[str] = "version-locked"
    lock_owner: ClassVar[str] = "rpm's"
    audit_tool: ClassVar[str] = "dnf"
    tools: ClassVar[str] = "dnf|dnf-3|yum|rpm|dnf-automatic|microdnf"
    archive_dirs: ClassVar[tuple[str, ...]] = ()  # keepcache=0: dnf keeps no package files
    file_suffix: ClassVar[str] = ".rpm"

    def configured(self, *options: str) -> Dnf:
        return Dnf(options=self.options + tuple(options), root=self.root)

    def under(self, root: str) -> Dnf:
        """The same manager reading its files under ``root``."""
        return Dnf(options=self.options, root=root.rstrip("/"))

    @property
    def lock_list(self) -> str:
        return f"{self.root}{LOCK_LIST}"

    def _dnf(self, *extra: str) -> str:
        return " ".join(("dnf", *self.options, *extra))

    def _rpm(self) -> str:
        return f"rpm --root={self.root}" if self.root else "rpm"

    # -- names and versions ------------------------------------------------------------------

    def exact(self, name: str, version: str) -> str:
        """``name-[epoch:]version[-release]``: dnf's NEVR(A) forms; a version without release
        matches every release of it."""
        return f"{name}-{version}"

    def lock_pattern(self, name: str, version: str, epoch: str | None = None) -> str:
        """The lock line for ``name`` at upstream ``version`` (any release and architecture):
        ``nvidia-driver-3:580.95.05-*``; a cuDNN release pattern (``9.10.2.*``) is kept:
        ``libcudnn9-cuda-13-9.10.2.*-*``. Always NAME-[E:]VERSION-RELEASE, so the name is the
        line without its last two ``-`` fields (``unhold``, ``parse_versionlock_entry``)."""
        return f"{name}-{f'{epoch}:' if epoch else ''}{version}-*"

    def package_file(self, name: str, version: str, arch: str) -> str:
        """``name-version-release.arch.rpm`` (the epoch is not in file names)."""
        return f"{name}-{split_epoch(version)[1]}.{arch}.rpm"

    # -- changes -----------------------------------------------------------------------------

    def install(self, specs: Sequence[str], *, recommends: bool = False,
                downgrades: bool = False, change_held: bool = False,
                erasing: bool = False) -> str:
        """``dnf install`` (a lower exact version than the installed one is a downgrade in
        dnf 4's install). ``change_held``: the versionlock plugin is off for this command, so a
        locked package may move; the lock file itself is not touched. ``erasing``: packages in
        the way are removed (``--allowerasing``: the other kernel module flavour, only when a
        flavour switch was asked for)."""
        extra = ([] if recommends else [_NO_WEAK]) + ([_NO_LOCKS] if change_held else [])
        extra += ["--allowerasing"] if erasing else []
        return f"{self._dnf('-y', *extra)} install " + " ".join(specs)

    def install_files(self, paths: Sequence[str]) -> str:
        """``dnf install`` of local files (an older file is a downgrade; locks off, repositories
        off: the files are all it needs; ``--allowerasing``: a package in their way, e.g. the
        other kernel module flavour a stream switch installed, is removed)."""
        return (
            f"{self._dnf('-y', _NO_WEAK, _NO_LOCKS, _NO_REPOS, '--allowerasing')} "
            "install " + quoted(paths)
        )

    def remove(self, names: Sequence[str], *, change_held: bool = False) -> str:
        """``dnf remove`` of ``names`` only (``--noautoremove``: RHEL's
        ``clean_requirements_on_remove`` would take dependencies along)."""
        extra = [_NO_LOCKS] if change_held else []
        return f"{self._dnf('-y', *extra)} remove --noautoremove " + quoted(names)

    def refresh(self) -> str:
        return self._dnf("-y", "--refresh", "makecache")

    def download(self, specs: Sequence[str], dest: str = ".") -> str:
        """``dnf download`` (dnf-plugins-core) with the lock plugin off: an older version the
        locks exclude is what a rollback's cache needs."""
        return f"{self._dnf('-q', _NO_LOCKS)} download --destdir {quoted([dest])} " + quoted(
            specs)

    def hold(self, locks: Sequence[str]) -> str:
        """Append the lock lines ``locks`` (``lock_pattern``) missing from the lock file (one
        command; the file is created where missing: the plugin fails every dnf command without
        it)."""
        body = "".join(f"{lock}\\n" for lock in locks)
        f = quoted([self.lock_list])
        return (
            f"mkdir -p \"$(dirname {f})\" && {regular_or_absent(self.lock_list)} && touch {f} && "
            f"printf {quoted([body])} | while IFS= read -r l; do "
            f'grep -qxF -- "$l" {f} || printf "%s\\n" "$l" >> {f}; done'
        )

    def unhold(self, names: Sequence[str]) -> str:
        """Drop every lock line of ``names`` (name = the line without its last two ``-``
        fields, a leading ``!`` ignored), comments and other names kept; the file replaced."""
        f = quoted([self.lock_list])
        wanted = " ".join(names)
        return (
            f"{regular_or_absent(self.lock_list)} && "
            f"{{ [ ! -f {f} ] || {{ awk -v names={quoted([wanted])} "
            "'BEGIN {n = split(names, a, \" \"); for (i = 1; i <= n; i++) drop[a[i]] = 1} "
            "{l = $0; sub(/^!/, \"\", l); sub(/-[^-]*-[^-]*$/, \"\", l)} "
            "/^#/ || !(l in drop)' "
            f"{f} > {f}.gpuhost && cat {f}.gpuhost > {f} && rm -f {f}.gpuhost; }}; }}"
        )

    def hold_hint(self, names: Sequence[str]) -> str:
        return " ".join(("dnf versionlock add", *names))

    def hold_kept(self, held: Sequence[str], install: str) -> str:
        """dnf's locks are lines of a file that an install never changes: ``install`` (made
        with ``change_held``) runs as it is, and the locks stay as they were."""
        return install

    # -- reading -----------------------------------------------------------------------------

    def holds_command(self) -> str:
        return small_file_command(self.lock_list)

    def installed_command(self, names: Sequence[str] = ()) -> str:
        return (
            f"LC_ALL=C {self._rpm()} -qa --qf '%{{NAME}}\\t{_EVR}\\tii\\n' {quoted(names)} "
            "2>/dev/null; true"
        )

    def snapshot_packages_command(self) -> str:
        return f"{self._rpm()} -qa --qf '%{{NAME}}\\t{_EVR}\\t%{{ARCH}}\\tii\\n' 2>/dev/null"

    def has_command(self, spec: str) -> str:
        """Print ``installed`` when a package ``spec`` (a name or N-V-R.A, as ``dnf install``
        takes it) is installed, or an installed package provides it."""
        rpm, q = self._rpm(), quoted([spec])
        return (
            f"{{ {rpm} -q {q} || {rpm} -q --whatprovides {q}; }} >/dev/null 2>&1 "
            "&& echo installed; true"
        )

    def versions_command(self, names: Sequence[str]) -> str:
        return f"{self._rpm()} -qa --qf '{_EVR}\\n' {quoted(names)} 2>/dev/null"

    def file_identity_command(self, path: str) -> str:
        return f"{self._rpm()} -qp --nosignature --qf '%{{NAME}} {_EVR}' {path} 2>/dev/null"

    def unfinished_command(self) -> str:
        """Duplicated packages: what a dnf transaction cut off midway leaves in the rpm
        database (``dnf check`` reads the database only, no repository)."""
        return f"LC_ALL=C {self._dnf('-q')} check --duplicates 2>/dev/null"

    def finish_command(self) -> str:
        return self._dnf("-y", "remove", "--duplicates")

    # -- dnf only ----------------------------------------------------------------------------

    def rpm_probe(self, name_filter: str) -> str:
        """The audit probe's ``rpm`` section: ``NAME<TAB>VERSION-RELEASE`` of the installed
        packages whose names match ``name_filter`` (``parsers.packages.parse_rpm_qa``)."""
        return (
            f"{self._rpm()} -qa --qf '%{{NAME}}\\t%{{VERSION}}-%{{RELEASE}}\\n' "
            f"| grep -iE '{name_filter}'; true"
        )

    def available_command(self, names: Sequence[str]) -> str:
        """``NAME<TAB>EVR`` of every version the repositories offer of ``names`` (locks
        ignored: what exists, not what may be installed)."""
        return (
            f"LC_ALL=C {self._dnf('-q', _NO_LOCKS)} repoquery --qf "
            f"'%{{name}}\\t%{{evr}}' {quoted(names)}"
        )

    def offered_command(self, names: Sequence[str], repo_url: str = "",
                        setopts: Sequence[str] = ()) -> str:
        """What the repositories offer of ``names`` whatever module stream is enabled
        (``--disable-modular-filtering``: before a stream is enabled or switched), with the
        repository folder ``repo_url`` added for this query alone (``--repofrompath``: read
        before the host has its repository file; nothing is written but dnf's metadata cache).
        ``NAME<TAB>EVR`` lines, dnf's own messages (stderr) as they are, and last
        ``OFFERED_RC <exit status>``: a repository dnf cannot read is not "offers nothing"
        (``parsers.packages.parse_offered``). ``setopts``: dnf settings for this query alone
        (``proxy=URL``: the proxy provision configures later in the run)."""
        query = self._dnf("-q", _NO_LOCKS, *self._query_repo(repo_url, setopts))
        return (
            f"LC_ALL=C {query} repoquery --disable-modular-filtering --qf "
            f"'%{{name}}\\t%{{evr}}' {quoted(names)} 2>&1; echo \"{OFFERED_RC} $?\""
        )

    def enable_repo(self, repo: str) -> str:
        """Enable a repository the host has a file for (dnf-plugins-core's config-manager)."""
        return self._dnf("-y", "config-manager", "--set-enabled", repo)

    def epel_hint(self, crb: str = "") -> str:
        """What a user runs to get EPEL (and the repository its packages need) enabled."""
        enable = f"; dnf config-manager --set-enabled {crb}" if crb else ""
        return f"dnf install epel-release{enable}"

    def import_key(self, path: str) -> str:
        """Import a repository signing key into rpm's keyring (what dnf checks packages with)."""
        return f"{self._rpm()} --import {quoted([path])}"

    def module_enable(self, module: str, stream: str) -> str:
        return self._dnf("-y", "module", "enable", f"{module}:{stream}")

    def module_reset(self, module: str) -> str:
        return self._dnf("-y", "module", "reset", module)

    def module_state_command(self, module: str) -> str:
        """The module's state file (``stream=``/``state=`` lines): local, no metadata."""
        return small_file_command(f"{self.root}/etc/dnf/modules.d/{module}.module")

    def download_resolved(self, specs: Sequence[str], dest: str) -> str:
        """Download into ``dest`` what installing ``specs`` would install on this host (every
        dependency it lacks, resolved as one transaction, as provision's install would), without
        installing anything (``--downloadonly``; locks off, no weak dependencies)."""
        return (
            f"{self._dnf('-y', _NO_WEAK, _NO_LOCKS)} install --downloadonly --destdir "
            f"{quoted([dest])} " + " ".join(specs)
        )

    def provides_command(self, name_shell: str) -> str:
        """Print what the repositories offer that provides ``name_shell`` (a shell word):
        nothing when none does."""
        return f"LC_ALL=C {self._dnf('-q')} repoquery --whatprovides {name_shell} 2>/dev/null"

    @staticmethod
    def private_options(folder: str) -> tuple[str, ...]:
        """dnf options for a private state in ``folder`` (a bundle's reference host): the
        host's repository files plus ``folder``/repos, metadata cache and dnf's own state in
        ``folder``; the host's configuration, cache and history are left as they are."""
        repos = ",".join((*REPOS_DIRS, f"{folder}/repos"))
        return (f"--setopt=reposdir={repos}", f"--setopt=cachedir={folder}/cache",
                f"--setopt=persistdir={folder}/persist", f"--setopt=logdir={folder}")

    @staticmethod
    def createrepo_argv(folder: str) -> list[str]:
        """The controller's command making an RPM repository's metadata (``repodata/``) for the
        packages in ``folder`` (gzip: what every dnf reads)."""
        return ["createrepo_c", "--quiet", "--no-database", "--general-compress-type=gz",
                folder]

    @staticmethod
    def modifyrepo_argv(path: str, repodata: str) -> list[str]:
        """The controller's command adding module metadata (``modules.yaml``) to ``repodata``."""
        return ["modifyrepo_c", "--mdtype=modules", "--compress-type=gz", path,
                repodata]

    def streams_command(self, module: str, repo_url: str = "",
                        setopts: Sequence[str] = ()) -> str:
        """``dnf module list`` of ``module`` (every stream the repositories offer; with
        ``repo_url`` that repository folder added for this query, as ``offered_command``)."""
        query = self._dnf("-q", *self._query_repo(repo_url, setopts))
        return f"LC_ALL=C {query} module list {quoted([module])} 2>/dev/null"

    @staticmethod
    def _query_repo(repo_url: str, setopts: Sequence[str] = ()) -> list[str]:
        """dnf's options adding the repository folder ``repo_url`` for one query (none: none),
        and ``setopts`` (``key=value``) for it."""
        options = [f"--setopt={quoted([option])}" for option in setopts]
        if not repo_url:
            return options
        return options + [
            f"--repofrompath={quoted([OFFERED_REPO + ',' + repo_url])}",
            f"--setopt={OFFERED_REPO}.metadata_expire=0",  # never an old copy of its metadata
        ]
