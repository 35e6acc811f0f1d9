"""``gpuhost matrix sync``: derive what each torch / TensorFlow release on PyPI is built with, and
compare it with ``data/wheels.yaml`` (written by ``--write``) and ``data/matrix.yaml``.

Per release from the range in wheels.yaml (``range:``), final releases only (``X.Y.Z``, and post
releases ``X.Y.Z.postN`` such as TensorFlow 2.15.0.post1):

- the release date (first wheel upload) and the CPython versions with a Linux wheel;
- per Linux machine (x86_64, aarch64) the libraries the default wheel pins (what a plain
  ``pip install torch==X`` / ``pip install tensorflow[and-cuda]==X`` brings): CUDA minor, runtime,
  cuDNN, cuBLAS, NCCL, read from one wheel's PEP 658 core metadata, or where the index has none
  from the METADATA inside the wheel (HTTP byte ranges).

:func:`sync` reads the index; :func:`drift` compares; :func:`render_wheels` writes the file. The
answers sync read are kept (trimmed to what it used) so ``--record DIR`` can store them as test
fixtures that :class:`gpuhost.knowledge.pypi.DirectoryIndex` answers from.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuhost.errors import PackageIndexError
from gpuhost.knowledge.pypi import Index, file_url, project_url, store
from gpuhost.matrix.model import Matrix
from gpuhost.matrix.wheels import (
    PLATFORMS,
    WheelFile,
    build_of,
    header,
    python_versions,
    wheel_file,
    wheels_for,
)
from gpuhost.versions import Version, parse_framework_version

FRAMEWORKS = {"torch": None, "tensorflow": "and-cuda"}  # project -> extra holding the CUDA pins
_FINAL_RE = re.compile(r"^\d+\.\d+\.\d+(\.post\d+)?$")  # no pre/dev releases
_LIB_FIELDS = ("cuda", "runtime", "cudnn", "cublas", "nccl")


def _key(version: str) -> Version:
    return parse_framework_version(version, field="release")


@dataclass
class SyncResult:
    """What sync derived (``data``: the wheels.yaml tables) and the answers it read."""

    data: dict[str, list[dict[str, Any]]]
    used: dict[str, str] = field(default_factory=dict)  # URL -> text as read (trimmed)


def sync(index: Index, ranges: dict[str, str]) -> SyncResult:
    """Read every release of each framework from ``ranges[framework]`` ("2.0.0") on."""
    result = SyncResult(data={})
    for project, extra in FRAMEWORKS.items():
        floor = ranges.get(project)
        if floor is None:
            continue
        url = project_url(index.base, project)
        raw = index.project(project)
        releases = raw["releases"]
        rows = []
        kept: dict[str, list[dict[str, Any]]] = {}
        for version in sorted((v for v in releases if _FINAL_RE.match(v)), key=_key):
            if _key(version) < _key(floor):
                continue
            entries = [e for e in releases[version] if isinstance(e, dict)]
            files = [f for f in (wheel_file(e) for e in entries) if f is not None]
            linux = [f for f in files if f.machine and f.python]
            if not linux:
                continue
            kept[version] = [
                e
                for e, f in zip(entries, map(wheel_file, entries), strict=True)
                if f is not None and f.machine and f.python
            ]
            rows.append(_release(index, url, project, version, extra, linux, result))
        result.used[url] = json.dumps(
            {
                "info": {"name": project},
                "releases": {v: [_trim_entry(e) for e in es] for v, es in kept.items()},
            },
            indent=1,
            sort_keys=True,
        )
        result.data[project] = rows
    return result


def _trim_entry(entry: dict[str, Any]) -> dict[str, Any]:
    keep = ("filename", "url", "upload_time_iso_8601", "upload_time", "requires_python", "yanked")
    return {k: entry[k] for k in keep if k in entry}


def _release(
    index: Index,
    url: str,
    project: str,
    version: str,
    extra: str | None,
    files: list[WheelFile],
    result: SyncResult,
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "version": version,
        "released": min(f.uploaded for f in files),
        "python": python_versions(files),
    }
    for machine in PLATFORMS:
        candidates = wheels_for(files, machine)
        if not candidates:
            continue
        found = _metadata(index, url, candidates)
        if found is None:
            row.setdefault("no_metadata", []).append(machine)
            continue
        wheel, meta_url, text = found
        got = header(text, "Version")
        if got is not None and got != version:
            raise PackageIndexError(f"{meta_url}: metadata says Version {got}, expected {version}")
        result.used[meta_url] = _trim_metadata(text)
        build = build_of(text, machine, extra)
        libs: dict[str, Any] = {
            k: getattr(build, k) for k in _LIB_FIELDS if getattr(build, k) is not None
        }
        if not build.exact:
            libs["exact"] = False
        row[machine] = libs
        row.setdefault("wheels", {})[machine] = wheel.filename
    return row


def _metadata(
    index: Index, url: str, candidates: list[WheelFile]
) -> tuple[WheelFile, str, str] | None:
    """(wheel, its ``.metadata`` URL, core metadata) of the first candidate whose PEP 658 file
    the index serves, else of the first whose METADATA a byte-range read of the wheel gives
    (recorded under the ``.metadata`` URL, so recorded answers replay it)."""
    for wheel in candidates:
        meta_url = file_url(url, wheel.url) + ".metadata"
        text = index.text(meta_url)
        if text is not None:
            return wheel, meta_url, text
    for wheel in candidates:
        text = index.wheel_metadata(file_url(url, wheel.url))
        if text is not None:
            return wheel, file_url(url, wheel.url) + ".metadata", text
    return None


def _trim_metadata(text: str) -> str:
    keep = (
        "metadata-version",
        "name",
        "version",
        "requires-python",
        "requires-dist",
        "provides-extra",
    )
    lines = []
    for line in text.splitlines():
        if not line.strip():
            break
        if line.partition(":")[0].strip().lower() in keep:
            lines.append(line)
    return "\n".join(lines) + "\n"


def record(result: SyncResult, root: Path) -> int:
    """Store the answers sync used under ``root`` (for :class:`DirectoryIndex`); returns count."""
    for url, text in sorted(result.used.items()):
        store(root, url, text)
    return len(result.used)


# --------------------------------------------------------------------------------------------
# comparing


def drift(
    current: dict[str, list[dict[str, Any]]], new: dict[str, list[dict[str, Any]]]
) -> list[str]:
    """Lines naming each difference between wheels.yaml (``current``) and the index (``new``)."""
    lines = []
    for project in FRAMEWORKS:
        old_rows = {r["version"]: r for r in current.get(project, [])}
        new_rows = {r["version"]: r for r in new.get(project, [])}
        for version in sorted(set(old_rows) | set(new_rows), key=_key):
            a, b = old_rows.get(version), new_rows.get(version)
            if a is None:
                lines.append(f"{project} {version}: new on the index ({_describe(b or {})})")
            elif b is None:
                lines.append(f"{project} {version}: in wheels.yaml but not on the index")
            else:
                for fld in sorted(set(a) | set(b)):
                    if a.get(fld) != b.get(fld):
                        lines.append(
                            f"{project} {version} {fld}: wheels.yaml has {_show(a.get(fld))}, "
                            f"the index has {_show(b.get(fld))}"
                        )
    return lines


def matrix_drift(matrix: Matrix, new: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Where matrix.yaml's hand-kept rows disagree with what the wheels pin.

    torch: a variant row with the default wheel's CUDA but another cuDNN; TensorFlow: a tested
    configuration whose CUDA or cuDNN major differs from the ``and-cuda`` pins.
    """
    lines = []
    for row in new.get("torch", []):
        x86 = row.get("x86_64", {})
        if not x86.get("cuda"):
            continue
        minor = ".".join(row["version"].split(".")[:2])
        rel = next((r for r in matrix.pytorch if r.version == minor), None)
        if rel is None:
            continue
        for var in rel.variants:
            if (
                var.cuda == x86["cuda"]
                and var.cudnn
                and x86.get("cudnn")
                and var.cudnn != x86["cudnn"]
            ):
                lines.append(
                    f"matrix.yaml pytorch {minor} {var.tag}: cuDNN {var.cudnn}, but the PyPI "
                    f"torch {row['version']} wheel ({var.tag}) pins {x86['cudnn']}; "
                    "edit matrix.yaml"
                )
    return lines


def _describe(row: dict[str, Any]) -> str:
    x86 = row.get("x86_64") or {}
    if x86.get("cuda"):
        return f"CUDA {x86['cuda']}, cuDNN {x86.get('cudnn', 'unpinned')}"
    return "no CUDA pins"


def _show(value: Any) -> str:
    return json.dumps(value) if value is not None else "nothing"


# --------------------------------------------------------------------------------------------
# the file


HEADER = """\
# What each torch / TensorFlow release on PyPI is built with: GENERATED by
# `gpuhost matrix sync --write` from PyPI's JSON API (https://pypi.org/pypi/<project>/json) and
# each wheel's PEP 658 core metadata (<wheel url>.metadata). Do not edit the release rows by hand;
# edit `range` (the oldest release synced per project) and run sync again.
# Per release: `released` (first wheel upload), `python` (CPython versions with a Linux wheel),
# per Linux machine the libraries the default wheel pins (TensorFlow: its `and-cuda` extra):
# `cuda` (minor), `runtime` (nvidia-cuda-runtime or cuda-toolkit pin), `cudnn`, `cublas`, `nccl`;
# `exact: false` = the wheel asks for these versions or newer (>=), not exactly them;
# `{}` = the wheel pins no NVIDIA library (a CPU build, or TensorFlow using the system's CUDA);
# `wheels` = the file whose metadata was read; `no_metadata` = machines with Linux wheels none of
# whose core metadata the index publishes (their libraries are unknown, not absent).
"""


def render_wheels(ranges: dict[str, str], data: dict[str, list[dict[str, Any]]]) -> str:
    """The text of wheels.yaml (stable: same data, same bytes)."""
    out = [HEADER, "schema: 1", "source: pypi", "range:"]
    for project, floor in ranges.items():
        out.append(f"  {project}: {json.dumps(floor)}")
    for project in FRAMEWORKS:
        if project not in data:
            continue
        out.append(f"{project}:")
        for row in data[project]:
            out.append(f"  - version: {json.dumps(row['version'])}")
            out.append(f"    released: {json.dumps(row['released'])}")
            out.append(f"    python: {json.dumps(row['python'])}")
            for machine in PLATFORMS:
                if machine in row:
                    libs = ", ".join(f"{k}: {json.dumps(v)}" for k, v in row[machine].items())
                    out.append(f"    {machine}: {{{libs}}}")
            if row.get("no_metadata"):
                out.append(f"    no_metadata: {json.dumps(row['no_metadata'])}")
            if row.get("wheels"):
                out.append("    wheels:")
                for machine, name in row["wheels"].items():
                    out.append(f"      {machine}: {json.dumps(name)}")
    return "\n".join(out) + "\n"
