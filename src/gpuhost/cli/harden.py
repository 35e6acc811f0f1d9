"""``gpuhost harden INVENTORY [--dry] [--limit PATTERN]``: harden SSH and the firewall of hosts.

Runs the packaged deploy ``gpuhost.deploys.harden.harden`` (the same one ``deploys/harden.py``
calls) with ``gpuhost.deploy_runner`` (pyinfra in this process); one host failing never stops the
others, and it prints one line per host:

    h1: ok, 3 changed, 2 unchanged
    h2: failed: refusing to harden, nothing was changed: user 'ops' has no authorized SSH key ...
    h3: unreachable

With ``--dry`` the exact nftables file each host would get follows the summary lines.

Exit code: 0 every host ok, 1 some host failed, was refused or was unreachable, 2 bad inventory
or data, 130/143 stopped by SIGINT/SIGTERM (while hosts are being changed, each stops after the
operation it is running, never between an SSH change and its confirm step:
``gpuhost.signals.StopAtOperationBoundary``).
"""

from __future__ import annotations

from pathlib import Path

import click

from gpuhost.cli._deploy import run_and_report
from gpuhost.cli._options import connect_timeout_option, parallel_option, state_option
from gpuhost.deploy_runner import exit_code, setup_logging
from gpuhost.terminal import FleetProgress


@click.command("harden")
@click.argument("inventory")
@click.option("--dry", is_flag=True, help="Show what would change; change nothing.")
@click.option("--limit", multiple=True, help="Only these hosts or groups (glob; repeatable).")
@click.option("--verbose", "-v", is_flag=True, help="Debug output from pyinfra.")
@parallel_option
@connect_timeout_option
@state_option
def command(
    inventory: str,
    dry: bool,
    limit: tuple[str, ...],
    verbose: bool,
    parallel: int | None,
    connect_timeout: int,
    state_dir: Path,
) -> int:
    """Harden SSH (keys only, modern algorithms) and, when asked for (roles, ports), a default-deny
    nftables firewall; --dry also prints the exact ruleset.

    Every lockout check runs before anything changes; see docs/harden.md for the inventory data.

    \b
    Example:
      gpuhost harden inventories/fleet.py --dry
    """
    from gpuhost.deploys.harden import harden, planned_rulesets, ruleset_text

    setup_logging(verbose)
    planned_rulesets.clear()
    outcomes, _stop = run_and_report(
        "gpuhost harden",
        inventory,
        harden,
        dry,
        state_dir,
        limit=limit,
        parallel=parallel,
        connect_timeout=connect_timeout,
        progress=FleetProgress(0, "harden"),  # a status line on a terminal, else nothing
    )
    if dry:
        for outcome in outcomes:
            if outcome.status == "ok":
                click.echo(ruleset_text(outcome.name, planned_rulesets.get(outcome.name)), nl=False)
    return exit_code(outcomes, refused_is_usage=False)
