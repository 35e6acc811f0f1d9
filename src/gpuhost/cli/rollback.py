"""``gpuhost rollback INVENTORY [--snapshot ID]``: put hosts back as a snapshot recorded them.

Per host (``--parallel`` hosts at a time): packages from the on-host cache (works when the
repository no longer offers them), apt preferences, sources, modprobe.d, gpuhost files and units
as in the snapshot, holds, then a reboot and validation against the snapshot. The node's
scheduler state is not touched. It asks before it changes (and reboots) anything: the hosts and
snapshots are listed and confirmed on the terminal, or by ``--yes``; without a terminal and
without ``--yes`` nothing is touched (exit 2).
Ctrl-C or SIGTERM stops it at once (what runs on the hosts is cut off; a run of the same command
finishes it). Exit: 0 every host restored and valid, 1 a host failed, 2 bad input or not
confirmed, 130 / 143 stopped by SIGINT / SIGTERM.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click

from gpuhost.cli._options import SECONDS
from gpuhost.errors import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, ConfigError, GpuhostError
from gpuhost.locks import acquire, host_locks
from gpuhost.signals import StopOnSignals
from gpuhost.terminal import FleetProgress, is_terminal
from gpuhost.upgrade.orchestrate import HostContext, StepFailed, UpgradeOptions
from gpuhost.upgrade.settings import limit_option, snapshots_dir, state_option
from gpuhost.upgrade.snapshot import SnapshotStore


@click.command("rollback")
@click.argument("inventory")
@click.option("--snapshot", "snapshot_id", help="Snapshot id (default: each host's latest).")
@limit_option
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option("--no-reboot", is_flag=True, help="Restore without rebooting (not validated live).")
@click.option(
    "--reboot-timeout",
    default=900,
    show_default=True,
    type=SECONDS,
    help="Seconds to wait for a rebooted host to answer SSH again.",
)
@click.option(
    "--parallel",
    default=8,
    show_default=True,
    type=click.IntRange(min=1),
    help="Hosts rolled back at the same time.",
)
@state_option
def command(
    inventory: str,
    snapshot_id: str | None,
    limit: tuple[str, ...],
    yes: bool,
    no_reboot: bool,
    reboot_timeout: float,
    parallel: int,
    state_dir: Path,
) -> int:
    """Roll INVENTORY's hosts back to a snapshot.

    \b
    Example:
      gpuhost rollback inventories/fleet.py --limit gpu-07 --yes
    """
    from gpuhost.inventory.loader import InventoryHost, select
    from gpuhost.upgrade.hoststeps import HostSteps, StepSettings

    hosts = select(inventory, limit).entries()
    lease = acquire(state_dir, host_locks(h.name for h in hosts), "rollback")
    click.get_current_context().call_on_close(lease.release)  # one writer per host
    store = SnapshotStore(snapshots_dir(state_dir))
    refs, docs = {}, {}
    for entry in hosts:  # every snapshot is found and checked before any host is touched
        found = store.find(entry.name, snapshot_id) if snapshot_id else store.latest(entry.name)
        if found is None:
            raise ConfigError(f"{entry.name}: no snapshot under {store.root / entry.name}")
        refs[entry.name], docs[entry.name] = found, store.load(found)
    for entry in hosts:
        ref = refs[entry.name]
        assert ref is not None
        click.echo(f"{entry.name}: back to snapshot {ref.id} ({ref.path})")
    what = "restore" + ("" if no_reboot else " and reboot")
    if not yes:
        if not is_terminal(sys.stdin):  # closed stdin (None) included
            raise ConfigError(
                f"rollback would {what} {len(hosts)} host(s); confirm with --yes "
                "(stdin is not a terminal, nothing was changed)"
            )
        if not click.confirm(f"{what} these {len(hosts)} host(s)?", default=False):
            click.echo("nothing changed", err=True)
            return EXIT_USAGE
    settings = StepSettings("", store.root, reboot_timeout_s=reboot_timeout)
    steps = HostSteps({h.name: h for h in hosts}, settings)

    fleet = FleetProgress(len(hosts), "rollback")

    def one(entry: InventoryHost) -> bool:
        ref = refs[entry.name]
        assert ref is not None
        doc = docs[entry.name]
        ctx = HostContext(entry.name, "-", UpgradeOptions(), {"snapshot_path": str(ref.path)})
        try:
            result = steps.restore(entry.name, doc)
            fleet.line(f"{entry.name}: restored {ref.id}: {result['summary']}")
            if not no_reboot:
                steps.restart(ctx)
                fleet.line(f"{entry.name}: rebooted")
            summary = steps.validate_against(entry.name, doc)["summary"]
            fleet.host_done(f"{entry.name}: {summary}", failing=False)
            return True
        except (GpuhostError, StepFailed) as exc:
            if signals.received is not None:
                line = f"{entry.name}: rollback stopped: run it again to finish it"
            else:
                line = f"{entry.name}: rollback failed: {exc}"
            fleet.host_done(line, failing=True)
            return False
        finally:
            steps.remote(entry.name).close()

    # Ctrl-C / SIGTERM: what runs on the hosts is cut off, no host starts; a rollback run again
    # finishes it (every part of it compares with the snapshot first)
    fleet.start()
    try:
        with (
            StopOnSignals(steps.interrupt, "rollback") as signals,
            ThreadPoolExecutor(max_workers=min(parallel, len(hosts))) as pool,
        ):
            failed = sum(1 for ok in pool.map(one, hosts) if not ok)
    finally:
        fleet.close()
    if signals.received is not None:
        raise signals.stopped(
            f"gpuhost: rollback stopped by {signals.signal_name}; run the same command again to "
            "finish it"
        )
    return EXIT_FINDINGS if failed else EXIT_OK
