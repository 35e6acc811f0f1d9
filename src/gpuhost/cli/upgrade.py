"""``gpuhost upgrade INVENTORY --to PROFILE``: move a fleet to a new pinned set, host by host.

Per host: preflight audit -> snapshot (+ on-host package cache, optional provider snapshot) ->
drain -> stop GPU users -> unhold, install the target profile, re-pin, hold -> reboot and wait ->
validate -> undrain. Any failure after the packages changed rolls the host back to its snapshot
and leaves it drained. Canary hosts first, then batches; a journal on the controller lets
``--resume`` finish an interrupted run. ``--dry`` prints the plan and changes nothing.

Ctrl-C or SIGTERM stops the run: the steps in flight end at once (child processes run in their
own session, so only the controller sees the signal), are journaled ``interrupted`` and are redone
by ``--resume``; nothing is rolled back for them. A step is journaled ``done`` only once its result
was checked on the host.

Exit code: 0 every host upgraded (or already current), 1 a host failed / was refused / the run
stopped early, 2 bad input, 130 / 143 stopped by SIGINT / SIGTERM.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click
from click.core import ParameterSource

from gpuhost.cli._echo import echo_lines, warn_lines
from gpuhost.cli._options import SECONDS, limit_option, state_option
from gpuhost.errors import EXIT_FINDINGS, EXIT_OK
from gpuhost.locks import acquire
from gpuhost.upgrade.drain import DRAIN_MODES
from gpuhost.upgrade.progress import summary_lines


@click.command("upgrade")
@click.argument("inventory")
@click.option("--to", "target", required=True, help="Target profile (see data/profiles.yaml).")
@click.option(
    "--profiles",
    "profiles_file",
    metavar="FILE",
    help="Profiles file for every host (else each host's gpuhost_profiles_file), merged over "
    "the built-in profiles: where --to and the hosts' current profiles are looked up.",
)
@limit_option
@click.option(
    "--canary",
    default=1,
    show_default=True,
    type=click.IntRange(min=0),
    help="Hosts upgraded (and validated) alone first, before any batch.",
)
@click.option(
    "--batch",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="Hosts upgraded at the same time after the canaries.",
)
@click.option(
    "--max-failures",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="Stop starting new hosts once this many hosts failed.",
)
@click.option(
    "--drain",
    "drain_mode",
    type=click.Choice(DRAIN_MODES),
    default="none",
    help="How to take a host's work away before it changes.",
)
@click.option("--drain-timeout", default=3600, show_default=True, type=SECONDS, help="Seconds.")
@click.option(
    "--resume",
    is_flag=True,
    help="Continue the interrupted run of this inventory, with the options it was started with.",
)
@click.option(
    "--abandon",
    is_flag=True,
    help="Start a new run although this inventory has an interrupted one (it is closed as "
    "abandoned; its hosts may be half-way).",
)
@click.option("--dry", is_flag=True, help="Print the plan; connect to nothing, change nothing.")
@click.option(
    "--force",
    is_flag=True,
    help="Upgrade hosts whose preflight audit has errors (validation then fails only on new ones), "
    "and to a --to profile whose driver or container toolkit NVIDIA's security bulletins name.",
)
@click.option(
    "--accept-audit",
    "accept_audit",
    multiple=True,
    metavar="RULE",
    help="Audit rule id whose errors are a known condition here (e.g. driver.not-loaded on a host "
    "without a GPU): they neither refuse a host nor fail validation. Repeatable.",
)
@click.option(
    "--checks",
    type=click.Choice(["none", "static", "functional"]),
    default="none",
    show_default=True,
    help="Also run the check suite (gpuhost check) on each upgraded host at validation.",
)
@click.option(
    "--accept-check",
    "accept_checks",
    multiple=True,
    metavar="NAME",
    help="Check (function name, e.g. test_driver_loaded) whose failure is a known condition "
    "here: it does not fail validation. Repeatable.",
)
@click.option(
    "--stop-gpu-processes",
    is_flag=True,
    help="Stop processes other than known GPU services that hold /dev/nvidia*.",
)
@click.option(
    "--restart",
    "restart_mode",
    type=click.Choice(["reboot", "reload"]),
    default="reboot",
    show_default=True,
    help="reload: unload/load the kernel module where nothing holds it, else reboot.",
)
@click.option("--reboot-timeout", default=900, show_default=True, type=SECONDS, help="Seconds.")
@click.option(
    "--provider-config",
    type=click.Path(dir_okay=False),
    help="YAML file: provider snapshot before any change (type: command | openstack).",
)
@state_option
def command(**options: Any) -> int:
    """Upgrade INVENTORY's hosts to profile --to, safely, host by host.

    \b
    Example:
      gpuhost upgrade inventories/fleet.py --to debian12-nonfree-535-security --canary 1 --batch 4
    """
    from gpuhost.upgrade.plan import UpgradeRequest, plan_upgrade, resumed_options, run_upgrade

    ctx = click.get_current_context()
    if options["resume"] and options["abandon"]:
        raise click.UsageError("give --resume or --abandon, not both")
    # --resume: the options the interrupted run was started with (one given again differently
    # is refused); every option by its parameter name
    request = UpgradeRequest.from_options(
        resumed_options(options, _explicit_params(ctx), _as_option_would(ctx))
    )
    state_dir = request.state_dir

    def hold(names: list[str]) -> None:  # one writer per host (and per resumed run)
        ctx.call_on_close(acquire(state_dir, names, "upgrade").release)

    plan = plan_upgrade(request, None if request.dry else hold)
    warn_lines(plan.warnings())
    if request.dry:
        echo_lines(plan.dry_lines())
        return EXIT_OK
    journal = plan.journal or plan.new_journal()
    click.echo(f"run {journal.header.run_id} (journal {journal.path})")
    summary = run_upgrade(plan, journal)
    echo_lines(summary_lines(summary))
    return EXIT_OK if summary.ok else EXIT_FINDINGS


def _as_option_would(ctx: click.Context) -> Callable[[str, Any], Any]:
    """A recorded value checked by its option's own type (ValueError: why it is not one)."""
    params = {p.name: p for p in ctx.command.params}

    def check(name: str, value: Any) -> Any:
        try:
            return params[name].type_cast_value(ctx, value)
        except click.BadParameter as exc:
            raise ValueError(exc.message) from None

    return check


def _explicit_params(ctx: click.Context) -> set[str]:
    """The parameters given on the command line (not defaults)."""
    return {
        name
        for name in ctx.params
        if ctx.get_parameter_source(name) not in (ParameterSource.DEFAULT, None)
    }
