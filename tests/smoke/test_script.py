"""The smoke script itself: its pure parsers, its portability, and real runs on this machine.

This machine has no GPU and (in the venv) the CPU-only PyTorch wheel, so the real runs prove the
honest "could not run" path; stand-in ``nvidia-smi`` programs replay captured outputs to show how
the script reads a driver that sees GPUs, and broken framework installs show the isolation.
"""

from __future__ import annotations

import ast
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gpuhost.smoke import script
from gpuhost.smoke.result import parse_result_text
from gpuhost.smoke.runner import SCRIPT_PATH

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
CAPTURES = HERE.parent / "fixtures" / "captures"
SYSTEM_PYTHON = "/usr/bin/python3"
H100 = "NVIDIA H100 80GB HBM3"


def _has_module(python: str, module: str) -> bool:
    proc = subprocess.run([python, "-c", f"import {module}"], capture_output=True, check=False)
    return proc.returncode == 0


TORCH_IN_VENV = _has_module(sys.executable, "torch")
needs_torch = pytest.mark.skipif(
    not TORCH_IN_VENV,
    reason=f"torch cannot be imported by {sys.executable} (scripts/test installs torch==2.13.0)",
)


def run_script(
    *args: str,
    python: str = sys.executable,
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> tuple[dict, subprocess.CompletedProcess[str]]:
    proc = subprocess.run(
        [python, str(SCRIPT_PATH), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc


def checks_by_name(framework: dict) -> dict[str, dict]:
    return {c["name"]: c for c in framework["checks"]}


# --------------------------------------------------------------------------- portability


def test_script_parses_as_python_3_8():
    ast.parse(SCRIPT_PATH.read_text(), feature_version=(3, 8))


def test_script_imports_only_the_standard_library():
    tree = ast.parse(SCRIPT_PATH.read_text())
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert imported - {"__future__"} <= set(sys.stdlib_module_names), imported


# --------------------------------------------------------------------------- pure parsers


def test_parse_smi_list_two_gpus():
    gpus = script.parse_smi_list((FIXTURES / "nvidia-smi-L__2x-h100.txt").read_text())
    assert [(g["index"], g["name"]) for g in gpus] == [(0, H100), (1, H100)]
    assert gpus[1]["uuid"] == "GPU-66666666-7777-8888-9999-000000000000"


def test_parse_smi_list_counts_mig_instances_under_their_gpu():
    text = (
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)\n"
        "  MIG 3g.40gb     Device  0: (UUID: MIG-0)\n"
        "  MIG 1g.10gb     Device  1: (UUID: MIG-1)\n"
        "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n"
    )
    gpus = script.parse_smi_list(text)
    assert [g["mig_devices"] for g in gpus] == [2, 0]


def test_parse_smi_list_reads_every_captured_listing():
    files = sorted((CAPTURES / "nvidia-smi-misc").glob("*__L.txt"))
    assert files
    for path in files:
        gpus = script.parse_smi_list(path.read_text())
        assert gpus, path.name
        assert all(g["name"] and g["uuid"] for g in gpus), path.name


def test_parse_smi_header_reads_every_captured_table():
    files = sorted((CAPTURES / "nvidia-smi-table").glob("*.txt"))
    assert files
    for path in files:
        text = path.read_text(errors="replace")
        driver, cuda = script.parse_smi_header(text)
        assert driver is not None, path.name
        if "CUDA Version:" in text or "CUDA UMD Version:" in text:
            assert cuda is not None and script.version_tuple(cuda), path.name
        else:  # drivers before 410 print no CUDA Version
            assert cuda is None


def test_parse_smi_header_and_query():
    driver, cuda = script.parse_smi_header((FIXTURES / "nvidia-smi-table__2x-h100.txt").read_text())
    assert (driver, cuda) == ("550.90.07", "12.4")
    rows = script.parse_smi_query(
        (FIXTURES / "nvidia-smi-query__2x-h100.csv").read_text(), script.SMI_QUERY_FIELDS
    )
    assert rows[1]["index"] == 1 and rows[1]["compute_cap"] == "9.0"
    assert rows[0]["memory.total"] == 81559


def test_parse_smi_header_of_drivers_610_and_newer():
    header = "| NVIDIA-SMI 610.57.04     KMD Version: 610.57.04     CUDA UMD Version: 13.3     |"
    assert script.parse_smi_header(header) == ("610.57.04", "13.3")


def test_parse_smi_query_rejects_a_wrong_column_count():
    with pytest.raises(ValueError, match="has 2 fields, expected 7"):
        script.parse_smi_query("0, NVIDIA A100\n", script.SMI_QUERY_FIELDS)


@pytest.mark.parametrize(
    ("arch_list", "capability", "supported", "says"),
    [
        (["sm_80", "sm_90"], "9.0", True, "sm_90 is in the arch list"),
        (["sm_80", "sm_90"], "8.6", True, "sm_80 binaries run on 8.6"),
        (["sm_80", "sm_90a"], "9.0", True, "sm_90a is in the arch list"),
        (["sm_70", "compute_70"], "8.0", True, "PTX compute_70"),
        (
            ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"],
            "12.0",
            False,
            "sm_120 (compute capability 12.0) is not in the arch list [sm_50,",
        ),
        (["sm_90a"], "10.0", False, "sm_100"),
        (["sm_86"], "8.0", False, "sm_80 (compute capability 8.0)"),
        ([], "9.0", False, "arch list []"),
    ],
)
def test_arch_supports(arch_list, capability, supported, says):
    ok, how = script.arch_supports(arch_list, capability)
    assert ok is supported
    assert says in how


def test_versions_and_cudnn_numbers():
    assert script.version_tuple("12.4") == (12, 4)
    assert script.version_tuple("2.13.0+cpu") == (2, 13, 0)
    assert script.version_tuple(None) is None
    assert script.version_tuple("abc") is None
    assert script.cudnn_version_text(8902) == "8.9.2"
    assert script.cudnn_version_text(90100) == "9.1.0"
    assert script.cudnn_version_text(None) is None


def test_make_check_refuses_unknown_outcomes_and_nulls_non_finite_numbers():
    with pytest.raises(ValueError, match="PASS, FAIL, COULD-NOT-RUN"):
        script.make_check("x", "OK", "because")
    check = script.make_check("x", "PASS", "r", numbers={"a": float("nan"), "b": 1.5, "c": True})
    assert check["numbers"] == {"a": None, "b": 1.5, "c": None}
    json.dumps(check, allow_nan=False)


# --------------------------------------------------------------------------- real runs


@needs_torch
def test_cpu_torch_run_reports_gpu_parts_as_could_not_run():
    doc, proc = run_script("--framework", "torch", "--quick")
    assert proc.stdout.strip().startswith("{") and proc.stdout.strip().endswith("}")
    parse_result_text(proc.stdout)  # the judge's validator accepts the real document
    torch = doc["frameworks"]["torch"]
    assert torch["installed"] is True
    assert torch["version"].startswith("2.")
    by_name = checks_by_name(torch)
    assert by_name["import"]["outcome"] == "PASS"
    expected = {"cuda_available", "device_count", "nccl_allreduce", *script.TORCH_DEVICE_CHECKS}
    assert expected <= set(by_name)
    for name in expected:
        assert by_name[name]["outcome"] == "COULD-NOT-RUN", by_name[name]
        assert by_name[name]["reason"], name
    if torch["cuda"] is None:  # the CPU-only wheel says so in the reason
        assert "CPU-only build" in by_name["cuda_available"]["reason"]
    assert "run" not in by_name  # the child finished normally


def test_python_without_torch_reports_could_not_run():
    if not Path(SYSTEM_PYTHON).exists():
        pytest.skip(f"{SYSTEM_PYTHON} does not exist here")
    if _has_module(SYSTEM_PYTHON, "torch"):
        pytest.skip(f"{SYSTEM_PYTHON} has torch installed; need an interpreter without it")
    doc, proc = run_script("--framework", "all", "--quick", python=SYSTEM_PYTHON)
    for name in ("torch", "tensorflow"):
        framework = doc["frameworks"][name]
        assert framework["installed"] is False
        assert framework["reason"] == f"{name} is not installed in {SYSTEM_PYTHON}"
        assert framework["checks"] == [
            script.make_check("import", "COULD-NOT-RUN", framework["reason"])
        ]
    assert doc["python"]["executable"] == SYSTEM_PYTHON


def _stand_in(tmp_path: Path, name: str, body: str) -> None:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def _env_with_path(tmp_path: Path, extra_pythonpath: Path | None = None) -> dict[str, str]:
    env = dict(os.environ, PATH=f"{tmp_path}:{os.environ['PATH']}")
    if extra_pythonpath is not None:
        env["PYTHONPATH"] = str(extra_pythonpath)
    return env


def _replaying_nvidia_smi(tmp_path: Path) -> None:
    """An nvidia-smi on PATH that prints the captured outputs of a two-H100 host."""
    _stand_in(
        tmp_path,
        "nvidia-smi",
        f"""
case "$1" in
  -L) cat {FIXTURES}/nvidia-smi-L__2x-h100.txt ;;
  --query-gpu=*) cat {FIXTURES}/nvidia-smi-query__2x-h100.csv ;;
  *) cat {FIXTURES}/nvidia-smi-table__2x-h100.txt ;;
esac
""",
    )


def test_nvidia_smi_outputs_are_read_into_the_document(tmp_path):
    _replaying_nvidia_smi(tmp_path)
    info, gpus = _probe_with_path(tmp_path)
    assert info["available"] is True
    assert (info["driver_version"], info["cuda_version"]) == ("550.90.07", "12.4")
    assert [g["compute_cap"] for g in gpus] == ["9.0", "9.0"]
    assert gpus[0]["pci_bus_id"] == "00000000:19:00.0"


def test_a_failing_nvidia_smi_is_recorded_with_its_message(tmp_path):
    _stand_in(
        tmp_path,
        "nvidia-smi",
        """
echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
exit 9
""",
    )
    info, gpus = _probe_with_path(tmp_path)
    assert info["available"] is False and gpus == []
    assert info["reason"].startswith("nvidia-smi -L exited 9: NVIDIA-SMI has failed")


def _probe_with_path(tmp_path: Path) -> tuple[dict, list]:
    code = (
        "import json; from gpuhost.smoke import script; "
        "print(json.dumps(script.probe_nvidia_smi()))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=_env_with_path(tmp_path),
        check=True,
    )
    info, gpus = json.loads(proc.stdout)
    return info, gpus


@needs_torch
def test_cpu_only_wheel_on_a_host_whose_driver_sees_gpus_fails(tmp_path):
    _replaying_nvidia_smi(tmp_path)
    doc, _ = run_script("--framework", "torch", "--quick", env=_env_with_path(tmp_path))
    torch = doc["frameworks"]["torch"]
    if torch["cuda"] is not None:
        pytest.skip("the installed torch is a CUDA build; this case needs the CPU-only wheel")
    check = checks_by_name(torch)["cuda_available"]
    assert check["outcome"] == "FAIL"
    assert "CPU-only build" in check["reason"] and "the driver sees 2 GPU(s)" in check["reason"]


def _broken_torch(tmp_path: Path, body: str) -> Path:
    package = tmp_path / "site" / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(body)
    return tmp_path / "site"


def test_a_broken_torch_install_is_a_fail_with_the_import_error(tmp_path):
    site = _broken_torch(
        tmp_path, "raise OSError('libcudart.so.12: cannot open shared object file')\n"
    )
    doc, _ = run_script("--framework", "torch", env=_env_with_path(tmp_path, site))
    torch = doc["frameworks"]["torch"]
    check = checks_by_name(torch)["import"]
    assert check["outcome"] == "FAIL"
    assert "libcudart.so.12" in check["reason"]


def test_a_crashing_framework_still_yields_one_document(tmp_path):
    site = _broken_torch(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    doc, proc = run_script("--framework", "all", env=_env_with_path(tmp_path, site))
    run = checks_by_name(doc["frameworks"]["torch"])["run"]
    assert run["outcome"] == "FAIL"
    assert "died with exit code -11" in run["reason"]
    assert "tensorflow" in doc["frameworks"]  # the other framework still ran
    parse_result_text(proc.stdout)


@pytest.mark.slow
def test_a_hanging_framework_is_killed_at_the_timeout(tmp_path):
    site = _broken_torch(tmp_path, "import time\ntime.sleep(600)\n")
    doc, _ = run_script(
        "--framework", "torch", "--timeout", "3", env=_env_with_path(tmp_path, site), timeout=60
    )
    run = checks_by_name(doc["frameworks"]["torch"])["run"]
    assert run["outcome"] == "FAIL"
    assert "did not finish within 3 s" in run["reason"]


def test_stdout_stays_one_document_when_a_framework_prints(tmp_path):
    site = _broken_torch(
        tmp_path, "print('hello from a chatty import')\nraise ImportError('nope')\n"
    )
    _doc, proc = run_script("--framework", "torch", env=_env_with_path(tmp_path, site))
    assert "chatty" not in proc.stdout
    json.loads(proc.stdout)


@needs_torch
def test_allreduce_orchestration_runs_for_real_with_gloo_on_cpu():
    """The NCCL check's process orchestration (file store, one process per rank, result
    collection, bandwidth arithmetic), exercised with torch's CPU backend on this machine."""
    check = script.allreduce_across_processes(2, 1024 * 1024, 120.0, "gloo")
    assert check["outcome"] == "PASS", check
    assert check["numbers"]["world_size"] == 2
    assert check["numbers"]["busbw_gbps"] > 0
    assert "gloo all-reduce across 2 ranks correct" in check["reason"]


@needs_torch
def test_allreduce_worker_failure_is_a_fail_with_its_stderr():
    check = script.allreduce_across_processes(2, 1024 * 1024, 120.0, "nccl")  # no CUDA here
    assert check["outcome"] == "FAIL"
    assert "nccl worker rank 0 exited 1" in check["reason"]
