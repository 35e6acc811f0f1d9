"""``gpuhost matrix sync`` (a maintainer command; registered by :mod:`gpuhost.cli.matrix`).

Reads PyPI (or recorded answers) and prints where ``data/wheels.yaml`` and ``data/matrix.yaml``
differ from what the torch / TensorFlow wheels pin. Exit codes: 0 no drift (or drift without
``--check``), 1 drift with ``--check`` or the index unreachable, 2 bad input.
"""

from __future__ import annotations

from pathlib import Path

import click

from gpuhost.errors import ConfigError
from gpuhost.matrix import load_matrix
from gpuhost.matrix.pypi import DEFAULT_INDEX, DirectoryIndex, HttpIndex, Index
from gpuhost.matrix.sync import drift, matrix_drift, record, render_wheels, sync
from gpuhost.matrix.wheeldata import default_wheels_path, read_wheels_file


@click.command("sync")
@click.option("--check", is_flag=True, help="Exit 1 when anything differs (for CI).")
@click.option("--write", is_flag=True, help="Rewrite the wheels file with what the index says.")
@click.option(
    "--from",
    "from_dir",
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Answer from recorded responses in DIR instead of the live index.",
)
@click.option(
    "--record",
    "record_dir",
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Store the (trimmed) answers used under DIR, for tests and offline runs.",
)
@click.option(
    "--index",
    "index_url",
    default=DEFAULT_INDEX,
    show_default=True,
    metavar="URL",
    help="Package index to ask (PyPI's JSON API or a mirror of it).",
)
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
    current = read_wheels_file(path)
    ranges = current.get("range")
    if not isinstance(ranges, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in ranges.items()
    ):
        raise ConfigError(
            f'{path}: range: expected a mapping such as {{torch: "2.0.0", tensorflow: "2.13.0"}}'
        )
    index: Index = DirectoryIndex(Path(from_dir), index_url) if from_dir else HttpIndex(index_url)
    result = sync(index, ranges)
    lines = drift(current, result.data) + matrix_drift(load_matrix(), result.data)
    counts = ", ".join(f"{len(rows)} {p} releases" for p, rows in result.data.items())
    for line in lines:
        click.echo(line)
    click.echo(f"{index.base}: {counts}; {len(lines)} differences")
    if record_dir:
        n = record(result, Path(record_dir))
        click.echo(f"recorded {n} answers under {record_dir}")
    if write:
        text = render_wheels(ranges, result.data)
        try:
            Path(path).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{path}: cannot write ({exc.strerror})") from exc
        click.echo(f"wrote {path}")
    return 1 if check and lines else 0
