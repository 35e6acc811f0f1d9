"""A flat apt repository in one directory (``deb [signed-by=KEY] URI ./``): the packages under
``pool/``, ``Packages`` and ``Packages.gz`` listing them with their sizes and hashes,
``Release`` with the hashes of both indexes (no ``Valid-Until``: a bundle carried to an offline
site must not expire on the way), signed by gpg as ``InRelease`` and ``Release.gpg``; the public
key as ``bundle-key.gpg`` (binary, what ``signed-by`` reads).

apt checks the chain on the host: the signature with the key, the indexes' hashes in
``Release``, each package's ``SHA256`` in ``Packages``.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from gpuhost import toolrun
from gpuhost.bundle.debfile import control_text, parse_control
from gpuhost.errors import ConfigError

POOL = "pool"
KEY_FILE = "bundle-key.gpg"
INDEXES = ("Packages", "Packages.gz")
SIGNED = ("Release", "InRelease", "Release.gpg")
#: one gpg (or gpgconf) call: a key made, a file signed (toolrun's deadline)
GPG_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Deb:
    """One package file of the repository and what its index entry says."""

    package: str
    version: str
    architecture: str
    filename: str  # relative to the repository root: pool/<file>.deb
    size: int
    sha256: str
    md5: str
    control: str  # the package's control stanza, as dpkg-deb wrote it


def file_hashes(path: Path) -> tuple[int, str, str]:
    """(size, sha256, md5) of a file, read in chunks."""
    sha, md5, size = hashlib.sha256(), hashlib.md5(usedforsecurity=False), 0
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            sha.update(chunk)
            md5.update(chunk)
            size += len(chunk)
    return size, sha.hexdigest(), md5.hexdigest()


def read_deb(root: Path, relative: str) -> Deb:
    """The index entry of ``root/relative``; ConfigError when it is not a readable package."""
    path = root / relative
    control = control_text(path).strip("\n")
    fields = parse_control(control)
    missing = [f for f in ("Package", "Version", "Architecture") if not fields.get(f)]
    if missing:
        raise ConfigError(f"{path}: its control file lacks {', '.join(missing)}")
    size, sha256, md5 = file_hashes(path)
    return Deb(
        fields["Package"], fields["Version"], fields["Architecture"], relative, size, sha256,
        md5, control,
    )


def packages_text(debs: Sequence[Deb]) -> str:
    """The ``Packages`` index: each control stanza with Filename, Size, MD5sum, SHA256."""
    stanzas = []
    for deb in sorted(debs, key=lambda d: (d.package, d.version, d.architecture)):
        stanzas.append(
            f"{deb.control}\nFilename: {deb.filename}\nSize: {deb.size}\n"
            f"MD5sum: {deb.md5}\nSHA256: {deb.sha256}\n"
        )
    return "\n".join(stanzas)


def release_text(indexes: dict[str, bytes], label: str, date: datetime) -> str:
    """``Release`` for a flat repository: its indexes' MD5 and SHA-256 sums and sizes."""
    lines = [
        "Origin: gpuhost",
        f"Label: {label}",
        f"Date: {date.astimezone(timezone.utc).strftime('%a, %d %b %Y %H:%M:%S UTC')}",
        "Acquire-By-Hash: no",
    ]
    for field, algo in (("MD5Sum", "md5"), ("SHA256", "sha256")):
        lines.append(f"{field}:")
        for name, data in sorted(indexes.items()):
            digest = hashlib.new(algo, data, usedforsecurity=False).hexdigest()
            lines.append(f" {digest} {len(data)} {name}")
    return "\n".join(lines) + "\n"


def write_indexes(root: Path, debs: Sequence[Deb], label: str, date: datetime) -> None:
    """Packages, Packages.gz and Release in ``root`` (unsigned)."""
    packages = packages_text(debs).encode("utf-8")
    indexes = {"Packages": packages, "Packages.gz": gzip.compress(packages, mtime=0)}
    for name, data in indexes.items():
        (root / name).write_bytes(data)
    (root / "Release").write_text(release_text(indexes, label, date), encoding="utf-8")


def _gpg(gnupghome: Path, *args: str, stdin: bytes | None = None) -> bytes:
    env = dict(os.environ, GNUPGHOME=str(gnupghome))
    command = ["gpg", "--batch", "--yes", "--no-tty", "--pinentry-mode", "loopback", *args]
    try:
        result = toolrun.run(command, GPG_TIMEOUT_S, input=stdin, env=env)
    except FileNotFoundError:
        raise ConfigError("gpg is not installed: it signs the bundle (apt install gnupg)") from None
    if result.timed_out:  # a passphrase prompt with no one to answer it, a stuck agent
        raise ConfigError(f"gpg {args[0]} did not finish within {GPG_TIMEOUT_S:g} s")
    if result.returncode != 0:
        detail = result.text(result.stderr).strip().splitlines()
        raise ConfigError(f"gpg {args[0]} failed: {detail[-1] if detail else 'no message'}")
    return result.stdout


def new_key(gnupghome: Path, label: str) -> str:
    """A new ed25519 signing key without passphrase in ``gnupghome``; its fingerprint."""
    gnupghome.mkdir(mode=0o700, parents=True, exist_ok=True)
    _gpg(gnupghome, "--passphrase", "", "--quick-generate-key", label, "ed25519", "sign", "never")
    listing = _gpg(gnupghome, "--with-colons", "--list-secret-keys", label).decode()
    fingerprints = [line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:")]
    if not fingerprints:
        raise ConfigError(f"gpg made no key for {label!r}")
    return fingerprints[0]


def sign(root: Path, gnupghome: Path, key: str) -> None:
    """InRelease and Release.gpg of ``root/Release`` by ``key``; its public key as KEY_FILE."""
    release = (root / "Release").read_bytes()
    signer = ("--local-user", key, "--digest-algo", "SHA512")
    (root / "InRelease").write_bytes(_gpg(gnupghome, *signer, "--clearsign", stdin=release))
    (root / "Release.gpg").write_bytes(
        _gpg(gnupghome, *signer, "--armor", "--detach-sign", stdin=release)
    )
    public = _gpg(gnupghome, "--export", key)
    if not public:
        raise ConfigError(f"gpg has no public key {key!r} in {gnupghome}")
    (root / KEY_FILE).write_bytes(public)


def _home(gnupghome: Path | None) -> Path:
    return gnupghome or Path(os.environ.get("GNUPGHOME") or Path.home() / ".gnupg")


def check_signing_key(gnupghome: Path | None, key: str) -> None:
    """``key`` is one secret key of ``gnupghome`` (``--sign-key``, ``--gnupghome``): one line
    otherwise, before anything is resolved or downloaded."""
    home = _home(gnupghome)
    if not key.strip() or not key.isprintable() or key.startswith("-"):
        raise ConfigError(f"--sign-key {key!r}: expected a gpg key id, fingerprint or user id")
    if not home.is_dir():
        raise ConfigError(f"--gnupghome {home}: not a folder; expected gpg's home with --sign-key")
    try:
        _gpg(home, "--with-colons", "--list-secret-keys", key)
    except ConfigError:
        raise ConfigError(f"--sign-key {key!r}: no secret key of that name in {home}") from None


def build(root: Path, label: str, gnupghome: Path | None = None, key: str | None = None) -> str:
    """Index and sign every ``pool/*.deb`` under ``root``: with ``key`` from ``gnupghome``
    (``GNUPGHOME`` or ~/.gnupg when None), else with a new key made in a temporary
    GNUPGHOME that is deleted afterwards. Returns the signing key's id or fingerprint."""
    debs = [read_deb(root, f"{POOL}/{p.name}") for p in sorted((root / POOL).glob("*.deb"))]
    write_indexes(root, debs, label, datetime.now(timezone.utc))
    if key is not None:
        home = _home(gnupghome)
        sign(root, home, key)
        return key
    with tempfile.TemporaryDirectory(prefix="gpuhost-bundle-gpg-") as tmp:
        home = Path(tmp) / "gnupg"
        fingerprint = new_key(home, f"gpuhost bundle {label}")
        sign(root, home, fingerprint)
        _stop_agent(home)
        return fingerprint


def _stop_agent(gnupghome: Path) -> None:
    """The gpg-agent a temporary GNUPGHOME started, stopped before its folder is removed."""
    with contextlib.suppress(FileNotFoundError):
        toolrun.run(
            ["gpgconf", "--kill", "gpg-agent"], GPG_TIMEOUT_S,
            env=dict(os.environ, GNUPGHOME=str(gnupghome)),
        )  # fmt: skip
