"""`matrix check --framework tensorflow==X` on releases and GPUs no other test names (issue #14,
tried as a user): TF 2.16-2.20 answer what they are built with, a GPU the wheel's CUDA cannot
serve is an error (PTX only JITs forward), and a fitting stack says so instead of staying silent.
Answers come from the shipped matrix.yaml and wheels.yaml (PyPI's recorded metadata)."""

from __future__ import annotations

import pytest

from gpuhost.cli import main
from gpuhost.matrix import Matrix, check_stack
from tests.matrix.answers import AS_OF
from tests.matrix.answers import rules as _rules


@pytest.mark.parametrize(
    ("version", "cuda", "cudnn"),
    [
        ("2.16.1", "12.3", "8.9"),  # tested configuration (tensorflow.org)
        ("2.17.0", "12.3", "8.9"),
        ("2.19.0", "12.5", "9.3.0.75"),  # and-cuda pins on PyPI
        ("2.20.0", "12.5", "9.3.0.75"),
    ],
)
def test_fitting_tensorflow_says_what_it_is_built_with(
    matrix: Matrix, version: str, cuda: str, cudnn: str
) -> None:
    found = _rules(
        matrix, gpus=["NVIDIA A10"], driver="580.159.03", frameworks=[f"tensorflow=={version}"]
    )
    severity, message = found["framework.ok"]
    assert severity == "info"
    assert f"CUDA {cuda}, cuDNN {cudnn}" in message
    assert f"pip install 'tensorflow[and-cuda]=={version}'" in message


@pytest.mark.parametrize("gpu", ["Tesla K80", "NVIDIA Tesla K40"])
def test_kepler_cannot_run_a_cuda_12_tensorflow(matrix: Matrix, gpu: str) -> None:
    """CUDA 12 has no Kepler code and no driver serves both: an error, not 'maybe via PTX'."""
    found = _rules(matrix, gpus=[gpu], frameworks=["tensorflow==2.20.0"])
    severity, message = found["framework.arch"]
    assert severity == "error"
    assert "CUDA 12.5, which does not support" in message and "to 11.x" in message
    assert "framework.ok" not in found and "framework.arch-unknown" not in found


def test_driver_below_the_floor_is_an_error_and_no_ok(matrix: Matrix) -> None:
    found = _rules(
        matrix, gpus=["NVIDIA A10"], driver="520.61.05", frameworks=["tensorflow==2.20.0"]
    )
    assert found["framework.cuda-driver"][0] == "error"
    assert "framework.ok" not in found


def test_untested_cuda_warns_without_claiming_a_fit(matrix: Matrix) -> None:
    found = _rules(matrix, gpus=["T4"], cuda="12.4", frameworks=["tensorflow==2.18.0"])
    assert found["tensorflow.untested-cuda"][0] == "warning"
    assert "framework.ok" not in found


def test_cli_prints_the_fit(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", "check", "--framework", "tensorflow==2.20.0", "--gpu", "L40S"]) == 0
    out = capsys.readouterr().out
    assert "framework.ok: TensorFlow 2.20.0" in out and "verdict: ok" in out


def test_torch_on_pypi_without_metadata_says_why_it_is_not_checked(matrix: Matrix) -> None:
    """torch 2.15.0 is on PyPI (data/wheels.yaml: no core metadata published for its wheels)
    and has no matrix row: the answer says that, not merely 'not in the matrix'."""
    severity, message = _rules(matrix, gpus=["H100"], frameworks=["torch==2.15.0"])[
        "framework.unknown"
    ]
    assert severity == "warning"
    assert "torch 2.15.0 is on PyPI (released 2026-10-28)" in message
    assert "publishes no core metadata" in message and "torch.version.cuda" in message
    _, other = _rules(matrix, frameworks=["torch==2.99.0"])["framework.unknown"]
    assert "is not in the matrix" in other and "PyPI" not in other


def test_pypi_answered_tensorflow_cites_tensorflows_own_index_page(matrix: Matrix) -> None:
    """It cited https://pypi.org/pypi/torch/json for TensorFlow's and-cuda pins."""
    found = check_stack(matrix, frameworks=["tensorflow==2.20.0"], as_of=AS_OF)
    ok = next(f for f in found if f.rule == "framework.ok")
    assert ok.source == "https://pypi.org/pypi/tensorflow/json"
    tested = check_stack(matrix, frameworks=["tensorflow==2.16.1"], as_of=AS_OF)
    assert next(f for f in tested if f.rule == "framework.ok").source.startswith(
        "https://www.tensorflow.org/"
    )
