"""nvidia-smi's report is read with one command: provision's SmiQuery fact and the checks run
the same shell (probe.script.SMI_XML_CODE) and read its output the same way."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gpuhost.checks_support import gpu
from gpuhost.facts.nvidia_smi import SmiQuery
from gpuhost.parsers import parse_output
from gpuhost.probe.script import SMI_NOT_FOUND, SMI_XML_CODE

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "captures"


def test_fact_and_checks_run_one_command() -> None:
    assert SmiQuery().command() == SMI_XML_CODE == gpu.SMI_COMMAND
    assert gpu.NOT_FOUND == SMI_NOT_FOUND


@pytest.mark.parametrize(
    "capture",
    [
        "nvidia-smi-xml/telegraf__a100-sxm4-v12.xml",
        "nvidia-smi-errors/nvml-driver-library-mismatch__nvml-570.124.txt",
    ],
)
def test_fact_reads_a_report_as_the_checks_do(capture: str) -> None:
    text = (CAPTURES / capture).read_text(encoding="utf-8")
    assert SmiQuery().process(text.splitlines()) == parse_output(text)


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="nvidia-smi is installed here")
def test_without_nvidia_smi_the_fact_is_absent() -> None:
    out = subprocess.run(["sh", "-c", SMI_XML_CODE], capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout.strip()) == (0, SMI_NOT_FOUND)
    assert SmiQuery().process(out.stdout.splitlines()) == SmiQuery.default()
