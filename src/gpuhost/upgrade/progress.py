"""Progress lines per host and step, and the end-of-run summary."""

from __future__ import annotations

import threading
import time

import click

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

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.started: dict[tuple[str, str], float] = {}
        self.lock = threading.Lock()

    def report(self, host: str, step: str, status: str, detail: str) -> None:
        with self.lock:
            key = (host, step)
            if status == "started":
                self.started[key] = time.monotonic()
                extra = " (resumed)" if detail == "resumed" else ""
                click.echo(f"[{host}] {STEP_TITLES.get(step, step)} ...{extra}")
                return
            took = ""
            if key in self.started:
                took = f" ({time.monotonic() - self.started.pop(key):.1f}s)"
            word = click.style(status, fg=_COLOURS.get(status))
            if step == "outcome":
                click.echo(f"[{host}] => {word}: {detail}")
            else:
                click.echo(
                    f"[{host}] {STEP_TITLES.get(step, step)}: {word}{took}"
                    + (f": {detail}" if detail else "")
                )


def print_summary(summary: RunSummary) -> None:
    click.echo("")
    click.echo("summary:")
    for host, outcome in summary.outcomes.items():
        click.echo(f"  {host}: {click.style(outcome, fg=_COLOURS.get(outcome))}")
    for host in summary.not_started:
        click.echo(f"  {host}: not started")
    if summary.stopped_reason:
        click.echo(summary.stopped_reason)
