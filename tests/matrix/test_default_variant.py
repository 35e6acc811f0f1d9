"""torch==X means PyPI's default wheel (data/wheels.yaml, from the wheels' own metadata);
other variants come with the command that installs them; TensorFlow's and-cuda pins;
`matrix show --framework`."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from gpuhost.cli import main
from gpuhost.matrix import Finding, Matrix, check_stack, resolve_stack, verdict
from gpuhost.matrix.frameworks import framework_answer

AS_OF = dt.date(2026, 11, 22)


def _rules(findings: list[Finding]) -> dict[str, str]:
    return {f.rule: f.message for f in findings}


def test_torch_211_on_r575_is_an_error_and_names_the_cu128_command(matrix: Matrix) -> None:
    """The issue's case: pip's torch 2.11.0 is a CUDA 13 wheel, which R575 cannot run."""
    found = check_stack(matrix, driver="575.57.08", frameworks=["torch==2.11.0"], as_of=AS_OF)
    rules = _rules(found)
    assert verdict(found) == "error"
    assert (
        "cu130" in rules["framework.cuda-driver"] and "580.65.06" in rules["framework.cuda-driver"]
    )
    assert rules["framework.other-variant"].endswith(
        "pip install torch==2.11.0 --index-url https://download.pytorch.org/whl/cu128"
    )


@pytest.mark.parametrize("version", ["2.1.0", "2.2.2", "2.3.1"])
def test_torch_21_to_23_judged_as_the_cuda_121_wheel(matrix: Matrix, version: str) -> None:
    found = check_stack(matrix, driver="535.54.03", frameworks=[f"torch=={version}"], as_of=AS_OF)
    ok = _rules(found)["framework.ok"]
    assert "cu121: CUDA 12.1, cuDNN 8.9.2.26" in ok and ok.endswith(f"pip install torch=={version}")


def test_local_tag_still_judges_that_variant(matrix: Matrix) -> None:
    found = check_stack(matrix, driver="520.61.05", frameworks=["torch==2.3.0+cu118"], as_of=AS_OF)
    assert verdict(found) != "error"


def test_release_without_published_metadata_says_so(matrix: Matrix) -> None:
    found = check_stack(matrix, driver="580.65.06", frameworks=["torch==2.14.1"], as_of=AS_OF)
    assert "no core metadata" in _rules(found)["framework.default-unknown"]


def test_resolve_v100_torch_211_is_not_pips_cuda13_wheel(matrix: Matrix) -> None:
    res = resolve_stack(matrix, gpus=["V100"], frameworks=["torch==2.11.0"], as_of=AS_OF)
    assert res.frameworks["torch"] != "2.11.0+cu130"  # CUDA 13 dropped Volta
    assert "--index-url https://download.pytorch.org/whl/cu12" in res.install["torch"]


def test_tensorflow_215_with_cudnn_9_is_an_error(matrix: Matrix) -> None:
    found = check_stack(
        matrix, cuda="12.2", cudnn="9.1.0", frameworks=["tensorflow==2.15.0"], as_of=AS_OF
    )
    assert verdict(found) == "error"
    assert "libcudnn.so.8" in _rules(found)["framework.cudnn-major"]


def test_tensorflow_cuda_major_mismatch_is_an_error(matrix: Matrix) -> None:
    found = check_stack(matrix, cuda="11.8", frameworks=["tensorflow==2.19.0"], as_of=AS_OF)
    assert "CUDA 12" in _rules(found)["framework.cuda-major"]


def test_tensorflow_220_range_accepts_newer_cudnn_9(matrix: Matrix) -> None:
    found = check_stack(
        matrix, cuda="12.5", cudnn="9.5.1", frameworks=["tensorflow==2.20.0"], as_of=AS_OF
    )
    assert "tensorflow.untested-cudnn" not in _rules(found)


def test_show_torch_251_has_the_issue_shape(matrix: Matrix) -> None:
    answer = framework_answer(matrix, "torch==2.5.1")
    assert answer["framework"] == "torch" and answer["version"] == "2.5.1"
    d = answer["default_variant"]
    assert (d["variant"], d["cuda"], d["cudnn"]) == ("cu124", "12.4", "9.1.0.70")
    assert {v["variant"] for v in answer["variants"]} == {"cu118", "cu121"}
    assert all(
        "--index-url https://download.pytorch.org/whl/" in v["install"] for v in answer["variants"]
    )
    assert "https://pypi.org/pypi/torch/json" in answer["sources"]


def test_show_answers_every_synced_release(matrix: Matrix) -> None:
    for wheel in matrix.wheels:
        answer = framework_answer(matrix, f"{wheel.framework}=={wheel.version}")
        assert answer["version"] == wheel.version
        assert answer["default_variant"] is not None or answer["default_variant_unknown"]
    tf = framework_answer(matrix, "tensorflow==2.19.0")["default_variant"]
    assert (tf["variant"], tf["cuda"], tf["cudnn"]) == ("and-cuda", "12.5", "9.3.0.75")


def test_cli_show_framework_json_and_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", "show", "--framework", "torch==2.5.1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["default_variant"]["variant"] == "cu124"
    assert main(["matrix", "show", "--framework", "torch==1.0.0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "torch 1.0.0" in err


def test_bundled_cudnn_checked_against_the_gpu() -> None:
    """A wheel whose bundled cuDNN has no package built for the GPU is an error. Test data: the
    shipped matrix with a 9.17.1 row shaped like its 9.17.0 one (no Maxwell/Pascal/Volta), which
    torch 2.11's cu128 wheel bundles as 9.17.1.4, and torch 2.11 without its arch lists."""
    from gpuhost.datafiles import load_yaml
    from gpuhost.matrix import build_matrix, default_matrix_path

    data = load_yaml(Path(default_matrix_path()).read_text(encoding="utf-8"))
    at = next(i for i, r in enumerate(data["cudnn"]) if r["version"] == "9.17.0")
    data["cudnn"].insert(at + 1, dict(data["cudnn"][at], version="9.17.1"))  # sorted after 9.17.0
    torch211 = next(r for r in data["pytorch"] if r["version"] == "2.11")
    for var in torch211["variants"]:  # arch lists dropped: only the cuDNN rule can speak
        for key in ("archs", "archs_source", "archs_confidence"):
            var.pop(key, None)
    m = build_matrix(data)
    found = check_stack(m, gpus=["V100"], frameworks=["torch==2.11.0+cu128"], as_of=AS_OF)
    assert "cuDNN 9.17.1.4" in _rules(found)["framework.cudnn-arch"]
    found = check_stack(m, gpus=["H100"], frameworks=["torch==2.11.0+cu128"], as_of=AS_OF)
    assert "framework.cudnn-arch" not in _rules(found)


def test_volta_in_cu128_wheels_until_211(matrix: Matrix) -> None:
    """PyTorch kept sm_70 in its CUDA 12.8 builds (2.8 build script) and removed it for 2.11."""
    ok = check_stack(matrix, gpus=["V100"], frameworks=["torch==2.8.0+cu128"], as_of=AS_OF)
    assert "framework.arch" not in _rules(ok)
    bad = check_stack(matrix, gpus=["V100"], frameworks=["torch==2.11.0+cu128"], as_of=AS_OF)
    assert "framework.arch" in _rules(bad)
    res = resolve_stack(matrix, gpus=["V100"], frameworks=["torch==2.11.0"], as_of=AS_OF)
    assert res.frameworks["torch"] == "2.11.0+cu126"  # the one 2.11 wheel with Volta kernels
