"""OS keys and package-manager families, made in one place.

An OS key names an operating system release the way the package data (``data/package_sets.yaml``)
and a profile's ``os`` list name it:

* RHEL and its rebuilds by major version: ``rhel-9``, ``rocky-9``, ``almalinux-9`` (also 8, 10):
  a RHEL minor release keeps the major's package repository (NVIDIA's ``rhel9`` folder serves
  9.0 to 9.x alike), so ``rocky-9.4`` and ``rocky-9.6`` are one key;
* Ubuntu by release: ``ubuntu-22.04``, ``ubuntu-24.04`` (each release has its own repository);
* Debian by major version: ``debian-12`` (Debian writes VERSION_ID as the major only);
* anything else as ``ID-VERSION_ID`` unchanged (no profile names it: refused, never guessed).

The family says which package manager the host has: ``apt`` (dpkg) or ``dnf`` (rpm). It is read
from the OS (``ID``), never from which binary exists: a RHEL host may have ``dpkg-query``
installed, and a Debian host ``rpm``. ``ID_LIKE`` decides only for an ID this module does not
know (a derivative such as Linux Mint or Oracle Linux): a derivative of Debian or RHEL installs
with its parent's package manager, which is what ID_LIKE says (os-release(5): "operating system
identifiers ... this OS is a derivative of"). Its OS key stays its own ID, so no profile matches
it unless one names it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

APT = "apt"
DNF = "dnf"

# os-release IDs (os-release(5), each distribution's own file) and their package manager
_FAMILY_BY_ID = {
    "debian": APT,
    "ubuntu": APT,
    "rhel": DNF,
    "rocky": DNF,
    "almalinux": DNF,
    "centos": DNF,
    "fedora": DNF,
    "ol": DNF,
}
# IDs whose key is the major version (a minor release shares the major's repository)
#: os-release(5): ID and VERSION_ID are "lower-case string(s)" of 0-9, a-z, ".", "_" and "-"
#: (no spaces); a value outside that (a newline, "../", a control character, pages of digits) is
#: no os-release's: the host's OS is unknown, and its text never becomes a key gpuhost names,
#: compares or writes
_OS_RELEASE_VALUE = re.compile(r"[0-9a-z._-]{1,64}")
_MAJOR_ONLY = frozenset({"rhel", "rocky", "almalinux", "centos", "ol", "debian"})
# RHEL family majors and Ubuntu releases gpuhost knows as OS keys (a profile's os list)
KNOWN_KEY_RE = re.compile(
    r"(?:(?:rhel|rocky|almalinux)-(?:8|9|10)|ubuntu-(?:22\.04|24\.04)|debian-(?:12|13))"
)


def os_key(os_id: str | None, version_id: str | None) -> str | None:
    """``ID`` and ``VERSION_ID`` of /etc/os-release → the OS key; None without an ID."""
    if not os_id:
        return None
    ident = os_id.strip().strip('"').lower()
    version = (version_id or "").strip().strip('"')
    if not _OS_RELEASE_VALUE.fullmatch(ident) or not (
        not version or _OS_RELEASE_VALUE.fullmatch(version)
    ):
        return None
    if not version:
        return ident
    if ident in _MAJOR_ONLY:
        version = version.split(".", 1)[0]
    return f"{ident}-{version}"


def family(os_id: str | None, id_like: str | None = None) -> str | None:
    """``apt`` or ``dnf`` for the OS ``os_id`` (ID_LIKE only for an ID not known here); None
    when neither says."""
    ident = (os_id or "").strip().strip('"').lower()
    if ident in _FAMILY_BY_ID:
        return _FAMILY_BY_ID[ident]
    for parent in (id_like or "").strip().strip('"').lower().split():
        if parent in _FAMILY_BY_ID:
            return _FAMILY_BY_ID[parent]
    return None


def ids_of(family_name: str) -> list[str]:
    """The os-release IDs of a family, sorted (``by_os_shell``)."""
    return sorted(i for i, f in _FAMILY_BY_ID.items() if f == family_name)


def family_of_key(key: str) -> str | None:
    """The family of an OS key (``rocky-9`` → ``dnf``); None for a key of an unknown OS."""
    return _FAMILY_BY_ID.get(key.rpartition("-")[0] if "-" in key else key)


def from_release_meta(meta: Mapping[str, object], name: object = None,
                      major: object = None) -> tuple[str, str | None]:
    """(OS key, family) from pyinfra's LinuxDistribution fact parts (``release_meta`` holds
    os-release's fields; ``name``/``major`` its fallbacks): ``("unknown", None)`` without any."""
    ident = str(meta.get("ID") or name or "") or None
    version = str(meta.get("VERSION_ID") or major or "") or None
    like = str(meta.get("ID_LIKE") or "") or None
    return os_key(ident, version) or "unknown", family(ident, like)


_TEXT_RE = re.compile(r"([a-z]+)-?([0-9][0-9.]*)")


def from_text(text: str) -> str | None:
    """A key as a user writes it (``debian12``, ``debian-12``, ``rocky-9.4``) → the OS key
    (``debian-12``, ``rocky-9``); None when it is not ID plus version."""
    match = _TEXT_RE.fullmatch(text.strip().lower())
    return os_key(match[1], match[2]) if match else None


def from_distro(distro: Mapping[str, object]) -> str:
    """pyinfra's LinuxDistribution fact → the OS key (``"unknown"`` without an ID)."""
    meta = distro.get("release_meta") or {}
    return from_release_meta(
        meta if isinstance(meta, Mapping) else {}, distro.get("name"), distro.get("major")
    )[0]


def unknown_keys(keys: Iterable[str], known: Iterable[str] = ()) -> list[str]:
    """The keys of ``keys`` that are neither gpuhost's OS keys (``KNOWN_KEY_RE``) nor in
    ``known`` (the package data's), in their order: a profile's ``os`` list must use them."""
    extra = set(known)
    return [key for key in keys if key not in extra and not KNOWN_KEY_RE.fullmatch(key)]
