"""``manifest.json`` of a bundle: every package with its exact version, file, SHA-256 and size.

Provision and upgrade read it before anything is installed: the profile's pinned set must be in
it at the pinned versions (:func:`pinned_problems`), and each package file must have the size and
SHA-256 it lists (:func:`file_problems`, for a bundle copied from this machine).
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gpuhost import oskey
from gpuhost.bundle.aptrepo import Deb, file_hashes
from gpuhost.bundle.rpmrepo import KEYS
from gpuhost.errors import ConfigError
from gpuhost.readers import check_shape, read_json

MANIFEST = "manifest.json"
SCHEMA = "bundle-manifest"
WHAT = "a gpuhost bundle manifest (manifest.json)"


@dataclass(frozen=True)
class Entry:
    package: str
    version: str
    architecture: str
    filename: str
    sha256: str
    size: int


@dataclass(frozen=True)
class Manifest:
    profile: str
    os: str
    created: str
    packages: tuple[Entry, ...]
    reference_host: str | None = None
    signing_key: str | None = None
    #: "apt" (a signed flat apt repository) or "rpm" (an RPM repository, bundle.rpmrepo)
    format: str = "apt"
    #: the module streams the bundle carries (``nvidia-driver:580-dkms``; RPM, RHEL 8/9)
    modules: tuple[str, ...] = ()
    #: the vendor keys an RPM bundle carries under keys/, as (file name, sha256) pairs: a
    #: served bundle's keys are checked against them (its manifest against ``key_sha256``)
    keys: tuple[tuple[str, str], ...] = ()

    def versions(self) -> dict[str, list[str]]:
        """{package: [versions in the bundle]}."""
        out: dict[str, list[str]] = {}
        for entry in self.packages:
            out.setdefault(entry.package, []).append(entry.version)
        return out

    def to_dict(self) -> dict[str, Any]:
        doc = {"schema": 1, **asdict(self)}
        doc["packages"] = [asdict(e) for e in sorted(self.packages, key=_order)]
        doc["modules"] = list(self.modules)
        doc["keys"] = dict(self.keys)
        if self.format == "apt":  # an apt bundle's manifest as before RPM bundles
            del doc["format"], doc["modules"], doc["keys"]
        return doc


def _order(entry: Entry) -> tuple[str, str, str]:
    return (entry.package, entry.version, entry.architecture)


def from_debs(
    debs: Sequence[Deb], profile: str, os_key: str, created: str,
    reference_host: str | None = None, signing_key: str | None = None,
) -> Manifest:
    entries = tuple(
        Entry(d.package, d.version, d.architecture, d.filename, d.sha256, d.size) for d in debs
    )
    return Manifest(profile, os_key, created, entries, reference_host, signing_key)


def manifest_text(manifest: Manifest) -> str:
    return json.dumps(manifest.to_dict(), indent=2) + "\n"


def parse_manifest(doc: Any, source: str) -> Manifest:
    """A manifest document checked against its schema; ConfigError naming ``source``, the field
    and what was expected."""
    check_shape(doc, SCHEMA, source)
    _check_format(doc, source)
    entries = tuple(Entry(**item) for item in doc["packages"])
    return Manifest(
        doc["profile"], doc["os"], doc["created"], entries,
        doc.get("reference_host"), doc.get("signing_key"), doc.get("format", "apt"),
        tuple(doc.get("modules") or ()), tuple(sorted((doc.get("keys") or {}).items())),
    )


def _check_format(doc: Mapping[str, Any], source: str) -> None:
    """The manifest's format is its OS's: an RPM repository for a RHEL-family OS, an apt
    repository otherwise (a hand-edited manifest made the host use the folder as the other)."""
    found = doc.get("format", "apt")
    wanted = {oskey.APT: "apt", oskey.DNF: "rpm"}.get(oskey.family_of_key(doc["os"]) or "")
    if wanted is not None and found != wanted:
        shown = repr(found) if "format" in doc else "none (read as 'apt')"
        raise ConfigError(
            f"{source}: format: found {shown} for os {doc['os']}, expected "
            f"{wanted!r} (what gpuhost bundle makes for {doc['os']}); make the bundle again"
        )


def read_manifest(root: Path) -> Manifest:
    """The manifest of the bundle directory ``root``."""
    path = root / MANIFEST
    return parse_manifest(read_json(path, WHAT), str(path))


def parse_manifest_text(text: str, source: str) -> Manifest:
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError, ValueError) as exc:
        raise ConfigError(f"{source}: not JSON ({exc}); expected {WHAT}") from None
    return parse_manifest(doc, source)


def file_problems(manifest: Manifest, root: Path) -> list[str]:
    """One line per package file of ``root`` that is missing or differs from the manifest, and
    (an RPM bundle) per vendor key under ``keys/`` that is missing, differs or is not listed:
    dnf trusts every key the repository file names, and checks nothing without them."""
    problems = _package_problems(manifest, root)
    if manifest.format == "rpm":
        problems += _key_problems(manifest, root / KEYS)
    return problems


def _key_problems(manifest: Manifest, folder: Path) -> list[str]:
    listed = dict(manifest.keys)
    if not listed:
        return [f"{KEYS}/: {MANIFEST} lists no keys; make the bundle again with gpuhost bundle"]
    found = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    problems = [f"{KEYS}/{name}: not listed in {MANIFEST}" for name in found
                if name not in listed]
    for name, sha256 in sorted(listed.items()):
        path = folder / name
        if not path.is_file():
            problems.append(f"{KEYS}/{name}: missing")
        elif file_hashes(path)[1] != sha256:
            problems.append(f"{KEYS}/{name}: sha256 {file_hashes(path)[1][:16]}..., manifest "
                            f"says {sha256[:16]}...")
    return problems


def _package_problems(manifest: Manifest, root: Path) -> list[str]:
    problems = []
    for entry in sorted(manifest.packages, key=_order):
        path = root / entry.filename
        if not path.is_file():
            problems.append(f"{entry.filename}: missing")
            continue
        size, sha256, _ = file_hashes(path)
        if size != entry.size or sha256 != entry.sha256:
            problems.append(
                f"{entry.filename}: sha256 {sha256[:16]}... size {size}, manifest says "
                f"sha256 {entry.sha256[:16]}... size {entry.size}"
            )
    return problems


def pinned_problems(manifest: Manifest, required: Mapping[str, str | None]) -> list[str]:
    """One line per required package the bundle lacks or has at no accepted version.

    ``required`` maps a package to the apt pin pattern its version must match (``580.178.04-*``,
    ``12.9.*``, an exact ``535.171.04-1~deb12u1``), or None for any version. An RPM bundle's
    versions are matched without their epoch (``3:580.178.04-1.el9`` is ``580.178.04-*``)."""
    have = manifest.versions()
    if manifest.format == "rpm":
        have = {n: [v.partition(":")[2] or v for v in vs] for n, vs in have.items()}
    problems = []
    for name, pattern in sorted(required.items()):
        versions = have.get(name)
        if not versions:
            problems.append(f"{name} (missing{', expected ' + pattern if pattern else ''})")
        elif pattern and not any(fnmatch.fnmatchcase(v, pattern) for v in versions):
            problems.append(f"{name} {', '.join(versions)} (expected {pattern})")
    return problems
