"""GPU names as users type them and nvidia-smi prints them (full and table-truncated), the
models the issue found unrecognised, and the warning an unknown GPU gives."""

from __future__ import annotations

import pytest

from gpuhost.matrix import Matrix, check_stack, gpu_info


@pytest.mark.parametrize(
    ("name", "cc"),
    [
        ("NVIDIA GeForce RTX 3080 Ti", "8.6"),
        ("NVIDIA GeForce RTX 3060", "8.6"),
        ("NVIDIA GeForce RTX 2080 Ti", "7.5"),
        ("NVIDIA TITAN RTX", "7.5"),
        ("Quadro RTX 6000", "7.5"),
        ("NVIDIA T1000", "7.5"),
        ("NVIDIA GeForce GTX 1650 Ti", "7.5"),
        ("NVIDIA TITAN Xp", "6.1"),
        ("Quadro P4000", "6.1"),
        ("NVIDIA GeForce GTX TITAN X", "5.2"),
        ("Jetson AGX Orin", "8.7"),
        ("Jetson AGX Xavier", "7.2"),
        ("NVIDIA H100 80GB HBM3", "9.0"),
    ],
)
def test_names_nvidia_smi_prints(matrix: Matrix, name: str, cc: str) -> None:
    info = gpu_info(matrix, name)
    assert info is not None and info.compute_capability == cc


@pytest.mark.parametrize(
    ("name", "cc"),
    [
        ("NVIDIA A100-SXM...", "8.0"),
        ("NVIDIA GeForce RTX 30...", "8.6"),
        ("Tesla V100-SXM2...", "7.0"),
    ],
)
def test_truncated_table_names_match_when_unambiguous(matrix: Matrix, name: str, cc: str) -> None:
    info = gpu_info(matrix, name)
    assert info is not None and info.compute_capability == cc


def test_truncated_name_of_several_architectures_is_unknown(matrix: Matrix) -> None:
    assert gpu_info(matrix, "NVIDIA GeForce ...") is None  # RTX 50 / 40 / 30 / GTX 10 ...
    assert gpu_info(matrix, "NVIDIA GeForce RTX 30") is None  # not truncated: no prefix match


def test_unknown_gpu_warning_names_the_rules_not_applied(matrix: Matrix) -> None:
    (f,) = [x for x in check_stack(matrix, gpus=["NVIDIA Foo 9000"]) if x.rule == "gpu_unknown"]
    assert f.severity == "warning" and "driver_arch_unsupported" in f.message
    assert "cudnn_arch" in f.message and "framework_arch" in f.message
