"""``gpuhost harden INVENTORY [--dry] [--limit PATTERN]``: harden SSH and the firewall of hosts.

Runs pyinfra (its Python API, in this process) with the packaged deploy
``gpuhost.deploys.harden.harden`` (the same one ``deploys/harden.py`` calls), one host failing
never stops the others, and prints one line per host:

    h1: ok, 3 changed, 2 unchanged
    h2: failed: refusing to harden, nothing was changed: user 'ops' has no authorized SSH key ...
    h3: unreachable

Exit code: 0 every host ok, 1 some host failed or was unreachable, 2 bad inventory or data.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import click
from pyinfra.api import Config, State
from pyinfra.api.connect import disconnect_all
from pyinfra.api.exceptions import NoGroupError, PyinfraError
from pyinfra.api.host import Host
from pyinfra.api.inventory import Inventory
from pyinfra.api.operations import run_ops
from pyinfra.api.state import StateStage
from pyinfra.context import ctx_config, ctx_host, ctx_inventory, ctx_state

from gpuhost.errors import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, ConfigError, GpuhostError


@dataclass
class HostOutcome:
    """What one run did on one host (read from pyinfra's per-operation results)."""

    name: str
    status: str = "ok"  # ok | failed | unreachable | bad-data
    changed: int = 0
    unchanged: int = 0
    message: str = ""
    changed_operations: list[str] = field(default_factory=list)

    def line(self, dry: bool) -> str:
        if self.status == "ok":
            verb = "would change" if dry else "changed"
            return f"{self.name}: ok, {self.changed} {verb}, {self.unchanged} unchanged"
        if self.status == "unreachable":
            return f"{self.name}: unreachable{': ' + self.message if self.message else ''}"
        return f"{self.name}: failed: {self.message}"


def _quiet_gevent_warning() -> None:
    # pyinfra_cli patches the stdlib for gevent on import; ssl was imported before (requests),
    # which gevent warns about. gpuhost's pyinfra runs use paramiko sockets, not ssl.
    warnings.filterwarnings("ignore", message="Monkey-patching ssl after ssl")


def _load_inventory(path: str, state: State) -> Inventory:
    """Load a pyinfra inventory file exactly as the pyinfra CLI does (groups, group_data/)."""
    _quiet_gevent_warning()
    from pyinfra_cli.inventory import make_inventory

    if not Path(path).is_file():
        raise ConfigError(f"{path}: inventory file not found (expected a pyinfra inventory .py)")
    try:
        with ctx_state.use(state):  # pyinfra's exec_file records the file on the current state
            return make_inventory(path, cwd=os.getcwd())
    except Exception as exc:  # pyinfra raises several kinds; each is one bad-inventory message
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"{path}: cannot load the pyinfra inventory: {first}") from exc


def _limit_hosts(inventory: Inventory, patterns: Iterable[str]) -> list[Host] | None:
    patterns = list(patterns)
    if not patterns:
        return None
    hosts: list[Host] = []
    for pattern in patterns:
        try:
            matched = list(inventory.get_group(pattern))
        except NoGroupError:
            matched = [h for h in inventory if fnmatch(h.name, pattern)]
        hosts.extend(h for h in matched if h not in hosts)
    if not hosts:
        raise ConfigError(
            f"--limit {' '.join(patterns)}: matches no host or group of the inventory "
            f"(hosts: {', '.join(h.name for h in inventory)})"
        )
    return hosts


def _fail(state: State, target: Host) -> None:
    # "No hosts remaining!" when every host failed, which the outcomes already say
    with contextlib.suppress(PyinfraError):
        state.fail_hosts({target})


def _connect(state: State, targets: list[Host], outcomes: dict[str, HostOutcome]) -> None:
    """Connect to every target in parallel; a host that fails is reported, never raised."""

    def connect(target: Host) -> str | None:
        try:
            target.connect(raise_exceptions=True)
        except Exception as exc:  # bad connector data, refused, auth failure: all one line
            text = str(exc).strip().splitlines()
            return text[0] if text else type(exc).__name__
        return None

    greenlets = {target: state.pool.spawn(connect, target) for target in targets}
    for target, greenlet in greenlets.items():
        error = greenlet.get()
        if error is None and target.connected:
            state.activate_host(target)
        else:
            outcomes[target.name].status = "unreachable"
            outcomes[target.name].message = error or "could not connect"


def run_deploy(
    inventory_path: str,
    deploy_func: Callable[[], Any],
    limit: Sequence[str] = (),
    dry: bool = False,
) -> list[HostOutcome]:
    """Run ``deploy_func`` on the inventory's hosts with pyinfra; one outcome per host.

    A host whose deploy raises (a lockout check, bad inventory data) or that cannot be reached is
    reported and left out; the others go on.
    """
    config = Config()
    state = State(check_for_changes=True)
    inventory = _load_inventory(inventory_path, state)
    outcomes: dict[str, HostOutcome] = {h.name: HostOutcome(h.name) for h in inventory}
    with ctx_state.use(state), ctx_config.use(config), ctx_inventory.use(inventory):
        state.init(inventory, config, initial_limit=_limit_hosts(inventory, limit))
        targets = [h for h in inventory if state.is_host_in_limit(h)]
        outcomes = {h.name: outcomes[h.name] for h in targets}
        state.set_stage(StateStage.Connect)
        _connect(state, targets, outcomes)
        try:
            for target in targets:
                if target not in state.active_hosts:
                    continue
                state.set_stage(StateStage.Prepare)
                with ctx_host.use(target):
                    try:
                        deploy_func()
                    except ConfigError as exc:
                        outcomes[target.name].status = "bad-data"
                        outcomes[target.name].message = str(exc)
                        _fail(state, target)
                    except (GpuhostError, PyinfraError) as exc:
                        outcomes[target.name].status = "failed"
                        outcomes[target.name].message = str(exc).removeprefix(f"{target.name}: ")
                        _fail(state, target)
            if not dry and state.active_hosts:
                state.set_stage(StateStage.Execute)
                # "No hosts remaining!" once every host failed: the outcomes say which and why
                with contextlib.suppress(PyinfraError):
                    run_ops(state)
        finally:
            state.set_stage(StateStage.Disconnect)
            disconnect_all(state)
        _count_results(state, outcomes, dry)
    return list(outcomes.values())


def _count_results(state: State, outcomes: dict[str, HostOutcome], dry: bool) -> None:
    for target, operations in state.ops.items():
        outcome = outcomes.get(target.name)
        if outcome is None or outcome.status != "ok":
            continue
        for op_hash, op_data in operations.items():
            meta = op_data.operation_meta
            name = ", ".join(sorted(state.op_meta[op_hash].names)) or op_hash
            if dry:
                changed = bool(meta._maybe_is_change)
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


def _setup_logging(verbose: bool) -> None:
    _quiet_gevent_warning()
    from pyinfra_cli.log import setup_logging

    setup_logging(logging.DEBUG if verbose else logging.INFO)


@click.command("harden")
@click.argument("inventory")
@click.option("--dry", is_flag=True, help="Show what would change; change nothing.")
@click.option("--limit", multiple=True, help="Only these hosts or groups (glob; repeatable).")
@click.option("--verbose", "-v", is_flag=True, help="Debug output from pyinfra.")
def command(inventory: str, dry: bool, limit: tuple[str, ...], verbose: bool) -> int:
    """Harden SSH (keys only, modern algorithms) and add a default-deny nftables firewall.

    Every lockout check runs before anything changes; see docs/harden.md for the inventory data.
    """
    from gpuhost.deploys.harden import harden

    _setup_logging(verbose)
    outcomes = run_deploy(inventory, harden, limit=limit, dry=dry)
    for outcome in outcomes:
        click.echo(outcome.line(dry))
    if any(o.status == "bad-data" for o in outcomes):
        return EXIT_USAGE
    if any(o.status != "ok" for o in outcomes):
        return EXIT_FINDINGS
    return EXIT_OK
