"""NVIDIA's security bulletins (CSAF 2.0 documents from github.com/NVIDIA/product-security) ->
the rows of ``data/advisories.yaml`` (pure functions).

Only what a Linux GPU server runs is kept: the GPU display driver for Linux (data-center
"Tesla", "NVIDIA RTX, Quadro, NVS" and GeForce products of each ``Linux(R<branch>)``; vGPU
guest/host drivers are left out), the NVIDIA Container Toolkit with the GPU Operator releases
its bulletins name, and the CUDA Toolkit on Linux (a product whose platform names Linux: a
Windows-only CVE is left out). Per bulletin: id, title, date, URL, the CVEs that affect those
products with their CVSS base score and, per CVE, the driver branches it affects (driver), its
first fixed CUDA Toolkit (``fixed``, CUDA) or whether it affects the GPU Operator
(``gpu_operator``); per branch (or for the container toolkit, ``gpu-operator`` and ``cuda``) the
first fixed version.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from gpuhost.errors import ConfigError

BULLETIN_URL = "https://nvidia.custhelp.com/app/answers/detail/a_id/{id}"
CSAF_URL = "https://github.com/NVIDIA/product-security/blob/main/{year}/{id}/{id}.json"
_LINUX_BRANCH_RE = re.compile(r"^Linux\s*\(R(\d+)\)$")
_VERSION_RE = re.compile(r"v?(\d+(?:\.\d+)+)")
_DRIVER_FAMILIES = ("Tesla", "NVIDIA RTX, Quadro, NVS", "RTX, Quadro, NVS", "GeForce")
TOOLKIT = "NVIDIA Container Toolkit"
OPERATOR = "NVIDIA GPU Operator"
# "11.6 Update 2", "CUDA Toolkit v12.4U1", "CUDA Toolkit 13.1" -> (11, 6, 2), (12, 4, 1), (13, 1)
_CUDA_RE = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?(?:\s*(?:U|Update\s*)(\d+))?", re.I)


def component_of(doc: dict[str, Any]) -> str | None:
    """``driver`` / ``container-toolkit`` / ``cuda-toolkit`` from the bulletin title; None for
    other products."""
    title = str(doc.get("document", {}).get("title", ""))
    if "Container Toolkit" in title:
        return "container-toolkit"
    if "Display Driver" in title:
        return "driver"
    if "CUDA Toolkit" in title:
        return "cuda-toolkit"
    return None


def _is_cuda(info: tuple[str, str, str]) -> bool:
    """A CUDA Toolkit product for Linux ("Windows, Linux", "Linux and Windows", "Linux")."""
    return "CUDA Toolkit" in info[1] and "Linux" in info[0]


def cuda_version(text: str) -> str | None:
    """The CUDA release a product text names: "11.6 Update 2" -> "11.6.2", "v12.4U1" ->
    "12.4.1", "CUDA Toolkit 13.1" -> "13.1.0" (an update is the third number up to 13.3)."""
    m = _CUDA_RE.search(text)
    if m is None:
        return None
    major, minor, patch, update = m.groups()
    return f"{major}.{minor}.{update or patch or 0}"


def _products(doc: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    """product_id -> (architecture, product family, version text) for every product_version."""
    out: dict[str, tuple[str, str, str]] = {}

    def walk(branches: list[dict[str, Any]], arch: str) -> None:
        for b in branches:
            cat = b.get("category")
            here = str(b.get("name", "")) if cat == "architecture" else arch
            product = b.get("product")
            if cat == "product_version" and isinstance(product, dict):
                out[str(product.get("product_id"))] = (
                    here,
                    str(b.get("name", "")),
                    str(product.get("name", "")),
                )
            walk(b.get("branches", []) or [], here)

    walk(doc.get("product_tree", {}).get("branches", []) or [], "")
    return out


def _score(vuln: dict[str, Any]) -> float | None:
    scores = [
        (s.get("cvss_v3") or s.get("cvss_v4") or {}).get("baseScore")
        for s in vuln.get("scores", []) or []
    ]
    found = [float(x) for x in scores if isinstance(x, (int, float))]
    return max(found) if found else None


def _version(text: str) -> str | None:
    m = _VERSION_RE.search(text)
    return m.group(1) if m else None


def _driver_product(info: tuple[str, str, str]) -> int | None:
    """The Linux driver branch of a product (None: not a Linux display driver product)."""
    arch, family, _ = info
    m = _LINUX_BRANCH_RE.match(arch.strip())
    return int(m.group(1)) if m and family in _DRIVER_FAMILIES else None


def bulletin_row(doc: dict[str, Any]) -> dict[str, Any] | None:
    """One advisories.yaml row for a CSAF document; None when nothing in it concerns Linux
    drivers or the container toolkit."""
    component = component_of(doc)
    if component is None:
        return None
    tracking = doc["document"]["tracking"]
    bid = str(tracking["id"])
    date = str(tracking["initial_release_date"])[:10]
    products = _products(doc)
    cves = []
    fixed: dict[str, tuple[int, str]] = {}  # branch (or "toolkit") -> (family rank, version)
    for vuln in doc.get("vulnerabilities", []) or []:
        status = vuln.get("product_status", {}) or {}
        affected = [products[p] for p in status.get("known_affected", []) if p in products]
        fixes = [products[p] for p in status.get("fixed", []) if p in products]
        if component == "driver":
            branches = sorted({b for b in map(_driver_product, affected) if b is not None})
            if not branches:
                continue
            for info in affected + fixes:
                branch = _driver_product(info)
                version = _fixed_driver_version(info[2], info in fixes)
                if branch is None or version is None:
                    continue
                _keep(fixed, str(branch), _DRIVER_FAMILIES.index(info[1]), version)
            cves.append({"id": vuln["cve"], "cvss": _score(vuln), "branches": branches})
        elif component == "cuda-toolkit":
            if not any(_is_cuda(info) for info in affected):
                continue
            first = _lowest(cuda_version(info[2]) for info in fixes if _is_cuda(info))
            if first is not None:
                _keep_newest(fixed, "cuda", first)
            cves.append({"id": vuln["cve"], "cvss": _score(vuln), "fixed": first})
        else:
            cve = _toolkit_cve(vuln, affected, fixes, fixed)
            if cve is not None:
                cves.append(cve)
    if not cves:
        return None
    scores = [c["cvss"] for c in cves if c["cvss"] is not None]
    year = date[:4]
    return {
        "id": bid,
        "component": component,
        "title": str(doc["document"]["title"]),
        "date": date,
        "url": BULLETIN_URL.format(id=bid),
        "csaf": CSAF_URL.format(year=year, id=bid),
        "highest_cvss": max(scores) if scores else None,
        "fixed": {k: v for k, (_, v) in sorted(fixed.items(), key=lambda kv: _branch_key(kv[0]))},
        "cves": sorted(cves, key=lambda c: c["id"]),
        "confidence": "primary",
    }


def _toolkit_cve(
    vuln: dict[str, Any],
    affected: list[tuple[str, str, str]],
    fixes: list[tuple[str, str, str]],
    fixed: dict[str, tuple[int, str]],
) -> dict[str, Any] | None:
    """A container-toolkit bulletin's CVE (None when it affects neither the toolkit nor the GPU
    Operator), recording each one's fixed version in ``fixed``."""
    toolkit = any(info[1] == TOOLKIT for info in affected)
    operator = any(info[1] == OPERATOR for info in affected)
    if not toolkit and not operator:
        return None
    for info in fixes:
        version = _version(info[2])
        if info[1] == TOOLKIT and version and toolkit:
            _keep(fixed, "toolkit", 0, version)
        elif info[1] == OPERATOR and version and operator:
            _keep_newest(fixed, "gpu-operator", version)
    cve: dict[str, Any] = {"id": vuln["cve"], "cvss": _score(vuln)}
    if not toolkit:
        cve["toolkit"] = False  # the GPU Operator's own CVE
    if operator:
        cve["gpu_operator"] = True
    return cve


def _lowest(versions: Any) -> str | None:
    found = [v for v in versions if v is not None]
    return min(found, key=_numbers) if found else None


def _numbers(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


def _keep_newest(fixed: dict[str, tuple[int, str]], key: str, version: str) -> None:
    """The newest of a bulletin's fixed versions (every CVE of it is fixed from there on)."""
    old = fixed.get(key)
    if old is None or _numbers(version) > _numbers(old[1]):
        fixed[key] = (0, version)


def _branch_key(branch: str) -> tuple[int, str]:
    return (int(branch), "") if branch.isdigit() else (0, branch)


def _fixed_driver_version(text: str, is_fix: bool) -> str | None:
    """The first fixed version a product text names: "580.95.05" (a fixed product) or
    "All driver versions prior to 580.95.05" (an affected one)."""
    if is_fix:
        return _version(text) if _VERSION_RE.fullmatch(text.strip()) else None
    if "prior to" in text and "including" not in text:
        return _version(text.split("prior to", 1)[1])
    return None


def _keep(fixed: dict[str, tuple[int, str]], key: str, rank: int, version: str) -> None:
    """Keep the data-center product's fixed version for a branch (Tesla before RTX/GeForce)."""
    old = fixed.get(key)
    if old is None or rank < old[0]:
        fixed[key] = (rank, version)


def trim(doc: dict[str, Any]) -> dict[str, Any]:
    """The parts of a CSAF document :func:`bulletin_row` reads (for recorded test fixtures)."""
    products = _products(doc)
    keep = {
        pid
        for pid, info in products.items()
        if _driver_product(info) is not None or info[1] in (TOOLKIT, OPERATOR) or _is_cuda(info)
    }

    def walk(branches: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for b in branches:
            product = b.get("product")
            if b.get("category") == "product_version":
                if isinstance(product, dict) and product.get("product_id") in keep:
                    out.append({k: b[k] for k in ("category", "name", "product") if k in b})
                continue
            sub = walk(b.get("branches", []) or [])
            if sub:
                out.append({"category": b.get("category"), "name": b.get("name"), "branches": sub})
        return out

    vulns = []
    for v in doc.get("vulnerabilities", []) or []:
        status = {
            k: [p for p in ids if p in keep]
            for k, ids in (v.get("product_status", {}) or {}).items()
            if k in ("known_affected", "fixed")
        }
        if status.get("known_affected"):
            scores = [
                {k: {"baseScore": s[k]["baseScore"]} for k in ("cvss_v3", "cvss_v4") if k in s}
                for s in v.get("scores", []) or []
            ]
            vulns.append({"cve": v.get("cve"), "scores": scores, "product_status": status})
    return {
        "document": {
            "title": doc["document"]["title"],
            "tracking": {k: doc["document"]["tracking"][k] for k in ("id", "initial_release_date")},
        },
        "product_tree": {"branches": walk(doc.get("product_tree", {}).get("branches", []) or [])},
        "vulnerabilities": vulns,
    }


def readable_row(doc: dict[str, Any], source: str) -> dict[str, Any] | None:
    """``bulletin_row(doc)``, or one ConfigError naming ``source`` when the document is damaged
    (a field of another type than CSAF 2.0 gives it: a string for the vulnerabilities, a
    number for a branch): a bulletin is data from outside, never a traceback."""
    try:
        return bulletin_row(doc)
    except (AttributeError, TypeError, KeyError, ValueError, IndexError) as exc:
        raise ConfigError(
            f"{source}: damaged CSAF bulletin ({type(exc).__name__}: {str(exc)[:120]}); "
            "expected a CSAF 2.0 document"
        ) from None


def read_bulletins(root: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Every bulletin document (``<id>.json``, not the per-CVE ``CVE-*.json``) under ``root``."""
    out = []
    for path in sorted(root.rglob("*.json")):
        if not path.stem.isdigit():
            continue
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConfigError(f"{path}: not a readable CSAF JSON document ({exc})") from exc
        if not isinstance(doc, dict) or "document" not in doc:
            raise ConfigError(f"{path}: no 'document' object; expected a CSAF 2.0 bulletin")
        out.append((path, doc))
    return out


HEADER = """\
# NVIDIA security bulletins for what a Linux GPU server runs: GENERATED by
# `gpuhost matrix advisories-sync --from <checkout of github.com/NVIDIA/product-security>`
# from NVIDIA's CSAF 2.0 documents (one per bulletin). Do not edit rows by hand.
# Per bulletin: `fixed` = first fixed version per Linux driver branch (data-center "Tesla"
# product, else RTX/Quadro or GeForce), for the container toolkit and the GPU Operator
# (`gpu-operator`), or the newest fixed CUDA Toolkit (`cuda`); `cves` with their CVSS base
# score and (driver) the branches each affects, (CUDA) its first fixed toolkit on Linux, or
# whether it affects the GPU Operator. vGPU guest/host drivers and Windows-only products are
# left out.
# `error_at_cvss`: a host affected by a CVE at or above it is an error (below: a warning).
"""


def render_advisories(rows: list[dict[str, Any]], threshold: float) -> str:
    out = [HEADER, "schema: 1", f"error_at_cvss: {threshold}", "advisories:"]
    for r in sorted(rows, key=lambda r: (r["date"], r["id"])):
        out.append(f"  - id: {json.dumps(r['id'])}")
        for key in ("component", "title", "date", "url", "csaf"):
            out.append(f"    {key}: {json.dumps(r[key])}")
        out.append(f"    highest_cvss: {json.dumps(r['highest_cvss'])}")
        fixed = ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in r["fixed"].items())
        out.append(f"    fixed: {{{fixed}}}")
        out.append("    cves:")
        for c in r["cves"]:
            items = ", ".join(f"{k}: {json.dumps(v)}" for k, v in c.items())
            out.append(f"      - {{{items}}}")
        out.append(f"    confidence: {r['confidence']}")
    return "\n".join(out) + "\n"
