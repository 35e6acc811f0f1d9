"""``gpuhost matrix sync`` (a maintainer command; registered by :mod:`gpuhost.cli.matrix`).

Reads PyPI (or recorded answers) and prints where ``data/wheels.yaml`` and ``data/matrix.yaml``
differ from what the torch / TensorFlow wheels pin. Exit codes: 0 no drift (or drift without
``--check``), 1 drift with ``--check`` or the index unreachable, 2 bad input.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from gpuhost.errors import ConfigError
from gpuhost.matrix import load_matrix
from gpuhost.matrix.advisories import default_advisories_path, read_raw
from gpuhost.matrix.csaf import bulletin_row, read_bulletins, render_advisories, trim
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
    """Derive the security advisories (Linux driver, container toolkit) from NVIDIA's CSAF.

    \b
    Example:
      gpuhost matrix advisories-sync --from product-security/ --check
    """
    root = Path(from_dir)
    if not root.is_dir():
        raise ConfigError(f"--from {from_dir}: no such directory of CSAF bulletins")
    path = advisories_file or default_advisories_path()
    current = read_raw(path) if Path(path).exists() else {}
    threshold = float(current.get("error_at_cvss", 7.0))
    rows = []
    for _file, doc in read_bulletins(root):
        row = bulletin_row(doc)
        if row is None:
            continue
        rows.append(row)
        if record_dir:
            target = Path(record_dir) / row["date"][:4] / row["id"] / f"{row['id']}.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(trim(doc), indent=1, sort_keys=True) + "\n")
    text = render_advisories(rows, threshold)
    old = Path(path).read_text(encoding="utf-8") if Path(path).exists() else ""
    known = {str(r.get("id")): r for r in current.get("advisories", []) or []}
    lines = []
    for row in rows:
        before = known.pop(row["id"], None)
        if before is None:
            lines.append(f"bulletin {row['id']} ({row['date']}): new ({row['title']})")
        elif {k: before.get(k) for k in row} != row:
            lines.append(f"bulletin {row['id']}: differs from {path}")
    lines += [f"bulletin {bid}: in {path} but not under {from_dir}" for bid in known]
    if not lines and text != old:
        lines.append(f"{path}: same rows, other text (run --write to normalise)")
    for line in lines:
        click.echo(line)
    click.echo(
        f"{from_dir}: {len(rows)} bulletins for Linux drivers and the container toolkit; "
        f"{len(lines)} differences"
    )
    if write:
        Path(path).write_text(text, encoding="utf-8")
        click.echo(f"wrote {path}")
    return 1 if check and lines else 0
