"""Recorded (and test-made) answers of NVIDIA's and PyPI's sources, served from 127.0.0.1 by an
HTTP server that answers byte ranges (``Range: bytes=A-B`` / ``bytes=-N``) as PyPI's file host
does, so the update reads them exactly as it reads the real ones.

The tree (``build``): PyPI's recorded answers (tests/fixtures/pypi) plus, made here and marked
as test data, a torch release ``2.15.1`` whose wheel has no PEP 658 file (its METADATA is read
with byte ranges), a CSAF bulletin ``9999``, CUDA redistrib manifests ``13.8.0`` (no driver)
and ``13.9.0`` and cuDNN redistrib manifests ``9.97.0`` (no 'cudnn' entry) and ``9.98.0``. These
versions are not NVIDIA's or PyTorch's: they only stand for "a release the shipped data
lacks".
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import re
import shutil
import threading
import zipfile
from collections.abc import Callable, Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from socketserver import BaseRequestHandler

RECORDED_PYPI = Path(__file__).resolve().parents[1] / "fixtures" / "pypi" / "pypi.org"
TEMPLATE_METADATA = next(RECORDED_PYPI.rglob("torch-2.14.0-cp312-*x86_64.whl.metadata"))
NEW_TORCH = "2.15.1"
NEW_WHEEL = f"torch-{NEW_TORCH}-cp312-cp312-manylinux_2_28_x86_64.whl"
NEW_BULLETIN = "9999"
NEW_CUDA = "13.9.0"
NEW_CUDNN = "9.98.0"
_RANGE_RE = re.compile(r"^bytes=(\d*)-(\d*)$")


class RangeHandler(SimpleHTTPRequestHandler):
    """Static files with single byte ranges (206 + Content-Range), quiet."""

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        return

    def do_GET(self) -> None:  # noqa: N802
        m = _RANGE_RE.match(self.headers.get("Range", ""))
        path = Path(self.translate_path(self.path))
        if m is None or not path.is_file():
            super().do_GET()
            return
        data = path.read_bytes()
        first, last = m.groups()
        if first == "":
            start, end = max(0, len(data) - int(last)), len(data) - 1
        else:
            start, end = int(first), min(len(data) - 1, int(last) if last else len(data) - 1)
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        self.wfile.write(data[start : end + 1])


def clear_loaded() -> None:
    """Forget the data this process loaded (every gpuhost command is its own process)."""
    from gpuhost.gpus.catalog import load_catalog
    from gpuhost.matrix import advisories, load

    load._load_default.cache_clear()
    advisories._default.cache_clear()
    load_catalog.cache_clear()


@contextlib.contextmanager
def serve(root: Path) -> Iterator[str]:
    """``http://127.0.0.1:PORT`` serving ``root`` until the block ends."""
    with serve_handler(functools.partial(RangeHandler, directory=str(root))) as base:
        yield base


@contextlib.contextmanager
def serve_handler(handler: Callable[..., BaseRequestHandler]) -> Iterator[str]:
    """``http://127.0.0.1:PORT`` answered by ``handler`` until the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def wheel_bytes(metadata: str) -> bytes:
    """A wheel-shaped zip: a large module first (so METADATA is far from the end), then the
    dist-info."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(zipfile.ZipInfo("torch/_big.bin"), bytes(range(256)) * 1200)
        zf.writestr(f"torch-{NEW_TORCH}.dist-info/METADATA", metadata)
        zf.writestr(f"torch-{NEW_TORCH}.dist-info/WHEEL", "Wheel-Version: 1.0\n")
    return out.getvalue()


def _csaf(fixed: dict[str, str]) -> dict[str, object]:
    arches, affected, fixes = [], [], []
    for branch, version in fixed.items():
        pa, pf = f"r{branch}_before", f"r{branch}_fixed"
        affected.append(pa)
        fixes.append(pf)
        arches.append(
            {
                "category": "architecture",
                "name": f"Linux(R{branch})",
                "branches": [
                    {
                        "category": "product_version",
                        "name": "Tesla",
                        "product": {
                            "name": f"All driver versions prior to {version}",
                            "product_id": pa,
                        },
                    },
                    {
                        "category": "product_version",
                        "name": "Tesla",
                        "product": {"name": version, "product_id": pf},
                    },
                ],
            }
        )
    return {
        "document": {
            "title": "Security Bulletin: NVIDIA GPU Display Driver - recorded test bulletin",
            "tracking": {"id": NEW_BULLETIN, "initial_release_date": "2026-11-20T00:00:00Z"},
        },
        "product_tree": {"branches": [{"branches": arches}]},
        "vulnerabilities": [
            {
                "cve": "CVE-2099-0001",
                "scores": [{"cvss_v3": {"baseScore": 8.2}}],
                "product_status": {"known_affected": affected, "fixed": fixes},
            },
        ],
    }


def build(root: Path) -> Path:
    """The served tree under ``root``."""
    shutil.copytree(RECORDED_PYPI, root, dirs_exist_ok=True)
    project = root / "pypi" / "torch" / "json"
    doc = json.loads(project.read_text(encoding="utf-8"))
    doc["releases"][NEW_TORCH] = [
        {
            "filename": NEW_WHEEL,
            "url": f"../../wheels/{NEW_WHEEL}",
            "requires_python": ">=3.10",
            "upload_time_iso_8601": "2026-11-20T10:00:00.000000Z",
            "yanked": False,
        }
    ]
    project.write_text(json.dumps(doc), encoding="utf-8")
    metadata = TEMPLATE_METADATA.read_text(encoding="utf-8").replace(
        "Version: 2.14.0", f"Version: {NEW_TORCH}"
    )
    (root / "wheels").mkdir()
    (root / "wheels" / NEW_WHEEL).write_bytes(wheel_bytes(metadata))
    year = root / "csaf" / "2026"
    (year / NEW_BULLETIN).mkdir(parents=True)
    (year / "README.md").write_text(
        "| Bulletin ID | Title | Initial Publication Date | Updated Publication Date | CVEs |\n"
        "|---|---|---|---|---|\n"
        f"| [{NEW_BULLETIN}]({NEW_BULLETIN}/{NEW_BULLETIN}.md) | Security Bulletin: NVIDIA GPU "
        "Display Driver - recorded test bulletin | 2026-11-20 | 2026-11-20 | CVE-2099-0001 |\n"
        "| [5861](5861/5861.md) | Security Bulletin: GPU Display Driver - September 2026 | "
        "2026-09-30 | 2026-09-30 | (already in the data) |\n"
        "| [5865](5865/5865.md) | Security Bulletin: NVIDIA Triton Inference Server - August 2026"
        " | 2026-08-18 | 2026-08-18 | (not a driver) |\n",
        encoding="utf-8",
    )
    bulletin = _csaf({"535": "535.999.01", "580": "580.999.01"})
    (year / NEW_BULLETIN / f"{NEW_BULLETIN}.json").write_text(
        json.dumps(bulletin), encoding="utf-8"
    )
    redist = root / "redist"
    redist.mkdir()
    (redist / "redistrib_13.3.0.json").write_text('{"release_label": "13.3.0"}', encoding="utf-8")
    (redist / "redistrib_13.8.0.json").write_text(
        json.dumps({"release_date": "2026-10-01", "release_label": "13.8.0"}), encoding="utf-8"
    )
    (redist / f"redistrib_{NEW_CUDA}.json").write_text(
        json.dumps(
            {
                "release_date": "2026-11-20",
                "release_label": NEW_CUDA,
                "release_product": "cuda",
                "nvidia_driver": {"name": "NVIDIA Linux Driver", "version": "620.999.01"},
            }
        ),
        encoding="utf-8",
    )
    _cudnn_manifests(root / "cudnn-redist")
    return root


def _cudnn_manifests(folder: Path) -> None:
    """cuDNN manifests in the shape of NVIDIA's (test-made: 9.97.0 without a 'cudnn' entry,
    9.98.0 for CUDA 12 and 13; not NVIDIA's releases), and the shipped data's 9.17.0 (known:
    not read)."""
    folder.mkdir()
    (folder / "redistrib_9.17.0.json").write_text('{"release_label": "9.17.0"}', "utf-8")
    (folder / "redistrib_9.97.0.json").write_text(
        json.dumps({"release_date": "2026-11-01", "release_label": "9.97.0"}), "utf-8"
    )
    archive = {"relative_path": "cudnn/linux-x86_64/x.tar.xz", "sha256": "00", "size": "1"}
    (folder / f"redistrib_{NEW_CUDNN}.json").write_text(
        json.dumps(
            {
                "release_date": "2026-11-21",
                "release_label": NEW_CUDNN,
                "release_product": "cudnn",
                "cudnn": {
                    "name": "NVIDIA CUDA Deep Neural Network library",
                    "version": f"{NEW_CUDNN}.7",
                    "cuda_variant": ["12", "13"],
                    "linux-x86_64": {"cuda12": archive, "cuda13": archive},
                },
            }
        ),
        "utf-8",
    )
