"""``gpuhost data update`` against recorded answers served from 127.0.0.1 (tests/knowledge/
served.py): it adds a bulletin, a CUDA release and a torch release the shipped data lacks, the
commands then judge with them and name the data's date and origin, and a corrupt or invalid
download leaves the data in use as it was, with one line saying so."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuhost import datadir
from gpuhost.audit.host import AuditSettings, audit_host
from gpuhost.cli import main
from gpuhost.errors import PackageIndexError
from gpuhost.facts.build import host_facts_from_text
from gpuhost.knowledge import wheelzip
from gpuhost.knowledge.pypi import DirectoryIndex
from gpuhost.matrix import load_matrix
from tests.matrix.test_sync import _online

from .served import NEW_BULLETIN, NEW_CUDNN, NEW_TORCH, NEW_WHEEL, build, serve, wheel_bytes
from .served import clear_loaded as _clear

CAPTURE = Path(__file__).resolve().parents[1] / "audit" / "data"
TODAY = datetime.date.today().isoformat()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    root = build(tmp_path / "served")
    with serve(root) as base:
        yield root, base


def _update(base: str, folder: Path) -> int:
    return main(
        [
            "data",
            "update",
            "--data-dir",
            str(folder),
            "--index",
            base,
            "--csaf",
            f"{base}/csaf",
            "--cuda-redist",
            f"{base}/redist/",
            "--cudnn-redist",
            f"{base}/cudnn-redist/",
            "--pci-ids",
            # no PCI ID database: the catalog's update is tests/knowledge/test_catalog_update.py
            str(folder.parent / "no-pci.ids"),
        ]
    )


def _torch_known() -> bool:
    return any(w.framework == "torch" and w.version == NEW_TORCH for w in load_matrix().wheels)


def test_update_adds_a_bulletin_a_cuda_release_and_a_torch_release(
    served: tuple[Path, str], data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, base = served
    assert not _torch_known() and load_matrix().cuda_minor("13.9") is None
    assert _update(base, data_dir) == 0
    out = capsys.readouterr().out
    assert f"bulletin {NEW_BULLETIN} (2026-11-20): new" in out
    assert "CUDA 13.9 (13.9.0, 2026-11-20): new, minimum driver 620.999.01" in out
    assert "CUDA 13.8.0:" in out and "names no nvidia_driver version; not added" in out
    assert f"torch {NEW_TORCH}: new" in out
    assert "5861" not in out  # already in the data: not read again
    meta = json.loads((data_dir / "meta.json").read_text(encoding="utf-8"))
    assert meta["date"] == TODAY and sorted(p.name for p in data_dir.iterdir()) == [
        "advisories.yaml",
        "matrix.yaml",
        "meta.json",
        "wheels.yaml",
    ]
    _clear()
    assert _torch_known() and load_matrix().cuda_minor("13.9") is not None
    (row,) = [w for w in load_matrix().wheels if (w.framework, w.version) == ("torch", NEW_TORCH)]
    # read from inside the wheel with byte ranges: the index has no .metadata file for it
    assert row.default is not None and row.default.cudnn and row.no_metadata == ()
    assert NEW_WHEEL in (data_dir / "wheels.yaml").read_text(encoding="utf-8")
    args = ["matrix", "check", "--driver", "580.178.04", "--json"]
    main(args)
    doc = json.loads(capsys.readouterr().out)
    assert doc["data"]["date"] == TODAY and doc["data"]["origin"].startswith("update of")
    assert any(NEW_BULLETIN in f["message"] for f in doc["security"]["advisories"])
    assert main(["data", "status"]) == 0
    assert f"data: {TODAY} (update of {TODAY} in {data_dir}" in capsys.readouterr().out


def test_update_adds_a_cudnn_release_from_its_manifest(
    served: tuple[Path, str], data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cuDNN release newer than the data: a row (derived) for every CUDA minor of the majors
    its manifest names, CUDA 13.9 from the same update included, with the majors' floors and
    the newest earlier cuDNN's compute capabilities; matrix check then knows it."""
    _, base = served
    check = ["matrix", "check", "--gpu", "H100", "--driver", "620.999.01", "--cuda", "13.9",
             "--cudnn", NEW_CUDNN, "--json"]
    main(check)
    before = json.loads(capsys.readouterr().out)
    assert _update(base, data_dir) == 0
    out = capsys.readouterr().out
    assert "cuDNN 9.97.0: " in out and "has no 'cudnn' entry; not added" in out
    assert f"cuDNN {NEW_CUDNN} (2026-11-21): new, for CUDA 12.0, " in out
    assert "13.1, 13.2, 13.3, 13.9" in out and "cuDNN 9.17.0" not in out
    _clear()
    (row,) = [r for r in load_matrix().cudnn if r.version == NEW_CUDNN]
    assert (row.source, row.confidence) == ("cudnn-redist", "derived")
    shipped = [r for r in load_matrix().cudnn if r.version != NEW_CUDNN][-1]  # the newest known
    cuda12, cuda13 = row.packages
    assert cuda12.min_driver == "525.60.13" and cuda13.min_driver == "580.65.06"
    assert cuda13.cuda[-1] == "13.9" and "11.8" not in cuda12.cuda + cuda13.cuda
    assert cuda13.compute_capabilities == shipped.packages[-1].compute_capabilities
    assert f"{NEW_CUDNN}.7 (2026-11-21)" in row.note and f"as cuDNN {shipped.version}" in row.note
    main(check)
    after = json.loads(capsys.readouterr().out)
    unknown = [f["message"] for f in before["findings"] if NEW_CUDNN in f["message"]]
    assert unknown and after["verdict"] == "ok", after
    assert not [f for f in after["findings"] if f["severity"] in ("warning", "error")], after


def test_audit_judges_with_the_update_and_names_the_data(
    served: tuple[Path, str], data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    facts = host_facts_from_text(
        (CAPTURE / "lab-debian12-nvidia-driver-held-no-gpu.probe").read_text(encoding="utf-8")
    )

    def bulletins() -> str:
        report = audit_host("h1", facts, {}, AuditSettings(matrix=load_matrix(), profiles={}))
        return " ".join(f.message for f in report.security_findings if f.rule == "security.driver")

    assert NEW_BULLETIN not in bulletins()  # 535.309.01 as shipped: only "R535 gets no fix"
    assert _update(base := served[1], data_dir) == 0, base
    _clear()
    assert f"bulletin(s) {NEW_BULLETIN} (2026-11-20)" in bulletins()
    capsys.readouterr()
    main(["audit", "--python", sys.executable, "--json", "-"])
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["data"]["date"] == TODAY == report["matrix_date"]
    assert report["data"]["origin"].startswith(f"update of {TODAY}")
    assert f"data: {TODAY} (update of" in captured.err


def test_a_corrupt_download_keeps_the_data_in_use(
    served: tuple[Path, str], data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, base = served
    project = root / "pypi" / "torch" / "json"
    whole = project.read_bytes()
    project.write_bytes(whole[: len(whole) // 2])  # the first update is cut short
    assert _update(base, data_dir) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "gpuhost: error: data update failed, keeping the data of 2026-11-23 (shipped with gpuhost)"
    ), err
    assert "not JSON" in err[0] and not (data_dir / "meta.json").exists()
    project.write_bytes(whole)
    assert _update(base, data_dir) == 0
    before = {p.name: p.read_bytes() for p in data_dir.iterdir()}
    (root / "redist" / "redistrib_13.9.1.json").write_text('{"release_label": "13.9', "utf-8")
    assert _update(base, data_dir) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"gpuhost: error: data update failed, keeping the data of {TODAY}")
    assert {p.name: p.read_bytes() for p in data_dir.iterdir()} == before


def test_facts_the_loader_refuses_are_never_installed(
    served: tuple[Path, str], data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, base = served
    manifest = root / "redist" / "redistrib_13.9.0.json"
    doc = json.loads(manifest.read_text(encoding="utf-8"))
    doc["nvidia_driver"]["version"] = "620.x"
    manifest.write_text(json.dumps(doc), encoding="utf-8")
    assert _update(base, data_dir) != 0
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "keeping the data of 2026-11-23" in line and "620.x" in line
    assert not (data_dir / "meta.json").exists()
    assert [p.name for p in data_dir.iterdir()] == []  # the work folder is gone too


@pytest.mark.parametrize(
    ("name", "text", "named"),
    [
        ("matrix.yaml", "not: [the matrix", "not valid YAML"),
        ("advisories.yaml", "error_at_cvss: high\nadvisories: [1, 2]\n", "error_at_cvss"),
    ],
)
def test_a_damaged_overlay_in_use_is_one_line(
    served: tuple[Path, str],
    data_dir: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    text: str,
    named: str,
) -> None:
    """The update builds on the data in use: an overlay damaged since it was written (edited by
    hand, a disk fault) is refused with one line naming the file, nothing changed (before: a
    YAMLError / ValueError traceback)."""
    _, base = served
    data_dir.mkdir()
    (data_dir / "meta.json").write_text(json.dumps({"date": TODAY}), encoding="utf-8")
    (data_dir / name).write_text(text, encoding="utf-8")
    before = {p.name: p.read_bytes() for p in data_dir.iterdir()}
    assert _update(base, data_dir) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"gpuhost: error: data update failed, keeping the data of {TODAY}")
    assert str(data_dir / name) in line and named in line
    assert {p.name: p.read_bytes() for p in data_dir.iterdir()} == before


def test_an_overlay_older_than_the_shipped_data_is_not_used(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir.mkdir()
    (data_dir / "meta.json").write_text('{"date": "2020-01-01"}', encoding="utf-8")
    (data_dir / "matrix.yaml").write_text("not: [the matrix", encoding="utf-8")
    assert datadir.data_path("matrix.yaml") == datadir.shipped_path("matrix.yaml")
    assert datadir.data_info() == {"date": "2026-11-23", "origin": "shipped with gpuhost"}


@pytest.mark.parametrize("date", ["2099-13-45", "2099-02-30", "2099-01-01\n", 20990101])
def test_an_overlay_whose_date_is_not_a_date_is_not_used(data_dir: Path, date: object) -> None:
    """meta.json's date decides whether the overlay is newer than the shipped data: one that is
    no calendar date (compared as text, 2099-13-45 beat every release) leaves the shipped data in
    use."""
    data_dir.mkdir()
    (data_dir / "meta.json").write_text(json.dumps({"date": date}), encoding="utf-8")
    (data_dir / "matrix.yaml").write_text("not: [the matrix", encoding="utf-8")
    assert datadir.data_path("matrix.yaml") == datadir.shipped_path("matrix.yaml")
    assert datadir.data_info() == {"date": "2026-11-23", "origin": "shipped with gpuhost"}


def test_old_data_is_warned_of_once(
    monkeypatch: pytest.MonkeyPatch, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(datadir.MAX_AGE_ENV, "0")
    main(["matrix", "check", "--driver", "580.178.04"])
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x]
    assert line.startswith("warning: gpuhost's data is ") and "gpuhost data update" in line
    assert datadir.staleness(datetime.date(2026, 11, 24), 30) is None
    # profile verify judges with the same data: the same one line
    main(["matrix", "profile", "verify", "debian12-nonfree-535-security"])
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x]
    assert line.startswith("warning: gpuhost's data is ")


def test_metadata_read_out_of_a_wheel() -> None:
    data = wheel_bytes("Metadata-Version: 2.1\nName: torch\nVersion: 9.9.9\n")
    reads: list[tuple[int, int]] = []

    def read(start: int, length: int) -> bytes:
        reads.append((start, length))
        return data[start : start + length]

    assert "Version: 9.9.9" in wheelzip.read_metadata(read, len(data))
    assert len(reads) == 3 and sum(n for _, n in reads) < len(data)  # tail, header, member
    with pytest.raises(ValueError, match="end-of-central-directory"):
        wheelzip.read_metadata(lambda s, n: b"\0" * n, 4096)


def test_a_recorded_folder_listing_sits_beside_its_files(tmp_path: Path) -> None:
    listing = tmp_path / "nvidia.example" / "redist" / "index.html"
    listing.parent.mkdir(parents=True)
    listing.write_text('<a href="redistrib_13.9.0.json">', encoding="utf-8")
    (listing.parent / "redistrib_13.9.0.json").write_text("{}", encoding="utf-8")
    index = DirectoryIndex(tmp_path)
    assert index.text("https://nvidia.example/redist/") == '<a href="redistrib_13.9.0.json">'
    assert index.text("https://nvidia.example/redist/redistrib_13.9.0.json") == "{}"


def test_recorded_wheel_in_a_directory_index(tmp_path: Path) -> None:
    url = "https://files.example/w/" + NEW_WHEEL
    target = tmp_path / "files.example" / "w" / NEW_WHEEL
    target.parent.mkdir(parents=True)
    target.write_bytes(wheel_bytes("Name: torch\nVersion: 9.9.9\n"))
    index = DirectoryIndex(tmp_path)
    assert "9.9.9" in (index.wheel_metadata(url) or "")
    assert index.wheel_metadata(url + "x") is None
    target.write_bytes(b"PK not a zip")
    with pytest.raises(PackageIndexError, match="not a readable wheel"):
        index.wheel_metadata(url)


@pytest.mark.network
def test_live_index_tensorflow_metadata_by_byte_ranges() -> None:
    if os.environ.get("GPUHOST_TEST_NETWORK") != "1":
        pytest.skip("asks the live pypi.org: opt in with GPUHOST_TEST_NETWORK=1")
    if not _online():
        pytest.skip("pypi.org:443 cannot be reached from this machine (offline)")
    # a fresh interpreter: pyinfra's gevent may have patched ssl in this one
    code = (
        "from gpuhost.knowledge.pypi import HttpIndex\n"
        "from gpuhost.knowledge.sync import sync\n"
        "r = sync(HttpIndex(), {'tensorflow': '2.21.0'})\n"
        "print(r.data['tensorflow'][0].get('x86_64'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "cudnn" in out.stdout, out.stdout  # the and-cuda pins, from inside the wheel
