"""One collective run's verdict from its output (pure): PASS, FAIL or COULD-NOT-RUN.

- COULD-NOT-RUN: the launcher started no nccl-tests (not installed, srun refused), or a rank
  found no GPU (CUDA's 'no CUDA-capable device', too few GPUs): never a pass, never a
  measurement;
- FAIL: the run did not finish within its time (exit 124: a hang), a rank failed
  (CUDA/NCCL/test failure), a result is wrong (``#wrong`` or out-of-bounds values not 0), the
  test exited non-zero, no result row, or all_reduce's peak bus bandwidth is below the floor;
- FAIL too: a measurement that cannot be (``implausible``): more than one result table (the
  output of two tests or of independent processes mixed: which one is this run?), a bus
  bandwidth above ``MAX_BUSBW_GBS`` or below zero, a row whose algbw is not its size over its
  time, or whose busbw is more than twice its algbw (no collective's factor is above 2);
- PASS otherwise. all_gather is judged for correctness only: the data's floors are all_reduce's.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

from gpuhost.errors import ParseError
from gpuhost.parsers._common import first_line
from gpuhost.parsers.nccl_tests import NcclRow, NcclTestsRun, parse_nccl_tests

PASS, FAIL, COULD_NOT_RUN = "PASS", "FAIL", "COULD-NOT-RUN"
VERDICTS = (PASS, FAIL, COULD_NOT_RUN)
FLOOR_TEST = "all_reduce_perf"
#: stages: the whole set, a pair, a split of a slow pair, a half
STAGES = ("all", "pair", "split", "half")
TIMED_OUT = 124  # timeout(1)'s exit status, and gpuhost's when it stopped a run
#: no GPU moves data faster: NVLink 5 gives a Blackwell GPU 1.8 TB/s in all (18 links of
#: 100 GB/s, both directions; https://www.nvidia.com/en-us/data-center/nvlink/), and a
#: collective's bus bandwidth is at most what one GPU's links carry. Twice that, as a margin.
MAX_BUSBW_GBS = 3600.0


@dataclass(frozen=True)
class RunResult:
    test: str
    nodes: tuple[str, ...]
    stage: str
    verdict: str
    reason: str
    rc: int
    busbw: float | None = None  # peak over sizes, GB/s
    avg_busbw: float | None = None
    floor: float | None = None  # what busbw was judged against (None: not judged)
    wrong: int | None = None
    hosts_seen: tuple[str, ...] = ()

    @property
    def slow(self) -> bool:
        """FAIL for the bus bandwidth only (the run itself worked)."""
        return (
            self.verdict == FAIL
            and self.floor is not None
            and self.busbw is not None
            and self.busbw < self.floor
            and not self.wrong
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["nodes"], data["hosts_seen"] = list(self.nodes), list(self.hosts_seen)
        return data


def _unrun(output: str, rc: int) -> str:
    line = first_line(output, limit=200) or "no output"
    if rc == 127 or "No such file or directory" in output or "not found" in output:
        return f"nccl-tests did not start (exit {rc}): {line}"
    return f"the launcher ran no nccl-tests (exit {rc}): {line}"


def _row_problem(row: NcclRow) -> str | None:
    """Why one row's numbers cannot all be true, or None (nccl-tests prints time in us, algbw
    = size / time in GB/s, busbw = algbw x the collective's factor, at most 2: all_reduce's
    2(n-1)/n); a tolerance for the printed precision."""
    groups = [(row.out_time, row.out_algbw, row.out_busbw)]
    if row.in_time is not None and row.in_algbw is not None and row.in_busbw is not None:
        groups.append((row.in_time, row.in_algbw, row.in_busbw))
    for time_us, algbw, busbw in groups:
        if min(time_us, algbw, busbw) < 0:
            return f"size {row.size}: a negative time or bandwidth"
        if busbw > MAX_BUSBW_GBS:
            return f"size {row.size}: bus bandwidth {busbw:g} GB/s, more than any GPU can move"
        if time_us > 0:
            expected = row.size / (time_us * 1e3)
            if not math.isclose(algbw, expected, rel_tol=0.1, abs_tol=0.02):
                return (
                    f"size {row.size}: algbw {algbw:g} GB/s is not its size over its time "
                    f"({time_us:g} us: {expected:.4g} GB/s)"
                )
        if busbw > 2 * algbw * 1.05 + 0.02:
            return f"size {row.size}: busbw {busbw:g} GB/s is more than twice its algbw"
    return None


def implausible(run: NcclTestsRun) -> str | None:
    """Why the run's measurements cannot be judged (module doc), or None."""
    if run.tables > 1:
        return (
            f"{run.tables} result tables in one run's output (tests or processes mixed their "
            "output: nccl-tests built without MPI runs one test per task); not judged"
        )
    if run.avg_busbw is not None and not 0 <= run.avg_busbw <= MAX_BUSBW_GBS:
        return f"average bus bandwidth {run.avg_busbw:g} GB/s cannot be"
    for row in run.rows:
        problem = _row_problem(row)
        if problem:
            return f"a measurement that cannot be: {problem}; not judged"
    return None


def _problem(run: NcclTestsRun, rc: int) -> tuple[str, str] | None:
    if run.no_device:
        failure = next(f for f in run.failures if "CUDA" in f or "Invalid number" in f)
        return COULD_NOT_RUN, f"no GPU for a rank: {failure}"
    if run.failures:
        return FAIL, f"a rank failed: {run.failures[0]}"
    if run.wrong or run.out_of_bounds:
        count = run.wrong or run.out_of_bounds
        return FAIL, f"wrong results: {count} wrong element(s) (#wrong / out-of-bounds values)"
    if not run.rows:
        return FAIL, f"no result row (exit {rc})"
    impossible = implausible(run)
    if impossible:
        return FAIL, impossible
    if rc != 0:
        return FAIL, f"nccl-tests exited {rc} after its results"
    return None


def judge(
    test: str, nodes: tuple[str, ...], stage: str, rc: int, output: str, floor: float
) -> RunResult:
    """The verdict of one run of ``test`` over ``nodes`` (exit status ``rc``, its output)."""
    if rc == TIMED_OUT:  # a hang (NCCL's init over a broken fabric, often) is a failure
        last = output.strip().splitlines()[-1:] or ["no output"]
        reason = f"did not finish within the run timeout (exit {rc}): {last[0][:200]}"
        return RunResult(test, nodes, stage, FAIL, reason, rc)
    try:
        run = parse_nccl_tests(output)
    except ParseError:
        return RunResult(test, nodes, stage, COULD_NOT_RUN, _unrun(output, rc), rc)
    judged = floor if test == FLOOR_TEST else None
    measured = RunResult(
        test,
        nodes,
        stage,
        PASS,
        "",
        rc,
        busbw=run.peak_busbw,
        avg_busbw=run.avg_busbw,
        floor=judged,
        wrong=run.wrong if run.counts_wrong else None,
        hosts_seen=run.hosts,
    )
    problem = _problem(run, rc)
    if problem is not None:
        failed = replace(measured, verdict=problem[0], reason=problem[1])
        # numbers that cannot be are no measurement: never 'slow', never a search for a node
        return replace(failed, busbw=None, avg_busbw=None) if implausible(run) else failed
    peak = run.peak_busbw or 0.0
    if judged is not None and peak < judged:
        reason = f"bus bandwidth {peak:g} GB/s is below the floor {judged:g} GB/s"
        return replace(measured, verdict=FAIL, reason=reason)
    reason = f"bus bandwidth {peak:g} GB/s" + (
        f" (floor {judged:g} GB/s)" if judged is not None else " (correctness only: no floor)"
    )
    return replace(measured, reason=reason)
