"""The ``--tier health`` run on this machine: judge, remember, drain/resume, report.

``run_health`` reads this machine once (``health.gather``), turns the judgement's findings into
faults with the fault catalog's action and drain policy (``faults``), prints one line
(``healthy`` or ``<action>: <first fault> (+n more)``) and, with ``--drain`` and/or ``--k8s``,
counts consecutive runs in the state file (``health_memory``), decides without flapping
(``health_decide``), drains/resumes the Slurm node (``gpuhost.slurm``) and taints/clears the
Kubernetes node (``gpuhost.k8s``). What was done goes to stderr; exit 0 healthy (or only faults
that never drain), 1 otherwise.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuhost.checks_support.health import gather, judge
from gpuhost.checks_support.health_decide import (
    DEFAULT_AFTER,
    REASON_LIMIT,
    Decision,
    HealthFault,
    Memory,
    check_after,
    decide,
    summary,
)
from gpuhost.errors import ConfigError
from gpuhost.faults.catalog import drain_policy
from gpuhost.findings import Finding
from gpuhost.k8s import K8sNode
from gpuhost.node_tool import K8S_NODE, SLURM_NODE, checked_node_name
from gpuhost.slurm import REASON_PREFIX, SlurmNode

_RULE = re.compile(r"^\[([a-z0-9][a-z0-9._-]*)\] ")
# the health line is the drain reason without its prefix: "gpuhost: " + line fits Slurm's reason
LINE_LIMIT = REASON_LIMIT - len(REASON_PREFIX)


@dataclass(frozen=True)
class HealthRequest:
    """What ``gpuhost check @local --tier health`` was asked: ``--drain`` [``--node``],
    ``--k8s`` [``--k8s-node``], ``--after`` and the state folder the counts live in."""

    drain: bool = False
    node: str | None = None
    k8s: bool = False
    k8s_node: str | None = None
    after: int = DEFAULT_AFTER
    state_dir: Path | None = None

    @property
    def acts(self) -> bool:
        return self.drain or self.k8s


def check_health_request(tier: str, others: bool) -> None:
    """``--drain``/``--node``/``--k8s``/``--k8s-node``/``--after``/``--state-dir`` need ``--tier
    health``, which checks this machine only (``others``: an inventory, ``--limit``,
    ``--junit``, ``--profiles`` or pytest arguments were given)."""
    if tier != "health" or others:
        raise ConfigError(
            "--tier health checks this machine only: gpuhost check @local --tier health "
            "[--drain [--node NAME]] [--k8s [--k8s-node NAME]] [--after N] (no inventory, "
            "--limit, --junit, --profiles or pytest arguments; --drain, --node, --k8s, "
            "--k8s-node, --after and --state-dir need --tier health)"
        )


def faults(problems: Sequence[Finding | str]) -> list[HealthFault]:
    """The health judgement's findings as faults: the fault catalog's action and drain policy
    (``faults.catalog``; a finding the catalog has no row for, e.g. ``gpu.unavailable`` or
    ``profile.driver``, calls for a drain once persistent). A bare line (older callers) ``[rule]
    ...`` is that rule's fault, any other ``gpu.unavailable``."""
    out = []
    for problem in problems:
        if isinstance(problem, Finding):
            # a GPU fault's line names its id; "the GPUs cannot be read" is said as it is
            bare = problem.rule == "gpu.unavailable"
            line = problem.message if bare else f"[{problem.rule}] {problem.message}"
            out.append(
                HealthFault(problem.rule, problem.action or "drain", drain_policy(problem), line)
            )
            continue
        match = _RULE.match(problem)
        rule = match.group(1) if match else "gpu.unavailable"
        out.append(HealthFault(rule, "drain", "persistent", problem))
    return out


def reason(decision: Decision) -> str | None:
    """The Slurm drain reason (``gpuhost: <action>: <line> (+n more)``), None: no drain."""
    if not decision.drain:
        return None
    return REASON_PREFIX + summary(decision.drain, REASON_LIMIT - len(REASON_PREFIX))


def waiting_line(decision: Decision, after: int) -> str | None:
    if not decision.waiting:
        return None
    seen = ", ".join(f"{f.id} seen on {n} of {after}" for f, n in decision.waiting[:3])
    more = f" (+{len(decision.waiting) - 3} more)" if len(decision.waiting) > 3 else ""
    return f"gpuhost: not drained yet: {seen} consecutive runs{more}"


def slurm_name(request: HealthRequest) -> str:
    """The Slurm node ``--drain`` acts on: ``--node``, else the short host name (checked)."""
    from gpuhost import slurm

    return checked_node_name(request.node, slurm.short_hostname(), "--node", SLURM_NODE)


def k8s_name(request: HealthRequest) -> str:
    """The Kubernetes node ``--k8s`` acts on: ``--k8s-node``, else the host name (checked)."""
    from gpuhost import k8s

    return checked_node_name(request.k8s_node, k8s.node_name(), "--k8s-node", K8S_NODE)


def run_health(request: HealthRequest, echo: Callable[..., object]) -> int:
    """One health run (see the module doc). Errors of scontrol/kubectl and an unusable state
    folder propagate (GpuhostError: the CLI prints them, exit 2 for bad input); a bad node
    name is refused before the GPUs are read."""
    problem = check_after(request.after)
    if problem:
        raise ConfigError(f"--after: {problem}")
    if request.drain:
        slurm_name(request)
    if request.k8s:
        k8s_name(request)
    found = faults(judge(gather()))
    echo(summary(found, LINE_LIMIT))
    if request.acts:
        for line in _act(request, found):
            echo(line, err=True)
    return 1 if any(f.drain != "never" for f in found) else 0


def _act(request: HealthRequest, found: list[HealthFault]) -> list[str]:
    """Count, decide, drain/resume, mark/clear; the memory is saved once the actions are done
    (a failed scontrol/kubectl call leaves the last run's memory: the next run tries again)."""
    from gpuhost.checks_support.health_memory import load_memory, save_memory
    from gpuhost.statedir import check_state_dir

    if request.state_dir is None:
        raise ConfigError("--drain/--k8s: no state folder to count consecutive runs in")
    check_state_dir(request.state_dir)
    memory, damaged = load_memory(request.state_dir)
    lines = [f"gpuhost: {damaged}"] if damaged else []
    nodes = _Nodes.read(request)
    decision = decide(found, memory, request.after, nodes.lifted(memory))
    waiting = waiting_line(decision, request.after)
    if waiting and not decision.drain:
        lines.append(waiting)
    lines += [f"gpuhost: {done}" for done in nodes.apply(decision) if done]
    save_memory(request.state_dir, decision.memory)
    return lines


@dataclass(frozen=True)
class _Nodes:
    """The Slurm and Kubernetes nodes this run acts on (None: not asked for)."""

    slurm: SlurmNode | None
    k8s: K8sNode | None

    @classmethod
    def read(cls, request: HealthRequest) -> _Nodes:
        from gpuhost import k8s, slurm

        return cls(
            slurm.show_node(slurm_name(request)) if request.drain else None,
            k8s.get_node(k8s_name(request)) if request.k8s else None,
        )

    def lifted(self, memory: Memory) -> bool:
        """gpuhost drained for faults last run, and its drain is gone (an operator's resume)."""
        if not memory.drained_for:
            return False
        return (self.slurm is not None and not self.slurm.drained) or (
            self.k8s is not None and self.k8s.taint is None
        )

    def apply(self, decision: Decision) -> list[str | None]:
        from gpuhost import k8s, slurm

        done: list[str | None] = []
        if self.slurm is not None:
            done.append(slurm.drain_or_resume(self.slurm, reason(decision), decision.resume))
        if self.k8s is not None:
            action = decision.drain[0].action if decision.drain else None
            line = summary(decision.drain, LINE_LIMIT)
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            done.append(k8s.mark_or_clear(self.k8s, action, line, decision.resume, now))
        return done
