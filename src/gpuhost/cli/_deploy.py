"""Run a packaged deploy over an inventory for ``gpuhost provision`` / ``gpuhost harden`` and
print its lines; Ctrl-C/SIGTERM stop each host at an operation boundary
(``gpuhost.signals.StopAtOperationBoundary``); each host changed is locked for the run
(``gpuhost.locks``, as upgrade, rollback and snapshot take/prune lock theirs)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gpuhost.cli._echo import echo_lines
from gpuhost.deploy_runner import HostOutcome, cut_off, outcome_lines, run_deploy
from gpuhost.locks import acquire, host_locks
from gpuhost.signals import StopAtOperationBoundary

if TYPE_CHECKING:
    from gpuhost.inventory.loader import Selection


def _locking(
    state_dir: Path, command: str, then: Callable[[Selection], None] | None
) -> Callable[[Selection], None]:
    """``run_deploy``'s ``on_selected``: lock every selected host for this command (one writer
    per host: a second provision, harden, upgrade or rollback of it refuses, naming this one)
    before any host is contacted, until the command ends; then ``then``."""

    def selected(selection: Selection) -> None:
        what = command.removeprefix("gpuhost ")
        lease = acquire(state_dir, host_locks(selection.names), what)
        click.get_current_context().call_on_close(lease.release)
        if then is not None:
            then(selection)

    return selected


def run_and_report(
    command: str,
    inventory: str,
    deploy_func: Callable[[], Any],
    dry: bool,
    state_dir: Path,
    **options: Any,
) -> tuple[list[HostOutcome], StopAtOperationBoundary]:
    """``run_deploy`` (``options`` passed on) under ``StopAtOperationBoundary``, then one line
    per host on stdout. Unless ``dry`` (it changes nothing) the selected hosts are locked in
    ``state_dir`` first. A signal that stopped a host before its last operation ends the command
    (``Stopped``, its line after the per-host lines); one that came after every host had
    finished is said on stderr and the run goes on (``stop.received`` set: the caller does no
    further step, e.g. no reboot, and exits with the run's own code unless that step was asked
    for)."""
    if not dry:
        options["on_selected"] = _locking(state_dir, command, options.get("on_selected"))
    with StopAtOperationBoundary(command) as stop:
        outcomes = run_deploy(inventory, deploy_func, dry=dry, stop=stop, **options)
    echo_lines(outcome_lines(outcomes, dry, again=command))
    if stop.received:
        if cut_off(outcomes):
            raise stop.stopped(stop.stopped_line(cut_off=True))
        click.echo(stop.stopped_line(cut_off=False), err=True)
    return outcomes, stop
