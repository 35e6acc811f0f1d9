"""``gpuhost matrix sync`` and ``matrix advisories-sync`` (maintainer commands; registered by
:mod:`gpuhost.cli.matrix`): options and printing; the work is in :mod:`gpuhost.knowledge`.

Exit codes: 0 no drift (or drift without ``--check``), 1 drift with ``--check`` or the index
unreachable, 2 bad input.
"""

from __future__ import annotations

from pathlib import Path

import click

from gpuhost.cli._echo import echo_lines
from gpuhost.cli._options import HTTP_URL
from gpuhost.knowledge.maintain import compare_advisories, compare_wheels
from gpuhost.knowledge.pypi import DEFAULT_INDEX, make_index
from gpuhost.matrix.advisories import default_advisories_path
from gpuhost.matrix.wheeldata import default_wheels_path

#: the recorded-answers and index options of `matrix sync` and `data update`
from_dir_option = click.option(
    "--from",
    "from_dir",
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Answer from recorded responses in DIR (<host>/<path> per URL) instead of the network.",
)
index_option = click.option(
    "--index",
    "index_url",
    type=HTTP_URL,
    default=DEFAULT_INDEX,
    show_default=True,
    metavar="URL",
    help="Package index to ask (PyPI's JSON API or a mirror of it).",
)


@click.command("sync")
@click.option("--check", is_flag=True, help="Exit 1 when anything differs (for CI).")
@click.option("--write", is_flag=True, help="Rewrite the wheels file with what the index says.")
@from_dir_option
@click.option(
    "--record",
    "record_dir",
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Store the (trimmed) answers used under DIR, for tests and offline runs.",
)
@index_option
@click.option(
    "--wheels",
    "wheels_file",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="The wheels file to compare and write (default: the one shipped with gpuhost).",
)
def sync_cmd(
    check: bool,
    write: bool,
    from_dir: str | None,
    record_dir: str | None,
    index_url: str,
    wheels_file: str | None,
) -> int:
    """Compare the matrix with the torch / TensorFlow wheels' own metadata on PyPI.

    \b
    Example:
      gpuhost matrix sync --check
    """
    path = wheels_file or default_wheels_path()
    index = make_index(from_dir, index_url)
    found = compare_wheels(index, path)
    echo_lines(found.outcome_lines(path, write, record_dir))
    return found.exit_code(check)


@click.command("advisories-sync")
@click.option(
    "--from",
    "from_dir",
    required=True,
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="A checkout of github.com/NVIDIA/product-security (or recorded bulletins).",
)
@click.option("--check", is_flag=True, help="Exit 1 when the advisories file differs.")
@click.option("--write", is_flag=True, help="Rewrite the advisories file.")
@click.option(
    "--record",
    "record_dir",
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Store the used bulletins, trimmed to what is read, under DIR (test fixtures).",
)
@click.option(
    "--advisories",
    "advisories_file",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="The advisories file (default: the one shipped with gpuhost).",
)
def advisories_sync_cmd(
    from_dir: str, check: bool, write: bool, record_dir: str | None, advisories_file: str | None
) -> int:
    """Derive the security advisories (Linux driver, container toolkit with the GPU Operator, CUDA
    Toolkit) from NVIDIA's CSAF.

    \b
    Example:
      gpuhost matrix advisories-sync --from product-security/ --check
    """
    path = advisories_file or default_advisories_path()
    found = compare_advisories(Path(from_dir), path, Path(record_dir) if record_dir else None)
    echo_lines(found.outcome_lines(path, write))
    return found.exit_code(check)
