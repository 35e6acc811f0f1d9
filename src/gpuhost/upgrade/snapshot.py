"""Snapshot documents: what a host looked like before a change, kept on the controller.

A snapshot is one versioned JSON document per host and moment, stored as
``<state dir>/snapshots/<host>/<id>.json`` where ``id`` is the UTC time (``20250101T120000Z``).
It records the coupled package versions, holds, apt preferences and sources, modprobe.d and the
kernel command line, the ``nvidia-smi -q -x`` state, runtime and fabric manager configs, gpuhost's
own files, units and drop-ins, the profile name, the on-host package cache and an optional
provider snapshot. ``diff`` compares two documents; rollback restores from one.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import os
import posixpath
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpuhost.errors import ConfigError, ParseError
from gpuhost.parsers.cuda import ALTERNATIVE_MODES, CUDA_LINK_KINDS
from gpuhost.parsers.profile_marker import MARKER_PATH, parse_profile_marker
from gpuhost.safeio import fsync_folder, read_regular, write_atomic
from gpuhost.statedir import checked_folder
from gpuhost.upgrade.host_state import (
    HOLD_RE,
    PACKAGE_RE,
    VERSION_RE,
    HostState,
    file_bytes,
    file_category,
    file_path_problem,
    mode_problem,
)

SNAPSHOT_SCHEMA = 1
SNAPSHOT_KIND = "gpuhost.snapshot"
PROFILE_FILE = MARKER_PATH
ID_RE = re.compile(r"^\d{8}T\d{6}Z(-\d+)?$")


def new_snapshot_id(now: datetime | None = None) -> str:
    return (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")


def profile_from_files(files: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The profile name recorded in /etc/gpuhost/profile (``gpuhost.parsers.profile_marker``:
    the JSON marker provision writes, or a legacy plain name). None when absent or unreadable."""
    record = files.get(PROFILE_FILE)
    if record is None or "content" not in record:
        return None
    try:
        marker = parse_profile_marker(str(record["content"]))
    except ParseError:
        return None
    return marker.profile if marker else None


def smi_summary(output: str, rc: int | None) -> dict[str, Any]:
    """The GPU state worth comparing: per GPU persistence, clocks, ECC, MIG; or the error state."""
    summary: dict[str, Any] = {"rc": rc}
    if not output.strip():
        summary["state"] = "absent"
        return summary
    try:
        from gpuhost.parsers.nvidia_smi import parse_output
    except ImportError:  # pragma: no cover - parsers ship with gpuhost
        summary["state"] = "unparsed"
        return summary
    report = parse_output(output).to_dict()
    summary["state"] = report.get("state")
    summary["driver_version"] = report.get("driver_version")
    summary["cuda_version"] = report.get("cuda_version")
    gpus = []
    for gpu in report.get("gpus") or []:
        gpus.append(
            {
                key: gpu.get(key)
                for key in (
                    "index",
                    "name",
                    "uuid",
                    "pci_bus_id",
                    "persistence_mode",
                    "clocks",
                    "ecc",
                    "mig",
                    "power",
                    "compute_mode",
                )
                if key in gpu
            }
        )
    summary["gpus"] = gpus
    return summary


def build_snapshot(host: str, state: HostState, snapshot_id: str | None = None) -> dict[str, Any]:
    """A snapshot document from a parsed host state (pure apart from the clock)."""
    now = datetime.now(timezone.utc)
    sid = snapshot_id or new_snapshot_id(now)
    return {
        "schema": SNAPSHOT_SCHEMA,
        "kind": SNAPSHOT_KIND,
        "id": sid,
        "host": host,
        "taken_at": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "profile": profile_from_files(state.files),
        "packages": dict(sorted(state.packages.items())),
        "holds": list(state.holds),
        "kernel": {
            "release": state.kernel_release,
            "cmdline": state.cmdline,
            "packages": dict(sorted(state.kernel_packages.items())),
        },
        "gpu": smi_summary(state.smi_output, state.smi_rc),
        "files": dict(sorted(state.files.items())),
        "cuda_link": state.cuda_link.record() if state.cuda_link else None,
        "package_cache": None,
        "provider": None,
    }


def _check_kernel(kernel: object, source: str) -> None:
    if kernel is None:
        return
    if not isinstance(kernel, dict):
        raise ConfigError(f"{source}: kernel: found {kernel!r:.40}, expected an object")
    for key in ("release", "cmdline"):
        if not isinstance(kernel.get(key, ""), (str, type(None))):
            raise ConfigError(f"{source}: kernel.{key}: found {kernel[key]!r:.40}, expected text")
    packages = kernel.get("packages", {})
    if not isinstance(packages, dict) or not all(
        isinstance(r, dict) and isinstance(r.get("version"), str) for r in packages.values()
    ):
        raise ConfigError(
            f'{source}: kernel.packages: expected an object of package name -> {{"version": "..."}}'
        )


def _check_file_record(path: str, record: dict[str, Any], source: str) -> None:
    """A recorded file must be one snapshots record, of the category its path gives, with a
    mode rollback may apply, and give back its exact bytes (what rollback writes)."""
    problem = file_path_problem(path)
    if problem:
        raise ConfigError(f"{source}: files: {path!r:.120}: {problem}")
    category = record.get("category", file_category(path))
    if category != file_category(path):
        raise ConfigError(
            f"{source}: files.{path}.category: found {category!r:.40}, expected "
            f"{file_category(path)!r} (the category of that path)"
        )
    problem = mode_problem(record.get("mode"))
    if problem:
        raise ConfigError(f"{source}: files.{path}.mode: found {record['mode']!r:.40}, {problem}")
    for key, allowed in (
        ("sha256", str),
        ("mode", (str, type(None))),
        ("content", str),
        ("content_b64", str),
    ):
        if not isinstance(record.get(key, ""), allowed):
            found = f"{record[key]!r:.40}"
            raise ConfigError(f"{source}: files.{path}.{key}: found {found}, expected text")
    if "sha256" in record and not re.fullmatch(r"[0-9a-f]{64}", record["sha256"]):
        raise ConfigError(
            f"{source}: files.{path}.sha256: found {record['sha256']!r:.40}, expected 64 hex digits"
        )
    try:
        if "content" in record or "content_b64" in record:
            digest = hashlib.sha256(file_bytes(record)).hexdigest()
            if record.get("sha256", digest) != digest:
                raise ConfigError(f"{source}: files.{path}.sha256: does not match its content")
    except (UnicodeEncodeError, ValueError) as exc:  # a lone surrogate, bad base64
        raise ConfigError(f"{source}: files.{path}: content not readable ({exc})") from None


def _check_cuda_link(record: object, source: str) -> None:
    """``cuda_link`` (optional: snapshots before it lack it): kind link|absent|other, the link
    targets plain absolute paths (rollback points /usr/local/cuda at them as root), mode
    auto|manual."""
    if record is None:
        return
    if not isinstance(record, dict) or record.get("kind") not in CUDA_LINK_KINDS:
        raise ConfigError(
            f"{source}: cuda_link: found {record!r:.60}, expected an object with kind "
            f"{' | '.join(CUDA_LINK_KINDS)}"
        )
    for key in ("link", "alternative"):
        path = record.get(key)
        if path is not None and (not isinstance(path, str) or not path.startswith("/")
                                 or posixpath.normpath(path) != path
                                 or any(ord(c) < 32 or ord(c) == 127 for c in path)):
            raise ConfigError(
                f"{source}: cuda_link.{key}: found {path!r:.60}, expected a plain absolute path"
            )
    if record.get("kind") == "link" and not record.get("link"):
        raise ConfigError(f"{source}: cuda_link.link: missing, expected the link's target")
    if record.get("mode") not in (None, *ALTERNATIVE_MODES):
        raise ConfigError(
            f"{source}: cuda_link.mode: found {record.get('mode')!r:.40}, expected auto or manual"
        )


def _check_packages(packages: Mapping[str, Any], source: str) -> None:
    """Each recorded package a package name with a version: rollback passes both to the
    package manager (a newline in a name split dpkg --set-selections' lines)."""
    for name, record in packages.items():
        if not PACKAGE_RE.fullmatch(name):
            raise ConfigError(f"{source}: packages: found {name!r:.60}, expected package names")
        if not isinstance(record, dict) or not isinstance(record.get("version"), str):
            raise ConfigError(f"{source}: packages.{name}.version missing or not a string")
        if not VERSION_RE.fullmatch(record["version"]):
            raise ConfigError(f"{source}: packages.{name}.version: found "
                              f"{record['version']!r:.60}, expected a package version")


def validate_document(doc: object, source: str) -> dict[str, Any]:
    """Check a loaded document's shape; one ConfigError naming the file and field."""
    if not isinstance(doc, dict):
        raise ConfigError(f"{source}: snapshot must be a JSON object, found {type(doc).__name__}")
    if doc.get("kind") != SNAPSHOT_KIND:
        raise ConfigError(f"{source}: kind is {doc.get('kind')!r}, expected {SNAPSHOT_KIND!r}")
    if doc.get("schema") != SNAPSHOT_SCHEMA:
        raise ConfigError(
            f"{source}: snapshot schema {doc.get('schema')!r} is not supported "
            f"(expected {SNAPSHOT_SCHEMA})"
        )
    for key, kind in (("id", str), ("host", str), ("packages", dict), ("holds", list)):
        if not isinstance(doc.get(key), kind):
            raise ConfigError(f"{source}: field {key!r} missing or not a {kind.__name__}")
    _check_packages(doc["packages"], source)
    bad_holds = [h for h in doc["holds"] if not isinstance(h, str) or not HOLD_RE.fullmatch(h)]
    if bad_holds:
        raise ConfigError(f"{source}: holds: found {bad_holds[0]!r:.40}, expected package names")
    _check_kernel(doc.get("kernel"), source)
    if not isinstance(doc.get("files", {}), dict):
        raise ConfigError(f"{source}: field 'files' is not an object")
    for path, record in (doc.get("files") or {}).items():
        if not isinstance(record, dict) or not isinstance(record.get("category", ""), str):
            raise ConfigError(f"{source}: files.{path}: expected an object with a 'category'")
        _check_file_record(path, record, source)
    _check_cuda_link(doc.get("cuda_link"), source)
    cache = doc.get("package_cache")
    if cache is not None:
        if not isinstance(cache, dict):
            raise ConfigError(f"{source}: package_cache: found {cache!r:.60}, expected an object")
        for key in ("files", "missing"):
            value = cache.get(key, {})
            if not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items()
            ):
                raise ConfigError(
                    f"{source}: package_cache.{key}: expected an object of package name -> text"
                )
        size = cache.get("size_bytes", 0)
        if not isinstance(size, int) or isinstance(size, bool):
            raise ConfigError(
                f"{source}: package_cache.size_bytes: found {size!r:.40}, expected a number"
            )
    return doc


# -- storage on the controller -------------------------------------------------------------------


@dataclass(frozen=True)
class SnapshotRef:
    host: str
    id: str
    path: Path


class SnapshotStore:
    """``<root>/<host>/<id>.json`` on the controller."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def save(self, doc: Mapping[str, Any]) -> Path:
        """Write ``doc`` atomically (mode 0600) as ``<host>/<id>.json``; its id's reservation
        (``unique_id``) is released."""
        host, sid = str(doc["host"]), str(doc["id"])
        folder = self._folder(host)
        path = folder / f"{sid}.json"
        text = json.dumps(doc, indent=1, sort_keys=True) + "\n"
        try:
            write_atomic(path, text.encode("utf-8"), 0o600)
        except OSError as exc:
            raise ConfigError(f"{path}: cannot write snapshot ({exc.strerror or exc})") from None
        with contextlib.suppress(OSError):
            os.unlink(folder / f".{sid}.id")
        return path

    def unique_id(self, host: str, sid: str) -> str:
        """``sid``, or ``sid-2``, ``sid-3``...: the first id no snapshot of ``host`` has and no
        other run has reserved; reserved here (a ``.<id>.id`` file created with O_EXCL), so
        snapshots taken in the same second never share an id."""
        folder = self._folder(host)
        candidate, n = sid, 1
        while True:
            if not os.path.lexists(folder / f"{candidate}.json"):
                try:
                    fd = os.open(folder / f".{candidate}.id", os.O_CREAT | os.O_EXCL, 0o600)
                except FileExistsError:
                    pass
                except OSError as exc:
                    raise ConfigError(
                        f"{folder}: cannot reserve snapshot id ({exc.strerror or exc})"
                    ) from None
                else:
                    os.close(fd)
                    fsync_folder(folder)
                    return candidate
            n += 1
            candidate = f"{sid}-{n}"

    def _folder(self, host: str) -> Path:
        checked_folder(self.root, create=True)
        return checked_folder(self.root / _safe_host(host), create=True)

    def list(self, host: str | None = None) -> list[SnapshotRef]:
        if not self.root.is_dir():
            return []
        folders = [self.root / _safe_host(host)] if host else sorted(self.root.iterdir())
        refs = []
        for folder in folders:
            if not folder.is_dir():
                continue
            for path in sorted(folder.glob("*.json")):
                if ID_RE.match(path.stem) and _regular(path):
                    refs.append(SnapshotRef(folder.name, path.stem, path))
        return refs

    def latest(self, host: str) -> SnapshotRef | None:
        refs = self.list(host)
        return max(refs, key=lambda r: _id_key(r.id)) if refs else None

    def find(self, host: str, sid: str) -> SnapshotRef:
        path = self.root / _safe_host(host) / f"{sid}.json"
        if not ID_RE.match(sid) or not _regular(path):
            have = ", ".join(r.id for r in self.list(host)) or "none"
            raise ConfigError(
                f"{host}: no snapshot {sid!r} under {self.root / _safe_host(host)} (have: {have})"
            )
        return SnapshotRef(host, sid, path)

    def resolve(self, ref: str) -> Path:
        """A path, ``host/id``, or ``host`` (its latest snapshot) -> the document's path."""
        path = Path(ref)
        if path.suffix == ".json" and os.path.lexists(path):
            return path  # load_snapshot refuses what is not a regular file
        host, _, sid = ref.partition("/")
        if sid:
            return self.find(host, sid).path
        latest = self.latest(host)
        if latest is None:
            raise ConfigError(
                f"{ref}: not a snapshot file, host/id or host with snapshots under {self.root}"
            )
        return latest.path

    def load(self, ref: SnapshotRef) -> dict[str, Any]:
        """The document of ``ref``, which must be the snapshot of that host with that id (a
        document copied into another host's folder, or renamed, is refused)."""
        return load_snapshot(ref.path, host=ref.host, sid=ref.id)


def _regular(path: Path) -> bool:
    """A regular file, not followed through a symbolic link (a FIFO or link is no snapshot)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def load_snapshot(path: Path, host: str | None = None, sid: str | None = None) -> dict[str, Any]:
    """A snapshot document read (regular file of this user or root only) and validated;
    ``host``/``sid``: what the document must say it is (a document of another host copied or
    renamed into this host's folder is refused)."""
    try:
        text = read_regular(path, "snapshot", owned=True).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not a snapshot (byte {exc.start} is not UTF-8 text; expected JSON)"
        ) from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not JSON (line {exc.lineno}: {exc.msg})") from None
    except (ValueError, RecursionError) as exc:  # a 5000-digit number, nesting too deep
        raise ConfigError(f"{path}: JSON not readable as a snapshot ({exc})") from None
    doc = validate_document(doc, str(path))
    for key, expected in (("host", host), ("id", sid)):
        if expected is not None and doc[key] != expected:
            raise ConfigError(
                f"{path}: {key}: found {doc[key]!r:.60}, expected {expected!r} (a snapshot must "
                "be the one its folder and name say)"
            )
    return doc


def _safe_host(host: str) -> str:
    if not host or "/" in host or host in (".", ".."):
        raise ConfigError(f"host name {host!r} cannot name a snapshot folder")
    return host


def _id_key(sid: str) -> tuple[str, int]:
    base, _, n = sid.partition("-")
    return base, int(n) if n.isdigit() else 1


# -- diff ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    section: str  # packages, holds, profile, kernel, gpu, files
    key: str
    before: str | None
    after: str | None
    detail: tuple[str, ...] = ()  # unified diff lines for files

    def line(self) -> str:
        if self.before is None:
            return f"{self.section}: + {self.key} {self.after or ''}".rstrip()
        if self.after is None:
            return f"{self.section}: - {self.key} {self.before or ''}".rstrip()
        return f"{self.section}: {self.key}: {self.before} -> {self.after}"


def diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Change]:
    """What changed from snapshot ``a`` to snapshot ``b`` (pure)."""
    changes: list[Change] = []
    if a.get("profile") != b.get("profile"):
        changes.append(Change("profile", "name", _s(a.get("profile")), _s(b.get("profile"))))
    changes += _dict_diff("packages", _versions(a["packages"]), _versions(b["packages"]))
    held_a, held_b = set(a.get("holds", [])), set(b.get("holds", []))
    changes += [Change("holds", n, None, "held") for n in sorted(held_b - held_a)]
    changes += [Change("holds", n, "held", None) for n in sorted(held_a - held_b)]
    ka, kb = a.get("kernel", {}) or {}, b.get("kernel", {}) or {}
    for key in ("release", "cmdline"):
        if ka.get(key) != kb.get(key):
            changes.append(Change("kernel", key, _s(ka.get(key)), _s(kb.get(key))))
    changes += _dict_diff(
        "kernel", _versions(ka.get("packages", {})), _versions(kb.get("packages", {}))
    )
    changes += _dict_diff("gpu", _flatten(a.get("gpu") or {}), _flatten(b.get("gpu") or {}))
    changes += _file_changes(a.get("files", {}) or {}, b.get("files", {}) or {})
    changes += _dict_diff("cuda_link", _flatten(a.get("cuda_link") or {}),
                          _flatten(b.get("cuda_link") or {}))
    return changes


def format_diff(a: Mapping[str, Any], b: Mapping[str, Any], changes: Iterable[Change]) -> str:
    head = f"--- {a['host']} {a['id']}\n+++ {b['host']} {b['id']}"
    body = []
    for change in changes:
        body.append(change.line())
        body.extend("    " + d for d in change.detail)
    return head + "\n" + ("\n".join(body) if body else "no changes")


def _versions(packages: Mapping[str, Any]) -> dict[str, str]:
    return {name: str(rec.get("version")) for name, rec in packages.items()}


def _dict_diff(section: str, a: Mapping[str, str], b: Mapping[str, str]) -> list[Change]:
    out = []
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            out.append(Change(section, key, a.get(key), b.get(key)))
    return out


def _flatten(value: Any, prefix: str = "") -> dict[str, str]:
    flat: dict[str, str] = {}
    if isinstance(value, Mapping):
        for key, inner in value.items():
            flat.update(_flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            flat.update(_flatten(inner, f"{prefix}[{index}]"))
    else:
        flat[prefix] = json.dumps(value)
    return flat


def _file_changes(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Change]:
    out = []
    for path in sorted(set(a) | set(b)):
        ra, rb = a.get(path), b.get(path)
        if ra is None:
            out.append(Change("files", path, None, "added"))
        elif rb is None:
            out.append(Change("files", path, "present", None))
        elif ra.get("sha256") != rb.get("sha256") or ra.get("mode") != rb.get("mode"):
            detail: tuple[str, ...] = ()
            if "content" in ra and "content" in rb:
                detail = tuple(
                    line.rstrip("\n")
                    for line in difflib.unified_diff(
                        file_bytes(ra).decode().splitlines(),
                        file_bytes(rb).decode().splitlines(),
                        lineterm="",
                        n=1,
                    )
                )[2:]
            what = "content" if ra.get("sha256") != rb.get("sha256") else "mode"
            before = ra.get("mode") if what == "mode" else ra.get("sha256", "")[:12]
            after = rb.get("mode") if what == "mode" else rb.get("sha256", "")[:12]
            out.append(Change("files", f"{path} ({what})", before, after, detail))
    return out


def _s(value: Any) -> str | None:
    return None if value is None else str(value)
