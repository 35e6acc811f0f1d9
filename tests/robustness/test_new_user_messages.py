"""Messages a new user met trying the installed wheel (a walkthrough of README and the guides):
each said something that was not quite so."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.robustness.conftest import ROOT, assert_one_line, gpuhost

CLOCKS = ROOT / (
    "tests/fixtures/captures/nvidia-smi-clocks/garylvov__4x-rtx3090-3090ti__580.65.06__q-d-CLOCK.txt"
)


def test_parse_of_a_report_without_gpu_names_prints_no_python_none() -> None:
    run = gpuhost("parse", str(CLOCKS))
    assert run.code == 0, run.err
    gpu_lines = [line for line in run.out.splitlines() if line.startswith("gpu ")]
    assert gpu_lines and all("None" not in line for line in gpu_lines), run.out
    assert gpu_lines[0] == "gpu 0: 00000000:01:00.0"


def test_smoke_judge_names_what_it_expected(tmp_path: Path) -> None:
    run = gpuhost("smoke", "judge", "nosuch.json", cwd=tmp_path)
    assert_one_line(run, 2, "nosuch.json", "expected a smoke result (gpuhost smoke run --save")


def test_inventory_check_counts_one_host(tmp_path: Path) -> None:
    inv = tmp_path / "inv.py"
    inv.write_text("hosts = ['n1.invalid']\n", encoding="utf-8")
    run = gpuhost("inventory", "check", str(inv))
    assert run.code == 0 and run.out.strip() == f"{inv}: 1 host, inventory data ok", run.out


@pytest.mark.parametrize("command", [["matrix", "render"], ["inventory", "render"]])
def test_render_outside_the_checkout_is_one_line_and_creates_nothing(tmp_path, command) -> None:
    """The default output is the checkout's docs/ file: elsewhere matrix render created ./docs/
    silently while inventory render failed; both now say the folder is missing."""
    run = gpuhost(*command, cwd=tmp_path)
    assert_one_line(run, 2, "--output docs/", "cannot write (folder docs does not exist)")
    assert list(tmp_path.iterdir()) == []
    to_stdout = gpuhost(*command, "-o", "-", cwd=tmp_path)
    assert to_stdout.code == 0 and to_stdout.out.startswith("# ") and "wrote" not in to_stdout.out


def test_an_inventory_that_is_a_fifo_or_empty_is_named_as_such(tmp_path: Path) -> None:
    """A FIFO was 'inventory file not found' and an empty argument 'is a directory'."""
    import os

    os.mkfifo(tmp_path / "fleet.py")
    run = gpuhost("inventory", "check", "fleet.py", cwd=tmp_path)
    assert_one_line(run, 2, "fleet.py: inventory file is not a regular file")
    run = gpuhost("inventory", "check", "", cwd=tmp_path)
    assert_one_line(run, 2, "the inventory argument is empty")
