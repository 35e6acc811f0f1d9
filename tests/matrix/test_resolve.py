"""resolve_stack: the newest supported, mutually compatible set, or reasons why none exists."""

from __future__ import annotations

import datetime as dt

import pytest

from gpuhost.errors import UnknownNameError
from gpuhost.matrix import Matrix, NoCompatibleSet, check_stack, resolve_stack, verdict
from gpuhost.matrix.advisories import branch_fix, load_advisories

AS_OF = dt.date(2026, 11, 22)  # fixed date for end-of-life judgements


def test_h100_with_torch_2_5_1(matrix: Matrix) -> None:
    res = resolve_stack(matrix, gpus=["H100"], frameworks=["torch==2.5.1"], as_of=AS_OF)
    out = res.to_json()
    assert out["frameworks"] == {"torch": "2.5.1+cu124"}
    assert out["cuda"] == "12.4"
    assert out["cudnn"] == "9.1.0"  # the cuDNN its wheel pins (nvidia-cudnn-cu12 9.1.0.70)
    # R595 is the newest production branch not past end of life on AS_OF; its minimum is the
    # first R595 driver NVIDIA's bulletins call fixed (595.45.04, its first release, is not)
    fixed = branch_fix(load_advisories(), 595).first_fixed
    assert out["driver"] == {"branch": "595", "min_version": fixed}
    assert set(out) == {"driver", "cuda", "cudnn", "frameworks", "install", "explain"}
    # cu124 is what a plain pip install gets for 2.5.1 (its PyPI wheel pins CUDA 12.4)
    assert out["install"] == {"torch": "pip install torch==2.5.1"}
    assert all(isinstance(line, str) for line in out["explain"])


def test_resolved_set_passes_check(matrix: Matrix) -> None:
    for gpus, fws in [
        (["H100"], ["torch==2.5.1"]),
        (["V100"], []),
        (["T4"], ["tensorflow==2.18"]),
        (["NVIDIA GeForce RTX 5090"], ["torch"]),
        (["NVIDIA L40S", "Tesla T4"], []),
    ]:
        res = resolve_stack(matrix, gpus=gpus, frameworks=fws, as_of=AS_OF)
        pins = [f"{k}=={v}" for k, v in res.frameworks.items()]
        findings = check_stack(
            matrix,
            gpus=gpus,
            driver=res.driver_min_version,
            cuda=res.cuda,
            cudnn=res.cudnn if not res.frameworks.get("tensorflow") else None,
            frameworks=pins,
            as_of=AS_OF,
        )
        assert verdict(findings) != "error", (gpus, fws, findings)


def test_v100_stays_on_r580_and_cuda_12(matrix: Matrix) -> None:
    res = resolve_stack(matrix, gpus=["Tesla V100-SXM2-32GB"], as_of=AS_OF)
    assert res.driver_branch == 580
    assert res.cuda == "12.9"
    assert res.cudnn == "9.10.2"  # 9.17.0 dropped Volta


def test_v100_with_cuda_13_has_no_set(matrix: Matrix) -> None:
    with pytest.raises(NoCompatibleSet) as exc:
        resolve_stack(matrix, gpus=["V100"], cuda="13.0", as_of=AS_OF)
    assert exc.value.exit_code == 1
    assert any("13.0" in r and "V100" in r for r in exc.value.reasons)


def test_tensorflow_pins_its_tested_cuda_and_cudnn(matrix: Matrix) -> None:
    res = resolve_stack(matrix, gpus=["T4"], frameworks=["tensorflow==2.18.0"], as_of=AS_OF)
    assert (res.cuda, res.cudnn, res.frameworks) == ("12.5", "9.3", {"tensorflow": "2.18.0"})


def test_sm120_card_with_old_torch_has_no_set(matrix: Matrix) -> None:
    with pytest.raises(NoCompatibleSet, match="RTX 5090"):
        resolve_stack(matrix, gpus=["RTX 5090"], frameworks=["torch==2.5.1"], as_of=AS_OF)


def test_cuda_series_restriction(matrix: Matrix) -> None:
    res = resolve_stack(matrix, gpus=["A100"], cuda="12", as_of=AS_OF)
    assert res.cuda.startswith("12.")


def test_eol_date_moves_the_driver(matrix: Matrix) -> None:
    later = resolve_stack(matrix, gpus=["H100"], as_of=dt.date(2027, 4, 1))
    assert later.driver_branch == 580  # R595 is past its March 2027 end of life


def test_unknown_framework_release_is_bad_input(matrix: Matrix) -> None:
    with pytest.raises(UnknownNameError):
        resolve_stack(matrix, frameworks=["torch==9.9"], as_of=AS_OF)
    with pytest.raises(UnknownNameError):
        resolve_stack(matrix, frameworks=["jax==0.4"], as_of=AS_OF)


def test_unknown_gpu_is_explained_not_fatal(matrix: Matrix) -> None:
    res = resolve_stack(matrix, gpus=["Voodoo 5"], as_of=AS_OF)
    assert any("Voodoo 5" in line for line in res.explain)
