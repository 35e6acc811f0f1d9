"""An RPM repository in one directory (a ``baseurl=file://`` repository, what NVIDIA documents
for air-gapped RHEL hosts: a local repository made with createrepo): the packages under
``pool/``, ``repodata/`` made by createrepo_c on this machine (``index``), for RHEL 8/9 with
the module metadata (``modules.yaml``, added with modifyrepo_c: ``add_modules``) of the
profile's stream, so ``dnf module enable nvidia-driver:<stream>`` works from the bundle alone;
the vendors' signing keys under ``keys/`` (each package keeps its vendor's signature: the
host's dnf checks it, ``gpgcheck=1``).

Pure parts (``primary_packages``, ``stream_modules``) read createrepo_c's ``primary.xml`` and a
repository's ``modules.yaml``; ``index`` and ``add_modules`` run the two tools (the
package-manager seam's argv).
"""

from __future__ import annotations

import gzip
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from gpuhost import toolrun
from gpuhost.errors import ConfigError
from gpuhost.pkgmgr import DNF

POOL = "pool"
TOOL_TIMEOUT_S = 600  # createrepo_c or modifyrepo_c over a bundle's packages
KEYS = "keys"
_REPO = "{http://linux.duke.edu/metadata/repo}"
_COMMON = "{http://linux.duke.edu/metadata/common}"
#: a key file name kept under keys/ (what a reference host's /etc/pki/rpm-gpg holds)
KEY_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


@dataclass(frozen=True)
class RpmFile:
    """One package of the repository, as createrepo_c's primary.xml lists it."""

    name: str
    epoch: str
    version: str
    release: str
    arch: str
    location: str  # relative to the repository root: pool/<file>.rpm
    sha256: str
    size: int

    @property
    def evr(self) -> str:
        """rpm's ``[epoch:]version-release`` (no epoch written when it is 0)."""
        head = f"{self.epoch}:" if self.epoch not in ("", "0") else ""
        return f"{head}{self.version}-{self.release}"

    @property
    def nevra(self) -> str:
        """``name-epoch:version-release.arch``: how module metadata names its artifacts."""
        return f"{self.name}-{self.epoch or '0'}:{self.version}-{self.release}.{self.arch}"


def _run(argv: list[str]) -> None:
    try:
        result = toolrun.run(argv, TOOL_TIMEOUT_S)
    except FileNotFoundError:
        raise ConfigError(
            f"{argv[0]} is not installed: it makes the RPM bundle's repository metadata "
            "(the package createrepo-c on Debian and Ubuntu, createrepo_c on RHEL)"
        ) from None
    if result.timed_out:
        raise ConfigError(f"{argv[0]} did not finish within {TOOL_TIMEOUT_S:g} s")
    if result.returncode != 0:
        detail = (result.text(result.stderr) or result.text()).strip().splitlines()
        last = detail[-1] if detail else f"exit {result.returncode}"
        raise ConfigError(f"{argv[0]} failed: {last}")


def index(root: Path) -> None:
    """``root/repodata`` for the packages under ``root`` (createrepo_c)."""
    _run(DNF.createrepo_argv(str(root)))


def add_modules(root: Path, modules_yaml: str) -> None:
    """``modules_yaml`` added to ``root/repodata`` as its module metadata (modifyrepo_c)."""
    path = root / "modules.yaml"
    path.write_text(modules_yaml, encoding="utf-8")
    try:
        _run(DNF.modifyrepo_argv(str(path), str(root / "repodata")))
    finally:
        path.unlink()


def primary_location(repomd: bytes, source: str) -> str:
    """The ``primary`` file's location in a ``repomd.xml`` (pure)."""
    try:
        root = ET.fromstring(repomd)
    except ET.ParseError as exc:
        raise ConfigError(f"{source}: not XML ({exc}); expected repomd.xml") from None
    for data in root.iter(f"{_REPO}data"):
        location = data.find(f"{_REPO}location")
        if data.get("type") == "primary" and location is not None and location.get("href"):
            return str(location.get("href"))
    raise ConfigError(f"{source}: names no primary metadata")


def parse_primary(xml: bytes, source: str) -> list[RpmFile]:
    """Every package of a ``primary.xml`` (pure)."""
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as exc:
        raise ConfigError(f"{source}: not XML ({exc}); expected primary.xml") from None
    found = []
    for pkg in root.iter(f"{_COMMON}package"):
        version = pkg.find(f"{_COMMON}version")
        checksum = pkg.find(f"{_COMMON}checksum")
        size = pkg.find(f"{_COMMON}size")
        location = pkg.find(f"{_COMMON}location")
        if version is None or checksum is None or size is None or location is None:
            raise ConfigError(
                f"{source}: a package entry lacks version, checksum, size or location")
        if checksum.get("type") != "sha256":
            raise ConfigError(f"{source}: checksums are {checksum.get('type')}; expected sha256")
        found.append(RpmFile(
            str(pkg.findtext(f"{_COMMON}name")), version.get("epoch") or "0",
            str(version.get("ver")), str(version.get("rel")), str(pkg.findtext(f"{_COMMON}arch")),
            str(location.get("href")), str(checksum.text).strip(), int(size.get("package") or 0),
        ))
    return found


def primary_packages(root: Path) -> list[RpmFile]:
    """The packages createrepo_c listed for the repository ``root``."""
    repomd = root / "repodata" / "repomd.xml"
    href = primary_location(repomd.read_bytes(), str(repomd))
    data = (root / href).read_bytes()
    if href.endswith(".gz"):
        data = gzip.decompress(data)
    return parse_primary(data, str(root / href))


def stream_modules(text: str, module: str, stream: str, nevras: Iterable[str],
                   source: str) -> str:
    """The module metadata a bundle carries (pure): the ``modulemd`` documents of
    ``module:stream`` in a repository's ``modules.yaml`` (every context and version), their
    artifacts cut to the packages of the bundle (``nevras``); nothing else (no defaults: the
    stream is enabled by name on the host). ConfigError when the stream is not there."""
    try:
        docs = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not YAML ({exc}); expected modules.yaml") from None
    have = set(nevras)
    kept = []
    for doc in docs:
        data = doc.get("data") or {}
        if doc.get("document") != "modulemd" or data.get("name") != module \
                or str(data.get("stream")) != stream:
            continue
        artifacts = (data.get("artifacts") or {}).get("rpms") or []
        data["artifacts"] = {"rpms": sorted(a for a in artifacts if a in have)}
        kept.append(doc)
    if not kept:
        streams = [d.get("data") or {} for d in docs if d.get("document") == "modulemd"]
        offered = sorted({f"{d.get('name')}:{d.get('stream')}" for d in streams})
        raise ConfigError(
            f"{source}: no module stream {module}:{stream} (offered: "
            f"{', '.join(offered) or 'none'}); the bundle could not carry it"
        )
    return "".join(yaml.safe_dump(d, sort_keys=False, explicit_start=True, explicit_end=True)
                   for d in kept)


def repo_file(name: str, baseurl: str, keys: Iterable[str], direct: bool = False) -> str:
    """The yum repository file of a bundle at ``baseurl`` (pure): the only NVIDIA source,
    every package's signature checked (``gpgcheck=1``) against the vendor keys it carries
    (``keys``: file URLs), its metadata read again only when gpuhost copies a changed bundle.
    ``direct``: a served bundle, reached past the proxy of dnf.conf (an empty ``proxy=`` in the
    repository's section, dnf.conf(5)), as apt reaches one ``DIRECT``."""
    return (
        "# Written by gpuhost: the offline bundle (docs/offline.md), the only NVIDIA source\n"
        "[gpuhost-bundle]\n"
        f"name={name}\n"
        f"baseurl={baseurl.rstrip('/')}/\n"
        "enabled=1\n"
        "gpgcheck=1\n"
        "repo_gpgcheck=0\n"
        f"gpgkey={' '.join(keys)}\n"
        "skip_if_unavailable=False\n"
        + ("proxy=\n" if direct else "")
    )
