"""``gpuhost smoke run|judge``: the PyTorch/TensorFlow GPU smoke test on this machine.

``run`` executes the smoke script with a Python interpreter here and judges its document;
``judge`` judges a document saved earlier (e.g. from a host). Exit 0 when nothing FAILed
(COULD-NOT-RUN is not a failure), 1 when a check FAILed, 2 for bad input.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from gpuhost.cli._echo import echo_lines
from gpuhost.cli._options import F, FiniteRange
from gpuhost.errors import EXIT_FINDINGS, EXIT_OK
from gpuhost.matrix.peaks import judge_smoke_document
from gpuhost.output import write_output
from gpuhost.readers import MAX_FILE_BYTES, read_text
from gpuhost.smoke.runner import FRAMEWORK_CHOICES, run_local_text


def _judge_document(text: str, source: str, *expected: Any) -> int:
    """Judge and print (``matrix.peaks.judge_smoke_document``); the exit code."""
    lines, failed = judge_smoke_document(text, source, *expected)
    echo_lines(lines)
    return EXIT_FINDINGS if failed else EXIT_OK


_expect_options = [
    click.option("--gpus", type=click.IntRange(min=0), help="GPUs the host must have."),
    click.option("--driver-cuda", help="Newest CUDA the driver supports (default: nvidia-smi's)."),
    click.option(
        "--min-ratio",
        type=FiniteRange(min=0, max=1, min_open=True),
        help="Required fraction of a GPU's published peak (default: data/gpu_peaks.yaml's).",
    ),
    click.option("--json", "as_json", is_flag=True, help="Print verdicts as JSON."),
]


def _with_expect_options(func: F) -> F:
    for option in reversed(_expect_options):
        func = option(func)
    return func


@click.group("smoke")
def command() -> None:
    """PyTorch/TensorFlow GPU smoke test: run it here, or judge a saved result.

    \b
    Example:
      gpuhost smoke run --quick
    """


@command.command("run")
@click.option(
    "--python",
    "python",
    default=sys.executable,
    show_default=True,
    help="Interpreter whose frameworks are tested.",
)
@click.option(
    "--framework",
    type=click.Choice(FRAMEWORK_CHOICES),
    default="all",
    show_default=True,
    help="Which framework's checks to run.",
)
@click.option("--quick", is_flag=True, help="Smaller sizes and fewer iterations.")
@click.option(
    "--timeout",
    type=FiniteRange(min=1),
    default=600.0,
    show_default=True,
    help="Seconds for the whole script.",
)
@click.option(
    "--save",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the script's JSON document to this file.",
)
@_with_expect_options
def run_command(
    python: str,
    framework: str,
    quick: bool,
    timeout: float,
    save: Path | None,
    gpus: int | None,
    driver_cuda: str | None,
    min_ratio: float | None,
    as_json: bool,
) -> int:
    """Run the smoke script with PYTHON on this machine and judge it.

    \b
    Example:
      gpuhost smoke run --framework torch --save result.json
    """
    raw, source = run_local_text(python, framework, quick, timeout)
    if save is not None:  # saved before parsing, so a malformed document can be inspected
        write_output(str(save), raw, "--save")
    return _judge_document(raw, source, gpus, driver_cuda, min_ratio, as_json)


@command.command("judge")
@click.argument("result_file", type=click.Path(path_type=Path))
@_with_expect_options
def judge_command(
    result_file: Path,
    gpus: int | None,
    driver_cuda: str | None,
    min_ratio: float | None,
    as_json: bool,
) -> int:
    """Judge RESULT_FILE, a JSON document printed by the smoke script.

    \b
    Example:
      gpuhost smoke judge result.json --gpus 8
    """
    text = read_text(result_file, "a smoke result (gpuhost smoke run --save FILE)", MAX_FILE_BYTES)
    return _judge_document(text, str(result_file), gpus, driver_cuda, min_ratio, as_json)
