"""Run a packaged pyinfra deploy on an inventory's hosts, in this process: the one runner behind
``gpuhost provision`` and ``gpuhost harden``.

.. code:: python

    outcomes = run_deploy("inventories/fleet.py", harden, limit=["gpu_*"], dry=False)
    for line in outcome_lines(outcomes, dry=False):
        print(line)                      # h1: ok, 3 changed, 2 unchanged

What it does: load the inventory exactly as the pyinfra CLI does (group_data/ beside it, optional
override data like ``pyinfra --data``), keep the hosts ``--limit`` names (host or group names,
globs, comma lists), connect to them in parallel, call the deploy function once per connected host,
all hosts at once in greenlets (pyinfra's prepare stage: facts are read, operations are added,
nothing changes), then execute unless ``dry``. ``parallel`` bounds all three phases.

The execute stage is bounded by what the prepare stage found (issue 9):

- a host none of whose prepared operations would change anything is not executed at all: its
  operations are not evaluated a second time, so a no-op re-run costs one fact-gathering pass
  (prepare evaluates every operation against the host's facts; gpuhost's operations decide from
  facts alone, and a plan without a change cannot start changing unless the host itself changes
  between the two stages, which a re-run then corrects). An operation with pyinfra's ``_if``
  (decided only at execute time) keeps its host in the execute stage.
- every other host runs its own operations in order, each re-evaluated against the host as the
  earlier ones left it (pyinfra's execute semantics), without waiting for the other hosts after
  each operation (gpuhost's deploys have no cross-host ordering: harden's revert/confirm steps
  act on their own host only). A failed operation stops that host; the others carry on.

Every host ends as one ``HostOutcome``:

- ``ok``           with counts of operations that changed (or, dry, would change) and did not;
- ``refused``      the deploy raised ``DeployError`` while preparing (a guard: nothing was changed);
- ``bad-data``     the deploy raised ``ConfigError`` (inventory data of that host);
- ``failed``       another gpuhost/pyinfra error while preparing, or an operation failed;
- ``interrupted``  ``stop`` ended the host at an operation boundary (the last operation done and
  how many of its operations ran are in the outcome);
- ``unreachable``  no connection.

One host's problem never stops the others. Inventory problems (missing file, bad Python,
``--limit`` matching nothing) raise ConfigError before any host is contacted.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import gevent
from pyinfra.api import Config, State
from pyinfra.api.connect import disconnect_all
from pyinfra.api.exceptions import PyinfraError
from pyinfra.api.host import Host
from pyinfra.api.inventory import Inventory
from pyinfra.api.operations import run_host_op
from pyinfra.api.output import format_text
from pyinfra.api.state import StateStage
from pyinfra.context import ctx_config, ctx_host, ctx_inventory, ctx_state

from gpuhost.connection import connect_cause, quiet_ssh_logs, redact_secret_logs
from gpuhost.errors import (
    EXIT_FINDINGS,
    EXIT_OK,
    EXIT_USAGE,
    ConfigError,
    DeployError,
    GpuhostError,
)
from gpuhost.pyinfra_adapter import (
    forget_cached_host_keys,
    may_change,
    quiet_missing_known_hosts,
    setup_cli_logging,
)
from gpuhost.terminal import FleetProgress

if TYPE_CHECKING:
    from gpuhost.inventory.loader import Selection

logger = logging.getLogger("pyinfra")

STATUSES = ("ok", "refused", "bad-data", "failed", "unreachable", "interrupted")


@dataclass
class HostOutcome:
    """What one run did on one host (read from pyinfra's per-operation results)."""

    name: str
    status: str = "ok"  # one of STATUSES
    changed: int = 0
    unchanged: int = 0
    message: str = ""
    changed_operations: list[str] = field(default_factory=list)
    executed: int = 0  # operations run at the execute stage (0: the plan changed nothing)
    operations: int = 0  # operations prepared for the host (counted for an interrupted host)
    last_done: str = ""  # the last operation that ran (an interrupted host)

    def line(self, dry: bool, again: str = "") -> str:
        """The host's summary line; ``again`` (``gpuhost provision``) ends an interrupted one."""
        if self.status == "ok":
            verb = "would change" if dry else "changed"
            return f"{self.name}: ok, {self.changed} {verb}, {self.unchanged} unchanged"
        if self.status == "interrupted":
            where = f"after {self.last_done}" if self.last_done else "before its first operation"
            return (
                f"{self.name}: interrupted {where} ({self.executed} of {self.operations} "
                f"operations done){f'; run {again} again to finish' if again else ''}"
            )
        if self.status == "unreachable":
            return f"{self.name}: unreachable{': ' + self.message if self.message else ''}"
        return f"{self.name}: failed: {self.message}"


def outcome_lines(outcomes: Iterable[HostOutcome], dry: bool, again: str = "") -> list[str]:
    """One summary line per host; with ``dry``, the operations that would change come first
    (``  h1: would change: Install NVIDIA driver | NVIDIA driver 535.261.03``); ``again``: the
    command an interrupted host's line tells to run again."""
    lines: list[str] = []
    for outcome in outcomes:
        if dry and outcome.status == "ok":
            lines += [f"  {outcome.name}: would change: {op}" for op in outcome.changed_operations]
        lines.append(outcome.line(dry, again))
    return lines


def cut_off(outcomes: Iterable[HostOutcome]) -> bool:
    """True when a signal stopped a host before its last operation (False: it came after every
    host had finished, so nothing was left undone on any host)."""
    return any(o.status == "interrupted" for o in outcomes)


def exit_code(outcomes: Iterable[HostOutcome], refused_is_usage: bool) -> int:
    """2 when a host had bad data (or, with ``refused_is_usage``, was refused by a guard);
    else 1 when any host is not ok; else 0."""
    statuses = {o.status for o in outcomes}
    if "bad-data" in statuses or (refused_is_usage and "refused" in statuses):
        return EXIT_USAGE
    if statuses - {"ok"}:
        return EXIT_FINDINGS
    return EXIT_OK


def _quiet_gevent_warning() -> None:
    # pyinfra_cli patches the stdlib for gevent on import; ssl was imported before (requests),
    # which gevent warns about. gpuhost's pyinfra runs use paramiko sockets, not ssl.
    warnings.filterwarnings("ignore", message="Monkey-patching ssl after ssl")


def setup_logging(verbose: bool) -> None:
    """pyinfra's own progress output (operations, per-host results) on stderr."""
    _quiet_gevent_warning()
    setup_cli_logging(logging.DEBUG if verbose else logging.INFO)
    redact_secret_logs()  # -v: pyinfra's connect line carries ssh_password
    quiet_missing_known_hosts()
    if not verbose:  # paramiko's transport tracebacks; each host's cause is in its outcome
        quiet_ssh_logs(("paramiko",))


def _fail(state: State, target: Host) -> None:
    # "No hosts remaining!" when every host failed, which the outcomes already say
    with contextlib.suppress(PyinfraError):
        state.fail_hosts({target})


def _connect(
    state: State,
    targets: list[Host],
    outcomes: dict[str, HostOutcome],
    progress: FleetProgress | None = None,
) -> None:
    """Connect to every target in parallel; a host that fails is reported, never raised."""

    timeout = float(state.config.CONNECT_TIMEOUT)

    def connect(target: Host) -> str | None:
        try:
            target.connect(show_errors=False, raise_exceptions=True)
        except Exception as exc:  # DNS, refused, timeout, no SSH, auth, host key: its cause
            return connect_cause(exc, target.data.dict(), target.name, timeout)
        return None

    greenlets = {target: state.pool.spawn(connect, target) for target in targets}
    for target, greenlet in greenlets.items():
        error = greenlet.get()
        if error is None and target.connected:
            state.activate_host(target)
        else:
            outcomes[target.name].status = "unreachable"
            outcomes[target.name].message = error or "could not connect"
            if progress is not None:
                progress.host_finished(failing=True)


def _prepare(
    state: State,
    target: Host,
    deploy_func: Callable[[], Any],
    outcome: HostOutcome,
    progress: FleetProgress | None = None,
) -> None:
    """Call the deploy for one host (in its own greenlet, with its own copy of the config, as
    pyinfra's CLI does); anything it raises takes that host out with its outcome."""
    try:
        with ctx_config.use(state.config.copy()), ctx_host.use(target):
            deploy_func()
    except GpuhostError as exc:
        outcome.status = (
            "bad-data"
            if isinstance(exc, ConfigError)
            else "refused"
            if isinstance(exc, DeployError)
            else "failed"
        )
        outcome.message = str(exc).removeprefix(f"{target.name}: ")
        _fail(state, target)
    except PyinfraError as exc:
        outcome.status = "failed"
        outcome.message = str(exc).removeprefix(f"{target.name}: ")
        _fail(state, target)
    except Exception as exc:  # a bug, not a host problem: that host fails, the others go on
        outcome.status = "failed"
        outcome.message = bug_message(target, exc)
        _fail(state, target)
    if outcome.status != "ok" and progress is not None:
        progress.host_finished(failing=True)  # refused, bad data or failed: done with this host


def _prepare_all(
    state: State,
    targets: list[Host],
    deploy_func: Callable[[], Any],
    outcomes: dict[str, HostOutcome],
    progress: FleetProgress | None = None,
) -> None:
    """Prepare every connected target at once, one greenlet per host from ``state.pool`` (at
    most ``Config.PARALLEL`` at a time), like ``pyinfra_cli.util._parallel_load_hosts``: each
    host waits for its own facts, not for the hosts before it. One host's error is its outcome
    and never stops the others, not even an unexpected exception (a bug: that host fails with
    ``bug_message``, the traceback goes to the log)."""
    greenlets = [
        state.pool.spawn(_prepare, state, target, deploy_func, outcomes[target.name], progress)
        for target in targets
        if target in state.active_hosts
    ]
    gevent.joinall(greenlets, raise_error=True)


def bug_message(target: Host, exc: BaseException) -> str:
    """One host's outcome when gpuhost's own code raised something unexpected on it: logged with
    its traceback (the terminal's or the host's log), and a line that says it is a bug."""
    logger.error(f"{target.print_prefix}unexpected error", exc_info=exc)
    return (
        f"unexpected error in gpuhost (a bug, please report it; its traceback is logged): "
        f"{type(exc).__name__}: {exc}"
    )


def plan_changes_nothing(state: State, target: Host) -> bool:
    """True when no operation prepared for ``target`` would change anything: pyinfra evaluated
    every one at the prepare stage (``State(check_for_changes=True)``) and none yielded a command.
    An operation with ``_if`` is decided only at execute time, so it counts as a change."""
    for op_data in state.ops.get(target, {}).values():
        if op_data.global_arguments.get("_if"):
            return False
        if may_change(op_data.operation_meta) is not False:
            return False
    return True


STOPPED = "stopped by the operator"
FACT_FAILED = "a fact could not be read from the host (see output above)"
#: what pyinfra raises when its last active host failed (a fact read inside an operation)
NO_HOSTS_REMAINING = "No hosts remaining!"


def _run_host(
    state: State,
    target: Host,
    errors: dict[str, str] | None = None,
    stop: Callable[[], bool] | None = None,
) -> bool:
    """Run ``target``'s operations in order (each evaluated again against the host as the earlier
    ones left it); stop at the first that fails. False when one failed. An operation that
    refuses the host while it executes (OperationError: a version apt cannot get, too little
    disk) is one red line and ``errors[host name]``, never a traceback (pyinfra does not catch
    it in the execute stage). ``stop`` is asked before each operation: True ends the host there
    (an operation boundary, never mid-operation) with ``errors[host name]`` = ``STOPPED``."""
    for op_hash in state.get_op_order():
        if op_hash not in state.ops[target]:
            continue
        names = ", ".join(sorted(state.op_meta[op_hash].names)) or op_hash
        if stop is not None and stop():
            target.log_styled(f"{STOPPED} before: {names}", fg="red", log_func=logger.error)
            if errors is not None:
                errors[target.name] = STOPPED
            return False
        logger.info(f"{target.print_prefix}{format_text('Starting operation:', 'blue')} {names}")
        with ctx_host.use(target):
            try:
                ok = run_host_op(state, target, op_hash) is not False
                if ok and target in state.failed_hosts:
                    # a fact the operation read failed: pyinfra took the host out and gave
                    # the operation the fact's default (an empty package list...)
                    raise PyinfraError(FACT_FAILED)
            except PyinfraError as exc:  # OperationError included
                # the last active host's failed fact reaches here as "No hosts remaining!"
                why = FACT_FAILED if str(exc) == NO_HOSTS_REMAINING else str(exc)
                target.log_styled(f"{names}: {why}", fg="red", log_func=logger.error)
                if errors is not None:
                    errors[target.name] = f"operation failed: {names}: {why}"
                return False
            if not ok:
                return False
    return True


def _execute(
    state: State,
    hosts: list[Host],
    progress: FleetProgress | None = None,
    outcomes: Mapping[str, HostOutcome] | None = None,
    stop: Callable[[], bool] | None = None,
) -> None:
    """The execute stage: hosts whose plan changes nothing are left out; every other host runs
    its own operations in its own greenlet from ``state.pool`` without per-operation barriers
    (pyinfra's ``no_wait``, minus its traceback when a host fails). Failed hosts are marked.
    ``stop``: see ``_run_host``."""
    busy = []
    for target in hosts:
        if plan_changes_nothing(state, target):
            logger.info(f"{target.print_prefix}{format_text('No changes planned', 'cyan')}")
            if progress is not None:
                progress.host_finished(failing=False)
        else:
            busy.append(target)
    if not busy:
        return
    state.is_executing = True
    errors: dict[str, str] = {}

    def run(target: Host) -> bool:
        try:
            ok = _run_host(state, target, errors, stop)
        except Exception as exc:  # a bug on this host: it fails, the others go on
            errors[target.name] = bug_message(target, exc)
            ok = False
        if progress is not None:
            progress.host_finished(failing=not ok)
        return ok

    greenlets = {target: state.pool.spawn(run, target) for target in busy}
    gevent.joinall(list(greenlets.values()))
    for target, greenlet in greenlets.items():
        if not greenlet.get():
            _fail(state, target)
            outcome = (outcomes or {}).get(target.name)
            if outcome is not None and target.name in errors:
                stopped = errors[target.name] == STOPPED
                outcome.status = "interrupted" if stopped else "failed"
                outcome.message = errors[target.name]


def run_deploy(
    inventory_path: str,
    deploy_func: Callable[[], Any],
    limit: Sequence[str] = (),
    dry: bool = False,
    override_data: Mapping[str, Any] | None = None,
    parallel: int | None = None,
    progress: FleetProgress | None = None,
    uses_profiles: bool = False,
    on_selected: Callable[[Selection], None] | None = None,
    connect_timeout: int | None = None,
    stop: Callable[[], bool] | None = None,
) -> list[HostOutcome]:
    """Run ``deploy_func`` on the inventory's hosts with pyinfra; one outcome per host, in
    inventory order. ``override_data`` is set on every host (like ``pyinfra --data``);
    ``parallel`` bounds how many hosts connect, prepare and execute at once (None: pyinfra's
    default, 20 per CPU core, at most the number of hosts). Hosts whose plan changes nothing are
    not executed (``HostOutcome.executed`` stays 0). ``progress`` counts hosts as each is done
    (unreachable, refused, planned with --dry or nothing to change, or executed).
    ``uses_profiles``: the deploy installs profiles, so every host's profile name must resolve,
    and its data have what installing it needs, before any host is contacted
    (``inventory.loader.select``). ``on_selected`` is called with
    the loaded and checked selection before any host is contacted (provision's warnings).
    ``connect_timeout``: seconds for a host's SSH connection (None: pyinfra's default, 10).
    ``stop`` is asked before each operation of the execute stage: True ends each host there
    (never mid-operation; outcome failed, ``STOPPED``), e.g. set by a SIGINT handler."""
    forget_cached_host_keys()
    config = Config(PARALLEL=parallel or 0)
    if connect_timeout is not None:
        config.CONNECT_TIMEOUT = connect_timeout
    state = State(check_for_changes=True)
    from gpuhost.inventory.loader import limit_items, select

    _quiet_gevent_warning()
    selection = select(
        inventory_path,
        limit,
        override_data=override_data,
        state=state,
        uses_profiles=uses_profiles,
        installs=uses_profiles,
    )
    if on_selected is not None:
        on_selected(selection)
    initial_limit = selection.hosts() if limit_items(limit) else None
    return _run(state, config, selection.inventory, deploy_func, dry, progress, initial_limit, stop)


def run_deploy_on(
    hosts: Sequence[tuple[str, Mapping[str, Any], Sequence[str]]],
    deploy_func: Callable[[], Any],
    stop: Callable[[], bool] | None = None,
    on_state: Callable[[State | None], None] | None = None,
    connect_timeout: int | None = None,
) -> list[HostOutcome]:
    """Run ``deploy_func`` on hosts given as (name, merged data, groups), with no inventory file
    (what ``gpuhost upgrade`` has after loading its inventory), as ``run_deploy`` does
    otherwise: connect, prepare, execute, one outcome per host. ``stop`` is asked before each
    operation (True: the host stops there, outcome failed, ``STOPPED``). ``on_state`` is called
    with the run's State once its hosts exist, and with None when the run is over (a canceller
    disconnects the hosts to end a command in flight). pyinfra's context is process-wide: one
    run at a time per process (the caller serialises)."""
    forget_cached_host_keys()
    config = Config(PARALLEL=0)
    if connect_timeout is not None:
        config.CONNECT_TIMEOUT = connect_timeout
    groups: dict[str, tuple[list[str], dict[str, Any]]] = {}
    for name, _, member_of in hosts:
        for group in member_of:
            groups.setdefault(group, ([], {}))[0].append(name)
    inventory = Inventory(([(name, dict(data)) for name, data, _ in hosts], {}), **groups)
    state = State(check_for_changes=True)
    return _run(state, config, inventory, deploy_func, False, None, None, stop, on_state)


def _run(
    state: State,
    config: Config,
    inventory: Inventory,
    deploy_func: Callable[[], Any],
    dry: bool,
    progress: FleetProgress | None,
    initial_limit: list[Host] | None,
    stop: Callable[[], bool] | None = None,
    on_state: Callable[[State | None], None] | None = None,
) -> list[HostOutcome]:
    outcomes: dict[str, HostOutcome] = {h.name: HostOutcome(h.name) for h in inventory}
    with ctx_state.use(state), ctx_config.use(config), ctx_inventory.use(inventory):
        state.init(inventory, config, initial_limit=initial_limit)
        targets = [h for h in inventory if state.is_host_in_limit(h)]
        outcomes = {h.name: outcomes[h.name] for h in targets}
        if progress is not None:
            progress.total = len(targets)
            progress.start()
        if on_state is not None:
            on_state(state)
        try:
            state.set_stage(StateStage.Connect)
            _connect(state, targets, outcomes, progress)
            state.set_stage(StateStage.Prepare)
            _prepare_all(state, targets, deploy_func, outcomes, progress)
            if dry and progress is not None:
                for target in targets:
                    if target in state.active_hosts and outcomes[target.name].status == "ok":
                        progress.host_finished(failing=False)
            if not dry and state.active_hosts:
                state.set_stage(StateStage.Execute)
                active = [h for h in targets if h in state.active_hosts]
                _execute(state, active, progress, outcomes, stop)
        finally:
            if on_state is not None:
                on_state(None)
            if progress is not None:
                progress.close()
            state.set_stage(StateStage.Disconnect)
            disconnect_all(state)
        _count_results(state, outcomes, dry)
        for target in targets:
            outcome = outcomes[target.name]
            if target in state.failed_hosts and outcome.status == "ok":
                # pyinfra took the host out (a fact failed while preparing) without raising
                outcome.status = "failed"
                outcome.message = outcome.message or FACT_FAILED
    return list(outcomes.values())


def _count_results(state: State, outcomes: dict[str, HostOutcome], dry: bool) -> None:
    """Counts per host from pyinfra's per-operation results: dry, and for hosts whose plan
    changed nothing (not executed), what prepare found; else what the execute stage did."""
    for target, operations in state.ops.items():
        outcome = outcomes.get(target.name)
        if outcome is not None and outcome.status == "interrupted":
            _count_done(state, target, outcome)
        if outcome is None or outcome.status != "ok":
            continue
        planned_only = dry or plan_changes_nothing(state, target)
        for op_hash, op_data in operations.items():
            meta = op_data.operation_meta
            name = ", ".join(sorted(state.op_meta[op_hash].names)) or op_hash
            if meta.is_complete():
                outcome.executed += 1
            if planned_only:
                changed = bool(may_change(meta))
            elif not meta.is_complete():
                continue
            elif meta.did_error():
                outcome.status = "failed"
                outcome.message = outcome.message or f"operation failed: {name} (see output above)"
                continue
            else:
                changed = meta.did_change()
            if changed:
                outcome.changed += 1
                outcome.changed_operations.append(name)
            else:
                outcome.unchanged += 1


def _count_done(state: State, target: Host, outcome: HostOutcome) -> None:
    """An interrupted host: how many of its operations ran, and the last that did."""
    for op_hash in state.get_op_order():
        op_data = state.ops[target].get(op_hash)
        if op_data is None:
            continue
        outcome.operations += 1
        if op_data.operation_meta.is_complete():
            outcome.executed += 1
            outcome.last_done = ", ".join(sorted(state.op_meta[op_hash].names)) or op_hash
