"""Progress lines per host and step, and the end-of-run summary.

With a :class:`gpuhost.terminal.FleetProgress` (``fleet``), the same lines go above its status
line on a terminal (``upgrade: 2/5 done, 1 failing, 3:10 elapsed``; a host counts as failing
when its outcome is not upgraded/current) and are unchanged elsewhere.
"""

from __future__ import annotations

import sys
import threading
import time

import click

from gpuhost.terminal import FleetProgress, style
from gpuhost.upgrade.journal import SUCCESSFUL_OUTCOMES
from gpuhost.upgrade.orchestrate import STEP_TITLES, RunSummary

_COLOURS = {
    "done": "green",
    "failed": "red",
    "interrupted": "yellow",
    "upgraded": "green",
    "current": "green",
    "rolled_back": "yellow",
    "aborted": "yellow",
    "refused": "red",
    "rollback_failed": "red",
}


class Progress:
    """``reporter`` for the orchestrator: one line per step start/end, with durations."""

    def __init__(self, run_id: str, fleet: FleetProgress | None = None) -> None:
        self.run_id = run_id
        self.fleet = fleet
        self.started: dict[tuple[str, str], float] = {}
        self.lock = threading.Lock()

    def _echo(self, line: str) -> None:
        if self.fleet is None:
            click.echo(line)
        else:
            self.fleet.line(line)

    def _word(self, status: str) -> str:
        if self.fleet is None:
            return style(status, sys.stdout, fg=_COLOURS.get(status))
        return style(status, self.fleet.stream, fg=_COLOURS.get(status))

    def report(self, host: str, step: str, status: str, detail: str) -> None:
        with self.lock:
            key = (host, step)
            if status == "started":
                self.started[key] = time.monotonic()
                extra = " (resumed)" if detail == "resumed" else ""
                self._echo(f"[{host}] {STEP_TITLES.get(step, step)} ...{extra}")
                return
            took = ""
            if key in self.started:
                took = f" ({time.monotonic() - self.started.pop(key):.1f}s)"
            word = self._word(status)
            if step == "outcome":
                line = f"[{host}] => {word}: {detail}"
                if self.fleet is None:
                    click.echo(line)
                else:
                    self.fleet.host_done(line, failing=status not in SUCCESSFUL_OUTCOMES)
            else:
                self._echo(
                    f"[{host}] {STEP_TITLES.get(step, step)}: {word}{took}"
                    + (f": {detail}" if detail else "")
                )


def print_summary(summary: RunSummary) -> None:
    click.echo("")
    click.echo("summary:")
    for host, outcome in summary.outcomes.items():
        click.echo(f"  {host}: {style(outcome, sys.stdout, fg=_COLOURS.get(outcome))}")
    for host in summary.not_started:
        click.echo(f"  {host}: not started")
    if summary.stopped_reason:
        click.echo(summary.stopped_reason)
