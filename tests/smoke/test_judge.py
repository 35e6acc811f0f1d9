"""Judging smoke results: a real one from this machine's CPU run, and hand-made GPU results."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuhost.errors import ConfigError, ParseError
from gpuhost.smoke import Expectations, PerfReference, Verdict, has_failures, judge
from gpuhost.smoke.result import parse_result, parse_result_text
from gpuhost.smoke.runner import SCRIPT_PATH

from .documents import H100, changed, find_check, gpu_document

H100_PEAKS = {
    # Stand-in reference values for the tests only (not facts about the H100): the judge must
    # compare with whatever the matrix data passes in.
    "matmul_tflops_fp16": PerfReference(peak=1000.0, source="test data", min_ratio=0.5),
    "h2d_gbps": PerfReference(peak=64.0, source="test data"),
}


def by_id(verdicts: list[Verdict]) -> dict[str, Verdict]:
    return {v.id: v for v in verdicts}


@pytest.fixture(scope="module")
def cpu_result() -> dict[str, Any]:
    """The real document from this machine (CPU-only torch, no GPU), run once per module."""
    probe = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"torch cannot be imported by {sys.executable}; scripts/test installs it")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT_PATH), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- the real CPU result


def test_real_cpu_result_has_no_failures_when_no_gpu_is_expected(cpu_result):
    verdicts = judge(cpu_result, Expectations())
    assert not has_failures(verdicts)
    found = by_id(verdicts)
    assert found["torch.import"].outcome == "PASS"
    assert found["torch.cuda_available"].outcome == "COULD-NOT-RUN"
    assert found["torch.matmul_correct"].outcome == "COULD-NOT-RUN"
    assert found["host.nvidia_smi"].outcome == "COULD-NOT-RUN"
    assert all(v.message for v in verdicts)


def test_real_cpu_result_fails_when_gpus_are_expected(cpu_result):
    verdicts = by_id(judge(cpu_result, Expectations(gpu_count=2)))
    assert verdicts["host.nvidia_smi"].outcome == "FAIL"
    assert "2 GPU(s) expected" in verdicts["host.nvidia_smi"].message
    assert verdicts["torch.cuda_available"].outcome == "FAIL"
    assert "cannot use any" in verdicts["torch.cuda_available"].message
    # the per-GPU checks still say they could not run, not that they failed
    assert verdicts["torch.matmul_tflops"].outcome == "COULD-NOT-RUN"


def test_framework_not_installed_is_could_not_run(cpu_result):
    verdicts = by_id(judge(cpu_result, Expectations()))
    tf = verdicts["tensorflow.import"]
    assert tf.outcome == "COULD-NOT-RUN"
    assert tf.message.startswith("tensorflow is not installed in ")


# --------------------------------------------------------------------------- hand-made GPU results


def test_healthy_host_passes_and_reports_missing_references():
    verdicts = judge(gpu_document(), Expectations(gpu_count=2))
    assert not has_failures(verdicts), [v for v in verdicts if v.outcome == "FAIL"]
    tflops = by_id(verdicts)["torch.matmul_tflops[gpu0]"]
    assert tflops.outcome == "PASS"
    assert tflops.measured == 600.0
    assert f"no reference for {H100}" in tflops.message
    assert by_id(verdicts)["host.gpu_count"].outcome == "PASS"


def test_too_slow_gpu_fails_with_measured_and_expected():
    doc = gpu_document()
    find_check(doc, "matmul_tflops", 1)["numbers"]["tflops"] = 312.5
    exp = Expectations(references={H100: H100_PEAKS})
    verdicts = by_id(judge(doc, exp))
    slow = verdicts["torch.matmul_tflops[gpu1]"]
    assert slow.outcome == "FAIL"
    assert slow.ratio == pytest.approx(0.3125)
    assert slow.expected == pytest.approx(500.0)
    assert "measured 312.5 TFLOP/s = 0.31 of the 1000 TFLOP/s published peak" in slow.message
    assert "at least 0.50 (500.0 TFLOP/s) required" in slow.message
    assert verdicts["torch.matmul_tflops[gpu0]"].outcome == "PASS"  # 600 of 1000 >= 0.5


def test_reference_without_required_fraction_reports_the_ratio_only():
    exp = Expectations(references={H100.lower(): H100_PEAKS})  # model names match loosely
    h2d = by_id(judge(gpu_document(), exp))["torch.h2d_bandwidth[gpu0]"]
    assert h2d.outcome == "PASS"
    assert h2d.ratio == pytest.approx(50.0 / 64.0)
    assert "no required fraction given" in h2d.message


def test_expectation_wide_min_ratio_applies_where_the_reference_has_none():
    exp = Expectations(references={H100: H100_PEAKS}, min_ratio=0.9)
    h2d = by_id(judge(gpu_document(), exp))["torch.h2d_bandwidth[gpu0]"]
    assert h2d.outcome == "FAIL"
    assert "too slow" in h2d.message


@pytest.mark.parametrize("reported", ["PASS", "FAIL"])
def test_wrong_matmul_result_fails(reported):
    doc = gpu_document()
    check = find_check(doc, "matmul_correct", 0)
    check["outcome"] = reported
    check["numbers"]["max_rel_error"] = 0.2
    verdict = by_id(judge(doc, Expectations()))["torch.matmul_correct[gpu0]"]
    assert verdict.outcome == "FAIL"
    assert verdict.measured == pytest.approx(0.2)


def test_correctness_pass_without_numbers_is_not_trusted():
    doc = gpu_document()
    find_check(doc, "cudnn_conv", 1)["numbers"] = {}
    verdict = by_id(judge(doc, Expectations()))["torch.cudnn_conv[gpu1]"]
    assert verdict.outcome == "FAIL"
    assert "without its error and tolerance" in verdict.message


def test_missing_arch_fails_naming_the_capability_and_the_arch_list():
    doc = gpu_document(
        model="NVIDIA GeForce RTX 5090",
        capability="12.0",
        arch_list=("sm_50", "sm_80", "sm_86", "sm_90"),
    )
    verdict = by_id(judge(doc, Expectations()))["torch.arch_supported[gpu0]"]
    assert verdict.outcome == "FAIL"
    assert "compute capability 12.0" in verdict.message
    assert "[sm_50, sm_80, sm_86, sm_90]" in verdict.message
    assert "sm_120" in verdict.message


def test_arch_by_same_major_binary_compatibility_passes():
    doc = gpu_document(model="NVIDIA A10", capability="8.6", arch_list=("sm_80", "sm_90"))
    verdict = by_id(judge(doc, Expectations()))["torch.arch_supported[gpu0]"]
    assert verdict.outcome == "PASS"
    assert "sm_80 binaries run on 8.6" in verdict.message


def test_wheel_cuda_newer_than_driver_fails():
    doc = gpu_document(wheel_cuda="12.8", driver_cuda="12.4")
    verdict = by_id(judge(doc, Expectations()))["torch.cuda_driver_compat"]
    assert verdict.outcome == "FAIL"
    assert "CUDA 12.8, newer than the driver's (nvidia-smi) CUDA 12.4" in verdict.message


def test_driver_max_cuda_from_expectations_overrides_nvidia_smi():
    doc = gpu_document(wheel_cuda="12.4", driver_cuda="12.4")
    verdict = by_id(judge(doc, Expectations(driver_max_cuda="12.2")))["torch.cuda_driver_compat"]
    assert verdict.outcome == "FAIL"
    assert "the driver's (expected) CUDA 12.2" in verdict.message
    ok = by_id(judge(doc, Expectations(driver_max_cuda="13.0")))["torch.cuda_driver_compat"]
    assert ok.outcome == "PASS"


def test_gpu_count_mismatch_fails_on_host_and_framework():
    verdicts = by_id(judge(gpu_document(count=2), Expectations(gpu_count=8)))
    assert verdicts["host.gpu_count"].outcome == "FAIL"
    assert "lists 2 GPU(s)" in verdicts["host.gpu_count"].message
    assert "expected 8" in verdicts["host.gpu_count"].message
    assert verdicts["torch.device_count"].outcome == "FAIL"


def test_script_fail_stays_fail_and_could_not_run_stays():
    doc = gpu_document()
    find_check(doc, "tensor_to_device", 0).update(outcome="FAIL", reason="landed on cpu")
    find_check(doc, "autocast_bf16", 1).update(outcome="COULD-NOT-RUN", reason="cc 7.0", numbers={})
    verdicts = by_id(judge(doc, Expectations()))
    assert verdicts["torch.tensor_to_device[gpu0]"].outcome == "FAIL"
    assert verdicts["torch.tensor_to_device[gpu0]"].message == "landed on cpu"
    assert verdicts["torch.autocast_bf16[gpu1]"].outcome == "COULD-NOT-RUN"


def test_tensorflow_build_cuda_is_judged_against_the_driver():
    doc = gpu_document(driver_cuda="11.8")
    doc["frameworks"]["tensorflow"] = {
        "installed": True,
        "reason": "tensorflow 2.16.1 imported",
        "version": "2.16.1",
        "cuda": "12.3",
        "cudnn": "8",
        "arch_list": [],
        "devices": [],
        "checks": [
            {
                "name": "import",
                "outcome": "PASS",
                "reason": "ok",
                "device": None,
                "value": "2.16.1",
                "numbers": {},
            }
        ],
    }
    verdict = by_id(judge(doc, Expectations()))["tensorflow.cuda_driver_compat"]
    assert verdict.outcome == "FAIL"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"gpu_count": -1}, "expected GPU count"),
        ({"min_ratio": 1.5}, "min_ratio: found 1.5"),
        ({"driver_max_cuda": "twelve"}, "driver_max_cuda"),
        ({"references": {H100: {"tflops": PerfReference(1.0, "x")}}}, "unknown metric 'tflops'"),
        ({"references": {H100: {"h2d_gbps": PerfReference(0.0, "x")}}}, "positive number"),
    ],
)
def test_bad_expectations_are_config_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        Expectations(**kwargs)


# --------------------------------------------------------------------------- malformed documents


def _drop(doc: dict, *path: Any) -> dict:
    target = doc
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return doc


def _set(doc: dict, value: Any, *path: Any) -> dict:
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return doc


MALFORMED = [
    ("not an object", lambda d: [d], "expected a JSON object"),
    ("future schema", lambda d: _set(d, 2, "schema"), "schema 2, this gpuhost reads schema 1"),
    ("schema missing", lambda d: _drop(d, "schema"), "schema null"),
    ("bool schema", lambda d: _set(d, True, "schema"), "schema true"),
    ("host missing", lambda d: _drop(d, "host"), "host: found null, expected a string"),
    (
        "bad outcome",
        lambda d: _set(d, "OK", "frameworks", "torch", "checks", 0, "outcome"),
        'frameworks.torch.checks[0].outcome: found "OK", expected one of PASS, FAIL, COULD-NOT-RUN',
    ),
    (
        "string number",
        lambda d: _set(d, "600", "frameworks", "torch", "checks", 4, "numbers", "max_rel_error"),
        'numbers.max_rel_error: found "600", expected a number or null',
    ),
    (
        "device as string",
        lambda d: _set(d, "0", "frameworks", "torch", "checks", 4, "device"),
        "checks[4].device",
    ),
    (
        "installed missing",
        lambda d: _drop(d, "frameworks", "torch", "installed"),
        "frameworks.torch.installed: found null, expected true or false",
    ),
    (
        "checks not a list",
        lambda d: _set(d, {}, "frameworks", "torch", "checks"),
        "frameworks.torch.checks: found {}, expected a list",
    ),
    ("no checks", lambda d: _set(d, [], "frameworks", "torch", "checks"), "checks: empty"),
    (
        "arch entry",
        lambda d: _set(d, [90], "frameworks", "torch", "arch_list"),
        "arch_list[0]: found 90",
    ),
    ("gpu index", lambda d: _set(d, None, "gpus", 0, "index"), "gpus[0].index"),
    (
        "empty check name",
        lambda d: _set(d, "", "frameworks", "torch", "checks", 0, "name"),
        "checks[0].name: empty",
    ),
]


@pytest.mark.parametrize(("label", "mutate", "message"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_documents_give_one_parse_error(label, mutate, message):
    doc = mutate(changed(gpu_document()))
    with pytest.raises(ParseError) as raised:
        judge(doc, Expectations())
    assert message in str(raised.value)
    assert str(raised.value).startswith("smoke result: ")


def test_many_problems_are_listed_in_one_error():
    doc = gpu_document()
    for check in doc["frameworks"]["torch"]["checks"]:
        check["outcome"] = "MAYBE"
    with pytest.raises(ParseError, match=r"\(and \d+ more\)"):
        parse_result(doc)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty output"),
        ("Traceback (most recent call last):\n", "not one JSON document"),
        ('{"schema": 1}\n{"schema": 1}\n', "not one JSON document"),
    ],
)
def test_unusable_script_output_is_a_parse_error(text, message):
    with pytest.raises(ParseError, match=message):
        parse_result_text(text, "gpu01 smoke output")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_any_json_value_is_accepted_or_a_parse_error(value):
    try:
        parsed = parse_result(value)
    except ParseError as exc:
        assert str(exc).startswith("smoke result: ")
    else:
        assert parsed.schema == 1


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


BASE = gpu_document(count=1)
BASE_PATHS = _paths(BASE)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(BASE_PATHS), JSON)
def test_any_single_field_change_is_judged_or_a_parse_error(path, value):
    doc = _set(changed(BASE), value, *path)
    try:
        verdicts = judge(doc, Expectations(gpu_count=1))
    except ParseError as exc:
        assert str(exc).startswith("smoke result: ")
    else:
        assert all(v.outcome in ("PASS", "FAIL", "COULD-NOT-RUN") for v in verdicts)
