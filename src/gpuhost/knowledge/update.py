"""``gpuhost data update``: new facts from machine-readable primary sources into an overlay in
this machine's data directory (:mod:`gpuhost.datadir`), never a partial one.

Sources (every URL read through one :class:`gpuhost.knowledge.pypi.Index`, so recorded answers
replay a whole update):

- NVIDIA's CSAF bulletins (github.com/NVIDIA/product-security): each year's ``README.md`` lists
  the bulletins; those for the GPU display driver, the container toolkit or the CUDA Toolkit
  that the advisories lack are read (``<year>/<id>/<id>.json``) and turned into rows as
  ``matrix advisories-sync`` does;
- NVIDIA's CUDA redistrib manifests (``redistrib_X.Y.Z.json``, listed by the redist folder's
  index page): a release newer than the matrix knows becomes a CUDA row or update, its minimum
  driver the ``nvidia_driver`` version the manifest carries (a manifest without one is skipped
  and said);
- NVIDIA's cuDNN redistrib manifests (the same shape, in cuDNN's redist folder): a release newer
  than the matrix knows becomes a cuDNN row (:mod:`gpuhost.knowledge.cudnn_redist`);
- the PCI ID database (this machine's ``pci.ids`` or ``--pci-ids``): the GPU catalog, when it
  is newer than the one in use (:mod:`gpuhost.knowledge.catalog_update`);
- PyPI's JSON API and each wheel's core metadata (PEP 658, else a byte-range read of the wheel):
  the torch / TensorFlow releases of wheels.yaml's range (:func:`gpuhost.knowledge.sync.sync`).

:func:`collect` builds the new files' texts; :func:`install` validates them with the same
loaders every command uses and only then replaces the overlay's files, ``meta.json`` last.
"""

from __future__ import annotations

import datetime
import json
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpuhost import datadir, safeio
from gpuhost.datafiles import load_yaml
from gpuhost.errors import DataUpdateError, GpuhostError, PackageIndexError
from gpuhost.gpus.catalog import CATALOG_FILE, parse_catalog
from gpuhost.knowledge.catalog_update import refresh
from gpuhost.knowledge.csaf import readable_row, render_advisories
from gpuhost.knowledge.cudnn_redist import CUDNN_REDIST, CUDNN_REDIST_SOURCE, cudnn_row
from gpuhost.knowledge.maintain import wheel_ranges
from gpuhost.knowledge.pypi import Index, make_index
from gpuhost.knowledge.sync import render_wheels, sync
from gpuhost.matrix.advisories import (
    default_advisories_path,
    load_advisories,
    read_raw,
    row_problems,
)
from gpuhost.matrix.load import default_matrix_path, load_matrix
from gpuhost.matrix.wheeldata import default_wheels_path, load_wheels
from gpuhost.redaction import redact_url
from gpuhost.statedir import unsafe_folder
from gpuhost.versions import parse_version

CSAF_BASE = "https://raw.githubusercontent.com/NVIDIA/product-security/main"
CUDA_REDIST = "https://developer.download.nvidia.com/compute/cuda/redist/"
_README_ROW_RE = re.compile(r"^\|\s*\[(\d+)\]\([^)]*\)\s*\|\s*([^|]+?)\s*\|")
_MANIFEST_RE = re.compile(r"redistrib_(\d+\.\d+\.\d+)\.json")
_WANTED_TITLES = ("Display Driver", "Container Toolkit", "CUDA Toolkit")
CUDA_REDIST_SOURCE = {
    "url": CUDA_REDIST,
    "title": "NVIDIA CUDA redistrib manifests (redistrib_X.Y.Z.json: release date and the "
    "nvidia_driver version bundled with the release), read by gpuhost data update",
    "facts": ["F-CUDA-REDIST"],
}


@dataclass
class Collected:
    """The new data files' texts and one line per fact added (or left out, and why)."""

    texts: dict[str, str]
    lines: list[str] = field(default_factory=list)
    origin: str = ""


def collect(
    index: Index,
    *,
    csaf_base: str = CSAF_BASE,
    cuda_redist: str = CUDA_REDIST,
    cudnn_redist: str = CUDNN_REDIST,
    today: datetime.date | None = None,
) -> Collected:
    """Read every source; raises PackageIndexError (or ConfigError) when one cannot answer."""
    today = today or datetime.date.today()
    out = Collected(texts={})
    out.texts["advisories.yaml"] = _advisories(index, csaf_base.rstrip("/"), today, out.lines)
    out.texts["matrix.yaml"] = _matrix(index, (cuda_redist, cudnn_redist), today, out.lines)
    wheels_path = default_wheels_path()
    ranges = wheel_ranges(wheels_path)
    result = sync(index, ranges)
    old = {(p, r["version"]) for p, rows in _wheel_rows(wheels_path).items() for r in rows}
    for project, rows in result.data.items():
        out.lines += [
            f"{project} {r['version']}: new (released {str(r['released'])[:10]})"
            for r in rows
            if (project, r["version"]) not in old
        ]
    out.texts["wheels.yaml"] = render_wheels(ranges, result.data)
    out.origin = redact_url(
        f"PyPI {index.base}, CSAF {csaf_base}, CUDA redist {cuda_redist}, "
        f"cuDNN redist {cudnn_redist}"
    )
    return out


def _wheel_rows(path: str) -> dict[str, list[dict[str, Any]]]:
    from gpuhost.matrix.wheeldata import read_wheels_file

    data = read_wheels_file(path)
    return {p: list(data.get(p) or []) for p in ("torch", "tensorflow")}


def _json(url: str, text: str | None) -> Any:
    if text is None:
        raise PackageIndexError(f"{url}: not found (HTTP 404)")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise PackageIndexError(
            f"{url}: not JSON ({exc.msg} at line {exc.lineno}); a partial or corrupt download"
        ) from exc


# --------------------------------------------------------------------------------------------
# advisories


def _advisories(index: Index, base: str, today: datetime.date, lines: list[str]) -> str:
    path = default_advisories_path()
    load_advisories(path)  # the data in use, damaged: one line (MatrixError), not a traceback
    current = read_raw(path)
    rows: list[dict[str, Any]] = [dict(r) for r in current.get("advisories") or []]
    known = {str(r.get("id")) for r in rows}
    for year in (today.year - 1, today.year):
        listing = index.text(f"{base}/{year}/README.md")
        if listing is None:
            continue
        for line in listing.splitlines():
            m = _README_ROW_RE.match(line)
            if not m or m.group(1) in known or not any(t in m.group(2) for t in _WANTED_TITLES):
                continue
            url = f"{base}/{year}/{m.group(1)}/{m.group(1)}.json"
            doc = _json(url, index.text(url))
            if not isinstance(doc, dict) or "document" not in doc:
                raise PackageIndexError(f"{url}: no 'document' object; expected a CSAF bulletin")
            row = readable_row(doc, url)
            if row is None:
                continue
            problems = row_problems(row, today)
            if problems:  # nothing of it is used: not its id in a path, nor its date
                lines.append(f"bulletin {m.group(1)}: not added ({'; '.join(problems)})")
                continue
            if row["id"] in known:
                lines.append(f"bulletin {m.group(1)}: not added (its id {row['id']} is known)")
                continue
            rows.append(row)
            known.add(row["id"])
            lines.append(f"bulletin {row['id']} ({row['date']}): new ({row['title']})")
    return render_advisories(rows, float(current.get("error_at_cvss", 7.0)))


# --------------------------------------------------------------------------------------------
# CUDA releases


def _matrix(
    index: Index, redists: tuple[str, str], today: datetime.date, lines: list[str]
) -> str:
    """matrix.yaml with the CUDA releases (``redists[0]``), then the cuDNN releases
    (``redists[1]``: their rows name the CUDA minors known by then) the data lacks."""
    cuda_redist, cudnn_redist = redists
    path = default_matrix_path()
    matrix = load_matrix(path)  # first: a damaged file in use is one line (MatrixError)
    raw = load_yaml(Path(path).read_text(encoding="utf-8"))
    known = [r.version for c in matrix.cuda for r in c.releases]
    for version, manifest, url in _new_manifests(index, cuda_redist, known, "cuda"):
        lines.append(_add_cuda(raw, version, manifest, url))
    raw.setdefault("sources", {}).setdefault("cuda-redist", CUDA_REDIST_SOURCE)
    known = [r.version for r in matrix.cudnn]
    for version, manifest, url in _new_manifests(index, cudnn_redist, known, "cudnn"):
        row, line = cudnn_row(raw, version, manifest, url)
        lines.append(line)
        if row is not None:
            raw.setdefault("cudnn", []).append(row)
            raw["sources"].setdefault("cudnn-redist", CUDNN_REDIST_SOURCE)
    raw["updated"] = today.isoformat()
    return yaml.safe_dump(raw, sort_keys=False, allow_unicode=True, width=100)


def _new_manifests(
    index: Index, redist: str, known: list[str], what: str
) -> list[tuple[str, Any, str]]:
    """(version, manifest, url) of every ``redistrib_X.Y.Z.json`` the redist folder's index
    page lists that is newer than every version in ``known``, oldest first."""
    newest = max((parse_version(v, field=what) for v in known), default=None)
    listing = index.text(redist)
    if listing is None:
        raise PackageIndexError(f"{redist}: not found (HTTP 404); expected the redist index page")
    found = sorted(set(_MANIFEST_RE.findall(listing)), key=lambda v: parse_version(v, field="v"))
    out = []
    for version in found:
        if version in known or (
            newest is not None and parse_version(version, field=what) <= newest
        ):
            continue
        url = f"{redist.rstrip('/')}/redistrib_{version}.json"
        out.append((version, _json(url, index.text(url)), url))
    return out


def _add_cuda(raw: dict[str, Any], version: str, manifest: Any, url: str) -> str:
    driver = (
        (manifest.get("nvidia_driver") or {}).get("version") if isinstance(manifest, dict) else None
    )
    if not isinstance(driver, str):
        return f"CUDA {version}: {url} names no nvidia_driver version; not added"
    major, minor = version.split(".")[:2]
    if major not in {str(k) for k in raw.get("cuda_minor_compat", {})}:
        return f"CUDA {version}: a new major release; not added (needs its minor-compat floor)"
    key = f"{major}.{minor}"
    date = manifest.get("release_date", "?")
    rows = raw.setdefault("cuda", {})
    if key not in rows:
        rows[key] = {
            "min_driver": driver,
            "source": "cuda-redist",
            "confidence": "primary",
            "note": f"CUDA {version} ({date}): the driver its redistrib manifest carries",
        }
        return f"CUDA {key} ({version}, {date}): new, minimum driver {driver}"
    rows[key].setdefault("updates", {})[version] = {
        "min_driver": driver,
        "source": "cuda-redist",
        "confidence": "primary",
    }
    return f"CUDA {version} ({date}): new update of {key}, minimum driver {driver}"


# --------------------------------------------------------------------------------------------
# writing


def update(
    folder: Path,
    from_dir: str | None,
    index_url: str,
    csaf_base: str,
    cuda_redist: str,
    cudnn_redist: str = CUDNN_REDIST,
    pci_ids: str = "",
) -> list[str]:
    """``gpuhost data update``: collect (PyPI from ``index_url``, or answers recorded under
    ``from_dir``) and install into ``folder``; one line per fact, then the data now in use.
    DataUpdateError naming the data kept when anything fails (nothing is changed then)."""
    before = datadir.data_info()
    unsafe = unsafe_folder(folder)
    if unsafe:  # an update there would not be used (datadir.overlay_problem)
        raise DataUpdateError(
            f"data update: data directory {folder}: {unsafe[0]} is {unsafe[1]}; refusing to "
            f"write the update there (fix: chmod go-w it, or give --data-dir a folder of yours)"
        )
    try:
        index = make_index(from_dir, index_url)
        found = collect(
            index, csaf_base=csaf_base, cuda_redist=cuda_redist, cudnn_redist=cudnn_redist
        )
        catalog, catalog_line = refresh(pci_ids, index, found.texts["matrix.yaml"])
        if catalog is not None:
            found.texts[CATALOG_FILE] = catalog
            found.lines.append(catalog_line)
        install(found, folder)
    except GpuhostError as exc:
        raise DataUpdateError(
            f"data update failed, keeping the data of {datadir.described(before)}: {exc}"
        ) from exc
    after = datadir.data_info()
    summary = f"data: {datadir.described(after)}; {len(found.lines)} facts added"
    kept = [] if catalog is not None else [catalog_line]
    return [*found.lines, *kept, summary]


def install(found: Collected, folder: Path, today: datetime.date | None = None) -> Path:
    """Validate the new files with the loaders, then replace the overlay in ``folder`` (each file
    atomically, ``meta.json`` last). Raises GpuhostError and changes nothing when a file does
    not validate or cannot be written."""
    today = today or datetime.date.today()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(dir=folder, prefix=".update-"))
    except OSError as exc:
        raise GpuhostError(f"{folder}: cannot write the data directory ({exc.strerror})") from exc
    try:
        for name, text in found.texts.items():  # a mirror's password is never stored
            (work / name).write_text(redact_url(text), encoding="utf-8")
        load_matrix(str(work / "matrix.yaml"))  # reads wheels.yaml beside it too
        load_advisories(str(work / "advisories.yaml"))
        load_wheels(str(work / "wheels.yaml"))
        if CATALOG_FILE in found.texts:
            parse_catalog(load_yaml(found.texts[CATALOG_FILE]), str(work / CATALOG_FILE))
        # retire the old overlay first: while the files are moved (or if this process dies
        # meanwhile) readers get the shipped data, never a mix of old and new files
        (folder / datadir.META).unlink(missing_ok=True)
        for name in found.texts:
            (work / name).replace(folder / name)
        meta = {
            "date": today.isoformat(),
            "origin": redact_url(found.origin),
            "added": [redact_url(line) for line in found.lines],
        }
        safeio.write_atomic(folder / datadir.META, (json.dumps(meta, indent=1) + "\n").encode())
    except OSError as exc:
        raise GpuhostError(f"{folder}: cannot write the data ({exc.strerror})") from exc
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return folder
