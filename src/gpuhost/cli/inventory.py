"""``gpuhost inventory check INVENTORY`` (load and check the data of every selected host, contact
none) and ``gpuhost inventory render`` (docs/inventory.md from the data contract)."""

from __future__ import annotations

import click

from gpuhost.output import write_output


@click.group("inventory")
def command() -> None:
    """Check inventories against gpuhost's inventory data contract (docs/inventory.md).

    \b
    Example:
      gpuhost inventory check inventories/fleet.py
    """


@command.command("check")
@click.argument("inventory")
@click.option("--limit", multiple=True, help="Only these hosts or groups (comma list, globs).")
@click.option("--profiles", "profiles_file", metavar="FILE", help="Profiles file for every host.")
def check(inventory: str, limit: tuple[str, ...], profiles_file: str | None) -> int:
    """Load INVENTORY and check every selected host's data; no host is contacted.
    Exit 0 all good, 2 with one line naming the host, key, found and expected value.

    \b
    Example:
      gpuhost inventory check inventories/fleet.py --limit gpu_a100
    """
    from gpuhost.inventory.loader import select
    from gpuhost.inventory.profiles import PROFILES_FILE_KEY, profile_table

    override = {}
    if profiles_file:
        profile_table(profiles_file)
        override[PROFILES_FILE_KEY] = profiles_file
    selection = select(
        inventory, limit=limit, override_data=override, uses_profiles=True, installs=True
    )
    count = len(selection.names)
    click.echo(f"{inventory}: {count} host{'' if count == 1 else 's'}, inventory data ok")
    return 0


@command.command("render")
@click.option(
    "--output",
    "-o",
    default="docs/inventory.md",
    show_default=True,
    help="File to write (- for standard output; the default is the checkout's).",
)
def render(output: str) -> int:
    """Write the inventory data reference (Markdown) rendered from the contract.

    \b
    Example:
      gpuhost inventory render -o docs/inventory.md
    """
    from gpuhost.inventory.render import render_markdown

    write_output(output, render_markdown(), "--output")
    if output != "-":
        click.echo(f"wrote {output}")
    return 0
