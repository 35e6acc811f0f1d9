"""``gpuhost parse FILE [--json]``: show what gpuhost reads from a captured output."""

from __future__ import annotations

import json
from pathlib import Path

import click

from gpuhost.errors import ParseError
from gpuhost.parsers.detect import parse_any, summary_lines
from gpuhost.readers import MAX_FILE_BYTES, read_text


@click.command("parse")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=True, exists=False))
@click.option("--json", "as_json", is_flag=True, help="Print everything read, as JSON.")
def command(file: Path, as_json: bool) -> int:
    """Recognise a captured output FILE (nvidia-smi XML/-q/table/error, /proc/driver/nvidia/version,
    nvcc --version, torch collect_env, dpkg -l, ...) and show what gpuhost reads from it.

    \b
    Example:
      gpuhost parse nvidia-smi-q.xml --json
    """
    text = read_text(file, "a captured output", MAX_FILE_BYTES)  # regular files; UTF-8/16
    try:
        result = parse_any(text)
    except ParseError as exc:
        raise ParseError(f"{file}: {exc}") from exc
    if as_json:
        click.echo(json.dumps(result, indent=2, sort_keys=False))
    else:
        click.echo("\n".join(summary_lines(result)))
    return 0
