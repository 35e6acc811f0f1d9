"""The checks ship inside the package (gpuhost.checks): ``gpuhost check`` and
``pytest --pyargs gpuhost.checks`` work from an installed wheel in any folder, and the source
tree's checks/ runs the same modules without a copy."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from wheel_support import build_wheel_venv

import gpuhost.checks
from gpuhost.cli import main

ROOT = Path(__file__).resolve().parents[2]
PACKAGED = Path(gpuhost.checks.__file__).parent


def _packaged_modules() -> list[str]:
    return sorted(p.stem for p in PACKAGED.glob("test_*.py"))


def test_source_tree_checks_reexport_every_packaged_module() -> None:
    modules = _packaged_modules()
    assert "test_driver" in modules and "test_ssh" in modules
    for name in modules:
        path = ROOT / "checks" / f"{name}.py"
        assert path.is_file(), f"checks/{name}.py missing: add a re-export of gpuhost.checks.{name}"
        tree = ast.parse(path.read_text())
        imports = [n for n in tree.body if isinstance(n, ast.ImportFrom)]
        assert [(i.module, [a.name for a in i.names]) for i in imports] == [
            (f"gpuhost.checks.{name}", ["*"])
        ], f"checks/{name}.py must only re-export gpuhost.checks.{name}, not copy it"
    conftest = ast.parse((ROOT / "checks" / "conftest.py").read_text())
    assigned = [n for n in conftest.body if isinstance(n, ast.Assign)]
    assert [ast.literal_eval(a.value) for a in assigned] == [["gpuhost.checks.plugin"]]


def _collect(args: list[str], cwd: Path, python: str = sys.executable) -> str:
    proc = subprocess.run(
        [python, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return proc.stdout


def test_source_tree_suite_collects_the_packaged_checks_once(tmp_path: Path) -> None:
    out = _collect([str(ROOT / "checks"), "--tier", "static"], tmp_path)
    ids = [line for line in out.splitlines() if "::" in line]
    assert any(i.endswith("checks/test_driver.py::test_driver_loaded[local]") for i in ids), out
    assert len(ids) == len(set(ids))
    assert not any("src/gpuhost/checks" in i for i in ids)  # collected via checks/, not twice
    assert not any("smoke" in i for i in ids)  # --tier static deselects functional checks


def test_checks_dir_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuhost.checks.run import checks_dir

    assert checks_dir() == PACKAGED
    monkeypatch.setenv("GPUHOST_CHECKS_DIR", str(tmp_path))
    assert main(["check", "--tier", "static"]) == 2  # no conftest.py there: a config error
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["gpuhost.checks.plugin"]\n')
    (tmp_path / "test_site.py").write_text("def test_site_rule(facts):\n    assert facts.name\n")
    assert checks_dir() == tmp_path
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("gpuhost")), "check", "--tier", "static"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "GPUHOST_CHECKS_DIR": str(tmp_path)},
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "1 passed" in proc.stdout


def test_checks_dir_override_error_names_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPUHOST_CHECKS_DIR", str(tmp_path))
    assert main(["check"]) == 2
    err = capsys.readouterr().err
    assert f"GPUHOST_CHECKS_DIR={tmp_path}: no conftest.py" in err
    assert "Traceback" not in err


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel_venv(tmp_path_factory.mktemp("wheel"))


@pytest.mark.slow
def test_installed_wheel_checks_from_any_folder(wheel_venv: Path, tmp_path: Path) -> None:
    python = str(wheel_venv / "bin/python")
    where = subprocess.run(
        [python, "-c", "import gpuhost.checks; print(gpuhost.checks.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    ).stdout
    assert where.startswith(str(wheel_venv)), where  # the wheel's copy, not the source tree
    junit = tmp_path / "report.xml"
    proc = subprocess.run(
        [str(wheel_venv / "bin/gpuhost"), "check", "--tier", "static", "--junit", str(junit)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    out = proc.stdout + proc.stderr
    assert "no checks/ folder" not in out
    assert proc.returncode == 1, out[-3000:]  # this machine has no GPU: checks run and fail
    assert f"rootdir: {wheel_venv}" in out  # the package's pytest.ini, not this folder's
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    assert cases["test_driver_loaded[local]"].find("failure") is not None
    assert "the NVIDIA kernel module is not loaded" in out
    assert not any(c.find("error") is not None for c in cases.values())
    assert len(cases) > 20


@pytest.mark.slow
def test_installed_wheel_pytest_pyargs(wheel_venv: Path, tmp_path: Path) -> None:
    python = str(wheel_venv / "bin/python")
    plain = _collect(["--hosts=local://", "--pyargs", "gpuhost.checks"], tmp_path, python)
    assert "test_driver.py::test_driver_loaded[local]" in plain
    assert "test_smoke.py::test_smoke_python_envs[local]" in plain  # default tier: functional
    assert "test_stress" not in plain
    tiered = ["-p", "gpuhost.checks.plugin", "--pyargs", "gpuhost.checks", "--tier", "static"]
    static = _collect(tiered, tmp_path, python)
    assert "test_driver_loaded[local]" in static and "smoke" not in static
