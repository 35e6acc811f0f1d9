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

from pathlib import Path
from typing import TYPE_CHECKING

import click

from gpuhost.cli._options import SECONDS
from gpuhost.errors import EXIT_FINDINGS, EXIT_OK, ConfigError
from gpuhost.locks import acquire, host_locks
from gpuhost.signals import StopOnSignals
from gpuhost.terminal import FleetProgress
from gpuhost.upgrade.drain import DRAIN_MODES
from gpuhost.upgrade.journal import SUCCESSFUL_OUTCOMES, Journal, find_resumable
from gpuhost.upgrade.orchestrate import (
    Interrupted,
    Orchestrator,
    UpgradeOptions,
    describe_plan,
)
from gpuhost.upgrade.progress import Progress, print_summary
from gpuhost.upgrade.resume import RECORDED, explicit_params, option_record, resumed_params
from gpuhost.upgrade.settings import (
    limit_option,
    load_provider_config,
    runs_dir,
    snapshots_dir,
    state_option,
)

if TYPE_CHECKING:
    from gpuhost.findings import Finding
    from gpuhost.inventory.loader import InventoryHost
    from gpuhost.matrix.profiles import Profile


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
def command(
    inventory: str,
    target: str,
    profiles_file: str | None,
    limit: tuple[str, ...],
    canary: int,
    batch: int,
    max_failures: int,
    drain_mode: str,
    drain_timeout: float,
    resume: bool,
    abandon: bool,
    dry: bool,
    force: bool,
    accept_audit: tuple[str, ...],
    checks: str,
    accept_checks: tuple[str, ...],
    stop_gpu_processes: bool,
    restart_mode: str,
    reboot_timeout: float,
    provider_config: str | None,
    state_dir: Path,
) -> int:
    """Upgrade INVENTORY's hosts to profile --to, safely, host by host.

    \b
    Example:
      gpuhost upgrade inventories/fleet.py --to debian12-nonfree-535-security --canary 1 --batch 4
    """
    from gpuhost.inventory.loader import InventoryHost, select
    from gpuhost.inventory.profiles import PROFILES_FILE_KEY, install_data_problem
    from gpuhost.upgrade.hoststeps import HostSteps, StepSettings, target_summary

    ctx = click.get_current_context()
    if resume and abandon:
        raise click.UsageError("give --resume or --abandon, not both")
    pending = find_resumable(runs_dir(state_dir), str(Path(inventory).resolve()))
    if resume and pending is not None:  # the options the interrupted run was started with
        params = resumed_params(
            Journal.open(pending).header.options, ctx.params, explicit_params(ctx), str(pending)
        )
        (canary, batch, max_failures, drain_mode, drain_timeout, force, accept_audit, checks,
         accept_checks, stop_gpu_processes, restart_mode, reboot_timeout) = (
            params[name] for name in RECORDED.values()
        )  # fmt: skip
    options = UpgradeOptions(
        canary=canary, batch=batch, max_failures=max_failures, drain=drain_mode, force=force
    )
    hosts = select(inventory, limit, uses_profiles=True, profiles=profiles_file).entries()
    if profiles_file:  # the deploy and the audit read it from the host's data
        hosts = [
            InventoryHost(h.name, {**h.data, PROFILES_FILE_KEY: profiles_file}, h.groups)
            for h in hosts
        ]
    profile = target_for_hosts(target, hosts)
    names = [h.name for h in hosts]
    if not dry:  # one writer per host: a second upgrade, rollback or snapshot is refused
        ctx.call_on_close(acquire(state_dir, host_locks(names), "upgrade").release)
    journal = None
    if resume:
        path = find_resumable(runs_dir(state_dir), str(Path(inventory).resolve()))
        if path is None:
            raise ConfigError(
                f"{inventory}: no interrupted upgrade run to resume under {runs_dir(state_dir)}"
            )
        journal = Journal.open(path)
        if journal.header.target != target:
            raise ConfigError(
                f"{path}: the interrupted run goes to {journal.header.target!r}, not {target!r}; "
                "resume it with that --to"
            )
        unknown = sorted(set(journal.header.hosts) - set(names))
        if unknown:
            raise ConfigError(
                f"{path}: the interrupted run has hosts this inventory"
                + (" and --limit" if limit else "")
                + f" do not select: {', '.join(unknown)}"
            )
        names = journal.header.hosts
        if not dry:
            ctx.call_on_close(acquire(state_dir, [f"run:{path.name}"], "upgrade").release)
    elif pending is not None and not dry:
        if not abandon:
            raise ConfigError(
                f"{inventory}: an interrupted upgrade run exists ({pending}); continue it with "
                "--resume, or start a new one with --abandon (its hosts may be half-way)"
            )
        Journal.open(pending).end({"abandoned": True})
    forced = force or bool(journal is not None and journal.header.options.get("force"))
    advised = target_advisories(target, hosts, forced)
    for finding in advised:
        click.echo(f"warning: --to {target!r}: {finding.message}", err=True)
    for entry in hosts:  # what installing --to needs, e.g. NVIDIA's repository key
        problem = install_data_problem(profile, entry.data)
        if problem:
            raise ConfigError(f"--to {target!r}: host {entry.name}: {problem}")
    # A target forced past its advisories is a known condition at validation too: the hosts
    # will carry the very security.* findings the operator accepted here
    accepted = (*accept_audit, *sorted({f.rule for f in advised} - set(accept_audit)))
    provider = load_provider_config(provider_config)  # a bad file fails the dry run too
    if dry:
        for line in describe_plan(names, target, options):
            click.echo(line)
        click.echo(f"  target: {target_summary(profile)}")
        if journal is not None:
            for host, p in journal.progress().items():
                state = p.outcome or (
                    f"at {p.current or p.failed or 'next step'}" if p.started else "not started"
                )
                click.echo(f"  resume {host}: {state}")
        return EXIT_OK
    settings = StepSettings(
        target=profile.name,
        snapshots=snapshots_dir(state_dir),
        provider=provider,
        drain_mode=drain_mode,
        drain_timeout_s=drain_timeout,
        stop_gpu_processes=stop_gpu_processes,
        restart_mode=restart_mode,
        reboot_timeout_s=reboot_timeout,
        force=force,
        accept_audit=accepted,
        checks=checks,
        accept_checks=tuple(accept_checks),
    )
    if journal is None:
        journal = Journal.create(
            runs_dir(state_dir), str(Path(inventory).resolve()), target, names,
            option_record(ctx.params),
        )  # fmt: skip
    click.echo(f"run {journal.header.run_id} (journal {journal.path})")
    finished = [p.outcome for p in journal.progress().values() if p.outcome is not None]
    fleet = FleetProgress(
        len(journal.header.hosts),
        "upgrade",
        done=len(finished),
        failing=sum(1 for o in finished if o not in SUCCESSFUL_OUTCOMES),
    )
    progress = Progress(journal.header.run_id, fleet)
    steps = HostSteps({h.name: h for h in hosts}, settings)
    orchestrator = Orchestrator(journal, steps.as_mapping(), options, progress.report)

    def stop() -> None:
        orchestrator.stop.set()
        steps.interrupt()

    fleet.start()
    try:
        with StopOnSignals(stop, "upgrade") as signals:
            try:
                summary = orchestrator.run()
            except Interrupted:
                fleet.close()
                steps.close()
                name = signals.signal_name if signals.received else "interrupt"
                raise signals.stopped(
                    f"gpuhost: upgrade stopped by {name}; journal {journal.path}; "
                    "to continue, run the same command with --resume"
                ) from None
    finally:
        fleet.close()  # the status line never outlives the run
    steps.close()
    print_summary(summary)
    return EXIT_OK if summary.ok else EXIT_FINDINGS


def target_for_hosts(target: str, hosts: list[InventoryHost]) -> Profile:
    """``--to`` resolved in every selected host's profile table (built-ins + its profiles file);
    one ConfigError when a host's table lacks it or two tables disagree on its driver."""
    from gpuhost.inventory.profiles import profile_table, profiles_file
    from gpuhost.upgrade.hoststeps import resolve_target

    found: dict[str, Profile] = {}
    for entry in hosts:
        source = profiles_file(None, entry.data)
        where = f" for host {entry.name} (profiles: built-in{' + ' + source if source else ''})"
        found[entry.name] = resolve_target(target, profile_table(None, entry.data), where)
    versions = {t.driver_version for t in found.values()}
    if len(versions) > 1:
        shown = ", ".join(f"{h}: {t.driver_version}" for h, t in found.items())
        raise ConfigError(f"--to {target!r} names different drivers on different hosts ({shown})")
    if not found:
        raise ConfigError("no host selected")
    return next(iter(found.values()))


def target_advisories(target: str, hosts: list[InventoryHost], force: bool) -> list[Finding]:
    """Judge --to's driver and container toolkit against NVIDIA's security bulletins (as
    ``gpuhost matrix profile verify`` does) before any host is touched: one ConfigError naming
    the bulletins and fixed versions for error-level findings unless ``force``; else the
    findings (the caller warns about them and accepts their rules at validation)."""
    from gpuhost.findings import ERROR
    from gpuhost.inventory.profiles import profile_table
    from gpuhost.matrix.advisories import load_advisories, security_findings

    advisories = load_advisories()
    findings = []
    for entry in hosts:
        profile = profile_table(None, entry.data)[target]
        for finding in security_findings(
            advisories, driver=profile.driver_version, container_toolkit=profile.container_toolkit
        ):
            if finding not in findings:
                findings.append(finding)
    errors = [f.message for f in findings if f.severity == ERROR]
    if errors and not force:
        raise ConfigError(
            f"--to {target!r}: " + "; ".join(errors) + "; refusing before any host is touched "
            "(pass --force to upgrade to it anyway)"
        )
    return findings
