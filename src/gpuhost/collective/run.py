"""The collective test over a set of nodes: preflight, each test over every node, and the search
for the slow node when all_reduce falls short. The commands go through ``execute(command,
timeout) -> (exit status, output)`` (the launch host's shell: ``collective.hosts``), so this
module runs nothing itself.

.. code:: python

    report = run_collective(setup, execute)   # Report: runs, slow nodes/links, verdict
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from gpuhost.collective.judge import COULD_NOT_RUN, FAIL, FLOOR_TEST, PASS, RunResult, judge
from gpuhost.collective.locate import Located, Subset, locate, pairs
from gpuhost.collective.plan import Setup, missing_lines, preflight_command, run_command

Execute = Callable[[str, float], tuple[int, str]]
PREFLIGHT_TIMEOUT = 120.0
#: how the launch host's shell says the launch host could not be reached
UNREACHABLE = "gpuhost: launch host unreachable: "


@dataclass(frozen=True)
class Report:
    setup: Setup
    runs: tuple[RunResult, ...]
    located: Located | None = None

    @property
    def verdict(self) -> str:
        verdicts = {r.verdict for r in self.runs}
        if FAIL in verdicts:
            return FAIL
        if COULD_NOT_RUN in verdicts or not self.runs:
            return COULD_NOT_RUN
        return PASS

    @property
    def exit_code(self) -> int:
        return 0 if self.verdict == PASS else 1


def _preflight(setup: Setup, execute: Execute) -> str | None:
    """Why nothing can run (a launcher or nccl-tests binary missing), else None."""
    rc, output = execute(preflight_command(setup), PREFLIGHT_TIMEOUT)
    if output.startswith(UNREACHABLE):
        return output.removeprefix("gpuhost: ").strip()
    missing = missing_lines(output)
    if missing:
        return "not found: " + "; ".join(missing)
    if rc != 0:
        line = output.strip().splitlines()[:1] or ["no output"]
        return f"the launcher could not start a task on every node (exit {rc}): {line[0][:200]}"
    return None


def _one(setup: Setup, execute: Execute, test: str, nodes: Subset, stage: str) -> RunResult:
    rc, output = execute(run_command(setup, test, nodes), setup.run_timeout)
    return judge(test, tuple(nodes), stage, rc, output, setup.floor.busbw_gbs)


def _search(setup: Setup, execute: Execute, runs: list[RunResult]) -> Located:
    """Split the set (pairs, then halves) with all_reduce runs, each one recorded."""

    def meets(subset: Subset) -> bool:
        stage = "pair" if len(subset) == 2 else "half"
        result = _one(setup, execute, FLOOR_TEST, subset, stage)
        runs.append(result)
        return result.verdict == PASS

    found = locate(setup.names, meets)
    pair_sets = {frozenset(p) for p in pairs(setup.names)}
    for index, run in enumerate(runs):  # a pair that is a split of a slow pair says so
        if run.stage == "pair" and frozenset(run.nodes) not in pair_sets:
            runs[index] = replace(run, stage="split")
    return found


def run_collective(setup: Setup, execute: Execute) -> Report:
    """Preflight, every test over all nodes, and the slow-node search (module docstring)."""
    why = _preflight(setup, execute)
    if why is not None:
        return Report(
            setup,
            tuple(RunResult(t, setup.names, "all", COULD_NOT_RUN, why, 127) for t in setup.tests),
        )
    runs = [_one(setup, execute, test, setup.names, "all") for test in setup.tests]
    first = next((r for r in runs if r.test == FLOOR_TEST), None)
    if first is None or not first.slow or len(setup.names) < 2:
        return Report(setup, tuple(runs))
    searched: list[RunResult] = []
    located = _search(setup, execute, searched)
    return Report(setup, tuple(runs + searched), located)
