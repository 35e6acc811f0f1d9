"""`matrix check --framework torch==X[+cuXYZ]` on releases, variants and GPUs no other test names
(issue #14, tried as a user), answered from the shipped matrix.yaml and wheels.yaml."""

from __future__ import annotations

import pytest

from gpuhost.matrix import Matrix
from tests.matrix.answers import rules as _rules


@pytest.mark.parametrize(
    ("spec", "gpu", "says"),
    [
        ("torch==2.7.0+cu128", "RTX 5090", "the cu128 wheel (CUDA 12.8, cuDNN 9.7.1.26)"),
        ("torch==2.7.0+cu118", "NVIDIA A10", "the cu118 wheel (CUDA 11.8"),
        ("torch==2.9.0+cu126", "GTX 1080 Ti", "the cu126 wheel (CUDA 12.6"),
    ],
)
def test_an_explicit_variant_that_fits_says_so(
    matrix: Matrix, spec: str, gpu: str, says: str
) -> None:
    """Before, a fitting +cuXYZ printed only 'verdict: ok'; a plain torch==X said what fits."""
    severity, message = _rules(matrix, gpus=[gpu], frameworks=[spec])["framework.ok"]
    assert severity == "info" and says in message
    version, _, tag = spec.partition("==")[2].partition("+")
    assert f"pip install torch=={version} --index-url" in message and message.endswith(tag)


def test_wheel_built_with_a_cuda_that_lacks_the_gpu_names_the_gpu_once(matrix: Matrix) -> None:
    severity, message = _rules(matrix, gpus=["RTX 5090"], frameworks=["torch==2.6.0"])[
        "framework.arch"
    ]
    assert severity == "error"
    assert "built with CUDA 12.4, which does not support RTX 5090 (Blackwell, cc 12.0); fix:" in (
        message
    )
    assert "support it" not in message


def test_suggested_wheel_also_has_cudnn_for_the_gpu(matrix: Matrix) -> None:
    """K80: the cu118 wheels of torch 2.7 list cc 3.7 but bundle cuDNN 9.1.0.70, which has no
    Kepler code; suggesting them only moved the error to framework.cudnn-arch."""
    found = _rules(matrix, gpus=["Tesla K80"], frameworks=["torch==2.4.0+cu118"])
    severity, message = found["framework.cudnn-arch"]
    assert severity == "error"
    assert "use torch 2.7 cu118" not in message
    fix = message.split("fix: ", 1)[1]
    if fix.startswith("use torch "):
        release, tag = fix.split()[2:4]
        again = _rules(matrix, gpus=["Tesla K80"], frameworks=[f"torch=={release}.0+{tag}"])
        assert "framework.arch" not in again and "framework.cudnn-arch" not in again
