"""``gpuhost data update`` regenerates the GPU catalog from a newer PCI ID database (a file, or
the published one through a URL: here a loopback server), and keeps the catalog in use, with one
line, when the database is damaged, older or absent."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhost import datadir
from gpuhost.cli import main
from gpuhost.gpus.catalog import identify, load_catalog

from .served import clear_loaded as _clear
from .test_data_update import served

__all__ = ["served"]  # the fixture, shared with the other update tests (data_dir: conftest.py)

NEW_ID = "2f00"
# A pci.ids in the database's own format: a newer edition naming a GH100 device the shipped
# catalog does not have (the chip's compute capability comes from the H100 SXM5 line, which
# NVIDIA's table's "NVIDIA H100" names).
NEWER = """\
#
#\tList of PCI ID's
#
#\tVersion: 2099.01.01
#\tDate:    2099-01-01 00:00:00
#
10de  NVIDIA Corporation
\t2330  GH100 [H100 SXM5 80GB]
\t\t10de 16c1  H100 SXM5 80GB
\t2f00  GH100 [H100 Next 96GB]
\t2f01  GH100 High Definition Audio Controller
10df  Emulex Corporation
\t0720  OneConnect NIC
"""


def _update(base: str, folder: Path, pci_ids: str) -> int:
    return main(
        [
            "data", "update", "--data-dir", str(folder), "--index", base,
            "--csaf", f"{base}/csaf", "--cuda-redist", f"{base}/redist/",
            "--cudnn-redist", f"{base}/cudnn-redist/", "--pci-ids", pci_ids,
        ]
    )  # fmt: skip


def test_a_newer_database_makes_a_new_gpu_known(
    served: tuple[Path, str], data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, base = served
    assert identify(f"10de:{NEW_ID}").compute_capability is None
    path = tmp_path / "pci.ids"
    path.write_text(NEWER, encoding="utf-8")
    assert _update(base, data_dir, str(path)) == 0
    out = capsys.readouterr().out
    assert f"GPU catalog: regenerated from PCI IDs 2099.01.01 ({path})" in out
    assert (data_dir / "gpu_catalog.yaml").is_file()
    _clear()
    sku = identify(f"0x{NEW_ID}10DE")
    assert (sku.name, sku.compute_capability, sku.chip) == ("H100 Next 96GB", "9.0", "GH100")
    assert main(["matrix", "show", "--gpu", f"10de:{NEW_ID}"]) == 0
    assert "compute capability  9.0 (Hopper" in capsys.readouterr().out
    assert main(["data", "status"]) == 0
    assert f"gpu_catalog.yaml: {data_dir / 'gpu_catalog.yaml'}" in capsys.readouterr().out


def test_the_published_database_is_read_through_a_url(
    served: tuple[Path, str], data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, base = served
    (root / "pci.ids").write_text(NEWER, encoding="utf-8")
    assert _update(base, data_dir, f"{base}/pci.ids") == 0
    assert f"GPU catalog: regenerated from PCI IDs 2099.01.01 ({base}/pci.ids)" in (
        capsys.readouterr().out
    )


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            NEWER.replace("\t2f00  GH100", "\t2f0  GH100"),
            "line 10 in NVIDIA's block is not a device",
        ),
        (NEWER.replace("2099.01.01", "2023.04.10"), "is version 2023.04.10, not newer"),
        ("<html>503 Service Unavailable</html>\n", "no NVIDIA (vendor 10de) devices found"),
    ],
    ids=["damaged", "older", "not-a-database"],
)
def test_a_damaged_or_older_database_keeps_the_catalog_with_one_line(
    served: tuple[Path, str],
    data_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    text: str,
    said: str,
) -> None:
    _, base = served
    version = load_catalog().version
    path = tmp_path / "pci.ids"
    path.write_text(text, encoding="utf-8")
    assert _update(base, data_dir, str(path)) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "GPU catalog" in line]
    assert len(lines) == 1 and said in lines[0], lines
    assert lines[0].endswith(f"the GPU catalog of PCI IDs {version} "
                             f"({datadir.shipped_path('gpu_catalog.yaml')}) is kept")  # fmt: skip
    assert not (data_dir / "gpu_catalog.yaml").exists()
    _clear()
    assert load_catalog().version == version
    assert identify(f"10de:{NEW_ID}").compute_capability is None
