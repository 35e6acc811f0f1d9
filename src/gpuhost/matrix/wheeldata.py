"""Load ``data/wheels.yaml`` (written by ``gpuhost matrix sync --write``) into typed rows."""

from __future__ import annotations

from typing import Any

from gpuhost.datadir import data_path
from gpuhost.errors import MatrixError, VersionError
from gpuhost.matrix.model import WheelRelease
from gpuhost.matrix.wheels import PLATFORMS, WheelBuild
from gpuhost.matrix.yamlfile import read_mapping
from gpuhost.versions import parse_framework_version

_LIBS = ("cuda", "runtime", "cudnn", "cublas", "nccl")


def default_wheels_path() -> str:
    """The wheels data in use: the data update's overlay, else the shipped file."""
    return data_path("wheels.yaml")


def read_wheels_file(path: str) -> dict[str, Any]:
    """The raw mapping of a wheels file; ConfigError when it cannot be read or parsed."""
    return read_mapping(path, "range/torch/tensorflow")


def load_wheels(path: str | None = None) -> tuple[WheelRelease, ...]:
    """Every release row of a wheels file (default: the shipped one), oldest first per framework.

    Raises MatrixError listing each bad field.
    """
    path = path or default_wheels_path()
    data = read_wheels_file(path)
    problems: list[str] = []
    out: list[WheelRelease] = []
    for framework in ("torch", "tensorflow"):
        rows = data.get(framework, [])
        if not isinstance(rows, list):
            problems.append(f"{framework}: expected a list of releases")
            continue
        for i, row in enumerate(rows):
            where = f"{framework}[{i}]"
            if not isinstance(row, dict):
                problems.append(f"{where}: expected a mapping")
                continue
            rel = _release(framework, row, where, problems)
            if rel is not None:
                out.append(rel)
    if problems:
        raise MatrixError(path, problems)
    return tuple(out)


def _version(value: Any, where: str, problems: list[str]) -> str | None:
    try:
        parse_framework_version(value, field=where)
    except VersionError as exc:
        problems.append(str(exc))
        return None
    return str(value)


def _release(
    framework: str, row: dict[str, Any], where: str, problems: list[str]
) -> WheelRelease | None:
    version = _version(row.get("version"), f"{where}.version", problems)
    released = row.get("released")
    if not isinstance(released, str):
        problems.append(f"{where}.released: expected a date string, found {released!r}")
    python = row.get("python", [])
    if not isinstance(python, list) or not all(isinstance(p, str) for p in python):
        problems.append(f'{where}.python: expected a list of strings such as "3.12"')
        python = []
    no_meta = row.get("no_metadata", [])
    if not isinstance(no_meta, list) or set(no_meta) - set(PLATFORMS):
        problems.append(f"{where}.no_metadata: expected a list of {', '.join(PLATFORMS)}")
        no_meta = []
    builds = {}
    for machine in PLATFORMS:
        libs = row.get(machine)
        if libs is None:
            continue
        if not isinstance(libs, dict) or set(libs) - set(_LIBS) - {"exact"}:
            problems.append(
                f"{where}.{machine}: expected a mapping of {', '.join(_LIBS)} and exact"
            )
            continue
        for k in _LIBS:
            if k in libs:
                _version(libs[k], f"{where}.{machine}.{k}", problems)
        exact = libs.get("exact", True)
        if not isinstance(exact, bool):
            problems.append(f"{where}.{machine}.exact: expected true or false")
            exact = True
        builds[machine] = WheelBuild(
            cuda=libs.get("cuda"),
            exact=exact,
            runtime=libs.get("runtime"),
            cudnn=libs.get("cudnn"),
            cublas=libs.get("cublas"),
            nccl=libs.get("nccl"),
        )
    if version is None or not isinstance(released, str):
        return None
    return WheelRelease(framework, version, released, tuple(python), builds, tuple(no_meta))
