"""GPU names as users type them and nvidia-smi prints them (full and table-truncated), the
models the issue found unrecognised, and the warning an unknown GPU gives."""

from __future__ import annotations

import pytest

from gpuhost.matrix import Matrix, check_stack, gpu_info


@pytest.mark.parametrize(
    ("name", "cc"),
    [
        ("NVIDIA GeForce RTX 3080 Ti", "8.6"),
        ("NVIDIA GeForce RTX 3060", "8.6"),
        ("NVIDIA GeForce RTX 2080 Ti", "7.5"),
        ("NVIDIA TITAN RTX", "7.5"),
        ("Quadro RTX 6000", "7.5"),
        ("NVIDIA T1000", "7.5"),
        ("NVIDIA GeForce GTX 1650 Ti", "7.5"),
        ("NVIDIA TITAN Xp", "6.1"),
        ("Quadro P4000", "6.1"),
        ("NVIDIA GeForce GTX TITAN X", "5.2"),
        ("Jetson AGX Orin", "8.7"),
        ("Jetson AGX Xavier", "7.2"),
        ("NVIDIA H100 80GB HBM3", "9.0"),
    ],
)
def test_names_nvidia_smi_prints(matrix: Matrix, name: str, cc: str) -> None:
    info = gpu_info(matrix, name)
    assert info is not None and info.compute_capability == cc


@pytest.mark.parametrize(
    ("name", "cc"),
    [
        ("NVIDIA A100-SXM...", "8.0"),
        ("NVIDIA GeForce RTX 30...", "8.6"),
        ("Tesla V100-SXM2...", "7.0"),
    ],
)
def test_truncated_table_names_match_when_unambiguous(matrix: Matrix, name: str, cc: str) -> None:
    info = gpu_info(matrix, name)
    assert info is not None and info.compute_capability == cc


def test_truncated_name_of_several_architectures_is_unknown(matrix: Matrix) -> None:
    assert gpu_info(matrix, "NVIDIA GeForce ...") is None  # RTX 50 / 40 / 30 / GTX 10 ...
    assert gpu_info(matrix, "NVIDIA GeForce RTX 30") is None  # not truncated: no prefix match


def test_unknown_gpu_warning_names_the_rules_not_applied(matrix: Matrix) -> None:
    (f,) = [x for x in check_stack(matrix, gpus=["NVIDIA Foo 9000"]) if x.rule == "gpu.unknown"]
    assert f.severity == "warning" and "driver.arch-unsupported" in f.message
    assert "cudnn.arch" in f.message and "framework.arch" in f.message


def test_unknown_gpu_warning_names_the_nearest_known_names(matrix: Matrix) -> None:
    (f,) = [x for x in check_stack(matrix, gpus=["A10O"]) if x.rule == "gpu.unknown"]
    assert "did you mean A10 or A10G or A100?" in f.message and "known names include" in f.message
    (far,) = [x for x in check_stack(matrix, gpus=["Foo 9000"]) if x.rule == "gpu.unknown"]
    assert "did you mean" not in far.message and "known names include" in far.message


@pytest.mark.parametrize(
    ("args", "said"),
    [
        # was exit 1 and a bare 'not in the compatibility matrix' on stdout
        (["--gpu", "A10O"], '--gpu "A10O": not a GPU the compatibility matrix lists; did you mean'),
        (["--gpu", "Foo 9000"], "known names include"),
        # --json without --framework printed the text table, exit 0
        (["--json"], "--json: only with --framework"),
        (["--gpu", "H100", "--json"], "--json: only with --framework"),
    ],
)
def test_cli_show_bad_input_is_one_line_exit_2(capsys: pytest.CaptureFixture[str], args, said):
    from gpuhost.cli import main

    assert main(["matrix", "show", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and said in captured.err


def test_cli_show_a_known_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    from gpuhost.cli import main

    assert main(["matrix", "show", "--gpu", "NVIDIA H100 80GB HBM3"]) == 0
    assert "compute capability  9.0" in capsys.readouterr().out
