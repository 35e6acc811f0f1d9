"""GPU models added with a source for their architecture (issue #14): the China-market Hopper,
Ampere and Ada parts and the GTX 16 series, matched from the names nvidia-smi prints. B100 stays
unrecognised: no source read gives its compute capability."""

from __future__ import annotations

import pytest

from gpuhost.matrix import Matrix, check_stack
from gpuhost.matrix.gpus import gpu_info


@pytest.mark.parametrize(
    ("name", "cc", "architecture"),
    [
        ("NVIDIA H800", "9.0", "Hopper"),
        ("NVIDIA H800 PCIe", "9.0", "Hopper"),
        ("NVIDIA H20", "9.0", "Hopper"),
        ("NVIDIA A800-SXM4-80GB", "8.0", "Ampere"),
        ("NVIDIA A800 80GB PCIe", "8.0", "Ampere"),
        ("NVIDIA L20", "8.9", "Ada"),
        ("NVIDIA L2", "8.9", "Ada"),
        ("NVIDIA GeForce GTX 1660 Ti", "7.5", "Turing"),
        ("NVIDIA GeForce GTX 1660 SUPER", "7.5", "Turing"),
        ("NVIDIA GeForce GTX 1660", "7.5", "Turing"),
        ("NVIDIA GeForce GTX 1650", "7.5", "Turing"),
    ],
)
def test_sourced_models_are_recognised(matrix: Matrix, name: str, cc: str, architecture: str):
    info = gpu_info(matrix, name)
    assert info is not None, name
    assert info.compute_capability == cc
    assert architecture.lower() in info.architecture.lower()
    assert info.confidence == "derived" and info.source.startswith("https://")


def test_neighbours_keep_their_own_rows(matrix: Matrix):
    """Exact names: H20 is not H200, L2 is not L20/L4/L40."""
    assert gpu_info(matrix, "NVIDIA H200").model == "NVIDIA H200"  # type: ignore[union-attr]
    assert gpu_info(matrix, "NVIDIA L4").model == "NVIDIA L4"  # type: ignore[union-attr]
    assert gpu_info(matrix, "NVIDIA GeForce GTX 1650 Ti").compute_capability == "7.5"  # type: ignore[union-attr]


def test_unsourced_b100_is_a_warning_naming_the_rules_not_applied(matrix: Matrix):
    found = {f.rule: f for f in check_stack(matrix, gpus=["NVIDIA B100"])}
    assert gpu_info(matrix, "NVIDIA B100") is None
    assert found["gpu.unknown"].severity == "warning"
    assert "were not applied" in found["gpu.unknown"].message


def test_h800_with_a_cuda_11_7_toolkit_is_judged_like_an_h100(matrix: Matrix):
    h800 = {f.rule for f in check_stack(matrix, gpus=["NVIDIA H800"], cuda="11.7")}
    h100 = {f.rule for f in check_stack(matrix, gpus=["NVIDIA H100 PCIe"], cuda="11.7")}
    assert h800 == h100 and "gpu.unknown" not in h800
