"""Finding the slow node or link when a collective run over a set of nodes falls short (pure).

``locate(nodes, meets)`` decides which subsets to run, in order; ``meets(subset)`` runs one (the
caller's: a real srun, or a fake in tests) and says whether it met the floor. The plan:

1. **pairs**: the nodes in disjoint pairs (an odd last node paired with the first);
2. a **slow pair** ``(a, b)`` is split against a node of a pair that met the floor, ``g``:
   ``(a, g)`` and ``(b, g)``. The member whose run with ``g`` is slow is a slow node; when both
   runs meet the floor, the link between ``a`` and ``b`` is the slow one (their path, not
   either node). With no pair meeting the floor there is no good node to compare with: every
   node is named, and the answer says so;
3. no pair is slow but the whole set is: **halves**, run each half of three or more nodes and
   split the slow half again, down to the smallest slow set (a set's own shortfall, e.g. a
   switch's uplinks, that no pair shows).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

Subset = tuple[str, ...]


@dataclass(frozen=True)
class Located:
    """What the split found: slow ``nodes``, slow ``links`` (pairs of nodes), a smallest slow
    ``group`` of nodes when only a set larger than a pair is slow, and ``note`` in words."""

    nodes: tuple[str, ...] = ()
    links: tuple[tuple[str, str], ...] = ()
    group: tuple[str, ...] = ()
    note: str = ""
    runs: tuple[tuple[Subset, bool], ...] = field(default=())

    @property
    def named(self) -> str:
        """The culprits in one line."""
        parts = []
        if self.nodes:
            parts.append(("node " if len(self.nodes) == 1 else "nodes ") + ", ".join(self.nodes))
        parts += [f"link {a} <-> {b}" for a, b in self.links]
        if self.group:
            parts.append("the set " + ", ".join(self.group))
        return "; ".join(parts) or "nothing"


def pairs(nodes: Sequence[str]) -> list[Subset]:
    """Disjoint pairs in order; an odd last node is paired with the first."""
    found: list[Subset] = [(nodes[i], nodes[i + 1]) for i in range(0, len(nodes) - 1, 2)]
    if len(nodes) % 2 and len(nodes) > 1:
        found.append((nodes[-1], nodes[0]))
    return found


def halves(nodes: Sequence[str]) -> tuple[Subset, Subset]:
    middle = (len(nodes) + 1) // 2
    return tuple(nodes[:middle]), tuple(nodes[middle:])


class _Runs:
    """``meets`` with each subset run at most once, every answer recorded in order."""

    def __init__(self, meets: Callable[[Subset], bool]) -> None:
        self._meets = meets
        self.done: dict[frozenset[str], bool] = {}
        self.order: list[tuple[Subset, bool]] = []

    def __call__(self, subset: Subset) -> bool:
        key = frozenset(subset)
        if key not in self.done:
            self.done[key] = self._meets(subset)
            self.order.append((subset, self.done[key]))
        return self.done[key]


def _split_pairs(slow: list[Subset], good: list[str], run: _Runs) -> Located:
    nodes: list[str] = []
    links: list[tuple[str, str]] = []
    for a, b in slow:
        ref = next((g for g in good if g not in (a, b)), None)
        if ref is None:
            continue
        a_ok, b_ok = run((a, ref)), run((b, ref))
        if a_ok and b_ok:
            links.append((a, b))
        nodes += [n for n, ok in ((a, a_ok), (b, b_ok)) if not ok]
    note = "pairs below the floor: " + ", ".join(f"{a}+{b}" for a, b in slow)
    return Located(tuple(dict.fromkeys(nodes)), tuple(links), note=note)


def _halve(nodes: Subset, run: _Runs) -> Subset:
    """The smallest slow set found by halving ``nodes`` (which is slow)."""
    while len(nodes) > 2:
        slow = [half for half in halves(nodes) if len(half) >= 2 and not run(half)]
        if len(slow) != 1:
            break  # both halves slow (share the cause) or neither (only the whole set)
        nodes = slow[0]
    return nodes


def locate(nodes: Sequence[str], meets: Callable[[Subset], bool]) -> Located:
    """Run pairs, then splits, then halves (module docstring) and name what is slow."""
    run = _Runs(meets)
    if len(nodes) < 2:
        return Located(note="one node: nothing to split")
    slow = [p for p in pairs(nodes) if not run(p)]
    good = [n for p in pairs(nodes) if p not in slow for n in p]
    if slow and good:
        found = _split_pairs(slow, good, run)
    elif slow:
        found = Located(
            tuple(nodes),
            note="every pair is below the floor: no node to compare with; the fabric they "
            "share (or the floor) rather than one node",
        )
    else:
        group = _halve(tuple(nodes), run)
        found = Located(
            group=group,
            note="every pair meets the floor; only a set of "
            f"{len(group)} nodes falls short (shared links: switch uplinks, routing)",
        )
    return Located(found.nodes, found.links, found.group, found.note, tuple(run.order))
