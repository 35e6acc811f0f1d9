"""cuDNN releases from NVIDIA's cuDNN redistrib manifests, for ``gpuhost data update`` (pure).

A manifest (``redistrib_X.Y.Z.json`` in cuDNN's redist folder) names the release, its date, its
full version and the CUDA majors it is built for (``cudnn.cuda_variant``, else the ``cudaNN``
archives of each platform). It names no driver floor and no compute capability, so a row made
from it is ``derived``, and its note says where each part comes from:

- the release, its date and its CUDA majors: the manifest (source ``cudnn-redist``);
- the CUDA minors of each major: the CUDA releases the matrix knows of that major;
- the driver floor of each major's package: that major's minor-version compatibility floor
  (``cuda_minor_compat``, NVIDIA's compatibility guide: what every cuDNN support matrix states
  for a CUDA major);
- the compute capabilities: those of the newest cuDNN the matrix has for that major.

A major without a known CUDA release, floor or earlier cuDNN package is left out and said; a
manifest with none left adds nothing (one line saying why).
"""

from __future__ import annotations

from typing import Any

from gpuhost.versions import numeric_key

CUDNN_REDIST = "https://developer.download.nvidia.com/compute/cudnn/redist/"
CUDNN_REDIST_SOURCE = {
    "url": CUDNN_REDIST,
    "title": "NVIDIA cuDNN redistrib manifests (redistrib_X.Y.Z.json: release date, version and "
    "the CUDA majors each build is for), read by gpuhost data update; driver floors from the "
    "CUDA minor-version compatibility floors, compute capabilities from the newest earlier "
    "cuDNN of the same CUDA major",
    "facts": ["F-CUDNN-REDIST"],
}
_CC_KEYS = ("compute_capabilities", "min_compute_capability")


def cuda_majors(body: dict[str, Any]) -> list[str]:
    """The CUDA majors of a manifest's ``cudnn`` entry: ``cuda_variant``, else the ``cudaNN``
    keys of its platforms (pure)."""
    variants = body.get("cuda_variant")
    if isinstance(variants, list) and variants:
        found = {str(v) for v in variants if str(v).isdigit()}
    else:
        found = {
            key[4:]
            for platform in body.values()
            if isinstance(platform, dict)
            for key in platform
            if isinstance(key, str) and key.startswith("cuda") and key[4:].isdigit()
        }
    return sorted(found, key=int)


def _minors(raw: dict[str, Any], major: str) -> list[str]:
    cuda = raw.get("cuda") or {}
    return sorted((str(k) for k in cuda if str(k).split(".")[0] == major), key=numeric_key)


def _newest_package(rows: list[Any], major: str) -> tuple[str, dict[str, Any]] | None:
    """(version, package) of the newest cuDNN row with a package for a CUDA minor of ``major``."""
    for row in reversed(rows):
        for package in row.get("packages") or []:
            if any(str(c).split(".")[0] == major for c in package.get("cuda") or []):
                return str(row.get("version")), package
    return None


def cudnn_row(
    raw: dict[str, Any], version: str, manifest: Any, url: str
) -> tuple[dict[str, Any] | None, str]:
    """The matrix row for the cuDNN release ``version`` whose manifest (at ``url``) is
    ``manifest``, given the matrix data ``raw`` so far, and one line saying what was added
    (row None: nothing, and why)."""
    body = manifest.get("cudnn") if isinstance(manifest, dict) else None
    if not isinstance(body, dict):
        return None, f"cuDNN {version}: {url} has no 'cudnn' entry; not added"
    majors = cuda_majors(body)
    if not majors:
        return None, f"cuDNN {version}: {url} names no CUDA variant; not added"
    packages, like, left_out = [], set(), []
    for major in majors:
        minors = _minors(raw, major)
        floor = ((raw.get("cuda_minor_compat") or {}).get(major) or {}).get("min_driver")
        newest = _newest_package(raw.get("cudnn") or [], major)
        if not minors or not floor or newest is None:
            left_out.append(major)
            continue
        like.add(newest[0])
        package: dict[str, Any] = {"cuda": minors, "min_driver": str(floor)}
        package.update({k: newest[1][k] for k in _CC_KEYS if k in newest[1]})
        packages.append(package)
    skipped = f" (CUDA {', '.join(left_out)}: no known release, floor or cuDNN; left out)"
    if not packages:
        return None, f"cuDNN {version}: none of its CUDA majors is known{skipped}; not added"
    date = str(manifest.get("release_date", "?"))
    full = body.get("version") if isinstance(body.get("version"), str) else version
    row = {
        "version": version,
        "packages": packages,
        "source": "cudnn-redist",
        "confidence": "derived",
        "note": (
            f"cuDNN {full} ({date}): release and CUDA majors ({', '.join(majors)}) from {url}; "
            "driver floors: each major's minor-version compatibility floor; compute "
            f"capabilities as cuDNN {', '.join(sorted(like, key=numeric_key))} (the manifest "
            "lists neither)"
        ),
    }
    cudas = ", ".join(c for p in packages for c in p["cuda"])
    line = f"cuDNN {version} ({date}): new, for CUDA {cudas}"
    return row, line + (skipped if left_out else "")
