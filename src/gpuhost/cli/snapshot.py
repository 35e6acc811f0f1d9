"""``gpuhost snapshot INVENTORY`` | ``snapshot list [HOST]`` | ``snapshot diff A B`` |
``snapshot prune INVENTORY``.

Taking a snapshot records each host's coupled package versions, holds, apt preferences and
sources, modprobe.d, kernel command line, nvidia-smi state, runtime / fabric manager configs and
gpuhost's own files in ``<state-dir>/snapshots/<host>/<UTC time>.json``, and keeps the package
files of those versions on the host (``/var/cache/gpuhost/packages/<id>/``). A and B of ``diff``
are snapshot files, ``host/id`` or ``host`` (its latest). ``prune`` removes on-host package caches
of older snapshots (the newest ``--keep`` per host stay, and any an unfinished upgrade needs).
Exit: 0 ok, 1 a host failed, 2 bad input.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click

from gpuhost.cli._echo import echo_lines
from gpuhost.cli._options import limit_option, locked_hosts, state_option
from gpuhost.errors import EXIT_FINDINGS, EXIT_OK
from gpuhost.upgrade.settings import load_provider_config, runs_dir, snapshots_dir
from gpuhost.upgrade.snapshot import SnapshotStore, diff, format_diff, load_snapshot
from gpuhost.upgrade.snapshot_hosts import list_lines


class _InventoryDefault(click.Group):
    """``gpuhost snapshot INVENTORY`` means ``gpuhost snapshot take INVENTORY``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["take", *args]
        return super().parse_args(ctx, args)


@click.group("snapshot", cls=_InventoryDefault)
def command() -> None:
    """Snapshot hosts before a change; list and compare snapshots.

    \b
    Example:
      gpuhost snapshot take inventories/fleet.py
    """


@command.command("take")
@click.argument("inventory")
@click.option(
    "--provider-config",
    type=click.Path(dir_okay=False),
    help="YAML file of the snapshot provider (command or OpenStack) to also call per host.",
)
@limit_option
@state_option
def take(
    inventory: str, provider_config: str | None, limit: tuple[str, ...], state_dir: Path
) -> int:
    """Snapshot every host of INVENTORY that --limit selects (one failing host never stops the
    others).

    \b
    Example:
      gpuhost snapshot take inventories/fleet.py
      gpuhost snapshot take inventories/fleet.py --limit gpu_a100,gpu-0*
    """
    from gpuhost.upgrade.snapshot_hosts import take_snapshots

    hosts = locked_hosts(inventory, limit, state_dir)
    provider = load_provider_config(provider_config)
    return _each(take_snapshots(hosts, snapshots_dir(state_dir), provider))


def _each(lines: Iterator[tuple[str, bool]]) -> int:
    """Print each host's line; exit 1 when a host failed."""
    failed = 0
    for line, ok in lines:
        click.echo(line)
        failed += 0 if ok else 1
    return EXIT_FINDINGS if failed else EXIT_OK


@command.command("list")
@click.argument("host", required=False)
@state_option
def list_(host: str | None, state_dir: Path) -> int:
    """List snapshots (of HOST, or of every host).

    \b
    Example:
      gpuhost snapshot list gpu-07
    """
    echo_lines(list_lines(SnapshotStore(snapshots_dir(state_dir)), host))
    return EXIT_OK


@command.command("diff")
@click.argument("a")
@click.argument("b")
@state_option
def diff_(a: str, b: str, state_dir: Path) -> int:
    """What changed from snapshot A to snapshot B (exit 1 when anything did).

    \b
    Example:
      gpuhost snapshot list gpu-07
      gpuhost snapshot diff OLDER_ID NEWER_ID
    """
    store = SnapshotStore(snapshots_dir(state_dir))
    doc_a, doc_b = load_snapshot(store.resolve(a)), load_snapshot(store.resolve(b))
    changes = diff(doc_a, doc_b)
    click.echo(format_diff(doc_a, doc_b, changes))
    return EXIT_FINDINGS if changes else EXIT_OK


@command.command("prune")
@click.argument("inventory")
@click.option(
    "--keep",
    default=2,
    show_default=True,
    type=click.IntRange(min=1),
    help="Package caches of this many newest snapshots per host stay.",
)
@limit_option
@click.option("--dry", is_flag=True, help="Say what would be removed; remove nothing.")
@state_option
def prune(inventory: str, keep: int, limit: tuple[str, ...], dry: bool, state_dir: Path) -> int:
    """Remove the on-host package caches (/var/cache/gpuhost/packages/ID) of older snapshots.

    A cache whose snapshot this state dir does not know is kept, and so is the one of a snapshot
    an unfinished upgrade run still needs for its rollback. The snapshot documents on the
    controller stay (a rollback to a pruned snapshot installs from the repository where it can).

    \b
    Example:
      gpuhost snapshot prune inventories/fleet.py --keep 2 --dry
    """
    from gpuhost.upgrade.snapshot_hosts import prune_hosts

    hosts = locked_hosts(inventory, limit, state_dir)
    store = SnapshotStore(snapshots_dir(state_dir))
    return _each(prune_hosts(hosts, store, runs_dir(state_dir), keep, dry))
