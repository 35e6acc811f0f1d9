"""Load and validate the compatibility matrix YAML.

:func:`load_matrix` reads the file with ``datafiles.load_yaml``, checks every field and the
consistency of the tables, and raises one :class:`gpuhost.errors.MatrixError` listing every
problem, each starting with the dotted path of the bad field, e.g.
``cuda.12.4.min_driver: "55O.54" is not a version``.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import re
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

import yaml

from gpuhost.datadir import data_path
from gpuhost.datafiles import load_yaml, read_file_text, yaml_problem
from gpuhost.errors import ConfigError, MatrixError, VersionError
from gpuhost.matrix import nvidia_rules
from gpuhost.matrix.model import (
    Architecture,
    CudaMinor,
    CudaRelease,
    CudnnPackage,
    CudnnRelease,
    DriverBranch,
    Gpu,
    Matrix,
    MinorCompat,
    Policy,
    Source,
    TensorflowArchs,
    TensorflowRelease,
    TorchRelease,
    TorchVariant,
)
from gpuhost.matrix.wheeldata import load_wheels
from gpuhost.versions import Version, parse_version

CONFIDENCES = ("primary", "primary-via-mirror", "secondary", "single-source", "derived")
BRANCH_TYPES = ("LTSB", "PB", "NFB", "other")
KERNEL_MODULES = ("open", "proprietary")
#: where a GPU gets its driver when not from NVIDIA's driver branches (Jetson: Jetson Linux)
DRIVER_FROM = ("l4t",)
CLOCK_POLICIES = ("application", "locked")
CHANNELS = ("stable", "experimental")
_CC_RE = re.compile(r"^\d{1,2}\.\d$")
_ARCH_RE = re.compile(r"^\d{1,2}\.\d(a|\+PTX)?$")
_EOL_RE = re.compile(r"^(\d{4}-(0[1-9]|1[0-2])|ended|n/a)$")
_LAST_CUDA_RE = re.compile(r"^\d{1,2}\.(x|\d{1,2})$")


class _Problems:
    """Collects problems; helpers return None (and record why) for bad fields."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, path: str, message: str) -> None:
        self.items.append(f"{path}: {message}")

    def mapping(self, value: Any, path: str) -> dict[str, Any] | None:
        if not isinstance(value, dict):
            self.add(path, f"expected a mapping, found {_kind(value)}")
            return None
        return value

    def seq(self, value: Any, path: str) -> list[Any] | None:
        if not isinstance(value, list):
            self.add(path, f"expected a list, found {_kind(value)}")
            return None
        return value

    def text(self, row: dict[str, Any], key: str, path: str, required: bool = True) -> str | None:
        value = row.get(key)
        if value is None:
            if required:
                self.add(f"{path}.{key}", "missing")
            return None
        if not isinstance(value, str) or not value.strip():
            self.add(f"{path}.{key}", f"expected a non-empty string, found {_kind(value)}")
            return None
        return value

    def version(self, value: Any, path: str) -> str | None:
        try:
            parse_version(value, field=path)
        except VersionError as exc:
            self.items.append(str(exc))
            return None
        return str(value)

    def optional_version(self, row: dict[str, Any], key: str, path: str) -> str | None:
        """``row[key]`` checked as a version; None when absent (fine) or not a version."""
        value = row.get(key)
        return None if value is None else self.version(value, f"{path}.{key}")

    def choice(self, row: dict[str, Any], key: str, path: str, allowed: tuple[str, ...]) -> str:
        value = row.get(key)
        if value not in allowed:
            self.add(f"{path}.{key}", f"{_show(value)} is not one of {', '.join(allowed)}")
            return allowed[0]
        return str(value)

    def pattern(self, value: Any, path: str, regex: re.Pattern[str], expected: str) -> str | None:
        if not isinstance(value, str) or not regex.match(value):
            self.add(path, f"{_show(value)} is not {expected}")
            return None
        return value


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return f"a boolean ({value})"
    if isinstance(value, (int, float)):
        return f"a number ({value}); quote versions as strings"
    if isinstance(value, str):
        return f'"{value}"'
    return type(value).__name__


def _show(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else _kind(value)


def _vkey(text: str) -> Version:
    return parse_version(text, field="key")


def default_matrix_path() -> str:
    """Path of the matrix in use: the data update's overlay, else the one shipped in the
    package (:func:`gpuhost.datadir.data_path`)."""
    return data_path("matrix.yaml")


def load_matrix(path: str | None = None) -> Matrix:
    """Load, validate and return the compatibility matrix.

    ``path=None`` loads the file shipped with gpuhost (cached: later calls return the same
    object). Raises :class:`gpuhost.errors.MatrixError` (exit code 2) listing every bad field with
    its path, or :class:`gpuhost.errors.ConfigError` when the file cannot be read.
    """
    if path is None:
        return _load_default()
    return _load_file(path)


@functools.lru_cache(maxsize=1)
def _load_default() -> Matrix:
    return _load_file(default_matrix_path())


def _load_file(path: str) -> Matrix:
    try:
        text = read_file_text(path, "the matrix")
    except ConfigError as exc:
        raise MatrixError(path, [str(exc).removeprefix(f"{path}: ")]) from None
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        raise MatrixError(path, [f"not valid YAML ({yaml_problem(exc)})"]) from exc
    matrix = build_matrix(data, path)
    wheels_file = Path(path).with_name("wheels.yaml")
    if not wheels_file.is_file():
        return matrix
    return dataclasses.replace(matrix, wheels=load_wheels(str(wheels_file)))


def _updated(p: _Problems, value: Any) -> str | None:
    """``updated``: the date the data was last checked (YYYY-MM-DD), optional."""
    if value is None:
        return None
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        return value
    p.add("updated", f"{_show(value)} is not a date (expected YYYY-MM-DD)")
    return None


def build_matrix(data: Any, path: str = "<matrix>") -> Matrix:
    """Validate already-parsed matrix data and build the :class:`Matrix` (MatrixError if bad)."""
    p = _Problems()
    root = p.mapping(data, "(top level)")
    if root is None:
        raise MatrixError(path, p.items)
    if root.get("schema") != 1:
        p.add("schema", f"{_show(root.get('schema'))} is not a supported schema (expected 1)")
    known = {
        "schema",
        "updated",
        "sources",
        "cuda_minor_compat",
        "cuda",
        "architectures",
        "gpus",
        "cudnn",
        "pytorch",
        "tensorflow",
        "tensorflow_archs",
        "driver_branches",
        "policies",
    }
    for key in root:
        if key not in known:
            p.add(str(key), f"unknown section (expected one of {', '.join(sorted(known))})")
    sources = _sources(p, root.get("sources"))

    def src(row: dict[str, Any], path: str, key: str = "source", required: bool = True) -> str:
        value = p.text(row, key, path, required=required)
        if value is not None and value not in sources:
            p.add(f"{path}.{key}", f'"{value}" is not a key of sources')
        return value or ""

    def conf(row: dict[str, Any], path: str, key: str = "confidence") -> str:
        return p.choice(row, key, path, CONFIDENCES)

    minor_compat = _minor_compat(p, root.get("cuda_minor_compat"), src, conf)
    cuda = _cuda(p, root.get("cuda"), src, conf)
    architectures = _architectures(p, root.get("architectures"), src, conf)
    gpus = _gpus(p, root.get("gpus"), src, conf)
    cudnn = _cudnn(p, root.get("cudnn"), src, conf)
    pytorch = _pytorch(p, root.get("pytorch"), src, conf)
    tensorflow = _tensorflow(p, root.get("tensorflow"), src, conf)
    tensorflow_archs = _tensorflow_archs(p, root.get("tensorflow_archs"), src, conf)
    branches = _branches(p, root.get("driver_branches"), src, conf)
    policies = _policies(p, root.get("policies"), src, conf)

    matrix = Matrix(
        path=path,
        sources=sources,
        minor_compat=minor_compat,
        cuda=cuda,
        architectures=architectures,
        gpus=gpus,
        cudnn=cudnn,
        pytorch=pytorch,
        tensorflow=tensorflow,
        driver_branches=branches,
        policies=policies,
        updated=_updated(p, root.get("updated")),
        tensorflow_archs=tensorflow_archs,
    )
    if not p.items:
        _consistency(p, matrix)
    if not p.items:
        for where, message in nvidia_rules.problems(matrix):
            p.add(where, message)
    if p.items:
        raise MatrixError(path, p.items)
    return matrix


Src = Callable[..., str]


def _sources(p: _Problems, raw: Any) -> dict[str, Source]:
    out: dict[str, Source] = {}
    table = p.mapping(raw, "sources")
    for key, row in (table or {}).items():
        path = f"sources.{key}"
        r = p.mapping(row, path)
        if r is None:
            continue
        url = p.text(r, "url", path)
        title = p.text(r, "title", path)
        if url and title:
            out[str(key)] = Source(key=str(key), url=url, title=title)
    return out


def _minor_compat(p: _Problems, raw: Any, src: Src, conf: Src) -> dict[int, MinorCompat]:
    out: dict[int, MinorCompat] = {}
    for key, row in (p.mapping(raw, "cuda_minor_compat") or {}).items():
        path = f"cuda_minor_compat.{key}"
        if not isinstance(key, str) or not key.isdigit():
            p.add(path, f'{_show(key)} is not a CUDA major (quote it: "12")')
            continue
        r = p.mapping(row, path)
        if r is None:
            continue
        drv = p.version(r.get("min_driver"), f"{path}.min_driver")
        if drv:
            out[int(key)] = MinorCompat(int(key), drv, src(r, path), conf(r, path))
    return out


def _cuda(p: _Problems, raw: Any, src: Src, conf: Src) -> tuple[CudaMinor, ...]:
    out: list[CudaMinor] = []
    keys: list[str] = []
    for key, row in (p.mapping(raw, "cuda") or {}).items():
        path = f"cuda.{key}"
        if not isinstance(key, str) or not re.match(r"^\d{1,2}\.\d{1,2}$", key):
            p.add(path, f'{_show(key)} is not a CUDA minor version such as "12.4" (quote it)')
            continue
        keys.append(key)
        r = p.mapping(row, path)
        if r is None:
            continue
        source, confidence = src(r, path), conf(r, path)
        ga = p.version(r.get("min_driver"), f"{path}.min_driver")
        releases = [CudaRelease(f"{key}.0", f"{key} GA", ga or "0", source, confidence)]
        updates = r.get("updates", {})
        upd = p.mapping(updates, f"{path}.updates") or {}
        for n, (ukey, uval) in enumerate(upd.items(), start=1):
            upath = f"{path}.updates.{ukey}"
            if (
                not isinstance(ukey, str)
                or not ukey.startswith(key + ".")
                or p.version(ukey, upath) is None
            ):
                p.add(upath, f"{_show(ukey)} is not a {key}.N update version")
                continue
            if isinstance(uval, dict):
                udrv = p.version(uval.get("min_driver"), f"{upath}.min_driver")
                usrc, uconf = src(uval, upath), conf(uval, upath)
            else:
                udrv = p.version(uval, upath)
                usrc, uconf = source, confidence
            releases.append(CudaRelease(ukey, f"{key} Update {n}", udrv or "0", usrc, uconf))
        if ga is None:
            continue
        for a, b in pairwise(releases):
            if _vkey(b.version) <= _vkey(a.version):
                p.add(f"{path}.updates.{b.version}", f"not sorted: comes after {a.version}")
        note = r.get("note", "")
        out.append(CudaMinor(key, tuple(releases), source, confidence, str(note)))
    _sorted(p, "cuda", keys)
    return tuple(out)


def _sorted(p: _Problems, path: str, keys: list[str]) -> None:
    try:
        versions = [_vkey(k) for k in keys]
    except VersionError:
        return
    for (ka, a), (kb, b) in pairwise(list(zip(keys, versions, strict=True))):
        if b <= a:
            p.add(f"{path}.{kb}", f"not sorted oldest first (comes after {ka})")


def _cc_list(
    p: _Problems, value: Any, path: str, regex: re.Pattern[str] = _CC_RE
) -> tuple[str, ...]:
    items = p.seq(value, path) or []
    out = []
    for i, cc in enumerate(items):
        ok = p.pattern(cc, f"{path}[{i}]", regex, 'a compute capability such as "8.6"')
        if ok:
            out.append(ok)
    return tuple(out)


def _rows(p: _Problems, raw: Any, path: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for i, row in enumerate(p.seq(raw, path) or []):
        r = p.mapping(row, f"{path}[{i}]")
        if r is not None:
            out.append((f"{path}[{i}]", r))
    return out


def _architectures(p: _Problems, raw: Any, src: Src, conf: Src) -> tuple[Architecture, ...]:
    out = []
    for path, r in _rows(p, raw, "architectures"):
        name = p.text(r, "name", path) or "?"
        ccs = _cc_list(p, r.get("compute_capabilities"), f"{path}.compute_capabilities")
        first = r.get("first_cuda")
        if first is not None:
            p.version(first, f"{path}.first_cuda")
        by_cc_raw = p.mapping(r.get("first_cuda_by_cc", {}), f"{path}.first_cuda_by_cc") or {}
        by_cc = {}
        for cc, v in by_cc_raw.items():
            if p.version(v, f"{path}.first_cuda_by_cc.{cc}") and cc in ccs:
                by_cc[str(cc)] = str(v)
            elif cc not in ccs:
                p.add(f"{path}.first_cuda_by_cc.{cc}", "not one of this row's compute_capabilities")
        last = r.get("last_cuda")
        if last is not None:
            p.pattern(
                last,
                f"{path}.last_cuda",
                _LAST_CUDA_RE,
                'a CUDA version ("10.2") or series ("12.x")',
            )
        last_branch = r.get("last_driver_branch")
        if last_branch is not None and (
            not isinstance(last_branch, int) or isinstance(last_branch, bool)
        ):
            p.add(
                f"{path}.last_driver_branch", f"{_show(last_branch)} is not a driver branch number"
            )
            last_branch = None
        mods = _kernel_modules(p, r.get("kernel_modules"), f"{path}.kernel_modules")
        driver_from = r.get("driver_from")
        if driver_from is not None and driver_from not in DRIVER_FROM:
            p.add(
                f"{path}.driver_from",
                f"{_show(driver_from)} is not one of {', '.join(DRIVER_FROM)}",
            )
            driver_from = None
        driver_from_source = src(r, path, "driver_from_source") if driver_from else None
        locked_mem = r.get("locked_memory_clocks")
        if not isinstance(locked_mem, bool):
            p.add(
                f"{path}.locked_memory_clocks", f"expected true or false, found {_kind(locked_mem)}"
            )
        out.append(
            Architecture(
                name=name,
                compute_capabilities=ccs,
                first_cuda=first if isinstance(first, str) else None,
                first_cuda_by_cc=by_cc,
                last_cuda=last if isinstance(last, str) else None,
                last_driver_branch=last_branch,
                clock_policy=p.choice(r, "clock_policy", path, CLOCK_POLICIES),  # type: ignore[arg-type]
                locked_memory_clocks=bool(locked_mem),
                kernel_modules=mods,
                source=src(r, path),
                confidence=conf(r, path),
                note=str(r.get("note", "")),
                driver_from=driver_from,
                driver_from_source=driver_from_source,
            )
        )
    return tuple(out)


def _kernel_modules(p: _Problems, raw: Any, path: str) -> tuple[str, ...]:
    mods = p.seq(raw, path) or []
    for i, m in enumerate(mods):
        if m not in KERNEL_MODULES:
            p.add(f"{path}[{i}]", f"{_show(m)} is not one of {', '.join(KERNEL_MODULES)}")
    return tuple(str(m) for m in mods if m in KERNEL_MODULES)


def _gpus(p: _Problems, raw: Any, src: Src, conf: Src) -> tuple[Gpu, ...]:
    from gpuhost.matrix.gpus import normalise_name  # local import: gpus imports model only

    out = []
    for path, r in _rows(p, raw, "gpus"):
        model = p.text(r, "model", path) or "?"
        names = []
        for i, n in enumerate(p.seq(r.get("names"), f"{path}.names") or []):
            if not isinstance(n, str) or not normalise_name(n):
                p.add(f"{path}.names[{i}]", f"{_show(n)} is not a GPU name")
            elif normalise_name(n) != n:
                p.add(
                    f"{path}.names[{i}]", f'"{n}" is not normalised (write "{normalise_name(n)}")'
                )
            else:
                names.append(n)
        cc = p.pattern(
            r.get("compute_capability"),
            f"{path}.compute_capability",
            _CC_RE,
            'a compute capability such as "8.6"',
        )
        out.append(
            Gpu(
                model,
                tuple(names),
                cc or "0.0",
                src(r, path),
                conf(r, path),
                str(r.get("note", "")),
                _kernel_modules(p, r.get("kernel_modules", []), f"{path}.kernel_modules"),
            )
        )
    return tuple(out)


def _cudnn(p: _Problems, raw: Any, src: Src, conf: Src) -> tuple[CudnnRelease, ...]:
    out = []
    for path, r in _rows(p, raw, "cudnn"):
        version = p.version(r.get("version"), f"{path}.version")
        packages = []
        for ppath, pk in _rows(p, r.get("packages"), f"{path}.packages"):
            cuda = tuple(
                v
                for i, v in enumerate(p.seq(pk.get("cuda"), f"{ppath}.cuda") or [])
                if p.version(v, f"{ppath}.cuda[{i}]")
            )
            if pk.get("cuda") == []:
                p.add(f"{ppath}.cuda", 'lists no CUDA release; give at least one, e.g. ["12.4"]')
            drv = p.optional_version(pk, "min_driver", ppath)
            ccs = pk.get("compute_capabilities")
            cc_min = pk.get("min_compute_capability")
            if (ccs is None) == (cc_min is None):
                p.add(ppath, "give exactly one of compute_capabilities and min_compute_capability")
            packages.append(
                CudnnPackage(
                    cuda=cuda,
                    min_driver=drv,
                    compute_capabilities=_cc_list(p, ccs, f"{ppath}.compute_capabilities")
                    if ccs is not None
                    else None,
                    min_compute_capability=p.pattern(
                        cc_min, f"{ppath}.min_compute_capability", _CC_RE, "a compute capability"
                    )
                    if cc_min is not None
                    else None,
                    note=str(pk.get("note", "")),
                )
            )
        if not packages:
            p.add(f"{path}.packages", "at least one package is needed")
        out.append(
            CudnnRelease(
                version or "0", tuple(packages), src(r, path), conf(r, path), str(r.get("note", ""))
            )
        )
    _sorted(p, "cudnn", [c.version for c in out])
    return tuple(out)


def _pytorch(p: _Problems, raw: Any, src: Src, conf: Src) -> tuple[TorchRelease, ...]:
    out = []
    for path, r in _rows(p, raw, "pytorch"):
        version = p.version(r.get("version"), f"{path}.version")
        variants = []
        for vpath, v in _rows(p, r.get("variants"), f"{path}.variants"):
            cuda = p.version(v.get("cuda"), f"{vpath}.cuda")
            cudnn = p.optional_version(v, "cudnn", vpath)
            archs = v.get("archs")
            arch_t = _cc_list(p, archs, f"{vpath}.archs", _ARCH_RE) if archs is not None else None
            archs_src = src(v, vpath, "archs_source", required=archs is not None) or None
            archs_conf = conf(v, vpath, "archs_confidence") if archs is not None else None
            variants.append(
                TorchVariant(
                    cuda=cuda or "0",
                    channel=p.choice(v, "channel", vpath, CHANNELS),
                    cudnn=cudnn,
                    archs=arch_t,
                    archs_source=archs_src,
                    archs_confidence=archs_conf,
                    note=str(v.get("note", "")),
                )
            )
        out.append(TorchRelease(version or "0", tuple(variants), src(r, path), conf(r, path)))
    _sorted(p, "pytorch", [t.version for t in out])
    return tuple(out)


def _tensorflow(p: _Problems, raw: Any, src: Src, conf: Src) -> tuple[TensorflowRelease, ...]:
    out = []
    for path, r in _rows(p, raw, "tensorflow"):
        version = p.version(r.get("version"), f"{path}.version")
        cuda = p.version(r.get("cuda"), f"{path}.cuda")
        cudnn = p.version(r.get("cudnn"), f"{path}.cudnn")
        out.append(
            TensorflowRelease(
                version or "0", cuda or "0", cudnn or "0", src(r, path), conf(r, path)
            )
        )
    _sorted(p, "tensorflow", [t.version for t in out])
    return tuple(out)


_SERIES_RE = re.compile(r"^\d+\.\d+$")


def _tensorflow_archs(p: _Problems, raw: Any, src: Src, conf: Src) -> tuple[TensorflowArchs, ...]:
    out = []
    for path, r in _rows(p, raw or [], "tensorflow_archs"):
        series = p.pattern(r.get("series"), f"{path}.series", _SERIES_RE, 'a series such as "2.17"')
        archs = _cc_list(p, r.get("archs"), f"{path}.archs", _ARCH_RE)
        if not archs:
            p.add(f"{path}.archs", "at least one compute capability is needed")
        out.append(TensorflowArchs(series or "0.0", archs, src(r, path), conf(r, path)))
    _sorted(p, "tensorflow_archs", [t.series for t in out])
    return tuple(out)


def _branches(p: _Problems, raw: Any, src: Src, conf: Src) -> tuple[DriverBranch, ...]:
    out = []
    for path, r in _rows(p, raw, "driver_branches"):
        number = r.get("branch")
        if not isinstance(number, int) or isinstance(number, bool) or number <= 0:
            p.add(f"{path}.branch", f"{_show(number)} is not a driver branch number such as 535")
            number = 0
        eol = r.get("eol")
        if eol is not None:
            eol = p.pattern(eol, f"{path}.eol", _EOL_RE, 'an EOL ("2026-06", "ended" or "n/a")')
        out.append(
            DriverBranch(
                number,
                p.choice(r, "type", path, BRANCH_TYPES),
                eol,
                src(r, path),
                conf(r, path),
                str(r.get("note", "")),
            )
        )
    numbers = [b.branch for b in out]
    for i, (a, b) in enumerate(pairwise(numbers), start=1):
        if b <= a:
            p.add(f"driver_branches[{i}].branch", f"not sorted oldest first ({b} after {a})")
    return tuple(out)


def _policies(p: _Problems, raw: Any, src: Src, conf: Src) -> dict[str, Policy]:
    out = {}
    required = (
        "binary_compatibility",
        "fabric_manager",
        "kernel_modules",
        "clocks",
        "container_toolkit",
    )
    table = p.mapping(raw, "policies") or {}
    for name in required:
        if name not in table:
            p.add(f"policies.{name}", "missing")
    for name, row in table.items():
        path = f"policies.{name}"
        r = p.mapping(row, path)
        if r is None:
            continue
        values: dict[str, str | int] = {}
        for k, v in r.items():
            if k in ("rule", "source", "confidence"):
                continue
            if k.startswith("min_driver"):
                if p.version(v, f"{path}.{k}"):
                    values[k] = v
            elif isinstance(v, (str, int)) and not isinstance(v, bool):
                values[k] = v
            else:
                p.add(f"{path}.{k}", f"expected a string or number, found {_kind(v)}")
        out[str(name)] = Policy(p.text(r, "rule", path) or "", src(r, path), conf(r, path), values)
    return out


def _consistency(p: _Problems, m: Matrix) -> None:
    """Cross-table checks: references resolve and numbers move the right way."""
    cuda_minors = {c.version for c in m.cuda}
    prev: CudaRelease | None = None
    for minor in m.cuda:
        if minor.major not in m.minor_compat:
            p.add(f"cuda.{minor.version}", f"no cuda_minor_compat row for major {minor.major}")
        for rel in minor.releases:
            field = (
                f"cuda.{minor.version}.min_driver"
                if rel is minor.ga
                else f"cuda.{minor.version}.updates.{rel.version}"
            )
            drv = parse_version(rel.min_driver, field=field)
            if prev is not None and drv < parse_version(prev.min_driver, field="-"):
                p.add(
                    field,
                    f"{rel.min_driver} is lower than the {prev.version} requirement "
                    f"{prev.min_driver} (driver minimums never go down)",
                )
            prev = rel
    seen_cc: dict[str, str] = {}
    for i, arch in enumerate(m.architectures):
        for cc in arch.compute_capabilities:
            if cc in seen_cc:
                p.add(
                    f"architectures[{i}].compute_capabilities",
                    f"{cc} already belongs to {seen_cc[cc]}",
                )
            seen_cc[cc] = arch.name
        if arch.last_driver_branch is not None and m.branch(arch.last_driver_branch) is None:
            p.add(
                f"architectures[{i}].last_driver_branch",
                f"{arch.last_driver_branch} is not in driver_branches",
            )
    seen_names: dict[str, str] = {}
    for i, gpu in enumerate(m.gpus):
        if gpu.compute_capability not in seen_cc:
            p.add(
                f"gpus[{i}].compute_capability",
                f"{gpu.compute_capability} is not listed by any architecture",
            )
        for name in gpu.names:
            if name in seen_names:
                p.add(f"gpus[{i}].names", f'"{name}" already selects {seen_names[name]}')
            seen_names[name] = gpu.model
    for i, crel in enumerate(m.cudnn):
        for j, pk in enumerate(crel.packages):
            for cuda in pk.cuda:
                if cuda not in cuda_minors:
                    p.add(f"cudnn[{i}].packages[{j}].cuda", f"{cuda} is not a CUDA release in cuda")
    for i, tr in enumerate(m.pytorch):
        for j, var in enumerate(tr.variants):
            if var.cuda not in cuda_minors:
                p.add(
                    f"pytorch[{i}].variants[{j}].cuda", f"{var.cuda} is not a CUDA release in cuda"
                )
    for i, tf in enumerate(m.tensorflow):
        if tf.cuda not in cuda_minors:
            p.add(f"tensorflow[{i}].cuda", f"{tf.cuda} is not a CUDA release in cuda")
