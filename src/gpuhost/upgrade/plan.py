"""``gpuhost upgrade`` before and around the orchestrator: what a run is asked to do, checked
before any host is touched, and the run itself under Ctrl-C/SIGTERM.

.. code:: python

    plan = plan_upgrade(UpgradeRequest(inventory, "nvidia-repo-580-cuda12.9", state_dir=...))
    for line in plan.warnings(): ...          # --to named by NVIDIA's security bulletins
    journal = plan.journal or plan.new_journal()
    summary = run_upgrade(plan, journal)      # signals.Stopped when a signal stopped it

``plan_upgrade`` checks, in this order, each failure one ConfigError: the inventory and
``--limit`` (the one loader), ``--to`` in every selected host's profile table (one driver for
all), ``--resume`` (an interrupted run of this inventory to the same target whose hosts this
selection has), the target's security advisories (refused unless ``--force``, also when the
resumed run was forced), what installing the target needs in each host's data, the provider
config. Nothing is contacted before ``run_upgrade``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuhost.errors import ConfigError
from gpuhost.inventory.loader import InventoryHost, select
from gpuhost.locks import host_locks
from gpuhost.signals import StopOnSignals
from gpuhost.terminal import FleetProgress
from gpuhost.upgrade.journal import SUCCESSFUL_OUTCOMES, Journal, find_resumable
from gpuhost.upgrade.orchestrate import (
    Interrupted,
    Orchestrator,
    RunSummary,
    UpgradeOptions,
    describe_plan,
)
from gpuhost.upgrade.progress import Progress
from gpuhost.upgrade.resume import Check, option_record, resumed_params
from gpuhost.upgrade.settings import load_provider_config, runs_dir, snapshots_dir

if TYPE_CHECKING:
    from gpuhost.findings import Finding
    from gpuhost.matrix.profiles import Profile
    from gpuhost.upgrade.hoststeps import StepSettings


@dataclass(frozen=True)
class UpgradeRequest:
    """What the command line asks for (``gpuhost upgrade``'s options)."""

    inventory: str
    target: str
    state_dir: Path
    profiles_file: str | None = None
    limit: tuple[str, ...] = ()
    options: UpgradeOptions = field(default_factory=UpgradeOptions)
    resume: bool = False
    abandon: bool = False
    dry: bool = False
    accept_audit: tuple[str, ...] = ()
    checks: str = "none"
    accept_checks: tuple[str, ...] = ()
    stop_gpu_processes: bool = False
    restart_mode: str = "reboot"
    drain_timeout_s: float = 3600
    reboot_timeout_s: float = 900
    provider_config: str | None = None
    record: dict[str, Any] = field(default_factory=dict)  # the options a new run's journal keeps

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> UpgradeRequest:
        """From ``gpuhost upgrade``'s options, by their parameter names (``--dry`` apart)."""
        o = dict(options)
        o["record"] = option_record(options)
        run = UpgradeOptions(
            canary=o.pop("canary"),
            batch=o.pop("batch"),
            max_failures=o.pop("max_failures"),
            drain=o.pop("drain_mode"),
            force=o.pop("force"),
        )
        o["drain_timeout_s"] = o.pop("drain_timeout")
        o["reboot_timeout_s"] = o.pop("reboot_timeout")
        return cls(options=run, **o)


@dataclass(frozen=True)
class UpgradePlan:
    """A checked request: the hosts (``names``: the resumed run's when resuming), the target
    profile, the run being resumed (None: a new one), the target's advisory findings (warned
    about, accepted at validation) and the provider config."""

    request: UpgradeRequest
    hosts: list[InventoryHost]
    profile: Profile
    names: list[str]
    journal: Journal | None
    advised: list[Finding]
    provider: dict[str, Any] | None

    def warnings(self) -> list[str]:
        return [f"warning: --to {self.request.target!r}: {f.message}" for f in self.advised]

    def dry_lines(self) -> list[str]:
        """What ``--dry`` prints: the order of hosts, the target, where a resumed run stands."""
        from gpuhost.upgrade.hoststeps import target_summary

        lines = describe_plan(self.names, self.request.target, self.request.options)
        lines.append(f"  target: {target_summary(self.profile)}")
        if self.journal is not None:
            for host, p in self.journal.progress().items():
                state = p.outcome or (
                    f"at {p.current or p.failed or 'next step'}" if p.started else "not started"
                )
                lines.append(f"  resume {host}: {state}")
        return lines

    def settings(self) -> StepSettings:
        from gpuhost.upgrade.hoststeps import StepSettings

        request = self.request
        # A target forced past its advisories is a known condition at validation too: the hosts
        # will carry the very security.* findings the operator accepted
        advised = sorted({f.rule for f in self.advised} - set(request.accept_audit))
        return StepSettings(
            target=self.profile.name,
            snapshots=snapshots_dir(request.state_dir),
            provider=self.provider,
            drain_mode=request.options.drain,
            drain_timeout_s=request.drain_timeout_s,
            stop_gpu_processes=request.stop_gpu_processes,
            restart_mode=request.restart_mode,
            reboot_timeout_s=request.reboot_timeout_s,
            force=request.options.force,
            accept_audit=(*request.accept_audit, *advised),
            checks=request.checks,
            accept_checks=tuple(request.accept_checks),
        )

    def new_journal(self) -> Journal:
        request = self.request
        return Journal.create(
            runs_dir(request.state_dir),
            str(Path(request.inventory).resolve()),
            request.target,
            self.names,
            request.record,
        )


def resumed_options(
    options: Mapping[str, Any], explicit: Collection[str], check: Check | None = None
) -> dict[str, Any]:
    """``--resume``: the command's options with the ones the interrupted run of this inventory
    recorded (``upgrade.resume.resumed_params``; ``explicit``: the options given on the command
    line, ``check``: each recorded value checked as its option is); the options as they are
    otherwise."""
    pending = _pending(options["state_dir"], options["inventory"])
    if not options["resume"] or pending is None:
        return dict(options)
    recorded = Journal.open(pending).header.options
    return resumed_params(recorded, options, explicit, str(pending), check)


def inventory_lock(inventory: str) -> str:
    """The lock one upgrade of ``inventory`` holds (the inventory file's real path): a second
    upgrade of it, ``--resume`` or not, is refused while the first runs."""
    return f"upgrade:{Path(inventory).resolve()}"


def _pending(state_dir: Path, inventory: str) -> Path | None:
    return find_resumable(runs_dir(state_dir), str(Path(inventory).resolve()))


def plan_upgrade(
    request: UpgradeRequest, hold: Callable[[list[str]], None] | None = None
) -> UpgradePlan:
    """Check everything the run needs before any host is touched (see the module doc).
    ``hold(lock names)``: take the hosts' locks (and the resumed run's) as soon as the hosts are
    known, before any state changes (None: ``--dry``, no lock). Without ``--resume`` an
    interrupted run of this inventory is refused (``--dry`` too), or with ``--abandon`` closed as
    abandoned (not by ``--dry``)."""
    from gpuhost.inventory.profiles import PROFILES_FILE_KEY, install_data_problem

    target = request.target
    pending = _pending(request.state_dir, request.inventory)
    hosts = select(
        request.inventory, request.limit, uses_profiles=True, profiles=request.profiles_file
    ).entries()
    if request.profiles_file:  # the deploy and the audit read it from the host's data
        hosts = [
            InventoryHost(h.name, {**h.data, PROFILES_FILE_KEY: request.profiles_file}, h.groups)
            for h in hosts
        ]
    profile = target_for_hosts(target, hosts)
    names = [h.name for h in hosts]
    if hold is not None:  # one writer per host: a second upgrade, rollback or snapshot is refused
        # and one upgrade per inventory: its journal (new or resumed) has one writer
        hold([inventory_lock(request.inventory), *host_locks(names)])
    journal = _resumed(request, names) if request.resume else None
    if journal is not None:
        names = journal.header.hosts
        if hold is not None:
            hold([f"run:{journal.path.name}"])
    elif pending is not None:  # --dry says so too; only a real run closes the journal
        if not request.abandon:
            raise ConfigError(
                f"{request.inventory}: an interrupted upgrade run exists ({pending}); continue it "
                "with --resume, or start a new one with --abandon (its hosts may be half-way)"
            )
        if hold is not None:
            Journal.open(pending).end({"abandoned": True})
    forced = request.options.force or bool(
        journal is not None and journal.header.options.get("force")
    )
    advised = target_advisories(target, hosts, forced)
    for entry in hosts:  # what installing --to needs, e.g. NVIDIA's repository key
        problem = install_data_problem(profile, entry.data)
        if problem:
            raise ConfigError(f"--to {target!r}: host {entry.name}: {problem}")
    provider = load_provider_config(request.provider_config)  # a bad file fails --dry too
    return UpgradePlan(request, hosts, profile, names, journal, advised, provider)


def _resumed(request: UpgradeRequest, names: list[str]) -> Journal:
    """The interrupted run of this inventory (``--resume``): same target, hosts selected."""
    runs = runs_dir(request.state_dir)
    path = find_resumable(runs, str(Path(request.inventory).resolve()))
    if path is None:
        raise ConfigError(f"{request.inventory}: no interrupted upgrade run to resume under {runs}")
    journal = Journal.open(path)
    if journal.header.target != request.target:
        raise ConfigError(
            f"{path}: the interrupted run goes to {journal.header.target!r}, not "
            f"{request.target!r}; resume it with that --to"
        )
    unknown = sorted(set(journal.header.hosts) - set(names))
    if unknown:
        raise ConfigError(
            f"{path}: the interrupted run has hosts this inventory"
            + (" and --limit" if request.limit else "")
            + f" do not select: {', '.join(unknown)}"
        )
    return journal


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
    """Judge --to's driver, container toolkit and CUDA toolkits against NVIDIA's security
    bulletins (as ``gpuhost matrix profile verify`` does) before any host is touched: one
    ConfigError naming the bulletins and fixed versions for the driver's or container toolkit's
    error-level findings unless ``force``; else the findings (the caller warns about them and
    accepts their rules at validation). The CUDA toolkits' findings only warn: their bulletins
    concern the toolkit's own tools and libraries a program is built with, not the running
    driver stack the upgrade moves, and the audit keeps reporting them (its security answer)."""
    from gpuhost.findings import ERROR
    from gpuhost.inventory.profiles import profile_table
    from gpuhost.matrix.advisories import load_advisories, security_findings

    advisories = load_advisories()
    findings: list[Finding] = []
    refusing: list[Finding] = []
    for entry in hosts:
        profile = profile_table(None, entry.data)[target]
        stack = security_findings(
            advisories, driver=profile.driver_version, container_toolkit=profile.container_toolkit
        )
        toolkits = [
            f for cuda in profile.cuda_versions for f in security_findings(advisories, cuda=cuda)
        ]
        for finding in stack + toolkits:
            if finding not in findings:
                findings.append(finding)
        refusing += [f for f in stack if f not in refusing]
    errors = [f.message for f in refusing if f.severity == ERROR]
    if errors and not force:
        raise ConfigError(
            f"--to {target!r}: " + "; ".join(errors) + "; refusing before any host is touched "
            "(pass --force to upgrade to it anyway)"
        )
    return findings


def run_upgrade(plan: UpgradePlan, journal: Journal) -> RunSummary:
    """Run the plan's hosts through the orchestrator, journaled in ``journal``, with a status
    line on a terminal. The first SIGINT/SIGTERM stops the run: the steps in flight end at once,
    are journaled ``interrupted`` (``--resume`` redoes them), and ``signals.Stopped`` ends the
    command with a line naming the journal."""
    from gpuhost.upgrade.hoststeps import HostSteps

    finished = [p.outcome for p in journal.progress().values() if p.outcome is not None]
    fleet = FleetProgress(
        len(journal.header.hosts),
        "upgrade",
        done=len(finished),
        failing=sum(1 for o in finished if o not in SUCCESSFUL_OUTCOMES),
    )
    progress = Progress(journal.header.run_id, fleet)
    steps = HostSteps({h.name: h for h in plan.hosts}, plan.settings())
    orchestrator = Orchestrator(journal, steps.as_mapping(), plan.request.options, progress.report)

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
    return summary
