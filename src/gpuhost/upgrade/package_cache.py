"""The on-host cache of the package files of a snapshot's versions.

``/var/cache/gpuhost/packages/<snapshot-id>/`` keeps one package file (``.deb``, ``.rpm``) per
coupled package at the version the snapshot recorded: copied from the package manager's archive
cache when it is still there (apt's), else from the offline bundle the host was provisioned from
(its copy in ``/var/lib/gpuhost-bundle/repo``, docs/offline.md: an offline host has no repository
to download from), else downloaded while the repository still offers it (the seam's
``download``). A rollback installs from this folder, so it works after the repository dropped
the old version. Each file's package name and version are read back (``file_identity_command``)
and must match; the folder's size is reported. The commands are the host's package manager's
(``gpuhost.pkgmgr``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuhost.operations.offline import REPO_DIR
from gpuhost.pkgmgr import APT, PackageManager

CACHE_ROOT = "/var/cache/gpuhost/packages"
BUNDLE_POOL = f"{REPO_DIR}/pool"  # a copied offline bundle's packages (apt's file: source)


def cache_dir(snapshot_id: str) -> str:
    return f"{CACHE_ROOT}/{snapshot_id}"


def deb_filename(name: str, version: str, arch: str) -> str:
    """apt's archive file name: an epoch's ``:`` is written ``%3a``."""
    return APT.package_file(name, version, arch)


def fill_command(
    snapshot_id: str, packages: Mapping[str, Mapping[str, str]], manager: PackageManager = APT
) -> str:
    """Shell command that fills the cache and prints one status line per package, then the
    size: ``OK <name> <file>`` / ``MISS <name> <reason>`` / ``SIZE <bytes>``."""
    folder = cache_dir(snapshot_id)
    lines = [
        "export LC_ALL=C",
        f"mkdir -p {shlex.quote(folder)} && chmod 700 {shlex.quote(folder)}"
        f" && cd {shlex.quote(folder)} || exit 3",
    ]
    for name, record in sorted(packages.items()):
        version, arch = record["version"], record.get("arch", "amd64")
        file = manager.package_file(name, version, arch)
        q = shlex.quote
        copies = "".join(
            f'if [ ! -s "$f" ] && [ -s {folder_of}/"$f" ]; then '
            # a hard link costs no space or time (apt replaces files, never rewrites them)
            f'a={folder_of}/"$f"; ln -f "$a" . 2>/dev/null || cp "$a" .; fi; '
            for folder_of in (*manager.archive_dirs, BUNDLE_POOL)
        )
        lines.append(
            f"f={q(file)}; {copies}"
            f'if [ ! -s "$f" ]; then '
            f"{manager.download([_download_spec(manager, name, version, arch)])} "
            ">/dev/null 2>.err || true; fi; "
            f'if [ -s "$f" ] && [ "$({manager.file_identity_command(chr(34) + "$f" + chr(34))})" '
            f'= {q(f"{name} {version}")} ]; then echo "OK {name} $f"; '
            f'else rm -f "$f"; echo "MISS {name} $(tail -n1 .err 2>/dev/null)"; fi'
        )
    lines.append('rm -f .err; echo "SIZE $(du -sb . | cut -f1)"')
    return "\n".join(lines)


@dataclass
class CacheReport:
    path: str
    files: dict[str, str] = field(default_factory=dict)  # package -> file name
    missing: dict[str, str] = field(default_factory=dict)  # package -> reason
    size_bytes: int = 0

    @property
    def complete(self) -> bool:
        return not self.missing

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "files": dict(self.files),
            "missing": dict(self.missing),
            "size_bytes": self.size_bytes,
        }


def _download_spec(manager: PackageManager, name: str, version: str, arch: str) -> str:
    """apt: ``name:arch=version`` (``name=version`` for arch all); dnf: ``name-E:V-R.arch``."""
    if manager.family == "apt":
        return manager.exact(name if arch == "all" else f"{name}:{arch}", version)
    return f"{manager.exact(name, version)}.{arch}"


def parse_fill_output(snapshot_id: str, output: str) -> CacheReport:
    report = CacheReport(cache_dir(snapshot_id))
    for line in output.splitlines():
        word, _, rest = line.partition(" ")
        if word == "OK":
            name, _, file = rest.partition(" ")
            report.files[name] = file
        elif word == "MISS":
            name, _, reason = rest.partition(" ")
            report.missing[name] = reason.strip() or "not cached, and the download failed"
        elif word == "SIZE" and rest.strip().isdigit():
            report.size_bytes = int(rest.strip())
    return report


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def install_command(
    snapshot_id: str, files: Mapping[str, str], manager: PackageManager = APT
) -> str:
    """Install the cached files (downgrades allowed; held packages may change; keep the admin's
    config files). Local files only: the repository is not needed."""
    folder = cache_dir(snapshot_id)
    return manager.install_files([f"{folder}/{f}" for f in sorted(files.values())])


# -- pruning -------------------------------------------------------------------------------------

SNAPSHOT_ID_RE = re.compile(r"^\d{8}T\d{6}Z(?:-\d+)?$")
LIST_COMMAND = (
    f"cd {CACHE_ROOT} 2>/dev/null || exit 0; for d in *; do [ -d \"$d\" ] || continue; "
    'echo "DIR $d $(du -sb -- "$d" | cut -f1)"; done'
)


def parse_cache_dirs(output: str) -> dict[str, int]:
    """{snapshot id: bytes} from ``LIST_COMMAND``; folders not named like a snapshot id are not
    gpuhost's and are left out (pure)."""
    found = {}
    for line in output.splitlines():
        word, _, rest = line.partition(" ")
        name, _, size = rest.partition(" ")
        if word == "DIR" and SNAPSHOT_ID_RE.match(name):
            found[name] = int(size) if size.strip().isdigit() else 0
    return found


@dataclass
class PrunePlan:
    remove: list[str] = field(default_factory=list)
    keep: list[str] = field(default_factory=list)  # the newest snapshots and those in use
    unknown: list[str] = field(default_factory=list)  # no snapshot of this state dir: kept

    def freed(self, sizes: Mapping[str, int]) -> int:
        return sum(sizes.get(sid, 0) for sid in self.remove)


def prune_plan(
    on_host: Sequence[str], known: Sequence[str], keep: int, in_use: Collection[str] = ()
) -> PrunePlan:
    """Which cache folders of one host go (pure): those of snapshots the controller knows
    (``known``), except the ``keep`` newest of them and any an unfinished upgrade run still
    needs for its rollback (``in_use``). A folder of a snapshot the controller does not know is
    kept: another state dir may rely on it."""
    newest = sorted(known, key=_id_order, reverse=True)[: max(keep, 0)]
    plan = PrunePlan()
    for sid in sorted(on_host, key=_id_order):
        if sid not in known:
            plan.unknown.append(sid)
        elif sid in newest or sid in in_use:
            plan.keep.append(sid)
        else:
            plan.remove.append(sid)
    return plan


def _id_order(sid: str) -> tuple[str, int]:
    base, _, n = sid.partition("-")
    return base, int(n) if n.isdigit() else 1


def remove_command(snapshot_ids: Sequence[str]) -> str:
    """``rm -rf`` of the cache folders of ``snapshot_ids`` (each checked to be a snapshot id)."""
    for sid in snapshot_ids:
        if not SNAPSHOT_ID_RE.match(sid):
            raise ValueError(f"not a snapshot id: {sid!r}")
    return "rm -rf -- " + " ".join(shlex.quote(cache_dir(sid)) for sid in snapshot_ids)
