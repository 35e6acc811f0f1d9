"""Run a packaged deploy over an inventory for ``gpuhost provision`` / ``gpuhost harden`` and
print its lines; Ctrl-C/SIGTERM stop each host at an operation boundary
(``gpuhost.signals.StopAtOperationBoundary``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from gpuhost.cli._echo import echo_lines
from gpuhost.deploy_runner import HostOutcome, cut_off, outcome_lines, run_deploy
from gpuhost.signals import StopAtOperationBoundary


def run_and_report(
    command: str,
    inventory: str,
    deploy_func: Callable[[], Any],
    dry: bool,
    **options: Any,
) -> tuple[list[HostOutcome], StopAtOperationBoundary]:
    """``run_deploy`` (``options`` passed on) under ``StopAtOperationBoundary``, then one line
    per host on stdout. A signal that stopped a host before its last operation ends the command
    (``Stopped``, its line after the per-host lines); one that came after every host had
    finished is said on stderr and the run goes on (``stop.received`` set: the caller does no
    further step, e.g. no reboot, and exits with the run's own code unless that step was asked
    for)."""
    with StopAtOperationBoundary(command) as stop:
        outcomes = run_deploy(inventory, deploy_func, dry=dry, stop=stop, **options)
    echo_lines(outcome_lines(outcomes, dry, again=command))
    if stop.received:
        if cut_off(outcomes):
            raise stop.stopped(stop.stopped_line(cut_off=True))
        click.echo(stop.stopped_line(cut_off=False), err=True)
    return outcomes, stop
