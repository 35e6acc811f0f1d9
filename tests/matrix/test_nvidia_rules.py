"""Facts of NVIDIA's that the shipped data carries (bulletin 5861, B300's nvidia-smi name, sm_103 /
sm_121 from CUDA 12.9, open kernel modules only on Grace Hopper and Blackwell) and the loader
refusing data that contradicts them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpuhost.cli import main
from gpuhost.matrix import gpu_info, load_matrix
from gpuhost.matrix.advisories import load_advisories, security_findings
from gpuhost.matrix.lookup import package_runs_on

from .test_load import _problems, raw

__all__ = ["raw"]  # the shipped matrix as YAML data (a fixture of test_load)


def _arch(data: dict[str, Any], cc: str) -> dict[str, Any]:
    row: dict[str, Any] = next(a for a in data["architectures"] if cc in a["compute_capabilities"])
    return row


def test_hgx_b300_name_is_known_with_sm103_from_cuda_12_9() -> None:
    info = gpu_info(load_matrix(), "NVIDIA B300 SXM6 AC")
    assert info is not None and (info.model, info.compute_capability) == ("NVIDIA B300", "10.3")
    assert main(["matrix", "show", "--gpu", "NVIDIA B300 SXM6 AC"]) == 0
    for gpu in ("NVIDIA B300 SXM6 AC", "GB10"):
        args = ["matrix", "check", "--gpu", gpu, "--driver", "580.178.04", "--cuda", "12.9"]
        assert main([*args, "--json"]) == 0


@pytest.mark.parametrize(
    ("name", "modules"),
    [
        ("GH200", ("open",)),
        ("B200", ("open",)),
        ("GB300", ("open",)),
        ("H100", ("open", "proprietary")),
    ],
)
def test_kernel_module_flavours(name: str, modules: tuple[str, ...]) -> None:
    info = gpu_info(load_matrix(), name)
    assert info is not None and info.kernel_modules == modules


@pytest.mark.parametrize("gpu", ["B200", "GH200", "NVIDIA B300 SXM6 AC"])
def test_a_proprietary_module_profile_does_not_verify_there(
    gpu: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["matrix", "profile", "verify", "debian12-nonfree-535-security", "--gpu", gpu]) == 1
    assert "installs the proprietary kernel module, which does not support" in (
        capsys.readouterr().out
    )


def test_old_cudnn_lines_are_not_for_b300() -> None:
    m = load_matrix()
    arch = m.architecture_of("10.3")
    assert arch is not None
    found = {
        rel.version for rel in m.cudnn for pkg in rel.packages if package_runs_on(pkg, "10.3", arch)
    }
    assert "8.4.0" not in found and "8.5.0" not in found and "9.17.0" in found


def test_loader_refuses_proprietary_modules_on_blackwell(raw: dict[str, Any]) -> None:
    data = copy.deepcopy(raw)
    _arch(data, "10.0")["kernel_modules"] = ["open", "proprietary"]
    found = _problems(data)
    assert any(
        p.startswith("architectures[") and "supports only the open kernel modules" in p
        for p in found
    ), found


def test_loader_refuses_a_gpu_row_widening_its_architecture(raw: dict[str, Any]) -> None:
    data = copy.deepcopy(raw)
    gh200 = next(g for g in data["gpus"] if g["names"] == ["GH200"])
    hopper = _arch(data, "9.0")
    hopper["kernel_modules"] = ["open"]
    gh200["kernel_modules"] = ["proprietary"]
    assert any("a GPU row can only narrow them" in p for p in _problems(data))


def test_loader_refuses_a_cudnn_line_on_an_architecture_it_predates(raw: dict[str, Any]) -> None:
    data = copy.deepcopy(raw)
    row = next(r for r in data["cudnn"] if r["version"] == "8.5.0")
    row["packages"][0] = {
        "cuda": row["packages"][0]["cuda"],
        "compute_capabilities": ["8.0", "10.3"],
    }
    found = _problems(data)
    assert any("lists 10.3" in p and "predates the architecture" in p for p in found), found


def test_bulletin_5861() -> None:
    advs = load_advisories()

    def severities(driver: str) -> set[str]:
        return {f.severity for f in security_findings(advs, driver=driver)}

    assert severities("580.159.03") == {"error"}
    assert severities("580.178.04") == set()
    assert severities("595.91.07") == set() and severities("595.71.05") == {"error"}
    assert severities("610.57.04") == set() and severities("615.71.09") == set()
    (r535,) = security_findings(advs, driver="535.309.01")
    assert r535.severity == "warning" and "R535 gets no fix" in r535.message
