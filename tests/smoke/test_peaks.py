"""Published GPU peaks (data/gpu_peaks.yaml) and the smoke judge measuring against them."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from gpuhost.cli import main
from gpuhost.errors import MatrixError
from gpuhost.matrix.peaks import default_peaks_path, load_peaks, smoke_references
from gpuhost.smoke import Expectations, judge
from gpuhost.smoke.judge import gpu_names
from gpuhost.smoke.result import parse_result

from .documents import H100, find_check, gpu_document
from .test_script import _env_with_path, _replaying_nvidia_smi, needs_torch, run_script

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "captures"
T4 = "Tesla T4"


def _verdict(verdicts, check_id):
    return next(v for v in verdicts if v.id == check_id)


def _judged(doc, min_ratio=None):
    result = parse_result(doc)
    refs = smoke_references(gpu_names(result), min_ratio=min_ratio)
    return judge(result, Expectations(references=refs, min_ratio=min_ratio))


# --- the data -------------------------------------------------------------------------------


def test_shipped_peaks_load_and_every_row_cites_a_source():
    peaks = load_peaks()
    assert peaks.gpus, "no GPU peaks shipped"
    for gpu in peaks.gpus:
        assert gpu.source in peaks.sources and peaks.sources[gpu.source].url.startswith("https://")
        assert gpu.fp16_tensor_tflops is not None or gpu.pcie_gbps_per_direction is not None
    assert peaks.no_reference, "models without a source must be listed as such"


def test_dense_numbers_are_half_of_the_sparse_datasheet_figures():
    peaks = load_peaks()
    sxm = peaks.find(H100)
    assert sxm is not None and sxm.sparse_halved
    assert sxm.fp16_tensor_tflops == pytest.approx(1979 / 2)  # datasheet: 1,979* with sparsity
    assert sxm.tf32_tensor_tflops == pytest.approx(989 / 2)
    assert sxm.pcie_gbps_per_direction == 64.0  # Gen5 x16: 128 GB/s both directions
    a100 = peaks.find("NVIDIA A100-SXM4-80GB")
    assert a100 is not None and not a100.sparse_halved and a100.fp16_tensor_tflops == 312
    assert a100.memory_gbps == 2039


def _capture_gpu_names() -> set[str]:
    names: set[str] = set()
    for path in (CAPTURES / "nvidia-smi-q-text").glob("*.txt"):
        for line in path.read_text(errors="replace").splitlines():
            found = re.match(r"\s*Product Name\s*:\s*(.+?)\s*$", line)
            if found:
                names.add(found.group(1))
    return names


def test_names_printed_by_real_nvidia_smi_captures_find_their_row():
    names = _capture_gpu_names()
    peaks = load_peaks()
    wanted = {
        "NVIDIA H100 80GB HBM3",
        "Tesla V100-SXM2-16GB",
        "NVIDIA A40",
        "NVIDIA L4",
        "NVIDIA H200",
    }
    assert wanted <= names, f"captures changed: {sorted(names)}"
    for name in wanted:
        assert peaks.find(name) is not None, name
    assert peaks.find("NVIDIA H200 NVL") is None  # no datasheet read: no reference, not a guess
    assert peaks.find("NVIDIA H100") is None  # a truncated name is not matched to one variant


def _write_peaks(tmp_path: Path, change) -> str:
    data = yaml.safe_load(Path(default_peaks_path()).read_text())
    change(data)
    path = tmp_path / "peaks.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["gpus"][0].update(source="nowhere"), "gpus[0].source: 'nowhere' is not a key"),
        (lambda d: d["gpus"][1].update(fp16_tensor_tflops=-3), "gpus[1].fp16_tensor_tflops"),
        (lambda d: d["gpus"][0].update(confidence="guess"), "gpus[0].confidence"),
        (lambda d: d["gpus"][0]["pcie"].update(gen="7"), "gpus[0].pcie.gen"),
        (lambda d: d["gpus"][2]["names"].append("nvidia h100 80gb hbm3"), "also a name of"),
        (lambda d: d["min_ratio"].update(h2d_gbps=1.5), "min_ratio.h2d_gbps"),
    ],
)
def test_bad_peaks_file_names_the_field(tmp_path, change, message):
    with pytest.raises(MatrixError, match=re.escape(message)):
        load_peaks(_write_peaks(tmp_path, change))


# --- the judge on synthetic results for known GPUs ------------------------------------------


def test_healthy_h100_is_judged_as_a_fraction_of_its_own_peak():
    verdicts = _judged(gpu_document())
    matmul = _verdict(verdicts, "torch.matmul_tflops[gpu0]")
    assert matmul.outcome == "PASS"
    assert matmul.ratio == pytest.approx(600 / 989.5)
    assert "989.5 TFLOP/s published peak" in matmul.message and "hpctech" in matmul.message
    h2d = _verdict(verdicts, "torch.h2d_bandwidth[gpu1]")
    assert h2d.outcome == "PASS" and h2d.ratio == pytest.approx(50 / 64)
    nccl = _verdict(verdicts, "torch.nccl_allreduce")
    assert nccl.outcome == "PASS" and "no reference" in nccl.message


def test_throttled_gpu_and_degraded_link_fail_naming_the_required_fraction():
    doc = gpu_document()
    find_check(doc, "matmul_tflops", 1)["numbers"]["tflops"] = 150.0  # 0.15 of 989.5
    find_check(doc, "h2d_bandwidth", 0)["numbers"]["gbps"] = 24.0  # a Gen5 x16 link at Gen4 x8
    verdicts = _judged(doc)
    slow = _verdict(verdicts, "torch.matmul_tflops[gpu1]")
    assert slow.outcome == "FAIL" and "at least 0.25" in slow.message
    assert _verdict(verdicts, "torch.matmul_tflops[gpu0]").outcome == "PASS"
    link = _verdict(verdicts, "torch.h2d_bandwidth[gpu0]")
    assert link.outcome == "FAIL" and "PCIe Gen5 x16" in link.message
    assert _verdict(verdicts, "torch.d2h_bandwidth[gpu0]").outcome == "PASS"


def test_t4_uses_its_own_peak_and_min_ratio_overrides_the_data():
    doc = gpu_document(count=1, model=T4, capability="7.5", arch_list=("sm_75",))
    find_check(doc, "matmul_tflops", 0)["numbers"]["tflops"] = 26.0  # 0.4 of 65
    find_check(doc, "h2d_bandwidth", 0)["numbers"]["gbps"] = 12.0  # 0.75 of Gen3 x16
    find_check(doc, "d2h_bandwidth", 0)["numbers"]["gbps"] = 12.5
    verdicts = _judged(doc)
    assert _verdict(verdicts, "torch.matmul_tflops[gpu0]").ratio == pytest.approx(0.4)
    assert not [v for v in verdicts if v.outcome == "FAIL"]
    strict = _judged(doc, min_ratio=0.5)
    assert _verdict(strict, "torch.matmul_tflops[gpu0]").outcome == "FAIL"
    assert _verdict(strict, "torch.h2d_bandwidth[gpu0]").outcome == "PASS"


def test_gpu_without_a_source_gets_no_invented_threshold():
    doc = gpu_document(model="NVIDIA H200 NVL")
    find_check(doc, "matmul_tflops", 0)["numbers"]["tflops"] = 1.0
    matmul = _verdict(_judged(doc), "torch.matmul_tflops[gpu0]")
    assert matmul.outcome == "PASS" and "no reference for NVIDIA H200 NVL" in matmul.message


def test_cli_judge_uses_the_shipped_peaks(tmp_path, capsys):
    doc = gpu_document()
    find_check(doc, "matmul_tflops", 0)["numbers"]["tflops"] = 100.0
    path = tmp_path / "result.json"
    path.write_text(json.dumps(doc))
    assert main(["smoke", "judge", str(path), "--json"]) == 1
    verdicts = {v["id"]: v for v in json.loads(capsys.readouterr().out)["verdicts"]}
    assert verdicts["torch.matmul_tflops[gpu0]"]["outcome"] == "FAIL"
    assert verdicts["torch.matmul_tflops[gpu0]"]["expected"] == pytest.approx(0.25 * 989.5)
    assert main(["smoke", "judge", str(path), "--min-ratio", "0.1"]) == 0
    assert "0.10 of the 989.5 TFLOP/s published peak" in capsys.readouterr().out


# --- a real document from the script ---------------------------------------------------------


@needs_torch
def test_real_document_with_captured_nvidia_smi_names_finds_references_but_judges_only_measurements(
    tmp_path,
):
    """The script run here (CPU torch) behind a replay of a real two-H100 nvidia-smi: the GPUs'
    names find the H100 SXM row, and no perf verdict appears without a measurement."""
    _replaying_nvidia_smi(tmp_path)
    doc, _ = run_script("--framework", "torch", "--quick", env=_env_with_path(tmp_path))
    result = parse_result(doc)
    refs = smoke_references(gpu_names(result))
    assert set(refs) == {H100}
    assert refs[H100]["matmul_tflops_fp16"].peak == pytest.approx(989.5)
    verdicts = judge(result, Expectations(references=refs))
    for v in verdicts:
        if v.check in ("matmul_tflops", "h2d_bandwidth", "d2h_bandwidth"):
            assert v.outcome != "PASS" and v.ratio is None, (v, sys.executable)


def test_l40s_row_takes_the_dense_column_of_the_datasheet():
    """The L40S table prints 'dense | sparse*'; the row holds the dense figure and a capture's
    name ('NVIDIA L40S', tests/fixtures/captures) finds it."""
    row = load_peaks().find("NVIDIA L40S")
    assert row is not None and not row.sparse_halved
    assert row.fp16_tensor_tflops == 362.05  # the dense column; 733* is the sparse one
    assert row.fp16_tensor_tflops == pytest.approx(733 / 2, rel=0.02)
    assert "NVIDIA L40S" in _capture_gpu_names()


def test_matrix_validate_checks_the_shipped_peaks(tmp_path, capsys, monkeypatch):
    assert main(["matrix", "validate"]) == 0
    assert "gpu_peaks.yaml: valid" in capsys.readouterr().out
    bad = _write_peaks(tmp_path, lambda d: d["gpus"][0].update(memory_gbps="fast"))
    monkeypatch.setattr("gpuhost.matrix.peaks.load_peaks", lambda: load_peaks(bad))
    assert main(["matrix", "validate"]) == 2
    err = capsys.readouterr().err.strip()
    assert "gpus[0].memory_gbps" in err and len(err.splitlines()) == 1 and "Traceback" not in err
