"""What the health tier does about the faults it found, without flapping (pure).

Each run of ``gpuhost check @local --tier health --drain`` (or ``--k8s``) counts, per fault id,
on how many consecutive runs it was seen (``Memory.streaks``, kept in the state file by
``health_memory``). A fault calls for a drain when its drain policy says so:

- ``immediate``: at once (a GPU fallen off the bus, uncorrectable ECC with a remap pending);
- ``persistent``: once seen on ``after`` consecutive runs (a fault that clears on the next run
  drains nothing);
- ``never``: never (``watch``/``none`` faults).

A drain gpuhost made is lifted (``resume``) only when none of the faults it was made for
(``Memory.drained_for``) is seen any more: a drain for fault X stays while X persists, even when
another fault clears. When the state file lost that record, only a run without any fault that
could drain lifts it.

Xid faults are events: their kernel log lines stay until the next boot, after the GPU reset
that dealt with them. When an operator lifts gpuhost's drain (``operator_lifted``) while such a
fault is still logged, the operator has acknowledged it (``Memory.acknowledged``): it drains
nothing more until it is gone from the log (the next boot). A fault that is a state (ECC
counts, a remap pending, a link down) is never acknowledged: it drains again.

.. code:: python

    decision = decide(faults, memory, after=3)
    decision.drain       # the faults to drain for now ([]: none), strongest action first
    decision.resume      # gpuhost's own drain may be lifted
    decision.memory      # what the next run starts from
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

# The strongest action first: the one a drain reason names when several faults call for a drain.
ACTION_RANK = ("inspect-hardware", "reboot", "reset-gpu", "drain", "watch", "none")
DRAIN_POLICIES = ("immediate", "persistent", "never")
DEFAULT_AFTER = 3
MAX_AFTER = 1000
EVENT_PREFIX = "gpu.xid."  # fault ids of kernel log events (acknowledged by an operator's resume)
MAX_FAULTS = 200  # fault ids remembered at most (the state file stays small)
REASON_LIMIT = 200  # characters of a Slurm drain reason, "gpuhost: " included


@dataclass(frozen=True)
class HealthFault:
    """One fault the health judgement found: its stable id (the audit's rule id), the action it
    calls for, its drain policy and its one line (``[rule] GPU 0 (...): ...``)."""

    id: str
    action: str
    drain: str
    line: str

    def __post_init__(self) -> None:
        if self.drain not in DRAIN_POLICIES:
            raise ValueError(
                f"fault {self.id}: drain policy {self.drain!r}, expected one of "
                f"{', '.join(DRAIN_POLICIES)}"
            )


@dataclass(frozen=True)
class Memory:
    """What the health tier remembers between runs: consecutive runs each fault id was seen on,
    and the fault ids gpuhost's drain (Slurm and/or Kubernetes) was made for (None: unknown, e.g.
    after a damaged state file)."""

    streaks: dict[str, int] = field(default_factory=dict)
    drained_for: tuple[str, ...] | None = ()
    acknowledged: tuple[str, ...] = ()


@dataclass(frozen=True)
class Decision:
    drain: list[HealthFault]
    resume: bool
    memory: Memory
    waiting: list[tuple[HealthFault, int]]  # persistent faults not yet seen on `after` runs


def _rank(fault: HealthFault) -> int:
    return ACTION_RANK.index(fault.action) if fault.action in ACTION_RANK else 0


def ordered(faults: Sequence[HealthFault]) -> list[HealthFault]:
    """Strongest action first; the judgement's order among equals."""
    return sorted(faults, key=_rank)


def check_after(after: int) -> str | None:
    """Why ``--after`` is not usable (None if it is)."""
    if isinstance(after, bool) or not isinstance(after, int) or not 1 <= after <= MAX_AFTER:
        return f"expected a whole number of runs from 1 to {MAX_AFTER}, found {after!r}"
    return None


def acknowledged(
    faults: Sequence[HealthFault], memory: Memory, operator_lifted: bool
) -> tuple[str, ...]:
    """The event faults (Xids) an operator acknowledged by lifting gpuhost's drain, as long as
    they are still seen."""
    ack = set(memory.acknowledged)
    if operator_lifted and memory.drained_for:
        ack |= {i for i in memory.drained_for if i.startswith(EVENT_PREFIX)}
    seen = {fault.id for fault in faults}
    return tuple(sorted(ack & seen))


def decide(
    faults: Sequence[HealthFault], memory: Memory, after: int, operator_lifted: bool = False
) -> Decision:
    """This run's drain/resume decision and the memory the next run starts from.
    ``operator_lifted``: gpuhost's drain of the last run is gone (an operator resumed the node)."""
    ack = acknowledged(faults, memory, operator_lifted)
    streaks: dict[str, int] = {}
    for fault in faults:
        if fault.id not in streaks and len(streaks) < MAX_FAULTS:
            streaks[fault.id] = memory.streaks.get(fault.id, 0) + 1
    drain: list[HealthFault] = []
    waiting: list[tuple[HealthFault, int]] = []
    for fault in faults:
        seen = streaks.get(fault.id, 1)
        if fault.id in ack:
            continue
        if fault.drain == "immediate" or (fault.drain == "persistent" and seen >= after):
            drain.append(fault)
        elif fault.drain == "persistent":
            waiting.append((fault, seen))
    present = {fault.id for fault in faults if fault.drain != "never" and fault.id not in ack}
    if drain:
        resume = False
        drained_for: tuple[str, ...] | None = tuple(dict.fromkeys(f.id for f in drain))
    elif memory.drained_for is None:  # unknown: only a run without any fault lifts it
        resume = not present
        drained_for = None if present else ()
    else:
        still = tuple(i for i in memory.drained_for if i in present)
        resume = not still
        drained_for = still
    return Decision(ordered(drain), resume, Memory(streaks, drained_for, ack), waiting)


def summary(faults: Sequence[HealthFault], limit: int) -> str:
    """``<action>: <first fault line> (+n more)`` of the strongest fault, in ``limit``
    characters (the count of the others stays visible); ``healthy`` when there is none."""
    if not faults:
        return "healthy"
    first = ordered(faults)[0]
    text = f"{first.action}: " + " ".join(first.line.split())
    more = f" (+{len(faults) - 1} more)" if len(faults) > 1 else ""
    room = limit - len(more)
    if len(text) > room:
        text = text[: room - 3] + "..."
    return text + more
