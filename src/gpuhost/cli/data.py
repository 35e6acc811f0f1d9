"""``gpuhost data status|update``: the data gpuhost judges with, and refreshing it from NVIDIA's
and PyPI's machine-readable sources into this machine's data directory (docs/knowledge.md).
The work is in :mod:`gpuhost.knowledge.update`; this module parses options and prints."""

from __future__ import annotations

import click

from gpuhost import datadir
from gpuhost.cli._echo import echo_lines
from gpuhost.cli._matrix_sync import from_dir_option, index_option
from gpuhost.cli._options import HTTP_URL
from gpuhost.knowledge.catalog_update import PUBLISHED_PCI_IDS
from gpuhost.knowledge.cudnn_redist import CUDNN_REDIST
from gpuhost.knowledge.gpu_catalog import HOST_PCI_IDS
from gpuhost.knowledge.update import CSAF_BASE, CUDA_REDIST, update

_DATA_DIR = click.option(
    "--data-dir",
    metavar="DIR",
    type=click.Path(file_okay=False),
    help=f"The data directory (default: ${datadir.ENV}, else /var/lib/gpuhost/data for root, "
    "else $XDG_DATA_HOME/gpuhost).",
)


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
    echo_lines(datadir.status_lines(datadir.use_data_dir(data_dir), as_json))
    return 0


@command.command("update")
@_DATA_DIR
@from_dir_option
@index_option
@click.option(
    "--csaf",
    "csaf_url",
    type=HTTP_URL,
    default=CSAF_BASE,
    show_default=True,
    metavar="URL",
    help="NVIDIA's CSAF bulletins (the product-security repository's raw files).",
)
@click.option(
    "--cuda-redist",
    "redist_url",
    type=HTTP_URL,
    default=CUDA_REDIST,
    show_default=True,
    metavar="URL",
    help="NVIDIA's CUDA redistrib manifests folder.",
)
@click.option(
    "--cudnn-redist",
    "cudnn_url",
    type=HTTP_URL,
    default=CUDNN_REDIST,
    show_default=True,
    metavar="URL",
    help="NVIDIA's cuDNN redistrib manifests folder.",
)
@click.option(
    "--pci-ids",
    "pci_ids",
    default="",
    metavar="FILE|URL",
    help="The PCI ID database the GPU catalog is regenerated from when it is newer than the "
    f"catalog's (default: this machine's {' or '.join(HOST_PCI_IDS)}; the published one: "
    f"{PUBLISHED_PCI_IDS}).",
)
def update_cmd(
    data_dir: str | None,
    from_dir: str | None,
    index_url: str,
    csaf_url: str,
    redist_url: str,
    cudnn_url: str,
    pci_ids: str,
) -> int:
    """Read NVIDIA's and PyPI's sources and write the data overlay (atomically, validated).

    A failed, partial or corrupt download changes nothing: the data in use stays.

    \b
    Example:
      gpuhost data update
    """
    folder = datadir.use_data_dir(data_dir)
    echo_lines(update(folder, from_dir, index_url, csaf_url, redist_url, cudnn_url, pci_ids))
    return 0
