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

from pathlib import Path
from typing import Any

import click

from gpuhost.errors import EXIT_FINDINGS, EXIT_OK, GpuhostError
from gpuhost.locks import acquire, host_locks
from gpuhost.upgrade.package_cache import human_size
from gpuhost.upgrade.settings import (
    limit_option,
    load_provider_config,
    runs_dir,
    snapshots_dir,
    state_option,
)
from gpuhost.upgrade.snapshot import SnapshotStore, diff, format_diff, load_snapshot


class _InventoryDefault(click.Group):
    """``gpuhost snapshot INVENTORY`` means ``gpuhost snapshot take INVENTORY``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["take", *args]
        return super().parse_args(ctx, args)


def failure_line(host: str, exc: Exception) -> str:
    """One line for a host the command could not serve: 'h1: unreachable over SSH: ...' or
    'h1: failed: ...', the host named once (the errors already start with it)."""
    message = str(exc).removeprefix(f"{host}: ")
    if message.startswith("unreachable"):
        return f"{host}: {message}"
    return f"{host}: failed: {message}"


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
    from gpuhost.inventory.loader import select
    from gpuhost.upgrade.hoststeps import HostSteps, StepSettings

    hosts = select(inventory, limit).entries()
    what = click.get_current_context().command_path.removeprefix("gpuhost ")
    lease = acquire(state_dir, host_locks(h.name for h in hosts), what)
    click.get_current_context().call_on_close(lease.release)  # one writer per host
    settings = StepSettings(
        target="",
        snapshots=snapshots_dir(state_dir),
        provider=load_provider_config(provider_config),
    )
    steps = HostSteps({h.name: h for h in hosts}, settings)
    failed = 0
    for entry in hosts:
        try:
            data: dict[str, Any] = steps.take_snapshot(entry.name, require_complete_cache=False)
        except GpuhostError as exc:
            failed += 1
            click.echo(failure_line(entry.name, exc))
            continue
        finally:
            steps.remote(entry.name).close()
        doc = load_snapshot(Path(data["snapshot_path"]))
        cache = doc.get("package_cache") or {}
        missing = cache.get("missing") or {}
        click.echo(
            f"{entry.name}: {doc['id']} profile={doc.get('profile') or '-'} "
            f"packages={len(doc['packages'])} held={len(doc['holds'])} "
            f"cache={human_size(int(cache.get('size_bytes') or 0))}"
            + (f" MISSING {', '.join(sorted(missing))}" if missing else "")
            + f" -> {data['snapshot_path']}"
        )
        if missing:
            failed += 1
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
    store = SnapshotStore(snapshots_dir(state_dir))
    refs = store.list(host)
    if not refs:
        click.echo(_none_text(host, sorted({ref.host for ref in store.list()}), state_dir))
    for ref in refs:
        doc = store.load(ref)
        click.echo(
            f"{ref.host}/{ref.id}  profile={doc.get('profile') or '-'}  "
            f"packages={len(doc['packages'])}  held={len(doc['holds'])}"
        )
    return EXIT_OK


def _none_text(host: str | None, hosts: list[str], state_dir: Path) -> str:
    """What ``snapshot list`` says when it lists nothing: which hosts do have snapshots, and
    that HOST is a host name when an inventory file was given instead."""
    where = snapshots_dir(state_dir)
    if host is None:
        return f"no snapshots under {where}"
    text = f"no snapshots of host {host!r} under {where}; hosts with snapshots: "
    text += ", ".join(hosts) or "none"
    if host.endswith(".py") or Path(host).is_file():
        text += " (snapshot list takes a HOST name as the inventory names it, not an inventory)"
    return text


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
    from gpuhost.inventory.loader import select
    from gpuhost.upgrade import package_cache
    from gpuhost.upgrade.connect import PyinfraRemote

    hosts = select(inventory, limit).entries()
    what = click.get_current_context().command_path.removeprefix("gpuhost ")
    lease = acquire(state_dir, host_locks(h.name for h in hosts), what)
    click.get_current_context().call_on_close(lease.release)  # one writer per host
    store = SnapshotStore(snapshots_dir(state_dir))
    in_use = _snapshots_in_use(runs_dir(state_dir))
    failed = 0
    for entry in hosts:
        remote = PyinfraRemote(entry)
        try:
            listing = remote.run(package_cache.LIST_COMMAND, timeout=120)
            if not listing.ok:
                raise GpuhostError(
                    f"{entry.name}: cannot list the package caches: {listing.tail()}"
                )
            sizes = package_cache.parse_cache_dirs(listing.stdout)
            known = [ref.id for ref in store.list(entry.name)]
            plan = package_cache.prune_plan(list(sizes), known, keep, in_use.get(entry.name, ()))
            if plan.remove and not dry:
                removed = remote.run(package_cache.remove_command(plan.remove), timeout=300)
                if not removed.ok:
                    raise GpuhostError(f"{entry.name}: removing failed: {removed.tail()}")
        except GpuhostError as exc:
            failed += 1
            click.echo(failure_line(entry.name, exc))
            continue
        finally:
            remote.close()
        verb = "would remove" if dry else "removed"
        click.echo(
            f"{entry.name}: {verb} {len(plan.remove)} cache(s)"
            + (f" ({', '.join(plan.remove)})" if plan.remove else "")
            + f", {human_size(plan.freed(sizes))}; kept {len(plan.keep)}"
            + (
                f"; not snapshots of this state dir, kept: {', '.join(plan.unknown)}"
                if plan.unknown
                else ""
            )
        )
    return EXIT_FINDINGS if failed else EXIT_OK


def _snapshots_in_use(runs: Path) -> dict[str, set[str]]:
    """{host: snapshot ids} recorded by upgrade runs that have not ended (a rollback may need
    their caches)."""
    from gpuhost.upgrade.journal import read_records, replay

    used: dict[str, set[str]] = {}
    for path in sorted(runs.glob("upgrade-*.jsonl")) if runs.is_dir() else []:
        records = read_records(path)
        if any(r.get("kind") == "end" for r in records):
            continue
        hosts = [str(h) for h in records[0].get("hosts", [])]
        for host, progress in replay(records, hosts).items():
            sid = progress.data.get("snapshot_id")
            if sid and progress.outcome is None:
                used.setdefault(host, set()).add(str(sid))
    return used
