"""``gpuhost schema [NAME]``: print the JSON Schema of a document gpuhost writes.

Without NAME, list the schema names and the document each describes. A printed schema is one
self-contained document (gpuhost.schemas.standalone_text).
"""

from __future__ import annotations

import click

from gpuhost.schemas import NAMES, load_schema, standalone_text


@click.command("schema")
@click.argument("name", required=False, type=click.Choice(NAMES))
def command(name: str | None) -> int:
    """Print the JSON Schema NAME (draft 2020-12), or list the schemas.

    \b
    Example:
      gpuhost schema audit-report > audit-report.schema.json
    """
    if name is None:
        for known in NAMES:
            click.echo(f"{known:<18} {load_schema(known).get('title', '')}")
        return 0
    click.echo(standalone_text(name), nl=False)
    return 0
