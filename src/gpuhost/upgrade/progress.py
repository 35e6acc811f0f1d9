"""Progress lines per host and step, and the end-of-run summary.

With a :class:`gpuhost.terminal.FleetProgress` (``fleet``), the same lines go above its status
line on a terminal (``upgrade: 2/5 done, 1 failing, 3:10 elapsed``; a host counts as failing
when its outcome is not upgraded/current) and are unchanged elsewhere.
"""

from __future__ import annotations

import sys
import threading
import time

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
            print(line, flush=True)
        else:
            self.fleet.line(line)

    def _word(self, status: str) -> str:
        stream = sys.stdout if self.fleet is None else self.fleet.stream
        return style(status, stream, fg=_COLOURS.get(status))

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
                    print(line, flush=True)
                else:
                    self.fleet.host_done(line, failing=status not in SUCCESSFUL_OUTCOMES)
            else:
                self._echo(
                    f"[{host}] {STEP_TITLES.get(step, step)}: {word}{took}"
                    + (f": {detail}" if detail else "")
                )


def summary_lines(summary: RunSummary) -> list[str]:
    """The end-of-run summary (outcomes coloured where stdout shows colour)."""
    lines = ["", "summary:"]
    for host, outcome in summary.outcomes.items():
        lines.append(f"  {host}: {style(outcome, sys.stdout, fg=_COLOURS.get(outcome))}")
    lines.extend(f"  {host}: not started" for host in summary.not_started)
    if summary.stopped_reason:
        lines.append(summary.stopped_reason)
    return lines
