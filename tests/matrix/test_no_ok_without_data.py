"""No "ok" the data cannot back (issue #35, part 3): every rule of ``matrix check`` (and the
audit's ``matrix`` rule, which runs the same rules on what a host reports) is walked with one
fact of a fully known stack missing from the data: a GPU, a driver branch, a CUDA release, a
cuDNN release, a torch or TensorFlow release, or the architectures a TensorFlow series' wheels
are built for. Each time the answer is not "ok", a warning names what is unknown, and no info
finding claims a fit that needs the missing fact."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from gpuhost.audit.matrix_check import matrix_results
from gpuhost.facts.host_facts import CudnnFacts, FrameworkFacts, HostFacts
from gpuhost.findings import Finding, verdict
from gpuhost.matrix import Matrix, check_stack
from tests.matrix.answers import AS_OF

# A stack the shipped data knows in every part: check_stack answers ok with findings that say so.
KNOWN: dict[str, Any] = {
    "gpus": ["NVIDIA H100 80GB HBM3"],
    "driver": "595.58.03",
    "cuda": "12.5",
    "cudnn": "9.3.0",
    "frameworks": ["torch==2.7.1+cu128", "tensorflow==2.19.0"],
}

# (what is missing, the changed input, the value a warning must name, info rules it must not
# leave standing because they would rest on the missing fact)
MISSING = [
    ("gpu", {"gpus": ["NVIDIA Mystery GPU 9000"]}, "Mystery GPU 9000", {"framework.ok"}),
    ("driver branch", {"driver": "999.10.01"}, "R999", set()),
    ("cuda", {"cuda": "12.7"}, "12.7", {"cuda.driver"}),
    ("cuda newer", {"cuda": "13.9"}, "13.9", {"cuda.driver"}),
    ("cudnn", {"cudnn": "9.99.0"}, "9.99.0", set()),
    ("torch", {"frameworks": ["torch==2.99.0", "tensorflow==2.19.0"]}, "2.99.0", set()),
    ("tensorflow", {"frameworks": ["torch==2.7.1+cu128", "tensorflow==2.99.0"]}, "2.99.0", set()),
]


def _check(matrix: Matrix, **changes: Any) -> list[Finding]:
    return check_stack(matrix, as_of=AS_OF, **(KNOWN | changes))


def _compat(findings: list[Finding]) -> list[Finding]:
    """The compatibility findings (the security exposure is an answer of its own)."""
    return [f for f in findings if not f.rule.startswith("security.")]


def test_the_known_stack_is_ok_so_each_missing_fact_is_what_changes_the_answer(
    matrix: Matrix,
) -> None:
    found = _compat(_check(matrix))
    assert verdict(found) == "ok", [f.message for f in found if f.severity != "info"]
    assert {"cuda.driver", "framework.ok"} <= {f.rule for f in found}


@pytest.mark.parametrize(
    ("what", "changes", "named", "not_ok"), MISSING, ids=[m[0] for m in MISSING]
)
def test_a_missing_fact_is_said_never_an_ok(
    matrix: Matrix, what: str, changes: dict[str, Any], named: str, not_ok: set[str]
) -> None:
    found = _compat(_check(matrix, **changes))
    assert verdict(found) != "ok", f"{what} missing from the data, yet the verdict is ok"
    warned = [f for f in found if f.severity == "warning" and named in f.message]
    assert warned, f"no warning names the missing {what} ({named})"
    standing = [f.rule for f in found if f.severity == "info" and f.rule in not_ok]
    assert not standing, f"{standing} stand on the missing {what}"


def test_an_unknown_gpu_turns_every_wheel_fit_into_an_unknown(matrix: Matrix) -> None:
    found = _check(matrix, gpus=["NVIDIA H100 80GB HBM3", "NVIDIA Mystery GPU 9000"])
    fits = [f for f in found if f.rule == "framework.ok"]
    unknown = [f for f in found if f.rule == "framework.arch-unknown"]
    assert not fits
    assert len(unknown) == 2  # torch and TensorFlow, each
    assert all(f.message.startswith("unknown: ") for f in unknown)
    assert all('"NVIDIA Mystery GPU 9000"' in f.message for f in unknown)


def test_a_tensorflow_series_without_sourced_archs_is_unknown_not_ok(matrix: Matrix) -> None:
    bare = dataclasses.replace(matrix, tensorflow_archs=())
    found = check_stack(
        bare, gpus=["NVIDIA H100 80GB HBM3"], frameworks=["tensorflow==2.19.0"], as_of=AS_OF
    )
    rules = {f.rule: f for f in found}
    assert "framework.ok" not in rules
    assert rules["framework.arch-unknown"].severity == "warning"
    assert "tf.sysconfig.get_build_info()" in rules["framework.arch-unknown"].message


@pytest.mark.parametrize(
    ("gpu", "version", "ok"),
    [
        ("Tesla K80", "2.14.0", True),  # cc 3.7: sm_35 binary code runs on 3.7
        ("Tesla M60", "2.17.0", False),  # cc 5.2: 2.17 dropped sm_50 (sm_60 up)
        ("Tesla M60", "2.16.1", True),  # cc 5.2: 2.16 still has sm_50
        ("NVIDIA L4", "2.15.0", True),  # cc 8.9: compute_80 PTX JITs forward
        ("NVIDIA H100 80GB HBM3", "2.15.0", True),  # cc 9.0: compute_80 PTX
        ("NVIDIA H100 80GB HBM3", "2.21.0", True),  # cc 9.0: compute_90
    ],
)
def test_tensorflow_wheels_are_judged_by_the_archs_they_are_built_for(
    matrix: Matrix, gpu: str, version: str, ok: bool
) -> None:
    """The archs come from each wheel's build_info.py (matrix.yaml tensorflow_archs)."""
    found = check_stack(matrix, gpus=[gpu], frameworks=[f"tensorflow=={version}"], as_of=AS_OF)
    arch = [f for f in found if f.rule == "framework.arch"]
    assert (not arch) is ok, [f.message for f in arch]
    if not ok:
        assert "official wheels are built for compute capabilities 6.0, 7.0, 8.0" in arch[0].message
        assert arch[0].source.endswith(
            f"tensorflow-{version}-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
        )


def test_the_audit_matrix_rule_keeps_the_unknowns(matrix: Matrix) -> None:
    """The audit runs the same rules on what the host reports: an unknown wheel and cuDNN stay
    warnings there too (prefixed matrix.), never an ok."""
    facts = HostFacts(
        cudnn=CudnnFacts(version="9.99.0"),
        frameworks=[FrameworkFacts(python="/usr/bin/python3", tensorflow_version="2.99.0")],
    )
    [result] = matrix_results(facts, matrix)
    severities = {f.rule: f.severity for f in result.findings}
    assert severities["matrix.cudnn.unknown"] == "warning"
    assert severities["matrix.framework.unknown"] == "warning"
    assert "matrix.framework.ok" not in severities


@pytest.mark.parametrize(
    ("driver", "rule", "severity"),
    [
        ("575.57.08", "cuda.driver-floor", "error"),  # below the 13.x floor 580.65.06
        ("580.95.05", "cuda.driver-minor-compat", "warning"),  # at or above it
    ],
)
def test_a_cuda_minor_newer_than_the_data_is_judged_by_its_major_floor(
    matrix: Matrix, driver: str, rule: str, severity: str
) -> None:
    """CUDA 13.4 (its Linux driver is no longer bundled, so the data has no exact minimum): the
    driver is judged by NVIDIA's CUDA 13.x minor-version-compatibility floor, and the finding
    says the exact floor is not in the data."""
    found = {f.rule: f for f in check_stack(matrix, cuda="13.4", driver=driver, as_of=AS_OF)}
    assert found[rule].severity == severity
    assert "580.65.06" in found[rule].message
    assert "the exact minimum driver of CUDA 13.4 is not in the matrix data" in found[rule].message
    assert "cuda.driver" not in found  # never "meets CUDA 13.4"


@pytest.mark.parametrize("cudnn", ["9.21.0", "9.24.0", "9.24.1"])
def test_cudnn_after_917_is_known_from_its_redistrib_manifest(matrix: Matrix, cudnn: str) -> None:
    """cuDNN 9.21 to 9.24.1: rows from NVIDIA's redistrib manifests (derived: driver floors per
    CUDA major, compute capabilities as 9.17.0, the last support-matrix row)."""
    found = {f.rule for f in check_stack(matrix, gpus=["H100"], cuda="13.0", cudnn=cudnn)}
    assert "cudnn.unknown" not in found and not found & {"cudnn.cuda-range", "cudnn.arch"}
    row = next(r for r in matrix.cudnn if r.version == cudnn)
    assert row.confidence == "derived" and f"redistrib_{cudnn}.json" in matrix.url(row.source)


@pytest.mark.parametrize("gpu", ["NVIDIA H100 80GB HBM3", "NVIDIA Mystery GPU 9000"])
def test_profile_verify_on_a_gpu_the_data_lacks_is_not_ok(matrix: Matrix, gpu: str) -> None:
    """``matrix profile verify`` runs the same rules (and the kernel-module ones): a built-in
    profile is ok on an H100 and not ok on a GPU the data lacks, which it names."""
    from gpuhost.matrix.profiles import load_profiles, verify_profile

    profile = load_profiles()["nvidia-repo-580-cuda13.0"]
    found = _compat(verify_profile(matrix, profile, [gpu], as_of=AS_OF))
    if "Mystery" in gpu:
        assert verdict(found) == "warning"
        assert any(f.rule == "gpu.unknown" and gpu in f.message for f in found)
    else:
        assert verdict(found) == "ok", [f.message for f in found if f.severity != "info"]


def test_matrix_show_names_what_a_tensorflow_wheel_is_built_for(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from gpuhost.cli import main

    assert main(["matrix", "show", "--framework", "tensorflow==2.17.0", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["archs"] == ["6.0", "7.0", "8.0", "8.9", "9.0+PTX"]
    assert any(
        url.endswith("tensorflow-2.17.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl")
        for url in answer["sources"]
    )
    assert main(["matrix", "show", "--framework", "tensorflow==2.17.0"]) == 0
    assert "built for       6.0, 7.0, 8.0, 8.9, 9.0+PTX" in capsys.readouterr().out
