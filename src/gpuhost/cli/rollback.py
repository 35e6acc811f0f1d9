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
from pathlib import Path

import click

from gpuhost.cli._echo import echo_lines
from gpuhost.cli._options import SECONDS, limit_option, locked_hosts, state_option
from gpuhost.errors import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, ConfigError
from gpuhost.terminal import is_terminal
from gpuhost.upgrade.settings import snapshots_dir


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
    from gpuhost.upgrade.rollback import plan_rollback, run_rollback

    hosts = locked_hosts(inventory, limit, state_dir)
    plan = plan_rollback(hosts, snapshots_dir(state_dir), snapshot_id)
    echo_lines(plan.lines())
    what = "restore" + ("" if no_reboot else " and reboot")
    count = len(plan.hosts)
    if not yes:
        if not is_terminal(sys.stdin):  # closed stdin (None) included
            raise ConfigError(
                f"rollback would {what} {count} host(s); confirm with --yes "
                "(stdin is not a terminal, nothing was changed)"
            )
        if not click.confirm(f"{what} these {count} host(s)?", default=False):
            click.echo("nothing changed", err=True)
            return EXIT_USAGE
    failed = run_rollback(plan, not no_reboot, reboot_timeout, parallel)
    return EXIT_FINDINGS if failed else EXIT_OK
