"""apt/dpkg (Debian, Ubuntu): the commands of the package-manager seam."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from gpuhost.parsers.packages import APT_OFFERED_RC, APT_UPDATE_RC, PRIVATE_DIR
from gpuhost.pkgmgr.base import PackageManager, quoted

#: dpkg-query's tab-separated package, version and status (``parse_dpkg_query``'s format)
DPKG_QUERY_STATUS = "dpkg-query -W -f='${Package}\\t${Version}\\t${db:Status-Abbrev}\\n'"
# The held packages: the same list as `apt-mark showhold` (dpkg selections set to "hold"; '*'
# includes packages held but not installed), one name a line, without apt-mark's cache loading;
# parsed by parsers.packages.parse_apt_mark_showhold.
HOLDS = (
    "LC_ALL=C dpkg-query -W -f='${db:Status-Want} ${Package}\\n' '*' "
    "| awk '$1 == \"hold\" {print $2}'"
)
FINISH = "DEBIAN_FRONTEND=noninteractive dpkg --configure -a --force-confdef --force-confold"
_DPKG_OPTIONS = '-o Dpkg::Options::="--force-confdef" -o Dpkg::Options::="--force-confold"'
#: apt reading only the private folder ``$d``'s sources and lists (the host's apt.conf.d, dpkg
#: status and keyrings as they are); no lock, no cache files, downloads as root (the folder is
#: mktemp's 0700, which apt's sandbox user could not write)
_PRIVATE_QUERY = " ".join(
    f"-o {option}" for option in (
        'Dir::Etc::SourceList="$d/sources.list"', 'Dir::Etc::SourceParts="$d/parts"',
        'Dir::State::Lists="$d/lists"', 'Dir::Cache="$d/cache"', "Dir::Cache::pkgcache=",
        "Dir::Cache::srcpkgcache=", "Debug::NoLocking=1", "APT::Sandbox::User=root",
    )
)


@dataclass(frozen=True)
class Apt(PackageManager):
    family: ClassVar[str] = "apt"
    database: ClassVar[str] = "dpkg"
    lock_word: ClassVar[str] = "held"
    lock_owner: ClassVar[str] = "dpkg's"
    # apt-get, apt, aptitude, dpkg and unattended-upgrades (its process name is cut at 15)
    audit_tool: ClassVar[str] = "dpkg"
    tools: ClassVar[str] = "apt-get|apt|aptitude|dpkg|unattended-upgr"
    # unattended-upgrades' shutdown helper has the same process name but runs the whole boot on
    # every host with the package (Ubuntu installs it by default) and takes dpkg's lock only at
    # shutdown: provision waited 600 s for it and failed (lab, Ubuntu-shaped host)
    not_waited: ClassVar[str] = "unattended-upgrade-shutdown"
    archive_dirs: ClassVar[tuple[str, ...]] = ("/var/cache/apt/archives",)
    file_suffix: ClassVar[str] = ".deb"

    def _get(self) -> str:
        return " ".join(("apt-get", *self.options))

    def _cache(self) -> str:
        return " ".join(("apt-cache", *self.options))

    def exact(self, name: str, version: str) -> str:
        return f"{name}={version}"

    def package_file(self, name: str, version: str, arch: str) -> str:
        """apt's archive file name: an epoch's ``:`` is written ``%3a``."""
        return f"{name}_{version.replace(':', '%3a')}_{arch}.deb"

    def install(self, specs: Sequence[str], *, recommends: bool = False,
                downgrades: bool = False, change_held: bool = False) -> str:
        args = "install" if recommends else "install --no-install-recommends"
        if downgrades:
            args += " --allow-downgrades"
        if change_held:
            args += " --allow-change-held-packages"
        return f"DEBIAN_FRONTEND=noninteractive {self._get()} -y {_DPKG_OPTIONS} {args} " + (
            " ".join(specs))

    def install_files(self, paths: Sequence[str]) -> str:
        """Install local package files (the rollback's cache): downgrades and held packages
        allowed, the admin's config files kept, dpkg's lock waited for up to 10 minutes."""
        return (
            f"DEBIAN_FRONTEND=noninteractive {self._get()} install -y -q --no-install-recommends "
            "--allow-downgrades --allow-change-held-packages -o DPkg::Lock::Timeout=600 "
            "-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "
            + quoted(paths)
        )

    def remove(self, names: Sequence[str], *, change_held: bool = False) -> str:
        held = " --allow-change-held-packages" if change_held else ""
        return f"DEBIAN_FRONTEND=noninteractive {self._get()} remove -y -q{held} " + quoted(names)

    def refresh(self) -> str:
        return f"{self._get()} update"

    def download(self, specs: Sequence[str], dest: str = ".") -> str:
        cd = "" if dest == "." else f"cd {quoted([dest])} && "
        return f"{cd}{self._get()} download -q " + quoted(specs)

    def hold(self, locks: Sequence[str]) -> str:
        return "apt-mark hold " + " ".join(locks)

    def unhold(self, names: Sequence[str]) -> str:
        """dpkg selections set back to install: unlike ``apt-mark unhold`` it also releases a
        package held but not installed."""
        lines = "".join(f"{name} install\\n" for name in names)
        return f"printf {quoted([lines])} | dpkg --set-selections"

    def hold_hint(self, names: Sequence[str]) -> str:
        return " ".join(("apt-mark hold", *names))

    def hold_kept(self, held: Sequence[str], install: str) -> str:
        names = " ".join(held)
        return (
            f"apt-mark unhold {names} && {{ {install}; rc=$?; apt-mark hold {names}; exit $rc; }}"
        )

    def holds_command(self) -> str:
        return HOLDS

    def installed_command(self, names: Sequence[str] = ()) -> str:
        if not names:
            return DPKG_QUERY_STATUS
        return f"LC_ALL=C {DPKG_QUERY_STATUS} {quoted(names)} 2>/dev/null; true"

    def snapshot_packages_command(self) -> str:
        return (
            "dpkg-query -W -f='${Package}\\t${Version}\\t${Architecture}\\t"
            "${db:Status-Abbrev}\\n' 2>/dev/null"
        )

    def versions_command(self, names: Sequence[str]) -> str:
        """The version of each installed package of ``names`` (globs allowed), one a line."""
        return f"dpkg-query -W -f='${{Version}}\\n' {quoted(names)} 2>/dev/null"

    def file_identity_command(self, path: str) -> str:
        return f"dpkg-deb -W --showformat='${{Package}} ${{Version}}' {path} 2>/dev/null"

    def unfinished_command(self) -> str:
        return "LC_ALL=C dpkg --audit 2>/dev/null"

    def finish_command(self) -> str:
        return FINISH

    # -- apt only ----------------------------------------------------------------------------

    def clean(self) -> str:
        """Empty apt's archive of downloaded package files."""
        return f"{self._get()} clean"

    def policy_command(self, names: Sequence[str]) -> str:
        """``apt-cache policy``: installed and candidate versions as the pins resolve them."""
        return f"LC_ALL=C {self._cache()} policy " + " ".join(sorted(names))

    def space_command(self, specs: Sequence[str]) -> str:
        """What installing ``specs`` would download and add (apt computes, nothing changes):
        the ``Need to get`` and ``After this operation`` lines."""
        names = " ".join(f"'{p}'" for p in specs)
        return (
            f"LC_ALL=C {self._get()} install --assume-no --no-install-recommends "
            "--allow-downgrades --allow-change-held-packages -o Debug::NoLocking=1 "
            f"{names} 2>&1 | grep -E '^(Need to get|After this operation)'"
        )

    def available_command(self, names_shell: str) -> str:
        """Print ``available=REST`` for each package ``names_shell`` (shell words) apt offers,
        where the name is ``linux-headers-REST`` (the kernel headers of provision's Kernels)."""
        return (
            f"command -v apt-cache >/dev/null 2>&1 && LC_ALL=C {self._cache()} show "
            f"--no-all-versions {names_shell} 2>/dev/null "
            "| sed -n 's/^Package: linux-headers-/available=/p'"
        )

    def show_command(self, names_shell: str) -> str:
        """``apt-cache show`` of the packages ``names_shell`` (shell words): every version apt
        knows of each, newest first; an unknown name is left out (``parsers.apt_records``)."""
        return f"LC_ALL=C {self._cache()} show {names_shell} 2>/dev/null; true"

    def known_command(self, name_shell: str) -> str:
        """Exit 0 when the repositories offer the package ``name_shell`` (shell word)."""
        return f"{self._cache()} show {name_shell} >/dev/null 2>&1"

    def print_uris(self, specs: Sequence[str]) -> str:
        """What apt would download to install ``specs``: one quoted URI a line
        (``parsers``: ``bundle.printuris``)."""
        return f"{self._get()} install --print-uris -qq -y --no-install-recommends " + " ".join(
            specs)

    def policy_probe(self, name_filter: str) -> str:
        """The audit probe's ``apt-policy`` section: ``apt-cache policy`` of the installed
        packages whose names match ``name_filter`` (grep -E)."""
        return (
            "p=$(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\\n' 2>/dev/null "
            f"| awk '$2 ~ /^[hi]i/ {{print $1}}' | grep -E '{name_filter}'); "
            f'[ -z "$p" ] || {self._cache()} policy $p'
        )

    def offered_command(self, names: Sequence[str], files: Sequence[tuple[str, str]],
                        keys: Sequence[tuple[str, str]], settings: Sequence[str]) -> str:
        """Every version apt would see of ``names``, through a private configuration that
        leaves the host's apt state untouched: a folder ``mktemp -d`` makes (removed on exit)
        holds the sources ``files`` ((``sources.list`` or ``parts/NAME``, text), where
        ``PRIVATE_DIR`` stands for the folder), the keyrings ``keys`` ((name, base64)), and the
        lists, started from a copy of the host's (a conditional download); ``settings`` are apt
        options (``Acquire::http::Proxy=URL``). Prints ``apt-get update``'s output and
        status, then ``apt-cache madison``'s (``parsers.packages.parse_apt_offered``)."""
        write = [f"printf %s {quoted([b64])} | base64 -d > \"$d\"/{quoted([name])}"
                 for name, b64 in keys]
        write += [f"printf %s {quoted([text])} | sed \"s|{PRIVATE_DIR}|$d|g\" > "
                  f"\"$d\"/{quoted([path])}" for path, text in files]
        options = " ".join((_PRIVATE_QUERY, *(f"-o {quoted([s])}" for s in settings)))
        return "; ".join((
            "d=$(mktemp -d /var/tmp/gpuhost-apt-offered.XXXXXX) || "
            f"{{ echo '{APT_UPDATE_RC} mktemp'; exit 0; }}",
            "trap 'rm -rf \"$d\"' EXIT",
            'mkdir -p "$d/parts" "$d/lists/partial" "$d/cache"',
            'cp -p /var/lib/apt/lists/*_* "$d/lists/" 2>/dev/null', *write,
            f"LC_ALL=C apt-get {options} -q update 2>&1",
            f'echo "{APT_UPDATE_RC} $?"',
            f"LC_ALL=C apt-cache {options} madison {quoted(sorted(names))} 2>&1",
            f'echo "{APT_OFFERED_RC} $?"',
        ))

    @staticmethod
    def control_argv(path: str) -> list[str]:
        """The controller's command reading a ``.deb``'s control file (zstd members)."""
        return ["dpkg-deb", "--info", path, "control"]

    @staticmethod
    def private_options(folder: str) -> tuple[str, ...]:
        """apt options for a private configuration in ``folder`` (a bundle's reference host):
        its own sources, preferences, lists and archives; no lock, no package cache files."""
        return tuple(
            f"-o {option}" for option in (
                f"Dir::Etc::SourceParts={folder}/parts",
                f"Dir::Etc::PreferencesParts={folder}/prefs",
                f"Dir::State::Lists={folder}/lists", f"Dir::Cache::archives={folder}/archives",
                "Dir::Cache::pkgcache=", "Dir::Cache::srcpkgcache=", "Debug::NoLocking=1",
                "APT::Sandbox::User=root",
            )
        )
