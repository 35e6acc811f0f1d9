"""``gpuhost harden INVENTORY [--dry] [--limit PATTERN]``: harden SSH and the firewall of hosts.

Runs the packaged deploy ``gpuhost.deploys.harden.harden`` (the same one ``deploys/harden.py``
calls) with ``gpuhost.deploy_runner`` (pyinfra in this process); one host failing never stops the
others, and it prints one line per host:

    h1: ok, 3 changed, 2 unchanged
    h2: failed: refusing to harden, nothing was changed: user 'ops' has no authorized SSH key ...
    h3: unreachable

Exit code: 0 every host ok, 1 some host failed, was refused or was unreachable, 2 bad inventory
or data.
"""

from __future__ import annotations

import click

from gpuhost.deploy_runner import (
    exit_code,
    outcome_lines,
    parallel_option,
    run_deploy,
    setup_logging,
)


@click.command("harden")
@click.argument("inventory")
@click.option("--dry", is_flag=True, help="Show what would change; change nothing.")
@click.option("--limit", multiple=True, help="Only these hosts or groups (glob; repeatable).")
@click.option("--verbose", "-v", is_flag=True, help="Debug output from pyinfra.")
@parallel_option
def command(
    inventory: str, dry: bool, limit: tuple[str, ...], verbose: bool, parallel: int | None
) -> int:
    """Harden SSH (keys only, modern algorithms) and add a default-deny nftables firewall.

    Every lockout check runs before anything changes; see docs/harden.md for the inventory data.
    """
    from gpuhost.deploys.harden import harden

    setup_logging(verbose)
    outcomes = run_deploy(inventory, harden, limit=limit, dry=dry, parallel=parallel)
    for line in outcome_lines(outcomes, dry):
        click.echo(line)
    return exit_code(outcomes, refused_is_usage=False)
