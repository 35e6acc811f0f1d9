"""``gpuhost provision INVENTORY``: the packaged provision deploy on each host of an inventory.

Runs ``gpuhost.deploys.provision.provision`` (the deploy ``deploys/provision.py`` calls: the pinned
NVIDIA stack and, unless ``gpuhost_harden: false``, SSH hardening and the firewall) with
``gpuhost.deploy_runner`` (pyinfra in this process) and prints one line per host:

    h1: ok, 12 changed, 30 unchanged
    h2: failed: gpuhost_profile: not set; accepted: debian12-nonfree-535-security, ...
    h3: unreachable: ...

Exit code: 0 every host ok, 1 an operation failed or a host was unreachable, 2 bad input (bad
profiles file or inventory, or a host refused by a guard before any change, e.g. a profile that
would change the driver of a provisioned host: ``gpuhost upgrade`` does that), 130/143 stopped by
SIGINT/SIGTERM: while hosts are being changed, each stops after the operation it is running
(``gpuhost.signals.StopAtOperationBoundary``) and its line says so:

    h1: interrupted after gpuhost provision | Install NVIDIA driver | NVIDIA driver 535.309.01 (7
    of 15 operations done); run gpuhost provision again to finish

A host whose plan changes nothing is not executed (a converged fleet's re-run is one fact pass);
the others run their operations without waiting for each other (``gpuhost.deploy_runner``).
"""

from __future__ import annotations

from pathlib import Path

import click

from gpuhost.cli._deploy import run_and_report
from gpuhost.cli._echo import warn_line, warn_lines
from gpuhost.cli._options import SECONDS, connect_timeout_option, parallel_option, state_option
from gpuhost.deploy_runner import exit_code, setup_logging
from gpuhost.inventory.profiles import PROFILES_FILE_KEY, advisory_warnings
from gpuhost.matrix.profiles import load_profiles
from gpuhost.terminal import FleetProgress


@click.command("provision")
@click.argument("inventory")
@click.option("--dry", is_flag=True, help="Print the plan per host; change nothing.")
@click.option("--limit", multiple=True, help="Only these hosts or groups (glob; repeatable).")
@click.option(
    "--profiles",
    "profiles",
    metavar="FILE",
    help="Extra profiles YAML merged over the built-in ones.",
)
@click.option("--verbose", "-v", is_flag=True, help="Debug output from pyinfra.")
@parallel_option
@connect_timeout_option
@state_option
@click.option(
    "--reboot",
    is_flag=True,
    help="Then reboot the hosts that came out ok whose loaded nvidia module is not the installed "
    "driver, wait for them and check again (exit 1 when it still differs).",
)
@click.option("--reboot-timeout", default=900, show_default=True, type=SECONDS, help="Seconds.")
def command(
    inventory: str,
    dry: bool,
    limit: tuple[str, ...],
    profiles: str | None,
    verbose: bool,
    reboot: bool,
    reboot_timeout: float,
    parallel: int | None,
    connect_timeout: int,
    state_dir: Path,
) -> int:
    """Install and pin driver, CUDA, cuDNN and container toolkit to each host's profile, and
    harden SSH and the firewall (inventory data ``gpuhost_harden: false`` opts out).

    \b
    Example:
      gpuhost provision inventories/fleet.py --dry
    """
    from gpuhost.deploys.provision import provision

    override = {}
    if profiles:
        load_profiles(profiles)  # a bad profiles file is one clear error before any host is touched
        override[PROFILES_FILE_KEY] = profiles
    setup_logging(verbose)
    outcomes, stop = run_and_report(
        "gpuhost provision",
        inventory,
        provision,
        dry,
        state_dir,
        limit=limit,
        override_data=override,
        parallel=parallel,
        connect_timeout=connect_timeout,
        progress=FleetProgress(0, "provision"),  # a status line on a terminal, else nothing
        uses_profiles=True,
        on_selected=lambda selection: warn_lines(
            advisory_warnings(selection.data(name) for name in selection.names)
        ),
    )
    if stop.received and reboot and not dry:  # every host finished; the signal stops the reboot
        raise stop.stopped(
            f"gpuhost provision: no reboot ({stop.signal_name}): run gpuhost provision "
            f"{inventory} --reboot to reboot the hosts that need it (it changes nothing else "
            "on converged hosts)"
        )
    code = exit_code(outcomes, refused_is_usage=True)
    if stop.received or dry:  # every host finished before the signal: the run's own result
        return code
    from gpuhost.upgrade.reboot_hosts import after_provision

    still = after_provision(inventory, outcomes, reboot, reboot_timeout, click.echo, warn_line)
    return max(code, 1) if still else code
