"""docs/matrix.md is current; real nvidia-smi names from the captures resolve."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpuhost.matrix import Matrix, gpu_info, render_markdown

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "captures"


def test_docs_matrix_md_is_up_to_date(matrix: Matrix) -> None:
    doc = ROOT / "docs" / "matrix.md"
    assert doc.exists(), "docs/matrix.md is missing: run `gpuhost matrix render`"
    assert doc.read_text(encoding="utf-8") == render_markdown(matrix), (
        "docs/matrix.md is stale: run `gpuhost matrix render`"
    )


@pytest.mark.parametrize(
    ("name", "cc", "arch"),
    [
        ("NVIDIA H100 80GB HBM3", "9.0", "Hopper"),
        ("Tesla V100-SXM2-32GB", "7.0", "Volta"),
        ("NVIDIA A100-SXM4-80GB", "8.0", "Ampere"),
        ("Tesla T4", "7.5", "Turing"),
        ("NVIDIA L4", "8.9", "Ada"),
        ("NVIDIA L40S", "8.9", "Ada"),
        ("NVIDIA A10G", "8.6", "Ampere"),
        ("NVIDIA H200", "9.0", "Hopper"),
        ("NVIDIA B200", "10.0", "Blackwell"),
        ("NVIDIA GeForce RTX 4090", "8.9", "Ada"),
        ("NVIDIA GeForce RTX 5090", "12.0", "Blackwell"),
        ("H100", "9.0", "Hopper"),
        ("a100", "8.0", "Ampere"),
        ("rtx4090", "8.9", "Ada"),
        ("A10", "8.6", "Ampere"),
        ("NVIDIA H200 (MIG enabled)", "9.0", "Hopper"),
    ],
)
def test_names_resolve(matrix: Matrix, name: str, cc: str, arch: str) -> None:
    info = gpu_info(matrix, name)
    assert info is not None
    assert (info.compute_capability, info.architecture) == (cc, arch)


def test_gpu_info_fields(matrix: Matrix) -> None:
    v100 = gpu_info(matrix, "Tesla V100-SXM2-16GB")
    assert v100 is not None
    assert v100.clock_policy == "locked" and v100.kernel_modules == ("proprietary",)
    assert v100.last_driver_branch == 580 and v100.fabric_manager is None
    p100 = gpu_info(matrix, "Tesla P100-PCIE-16GB")
    assert p100 is not None and p100.clock_policy == "application" and p100.fabric_manager is False
    assert gpu_info(matrix, "NVIDIA A1000") is None  # not A100, not A10
    assert gpu_info(matrix, "") is None


# Names nvidia-smi printed in the captures whose compute capability no source gives us.
NOT_IN_SOURCES = {
    "NVIDIA GeForce GTX 680",
    "NVIDIA GeForce RTX 3080",
    "NVIDIA GeForce RTX 4080 SUPER",
    "TITAN Xp",
    "GeForce RTX 2080 Ti",
}


def _fixture_names() -> set[str]:
    names = set()
    for path in FIXTURES.rglob("*"):
        if not path.is_file() or path.suffix not in (".txt", ".csv", ".xml", ""):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        names |= {m.strip() for m in re.findall(r"Product Name\s*:\s*(.+)", text)}
        names |= {m.strip() for m in re.findall(r"^GPU \d+: (.+?) \(UUID", text, re.M)}
    return names


def test_every_captured_name_resolves_unless_no_source_knows_it(matrix: Matrix) -> None:
    names = _fixture_names()
    assert len(names) > 10
    unknown = {n for n in names if gpu_info(matrix, n) is None}
    assert unknown <= NOT_IN_SOURCES, unknown - NOT_IN_SOURCES


def test_compute_capability_agrees_with_captures(matrix: Matrix) -> None:
    index = json.loads((FIXTURES / "INDEX.json").read_text())
    checked = 0
    for entry in index:
        if not str(entry.get("file", "")).endswith(".csv"):
            continue
        lines = (FIXTURES / entry["file"]).read_text().splitlines()
        header = [h.strip() for h in lines[0].split(",")]
        if "compute_cap" not in header:
            continue
        for line in lines[1:]:
            cells = [c.strip() for c in line.split(",")]
            name, cc = cells[header.index("name")], cells[header.index("compute_cap")]
            info = gpu_info(matrix, name)
            assert info is not None and info.compute_capability == cc, (name, cc)
            checked += 1
    assert checked >= 4
