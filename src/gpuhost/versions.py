"""The one place where version strings are parsed and compared.

Every comparison in gpuhost goes through :func:`parse_version` (a ``packaging`` ``Version``), so
driver versions (``535.161.07``, ``570.26``), CUDA versions (``12.4``, ``12.4.1``), framework
versions (``2.5.1+cu124``) and cuDNN versions (``9.1.0.70``) all order the same way.

Package managers add their own decorations; :func:`upstream_of_package_version` strips them
(``535.309.01-0+deb12u1`` -> ``535.309.01``, ``1:550.54.15-1.el9`` -> ``550.54.15``).
"""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

from gpuhost.errors import VersionError

__all__ = [
    "Version",
    "SpelledVersion",
    "parse_version",
    "parse_framework_version",
    "is_version",
    "upstream_of_package_version",
    "driver_branch",
    "release_prefix",
    "same_series",
    "cuda_variant_of",
]

# Plain dotted numbers with an optional PEP 440 local part ("+cu124"); this is stricter than
# packaging on purpose: "v1", "1.0rc1" or "1.0.post1" are not versions NVIDIA or PyTorch print
# for the things gpuhost compares, and accepting them would hide typos (framework releases on PyPI:
# parse_framework_version, which admits ".postN").
_VERSION_RE = re.compile(r"^\d{1,6}(\.\d{1,6}){0,4}(\+[a-z0-9]+(\.[a-z0-9]+)*)?$")
# A framework release on PyPI may also be a PEP 440 post release ("2.15.0.post1": TensorFlow).
_FRAMEWORK_RE = re.compile(r"^\d{1,6}(\.\d{1,6}){0,4}(\.post\d{1,6})?(\+[a-z0-9]+(\.[a-z0-9]+)*)?$")
_CUDA_VARIANT_RE = re.compile(r"^cu(\d{2,3})$")


def _show(value: object) -> str:
    text = repr(value) if not isinstance(value, str) else f'"{value}"'
    return text if len(text) <= 60 else text[:57] + '..."'


class SpelledVersion(Version):
    """A ``Version`` that prints as it was written ("580.65.06", not "580.65.6")."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._spelling = text

    def __str__(self) -> str:
        return self._spelling


def parse_version(s: object, *, field: str) -> Version:
    """Parse ``s`` as a dotted version (optionally with a ``+local`` part).

    ``field`` names where the value came from; it starts the error message.

    >>> parse_version("550.54.15", field="driver") > parse_version("550.54.14", field="driver")
    True

    Raises :class:`gpuhost.errors.VersionError` for anything else (non-strings included).
    """
    if not isinstance(s, str):
        raise VersionError(
            f'{field}: {_show(s)} is not a version (expected a quoted string such as "12.4")'
        )
    text = s.strip()
    if not _VERSION_RE.match(text):
        raise VersionError(
            f"{field}: {_show(s)} is not a version (expected dotted numbers such as "
            '"550.54.15", "12.4" or "2.5.1+cu124")'
        )
    try:
        return SpelledVersion(text)
    except InvalidVersion as exc:  # pragma: no cover - the regex admits only valid versions
        raise VersionError(f"{field}: {_show(s)} is not a version") from exc


def parse_framework_version(s: object, *, field: str) -> Version:
    """:func:`parse_version` for a torch / TensorFlow release, which may be a PEP 440 post
    release: "2.15.0.post1" (ordered after 2.15.0 and before 2.15.1, as pip orders it)."""
    if isinstance(s, str) and ".post" in s and _FRAMEWORK_RE.match(s.strip()):
        return SpelledVersion(s.strip())
    try:
        return parse_version(s, field=field)
    except VersionError:
        raise VersionError(
            f"{field}: {_show(s)} is not a version (expected dotted numbers such as "
            '"2.5.1", "2.15.0.post1" or "2.5.1+cu124")'
        ) from None


def is_version(s: object) -> bool:
    """True when :func:`parse_version` would accept ``s``."""
    return isinstance(s, str) and bool(_VERSION_RE.match(s.strip()))


def upstream_of_package_version(s: str) -> str:
    """Return the upstream version inside a Debian/RPM package version.

    ``"535.261.03-1"`` -> ``"535.261.03"``; ``"535.309.01-0+deb12u1"`` -> ``"535.309.01"``;
    ``"1:550.54.15-1.el9"`` -> ``"550.54.15"``; ``"12.4.1-1"`` -> ``"12.4.1"``;
    a plain ``"570.124.06"`` is returned unchanged. Raises VersionError when no version remains.
    """
    if not isinstance(s, str) or not s.strip():
        raise VersionError(f"package version: {_show(s)} is not a package version")
    text = s.strip()
    if ":" in text:  # epoch
        epoch, _, text = text.partition(":")
        if not epoch.isdigit():
            raise VersionError(f'package version: "{s}" has a bad epoch "{epoch}"')
    if "-" in text:  # Debian revision / RPM release
        text = text.rsplit("-", 1)[0]
    # Debian/Ubuntu repackaging marks inside the upstream part ("~", "+dfsg", "+really")
    text = re.split(r"[~+]", text, maxsplit=1)[0]
    parse_version(text, field=f'package version "{s}"')
    return text


def driver_branch(v: str | Version) -> int:
    """The driver branch of a driver version: ``"535.161.07"`` -> ``535``.

    Raises VersionError for something that is not a driver version.
    """
    version = v if isinstance(v, Version) else parse_version(v, field="driver")
    if version.local is not None:
        raise VersionError(f'driver: "{v}" is not a driver version (it has a "+" part)')
    return version.release[0]


def release_prefix(v: Version, n: int) -> tuple[int, ...]:
    """The first ``n`` release numbers, padded with zeros: (12, 4, 1) for n=3 of "12.4.1"."""
    rel = v.release + (0,) * n
    return tuple(rel[:n])


def same_series(v: Version, series: Version) -> bool:
    """True when ``v`` starts with every number of ``series`` ("12.4.1" is in "12.4" and "12")."""
    return v.release[: len(series.release)] == series.release


def extends_version(found: str | None, version: str) -> bool:
    """``found`` is ``version`` or extends it with more dot-separated fields: "12.4.1" extends
    "12.4"; a cuDNN package's "9.5.1.17" extends a profile's "9.5.1"; "12.40" does not extend
    "12.4". False when nothing was found."""
    return found is not None and (found == version or found.startswith(version + "."))


def major_of(v: str) -> int:
    """The first number of a dotted version: ``"12.4"`` -> ``12``."""
    return int(v.split(".")[0])


def series_of(v: str, n: int) -> str:
    """The first ``n`` dot-separated fields: ``series_of("12.4.131", 2)`` -> ``"12.4"``."""
    return ".".join(v.split(".")[:n])


def numeric_key(v: str) -> tuple[int, ...]:
    """A sort key of an all-numeric dotted version (a Python version "3.12" before "3.9")."""
    return tuple(int(x) for x in v.split("."))


def cuda_variant_of(local: str) -> str | None:
    """Map a wheel's local tag to a CUDA version: ``"cu124"`` -> ``"12.4"``.

    Returns None for tags that are not CUDA variants (``"cpu"``, ``"rocm6.2"``).
    """
    m = _CUDA_VARIANT_RE.match(local)
    if not m:
        return None
    digits = m.group(1)
    return f"{digits[:-1]}.{digits[-1]}"
