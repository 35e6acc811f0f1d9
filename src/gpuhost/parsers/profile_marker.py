"""The provision marker ``/etc/gpuhost/profile`` (written by ``gpuhost.operations.marker``; format
in docs/provision.md): the one parser that audit, checks, upgrade and reboot use.

Schema 1 is JSON (``schema``, ``profile``, ``source``, ``os`` (the profile's OS keys; markers
written before it lack it), ``driver{version,branch,kernel_module}``,
``cuda{versions,default}``, ``cudnn``, ``container_toolkit``, ``fabric_manager``, ``persistence``,
``clocks{mode,graphics_mhz,memory_mhz}``, ``companions{package: Debian version}`` (markers
written before it lack it)). Older or hand-written files hold just a profile name
(optionally ``profile = NAME`` / ``profile: NAME``, ``#`` comments allowed): read as a legacy
marker that names a profile and records no versions.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import Any

from gpuhost.errors import ParseError
from gpuhost.parsers._common import first_line, require_text

MARKER_PATH = "/etc/gpuhost/profile"
MARKER_SCHEMA = 1
#: a profile name as the marker holds it (and so as a profiles file may define it)
PROFILE_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
_EXPECTED = f"{MARKER_PATH} (gpuhost's JSON marker, schema {MARKER_SCHEMA}, or a profile name)"


@dataclass(frozen=True)
class ProfileMarker:
    """What the marker says. ``schema`` None: a legacy plain profile name (no versions)."""

    profile: str
    schema: int | None = None
    source: str | None = None
    os: tuple[str, ...] = ()
    driver_version: str | None = None
    driver_branch: str | None = None
    kernel_module: str | None = None
    cuda_versions: tuple[str, ...] = ()
    cuda_default: str | None = None
    cudnn: str | None = None
    container_toolkit: str | None = None
    fabric_manager: bool | None = None
    persistence: bool | None = None
    cdi: bool | None = None  # the profile asked for a CDI spec (None: older markers)
    clocks_mode: str | None = None
    graphics_mhz: int | None = None
    memory_mhz: int | None = None
    # (package, exact Debian version) of the companion packages provision pinned; () in markers
    # written before companions were pinned
    companions: tuple[tuple[str, str], ...] = ()

    @property
    def legacy(self) -> bool:
        return self.schema is None

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["cuda_versions"] = list(self.cuda_versions)
        data["os"] = list(self.os)
        data["companions"] = dict(self.companions)
        return data


def _bad(field: str, found: object, expected: str) -> ParseError:
    return ParseError(f"{MARKER_PATH}: {field}: found {found!r}; expected {expected}")


def _get(data: dict[str, Any], field: str, kind: type | tuple[type, ...], what: str) -> Any:
    """``data[field]`` (path ``field`` with dots) if of ``kind`` or None/absent; else ParseError."""
    value: Any = data
    for part in field.split("."):
        if value is None:
            return None
        if not isinstance(value, dict):
            raise _bad(field.rsplit(".", 1)[0], value, "an object")
        value = value.get(part)
    if value is None:
        return None
    if isinstance(value, bool) and kind in (int, str):
        raise _bad(field, value, what)
    if not isinstance(value, kind):
        raise _bad(field, value, what)
    return value


def _from_json(data: object) -> ProfileMarker:
    if not isinstance(data, dict):
        raise _bad("(top level)", data, "a JSON object")
    schema = data.get("schema")
    if schema != MARKER_SCHEMA:
        raise _bad("schema", schema, f"{MARKER_SCHEMA} (written by this gpuhost's provision)")
    name = data.get("profile")
    if not isinstance(name, str) or not PROFILE_NAME_RE.fullmatch(name):
        raise _bad("profile", name, "a profile name")
    versions = _get(data, "cuda.versions", list, "a list of CUDA versions") or []
    if not all(isinstance(v, str) and v for v in versions):
        raise _bad("cuda.versions", versions, "a list of CUDA versions")
    os_keys = _get(data, "os", list, "a list of OS keys") or []
    if not all(isinstance(v, str) and v for v in os_keys):
        raise _bad("os", os_keys, "a list of OS keys")
    companions = _get(data, "companions", dict, "an object {package: Debian version}") or {}
    if not all(isinstance(v, str) and v for v in companions.values()):
        raise _bad("companions", companions, "an object {package: Debian version}")
    text = "a version string"
    return ProfileMarker(
        profile=name,
        schema=MARKER_SCHEMA,
        source=_get(data, "source", str, "a source name"),
        os=tuple(os_keys),
        driver_version=_get(data, "driver.version", str, text),
        driver_branch=_get(data, "driver.branch", str, text),
        kernel_module=_get(data, "driver.kernel_module", str, "open or proprietary"),
        cuda_versions=tuple(versions),
        cuda_default=_get(data, "cuda.default", str, text),
        cudnn=_get(data, "cudnn", str, text),
        container_toolkit=_get(data, "container_toolkit", str, text),
        fabric_manager=_get(data, "fabric_manager", bool, "true or false"),
        persistence=_get(data, "persistence", bool, "true or false"),
        cdi=_get(data, "cdi", bool, "true or false"),
        clocks_mode=_get(data, "clocks.mode", str, "a clocks mode"),
        graphics_mhz=_get(data, "clocks.graphics_mhz", int, "MHz (an integer)"),
        memory_mhz=_get(data, "clocks.memory_mhz", int, "MHz (an integer)"),
        companions=tuple(sorted((str(k), str(v)) for k, v in companions.items())),
    )


def _legacy_name(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        value = line
        for sep in ("=", ":"):
            key, found, rest = line.partition(sep)
            if found and key.strip() in ("profile", "name"):
                value = rest.strip().strip("\"'")
                break
        if PROFILE_NAME_RE.fullmatch(value):
            return value
        raise ParseError(f"expected {_EXPECTED}, found {first_line(line)!r}")
    raise ParseError(f"expected {_EXPECTED}, found only comments")


def parse_profile_marker(text: str) -> ProfileMarker | None:
    """The marker file's content → ProfileMarker; None for an empty file (no marker).

    ParseError (naming the field, what was found and what is expected) for malformed JSON, a
    schema other than 1, wrong field types, or text that is neither JSON nor a profile name."""
    text = require_text(text, _EXPECTED).removeprefix("\ufeff")  # a BOM from a Windows editor
    if not text.strip():
        return None
    if text.lstrip().startswith(("{", "[")):
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise ParseError(
                f"{MARKER_PATH} is not valid JSON ({exc}); expected {_EXPECTED}"
            ) from exc
        return _from_json(data)
    return ProfileMarker(_legacy_name(text))
