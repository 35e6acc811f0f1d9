"""GPU names a user or nvidia-smi gives that no capture in tests/ carries (issue #14, tried as a
user): each is answered from a sourced matrix row, or stays unknown where no source was read."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import yaml

from gpuhost.matrix import Matrix, build_matrix, check_stack, default_matrix_path, resolve_stack
from gpuhost.matrix.gpus import gpu_info
from gpuhost.matrix.resolve import NoCompatibleSet

PRO = "NVIDIA RTX PRO Blackwell"
AS_OF = dt.date(2026, 11, 23)


@pytest.mark.parametrize(
    ("name", "cc", "model"),
    [
        ("RTX PRO 6000", "12.0", PRO),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0", PRO),
        ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "12.0", PRO),
        ("NVIDIA RTX PRO 4000 Blackwell SFF Edition", "12.0", PRO),
        ("rtx pro 4500", "12.0", PRO),
        ("NVIDIA GeForce RTX 4060 Laptop GPU", "8.9", "GeForce RTX 40 Laptop GPUs"),
        ("NVIDIA GeForce RTX 4090 Laptop GPU", "8.9", "GeForce RTX 40 Laptop GPUs"),
        ("Jetson T5000", "11.0", "Jetson Thor (T5000 / T4000)"),
        ("NVIDIA Jetson T4000", "11.0", "Jetson Thor (T5000 / T4000)"),
        ("NVIDIA GeForce RTX 3090", "8.6", "GeForce RTX 3090"),
        ("NVIDIA A30", "8.0", "NVIDIA A30"),
        ("NVIDIA L40S", "8.9", "NVIDIA L40S"),
        ("NVIDIA H200 NVL", "9.0", "NVIDIA H200"),
        ("NVIDIA GH200 480GB", "9.0", "NVIDIA GH200"),
        ("NVIDIA B200", "10.0", "NVIDIA B200"),
        ("NVIDIA Jetson AGX Orin", "8.7", "Jetson Orin"),
    ],
)
def test_names_find_their_row(matrix: Matrix, name: str, cc: str, model: str) -> None:
    info = gpu_info(matrix, name)
    assert info is not None, name
    assert (info.compute_capability, info.model) == (cc, model)
    assert info.source.startswith("https://")


@pytest.mark.parametrize(
    "name",
    [
        "NVIDIA RTX PRO 6000D",  # not on the cuda-gpus page (its PCI ID 10de:2bb2 is known)
        "Orin (nvgpu)",  # what Jetson's nvidia-smi prints: no source read names it
    ],
)
def test_unsourced_names_stay_unknown(matrix: Matrix, name: str) -> None:
    assert gpu_info(matrix, name) is None
    rules = {f.rule for f in check_stack(matrix, gpus=[name])}
    assert "gpu.unknown" in rules


@pytest.mark.parametrize(
    ("name", "chip_id"),
    [
        # not on NVIDIA's tables, but the PCI database names them on a chip the tables' GPUs
        # share (GA107: RTX 3050 and A2; AD104: RTX 4070 Ti and L4): the GPU catalog
        ("NVIDIA GeForce RTX 2050 Laptop GPU", ("8.6", "Ampere")),
        ("NVIDIA GeForce RTX 4070 SUPER", ("8.9", "Ada")),
    ],
)
def test_names_known_by_their_chip(matrix: Matrix, name: str, chip_id: tuple[str, str]) -> None:
    info = gpu_info(matrix, name)
    assert info is not None and (info.compute_capability, info.architecture) == chip_id
    assert info.confidence == "derived"


def test_laptop_rows_do_not_swallow_desktop_names(matrix: Matrix) -> None:
    assert gpu_info(matrix, "NVIDIA GeForce RTX 4060").model == "GeForce RTX 40 series"  # type: ignore[union-attr]


def test_resolve_for_an_undated_architecture_offers_the_newest_cuda(matrix: Matrix) -> None:
    """An architecture no source dates (B300, cc 10.3, before CUDA 12.9's notes were read): an
    old cuDNN's open-ended 'SM 3.5 and later' once made resolve propose CUDA 11.7 for such a
    GPU. The newest CUDA, and the reason is said."""
    raw = yaml.safe_load(Path(default_matrix_path()).read_text(encoding="utf-8"))
    row = next(a for a in raw["architectures"] if "10.3" in a["compute_capabilities"])
    del row["first_cuda"]
    undated = build_matrix(raw, "undated.yaml")
    newest_major = max(int(c.version.split(".")[0]) for c in matrix.cuda)
    b300 = resolve_stack(undated, gpus=["B300"], as_of=AS_OF)
    assert int(b300.cuda.split(".")[0]) == newest_major
    assert any("no source says which CUDA first supports B300" in e for e in b300.explain)
    h100 = resolve_stack(matrix, gpus=["H100"], as_of=AS_OF)
    assert any("newest release that supports this hardware" in e for e in h100.explain)


@pytest.mark.parametrize(
    "gpus",
    [["NVIDIA Jetson AGX Orin"], ["Jetson T5000"], ["Jetson Xavier NX"], ["H100", "Jetson TX2"]],
)
def test_resolve_proposes_no_driver_branch_for_a_jetson(matrix: Matrix, gpus: list[str]) -> None:
    """A Jetson's driver, CUDA and cuDNN come with Jetson Linux (L4T, installed by JetPack), not
    from NVIDIA's driver branches: resolve proposed R595 + CUDA 13.1 for an Orin. Now no set, and
    the reason names the GPU and the source."""
    with pytest.raises(NoCompatibleSet) as caught:
        resolve_stack(matrix, gpus=gpus, as_of=AS_OF)
    [reason] = caught.value.reasons
    assert "gets its driver, CUDA and cuDNN from Jetson Linux (L4T)" in reason
    assert "https://developer.nvidia.com/embedded/linux-tegra-r3272" in reason


def test_open_ended_cudnn_is_not_offered_to_gpus_its_cuda_lacks(
    matrix: Matrix, capsys: pytest.CaptureFixture[str]
) -> None:
    """cuDNN 8.4/8.5 say 'SM 3.5 and later' but are built for CUDA 11.x, which has no Blackwell:
    `show --gpu 'RTX PRO 6000'` listed them and `check --cudnn 8.5.0` passed an RTX 5090."""
    from gpuhost.cli import main

    assert main(["matrix", "show", "--gpu", "RTX PRO 6000"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "cuDNN" in x)
    assert "8.5.0" not in line and "9.17.0" in line
    rules = {f.rule: f.severity for f in check_stack(matrix, gpus=["RTX 5090"], cudnn="8.5.0")}
    assert rules["cudnn.arch"] == "error"
    rules = {f.rule: f.severity for f in check_stack(matrix, gpus=["T4"], cudnn="8.5.0")}
    assert "cudnn.arch" not in rules


@pytest.mark.parametrize(
    ("given", "rule"),
    [
        ({"frameworks": ["torch==99.0"]}, "framework.unknown"),
        ({"frameworks": ["tensorflow==9.1"]}, "framework.unknown"),
        ({"cudnn": "9.99.0", "cuda": "12.4"}, "cudnn.unknown"),
        ({"cuda": "14.0"}, "cuda.unknown"),
        ({"gpus": ["H100"], "driver": "999.1.2"}, "driver.branch-unknown"),
    ],
)
def test_a_release_newer_than_the_data_says_so_and_what_to_do(
    matrix: Matrix, given: dict, rule: str
) -> None:
    """A release published after the data was checked is not a wrong confident answer: the
    finding says the data is older than it, with the data's date and how to get newer data."""
    [finding] = [f for f in check_stack(matrix, as_of=AS_OF, **given) if f.rule == rule]
    said = f"it is newer than every release the matrix data (checked {matrix.updated}) lists: "
    assert said in finding.message
    assert "update gpuhost for newer data" in finding.message


def test_an_unlisted_release_between_known_ones_is_not_called_newer(matrix: Matrix) -> None:
    [finding] = check_stack(matrix, cudnn="9.4.0", as_of=AS_OF)
    assert finding.rule == "cudnn.unknown" and "newer than every" not in finding.message
