"""Fleet upgrade orchestration: the per-host step machine and canary/batch scheduling.

This module is pure: it knows the order of steps, what a failure at each step means, how the
journal is written and replayed, and in which order hosts are started. The steps themselves are
injected (``Steps``), so the same machine runs against real hosts (``hoststeps``) and against
fakes in tests.

Per host, forward phase::

    preflight -> snapshot -> drain -> stop_users -> install -> restart -> validate -> undrain

- preflight failing (unreachable, unhealthy without --force) refuses the host: nothing changed.
- preflight raising ``HostIsCurrent`` ends the host as ``current``: nothing to do.
- a failure before ``install`` runs ``abort`` (restart what was stopped, undrain what this run
  drained): nothing changed on the packages.
- a failure at or after ``install`` rolls back: ``rollback`` (packages from the host's cache,
  pins, holds and configs from the snapshot) -> ``rollback_restart`` -> ``rollback_validate``.
  The node stays drained so a human looks at it before jobs land there again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from gpuhost.upgrade.journal import (
    ABORTED,
    CURRENT,
    REFUSED,
    ROLLBACK_FAILED,
    ROLLED_BACK,
    SUCCESSFUL_OUTCOMES,
    UPGRADED,
    HostProgress,
    Journal,
)

FORWARD_STEPS = (
    "preflight",
    "snapshot",
    "drain",
    "stop_users",
    "install",
    "restart",
    "validate",
    "undrain",
)
ROLLBACK_STEPS = ("rollback", "rollback_restart", "rollback_validate")
ABORT_STEP = "abort"
ALL_STEPS = FORWARD_STEPS + ROLLBACK_STEPS + (ABORT_STEP,)
FIRST_CHANGING_STEP = "install"  # failures from here on need a rollback

STEP_TITLES = {
    "preflight": "preflight audit",
    "snapshot": "snapshot (+ package cache, provider)",
    "drain": "drain",
    "stop_users": "stop GPU users",
    "install": "unhold, install target, re-pin, hold",
    "restart": "reboot (or module reload) and wait",
    "validate": "validate",
    "undrain": "undrain",
    "rollback": "roll back packages, pins, holds, configs",
    "rollback_restart": "reboot after rollback",
    "rollback_validate": "validate after rollback",
    "abort": "undo drain / restart stopped services",
}


class StepFailed(Exception):
    """A step could not do its job; the message says what was found."""


class HostIsCurrent(Exception):
    """Raised by preflight: the host already runs the target, validated; nothing to do."""


class Interrupted(Exception):
    """The run is stopping (Ctrl-C, SIGTERM): raised instead of starting a new step, and instead
    of a step's own error once the stop was asked for. The step in flight is journaled
    ``interrupted`` (never ``done`` or ``failed``), so ``--resume`` redoes it and nothing is rolled
    back for it."""


@dataclass
class UpgradeOptions:
    canary: int = 1
    batch: int = 1
    max_failures: int = 1
    drain: str = "none"
    force: bool = False
    workers: int | None = None  # parallel hosts within a batch; None = batch size


@dataclass
class HostContext:
    """What a step gets: the host, the target, data recorded by earlier steps of this host."""

    host: str
    target: str
    options: UpgradeOptions
    data: dict[str, Any] = field(default_factory=dict)
    resumed_step: str | None = None  # the step that was interrupted, now being re-run
    failure: str = ""  # during abort/rollback: why the forward phase failed


StepFn = Callable[[HostContext], "Mapping[str, Any] | None"]
Steps = Mapping[str, StepFn]
Reporter = Callable[[str, str, str, str], None]  # host, step, status, detail


@dataclass
class RunSummary:
    outcomes: dict[str, str]  # host -> outcome, for hosts that finished
    not_started: list[str]
    stopped_reason: str = ""

    @property
    def ok(self) -> bool:
        return not self.not_started and all(
            o in SUCCESSFUL_OUTCOMES for o in self.outcomes.values()
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "outcomes": dict(self.outcomes),
            "not_started": list(self.not_started),
            "stopped_reason": self.stopped_reason,
        }


def plan_batches(hosts: list[str], canary: int, batch: int) -> list[list[str]]:
    """Canary hosts first (one batch), then batches of ``batch`` hosts, in inventory order."""
    if batch < 1:
        raise ValueError("batch size must be at least 1")
    batches: list[list[str]] = []
    canaries = hosts[: max(canary, 0)]
    if canaries:
        batches.append(canaries)
    rest = hosts[len(canaries) :]
    batches.extend(rest[i : i + batch] for i in range(0, len(rest), batch))
    return batches


def describe_plan(hosts: list[str], target: str, options: UpgradeOptions) -> list[str]:
    """Human-readable plan for ``--dry``."""
    lines = [
        f"upgrade {len(hosts)} host(s) to profile {target}: drain={options.drain}, "
        f"canary={options.canary}, batch={options.batch}, max-failures={options.max_failures}"
        + (", force (preflight findings do not refuse hosts)" if options.force else "")
    ]
    for number, batch in enumerate(plan_batches(hosts, options.canary, options.batch), start=1):
        kind = "canary" if number == 1 and options.canary > 0 else "batch"
        lines.append(f"  {kind} {number}: {', '.join(batch)}")
    lines.append("  per host: " + " -> ".join(FORWARD_STEPS))
    lines.append("  on failure before install: abort (restart stopped services, undrain)")
    lines.append("  on failure from install on: " + " -> ".join(ROLLBACK_STEPS) + " (left drained)")
    lines.append(
        f"  stops starting hosts after {options.max_failures} failure(s)"
        + (" or any canary failure" if options.canary > 0 else "")
    )
    return lines


class Orchestrator:
    """Runs the step machine for every host of a journal's run, in canary/batch order."""

    def __init__(
        self,
        journal: Journal,
        steps: Steps,
        options: UpgradeOptions,
        reporter: Reporter | None = None,
    ) -> None:
        missing = [s for s in ALL_STEPS if s not in steps]
        if missing:
            raise ValueError(f"steps missing: {', '.join(missing)}")
        self.journal = journal
        self.steps = steps
        self.options = options
        self.reporter: Reporter = reporter or (lambda host, step, status, detail: None)
        self.stop = threading.Event()

    # -- fleet -------------------------------------------------------------------------------

    def run(self) -> RunSummary:
        hosts = self.journal.header.hosts
        progress = self.journal.progress()
        outcomes = {h: p.outcome for h, p in progress.items() if p.outcome is not None}
        failures = sum(1 for o in outcomes.values() if o not in SUCCESSFUL_OUTCOMES)
        # Hosts that were in flight when an earlier run stopped go first: finish what was begun.
        half_done = [h for h in hosts if progress[h].started and not progress[h].finished]
        batches = plan_batches(hosts, self.options.canary, self.options.batch)
        if half_done:
            batches.insert(0, half_done)
        canary_batch = None if half_done or self.options.canary <= 0 else 0
        stopped = ""
        for index, batch in enumerate(batches):
            todo = [h for h in batch if h not in outcomes]
            if not todo:
                continue
            if failures >= self.options.max_failures:
                stopped = f"stopped: {failures} failure(s) reached --max-failures"
                break
            results = self._run_batch(todo, progress)
            outcomes.update(results)
            failed_now = [h for h, o in results.items() if o not in SUCCESSFUL_OUTCOMES]
            failures += len(failed_now)
            if index == canary_batch and failed_now:
                stopped = f"stopped: canary host(s) failed: {', '.join(failed_now)}"
                break
        not_started = [h for h in hosts if h not in outcomes]
        if not stopped and failures >= self.options.max_failures and not_started:
            stopped = f"stopped: {failures} failure(s) reached --max-failures"
        # inventory order, whatever order hosts finished in (stable tables between runs)
        ordered = {h: outcomes[h] for h in hosts if h in outcomes}
        summary = RunSummary(ordered, not_started, stopped)
        if not not_started:
            self.journal.end(summary.as_dict())
        return summary

    def _run_batch(self, hosts: list[str], progress: Mapping[str, HostProgress]) -> dict[str, str]:
        workers = self.options.workers or len(hosts)
        if workers <= 1 or len(hosts) == 1:
            return {h: self.run_host(h, progress[h]) for h in hosts}
        results: dict[str, str] = {}
        interrupted = False
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="upgrade") as pool:
            futures = {h: pool.submit(self.run_host, h, progress[h]) for h in hosts}
            for host, future in futures.items():
                try:
                    results[host] = future.result()
                except Interrupted:
                    interrupted = True  # the others stop at their next step (or sooner)
                except BaseException:
                    self.stop.set()
                    raise
        if interrupted:
            raise Interrupted("batch")
        return results

    # -- one host ----------------------------------------------------------------------------

    def run_host(self, host: str, progress: HostProgress) -> str:
        if progress.outcome is not None:
            return progress.outcome
        ctx = HostContext(host, self.journal.header.target, self.options, dict(progress.data))
        if progress.failed is not None:
            ctx.failure = f"{progress.failed}: {progress.failure}"
        if progress.failed is not None:
            return self._after_failure(ctx, progress.failed, progress.done, progress.current)
        if progress.current in ROLLBACK_STEPS or progress.current == ABORT_STEP:
            # interrupted while cleaning up after a failure whose record is the "failed" line;
            # replay always has it, so reaching here means a hand-edited journal
            raise StepFailed(f"{host}: journal has {progress.current} without a failed step")
        for step in FORWARD_STEPS:
            if step in progress.done:
                continue
            resumed = step if progress.current == step else None
            try:
                self._do(ctx, step, resumed)
            except HostIsCurrent as exc:
                self.journal.step(host, step, "done", str(exc))
                self.reporter(host, step, "done", str(exc))
                return self._finish(host, CURRENT, str(exc))
            except Interrupted:
                raise
            except Exception as exc:
                ctx.failure = f"{step}: {_message(exc)}"
                return self._after_failure(ctx, step, progress.done, None)
        return self._finish(host, UPGRADED, f"upgraded to {ctx.target}")

    def _after_failure(
        self, ctx: HostContext, failed: str, done: list[str], current: str | None
    ) -> str:
        if failed == "preflight":
            return self._finish(ctx.host, REFUSED, ctx.failure)
        if FORWARD_STEPS.index(failed) < FORWARD_STEPS.index(FIRST_CHANGING_STEP):
            if ABORT_STEP not in done:
                error = self._recovery_step(ctx, ABORT_STEP, current)
                if error is not None:
                    return self._finish(
                        ctx.host, ROLLBACK_FAILED, f"{ctx.failure}; cleanup failed: {error}"
                    )
            return self._finish(ctx.host, ABORTED, ctx.failure + "; nothing changed")
        for step in ROLLBACK_STEPS:
            if step in done:
                continue
            error = self._recovery_step(ctx, step, current)
            if error is not None:
                return self._finish(
                    ctx.host,
                    ROLLBACK_FAILED,
                    f"{ctx.failure}; {step} failed: {error}; left drained",
                )
        return self._finish(
            ctx.host, ROLLED_BACK, f"{ctx.failure}; rolled back to the snapshot, left drained"
        )

    def _recovery_step(self, ctx: HostContext, step: str, current: str | None) -> str | None:
        """Run one abort/rollback step (resumed when it is the step a crash interrupted); the
        error message when it failed, None when it succeeded. Interrupted passes through."""
        try:
            self._do(ctx, step, step if current == step else None)
        except Interrupted:
            raise
        except Exception as exc:
            return _message(exc)
        return None

    def _do(self, ctx: HostContext, step: str, resumed: str | None) -> None:
        if self.stop.is_set():
            raise Interrupted(step)
        ctx.resumed_step = resumed
        self.journal.step(ctx.host, step, "started", "resumed" if resumed else "")
        self.reporter(ctx.host, step, "started", "resumed" if resumed else "")
        try:
            result = self.steps[step](ctx)
        except HostIsCurrent:
            raise
        except BaseException as exc:
            # Once a stop was asked for, a step's error is what stopping did to it (its child
            # killed, its connection closed), not a verdict on the host: no rollback for it.
            if self.stop.is_set() or not isinstance(exc, Exception) or isinstance(exc, Interrupted):
                self.stop.set()
                why = "stopped by the operator" + (f" ({_message(exc)})" if str(exc) else "")
                self.journal.step(ctx.host, step, "interrupted", why)
                self.reporter(ctx.host, step, "interrupted", why)
                raise Interrupted(step) from None
            self.journal.step(ctx.host, step, "failed", _message(exc))
            self.reporter(ctx.host, step, "failed", _message(exc))
            raise
        data = dict(result or {})
        ctx.data.update(data)
        detail = str(data.get("summary", ""))
        self.journal.step(ctx.host, step, "done", detail, data)
        self.reporter(ctx.host, step, "done", detail)

    def _finish(self, host: str, outcome: str, detail: str) -> str:
        self.journal.outcome(host, outcome, detail)
        self.reporter(host, "outcome", outcome, detail)
        return outcome


def _message(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text
