"""``gpuhost data status|update``: the data gpuhost judges with, and refreshing it from NVIDIA's
and PyPI's machine-readable sources into this machine's data directory (docs/knowledge.md).
The work is in :mod:`gpuhost.knowledge.update`; this module parses options and prints."""

from __future__ import annotations

import os
from pathlib import Path

import click

from gpuhost import datadir
from gpuhost.cli._matrix_sync import from_dir_option, index_option
from gpuhost.errors import DataUpdateError, GpuhostError
from gpuhost.knowledge.pypi import make_index
from gpuhost.knowledge.update import CSAF_BASE, CUDA_REDIST, collect, install

_DATA_DIR = click.option(
    "--data-dir",
    metavar="DIR",
    type=click.Path(file_okay=False),
    help=f"The data directory (default: ${datadir.ENV}, else /var/lib/gpuhost/data for root, "
    "else $XDG_DATA_HOME/gpuhost).",
)


def _use(data_dir: str | None) -> Path:
    if data_dir:
        os.environ[datadir.ENV] = data_dir
    return datadir.data_dir()


@click.group("data")
def command() -> None:
    """The data gpuhost judges with: where it comes from, how old it is, and its update.

    \b
    Example:
      gpuhost data status
      gpuhost data update
    """


@command.command("status")
@_DATA_DIR
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def status_cmd(data_dir: str | None, as_json: bool) -> int:
    """Show the data in use: its date, its origin and the files read.

    \b
    Example:
      gpuhost data status --json
    """
    for line in datadir.status_lines(_use(data_dir), as_json):
        click.echo(line)
    return 0


@command.command("update")
@_DATA_DIR
@from_dir_option
@index_option
@click.option(
    "--csaf",
    "csaf_url",
    default=CSAF_BASE,
    show_default=True,
    metavar="URL",
    help="NVIDIA's CSAF bulletins (the product-security repository's raw files).",
)
@click.option(
    "--cuda-redist",
    "redist_url",
    default=CUDA_REDIST,
    show_default=True,
    metavar="URL",
    help="NVIDIA's CUDA redistrib manifests folder.",
)
def update_cmd(
    data_dir: str | None, from_dir: str | None, index_url: str, csaf_url: str, redist_url: str
) -> int:
    """Read NVIDIA's and PyPI's sources and write the data overlay (atomically, validated).

    A failed, partial or corrupt download changes nothing: the data in use stays.

    \b
    Example:
      gpuhost data update
    """
    folder = _use(data_dir)
    before = datadir.data_info()
    try:
        index = make_index(from_dir, index_url)
        found = collect(index, csaf_base=csaf_url, cuda_redist=redist_url)
        install(found, folder)
    except GpuhostError as exc:
        raise DataUpdateError(
            f"data update failed, keeping the data of {before['date']} ({before['origin']}): {exc}"
        ) from exc
    for line in found.lines:
        click.echo(line)
    after = datadir.data_info()
    click.echo(f"data: {after['date']} ({after['origin']}); {len(found.lines)} facts added")
    return 0
