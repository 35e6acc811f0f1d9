"""``gpuhost check INVENTORY --tier collective``: what the CLI calls (cli/check.py only parses
options). Output paths are checked before anything runs; the reports are written whatever the
verdict. Exit 0 every run passed, 1 a run failed or could not run, 2 bad input (ConfigError)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gpuhost.collective import report as reports
from gpuhost.collective.hosts import Options, executor, setup_from_inventory
from gpuhost.collective.run import run_collective
from gpuhost.output import check_output_path, write_output


def check_collective(
    inventory: str,
    limit: str | None,
    options: Options,
    outputs: dict[str, str | Path | None],
    echo: Callable[[str], None],
) -> int:
    """``outputs``: ``json``, ``junit``, ``prom`` paths (None: not written)."""
    for option, path in outputs.items():
        if path is not None:
            check_output_path(str(path), f"--{option}")
    setup = setup_from_inventory(inventory, limit, options)
    with executor(inventory, limit, setup) as execute:
        result = run_collective(setup, execute)
    for line in reports.lines(result):
        echo(line)
    writers = {"json": reports.json_text, "junit": reports.junit, "prom": reports.prometheus}
    for option, path in outputs.items():
        if path is not None:
            write_output(str(path), writers[option](result), f"--{option}")
    return result.exit_code
