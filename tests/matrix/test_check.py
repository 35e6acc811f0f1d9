"""check_stack: one test per rule, with the real numbers of the sources."""

from __future__ import annotations

import datetime as dt

import pytest

from gpuhost.errors import VersionError
from gpuhost.matrix import Finding, Matrix, check_stack, verdict

AS_OF = dt.date(2026, 11, 22)  # fixed date for end-of-life judgements


def _check(matrix: Matrix, **kw: object) -> list[Finding]:
    return check_stack(matrix, as_of=AS_OF, **kw)  # type: ignore[arg-type]


def _rules(findings: list[Finding], severity: str | None = None) -> set[str]:
    return {f.rule for f in findings if severity is None or f.severity == severity}


def test_cuda_12_4_update_1_needs_550_54_15(matrix: Matrix) -> None:
    ok = _check(matrix, driver="550.54.15", cuda="12.4.1")
    assert "cuda.driver" in _rules(ok, "info") and not _rules(ok, "error")
    low = _check(matrix, driver="550.54.14", cuda="12.4.1")
    f = next(f for f in low if f.rule == "cuda.driver-minor-compat")
    assert f.severity == "warning"
    assert "550.54.14" in f.message and "550.54.15" in f.message and "525.60.13" in f.message
    # 12.4 GA is satisfied by 550.54.14
    assert "cuda.driver" in _rules(_check(matrix, driver="550.54.14", cuda="12.4"), "info")


def test_12x_minor_compat_floor_is_525_60_13(matrix: Matrix) -> None:
    at_floor = _check(matrix, driver="525.60.13", cuda="12.6")
    assert "cuda.driver-minor-compat" in _rules(at_floor, "warning")
    assert verdict(at_floor) == "warning"
    below = _check(matrix, driver="520.61.05", cuda="12.6")
    f = next(f for f in below if f.rule == "cuda.driver-floor")
    assert f.severity == "error" and "525.60.13" in f.message and "520.61.05" in f.message
    assert "11.8" in f.message  # the fix names the newest CUDA this driver serves


def test_13x_needs_580_65_06(matrix: Matrix) -> None:
    f = next(
        f for f in _check(matrix, driver="575.57.08", cuda="13.0") if f.rule == "cuda.driver-floor"
    )
    assert "580.65.06" in f.message and f.severity == "error"
    assert not _rules(_check(matrix, driver="580.65.06", cuda="13.0"), "error")


def test_v100_with_cuda_13_is_an_error(matrix: Matrix) -> None:
    findings = _check(matrix, gpus=["Tesla V100-SXM2-32GB"], cuda="13.0")
    f = next(f for f in findings if f.rule == "cuda.arch-unsupported")
    assert f.severity == "error" and "dropped" in f.message and "12.x" in f.message
    assert not _rules(_check(matrix, gpus=["V100"], cuda="12.9"), "error")


def test_b200_with_cuda_12_4_is_not_yet_supported(matrix: Matrix) -> None:
    f = next(
        f
        for f in _check(matrix, gpus=["NVIDIA B200"], cuda="12.4")
        if f.rule == "cuda.arch-unsupported"
    )
    assert "does not yet support" in f.message and "12.8" in f.message


def test_v100_on_r590_driver_is_an_error(matrix: Matrix) -> None:
    f = next(
        f
        for f in _check(matrix, gpus=["V100"], driver="590.48.01")
        if f.rule == "driver.arch-unsupported"
    )
    assert f.severity == "error" and "R580" in f.message and "590.48.01" in f.message
    assert "driver.arch-unsupported" not in _rules(
        _check(matrix, gpus=["V100"], driver="580.95.05")
    )


def test_k80_after_r470_is_an_error(matrix: Matrix) -> None:
    assert "driver.arch-unsupported" in _rules(
        _check(matrix, gpus=["Tesla K80"], driver="535.261.03")
    )


def test_blackwell_on_an_old_driver_is_an_error(matrix: Matrix) -> None:
    f = next(
        f
        for f in _check(matrix, gpus=["B200"], driver="535.261.03")
        if f.rule == "driver.arch-too-old"
    )
    assert "570.26" in f.message


def test_sm120_card_with_cu124_wheel_is_an_error(matrix: Matrix) -> None:
    findings = _check(matrix, gpus=["NVIDIA GeForce RTX 5090"], frameworks=["torch==2.5.1+cu124"])
    f = next(f for f in findings if f.rule == "framework.arch")
    assert f.severity == "error" and "12.0" in f.message and "fix:" in f.message
    ok = _check(matrix, gpus=["RTX 5090"], frameworks=["torch==2.8.0+cu128"], driver="580.65.06")
    assert not _rules(ok, "error")


def test_wheel_for_a_cuda_the_driver_cannot_serve(matrix: Matrix) -> None:
    findings = _check(matrix, driver="520.61.05", frameworks=["torch==2.5.1+cu124"])
    f = next(f for f in findings if f.rule == "framework.cuda-driver")
    assert "525.60.13" in f.message and f.severity == "error"


def test_unpublished_variant_and_cpu_build(matrix: Matrix) -> None:
    assert "framework.variant" in _rules(_check(matrix, frameworks=["torch==2.5.1+cu126"]), "error")
    assert "framework.not-cuda" in _rules(
        _check(matrix, frameworks=["torch==2.5.1+cpu"]), "warning"
    )


def test_torch_without_variant_picks_one_that_fits(matrix: Matrix) -> None:
    findings = _check(matrix, gpus=["H100"], frameworks=["torch==2.5.1"])
    f = next(f for f in findings if f.rule == "framework.ok")
    assert "cu124" in f.message


def test_sass_binary_compatibility_within_a_major(matrix: Matrix) -> None:
    # RTX 4090 is cc 8.9; torch 2.5 cu124 lists 8.6 (same major, lower minor) -> runs
    assert not _rules(_check(matrix, gpus=["RTX 4090"], frameworks=["torch==2.5.1+cu124"]), "error")


def test_tensorflow_2_18_tested_with_cuda_12_5_and_cudnn_9_3(matrix: Matrix) -> None:
    assert not _rules(
        _check(matrix, frameworks=["tensorflow==2.18.0"], cuda="12.5", cudnn="9.3"), "warning"
    ) - {"cudnn.unknown"}
    findings = _check(matrix, frameworks=["tensorflow==2.18.0"], cuda="12.4", cudnn="9.1")
    assert {"tensorflow.untested-cuda", "tensorflow.untested-cudnn"} <= _rules(findings, "warning")
    msg = next(f.message for f in findings if f.rule == "tensorflow.untested-cuda")
    assert "12.5" in msg and "12.4" in msg


def test_cudnn_outside_its_cuda_range(matrix: Matrix) -> None:
    f = next(f for f in _check(matrix, cudnn="9.17.0", cuda="11.8") if f.rule == "cudnn.cuda-range")
    assert f.severity == "error" and "9.10.2" in f.message  # newest cuDNN for CUDA 11.8


def test_cudnn_not_built_for_the_gpu(matrix: Matrix) -> None:
    f = next(
        f
        for f in _check(matrix, gpus=["V100"], cudnn="9.17.0", cuda="12.4")
        if f.rule == "cudnn.arch"
    )
    assert "9.10.2" in f.message


def test_cudnn_driver_floor(matrix: Matrix) -> None:
    findings = _check(matrix, cudnn="9.17.0", cuda="13.0", driver="575.57.08")
    assert "cudnn.driver" in _rules(findings, "error")


def test_unknown_gpu_and_versions_warn(matrix: Matrix) -> None:
    findings = _check(
        matrix,
        gpus=["Voodoo 5 6000"],
        cuda="12.7",
        cudnn="7.0",
        frameworks=["torch==9.9", "jax==0.4"],
    )
    assert {"gpu.unknown", "cuda.unknown", "cudnn.unknown", "framework.unknown"} <= _rules(
        findings, "warning"
    )
    assert verdict(findings) == "warning"


def test_driver_branch_eol_depends_on_the_date(matrix: Matrix) -> None:
    assert "driver.branch-eol" in _rules(_check(matrix, driver="535.261.03"))
    early = check_stack(matrix, driver="535.261.03", as_of=dt.date(2026, 6, 30))
    assert "driver.branch-eol" not in _rules(early)
    assert "driver.branch-unknown" in _rules(_check(matrix, driver="530.30.02"), "warning")


def test_fabric_manager_must_equal_the_driver(matrix: Matrix) -> None:
    bad = _check(matrix, driver="550.54.15", fabric_manager="550.54.14")
    assert "fabric-manager.version" in _rules(bad, "error")
    assert "fabric-manager.version" not in _rules(
        _check(matrix, driver="550.54.15", fabric_manager="550.54.15")
    )


def test_container_toolkit_minimum_driver(matrix: Matrix) -> None:
    assert "container-toolkit.driver" in _rules(
        _check(matrix, driver="418.40.04", container_toolkit="1.12.0"), "error"
    )


@pytest.mark.parametrize("field", ["driver", "cuda", "cudnn"])
def test_garbage_versions_are_bad_input(matrix: Matrix, field: str) -> None:
    with pytest.raises(VersionError, match=f"--{field}"):
        _check(matrix, **{field: "55O.54"})


def test_every_finding_names_a_source(matrix: Matrix) -> None:
    findings = _check(
        matrix,
        gpus=["V100", "RTX 5090", "nope"],
        driver="590.48.01",
        cuda="13.0",
        cudnn="9.17.0",
        frameworks=["torch==2.5.1+cu124", "tensorflow==2.18.0"],
    )
    assert findings
    for f in findings:
        assert f.source.startswith(("https://", "../")), f
