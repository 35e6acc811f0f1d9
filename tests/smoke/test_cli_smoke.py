"""``gpuhost smoke run|judge``: exit codes and messages, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpuhost.cli import main
from tests.schema_check import assert_valid

from .documents import find_check, gpu_document

TORCH_IN_VENV = (
    subprocess.run(
        [sys.executable, "-c", "import torch"], capture_output=True, check=False
    ).returncode
    == 0
)


def _write(tmp_path, doc) -> str:
    path = tmp_path / "result.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_judge_healthy_result_exits_zero(tmp_path, capsys):
    assert main(["smoke", "judge", _write(tmp_path, gpu_document()), "--gpus", "2"]) == 0
    out = capsys.readouterr().out
    assert "PASS          torch.matmul_correct[gpu0]" in out
    assert "0 FAIL" in out


def test_judge_failure_exits_one_and_json_names_the_check(tmp_path, capsys):
    doc = gpu_document()
    find_check(doc, "matmul_correct", 1)["numbers"]["max_rel_error"] = 0.5
    assert main(["smoke", "judge", _write(tmp_path, doc), "--json"]) == 1
    verdicts = json.loads(capsys.readouterr().out)["verdicts"]
    failed = [v for v in verdicts if v["outcome"] == "FAIL"]
    assert [v["id"] for v in failed] == ["torch.matmul_correct[gpu1]"]


def test_judge_driver_cuda_option(tmp_path, capsys):
    assert main(["smoke", "judge", _write(tmp_path, gpu_document()), "--driver-cuda", "12.0"]) == 1
    assert "the driver's (expected) CUDA 12.0" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "not one JSON document"),
        ('{"schema": 9}', "schema 9"),
        ('{"schema": 1, "host": 3}', "host: found 3, expected a string"),
    ],
)
def test_judge_malformed_file_is_one_line_exit_two(tmp_path, capsys, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    assert main(["smoke", "judge", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and str(path) in err
    assert "Traceback" not in err


def test_judge_missing_file_and_bad_option_exit_two(tmp_path, capsys):
    assert main(["smoke", "judge", str(tmp_path / "absent.json")]) == 2
    assert "cannot read file" in capsys.readouterr().err
    assert main(["smoke", "judge", _write(tmp_path, gpu_document()), "--driver-cuda", "x"]) == 2
    assert "driver_max_cuda" in capsys.readouterr().err


def test_run_with_unknown_python_exits_two(capsys):
    assert main(["smoke", "run", "--python", "/no/such/python"]) == 2
    assert "/no/such/python" in capsys.readouterr().err


@pytest.mark.skipif(not TORCH_IN_VENV, reason=f"torch cannot be imported by {sys.executable}")
def test_run_here_saves_and_judges_the_real_document(tmp_path, capsys):
    saved = tmp_path / "here.json"
    code = main(["smoke", "run", "--framework", "torch", "--quick", "--save", str(saved)])
    out = capsys.readouterr().out
    assert code == 0  # nothing FAILs on a machine where no GPU is expected
    assert "COULD-NOT-RUN torch.matmul_tflops" in out
    assert json.loads(saved.read_text())["schema"] == 1
    assert_valid(json.loads(saved.read_text()), "smoke-result")
    assert main(["smoke", "judge", str(saved), "--gpus", "1"]) == 1  # but a GPU was expected


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_judge_refuses_a_measurement_that_is_not_a_finite_number(tmp_path, capsys, value):
    """NaN or infinite measurements passed every threshold of the judge (issue 29)."""
    doc = gpu_document()
    find_check(doc, "nccl_allreduce")["numbers"]["busbw_gbps"] = value
    assert main(["smoke", "judge", _write(tmp_path, doc), "--gpus", "2"]) == 2
    err = capsys.readouterr().err
    assert "busbw_gbps" in err and "a finite number or null" in err and err.count("\n") == 1
