"""Draining and resuming this Slurm node from the health check (``gpuhost check --drain``).

``scontrol show node NAME`` is read with a pure parser; ``drain_command`` decides (pure) what to
run: the health tier's decision to drain (``checks_support.health_decide``) drains with
``reason="gpuhost: <action>: ..."``; its decision to lift gpuhost's drain resumes the node only
when it is drained with a reason gpuhost wrote (an operator's drain is never undone, and a node
an operator drained is never re-labelled by gpuhost).
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass

from gpuhost.errors import ParseError
from gpuhost.node_tool import run_tool
from gpuhost.parsers._common import first_line, require_text

REASON_PREFIX = "gpuhost: "
_NODE_RE = re.compile(r"^NodeName=(\S+)")
_STATE_RE = re.compile(r"(?:^|\s)State=(\S+)")
_REASON_RE = re.compile(r"(?:^|\s)Reason=(.*?)(?: \[[^\]]*@[^\]]*\])?\s*$")


@dataclass(frozen=True)
class SlurmNode:
    name: str
    states: frozenset[str]  # {"IDLE", "DRAIN"}; "IDLE+DRAIN" split, "*" suffix dropped
    reason: str | None  # without Slurm's "[user@time]" suffix

    @property
    def drained(self) -> bool:
        return bool(self.states & {"DRAIN", "DRAINED", "DRAINING"})

    @property
    def drained_by_gpuhost(self) -> bool:
        return self.drained and (self.reason or "").startswith(REASON_PREFIX)


def parse_show_node(text: str) -> SlurmNode:
    """``scontrol show node NAME`` (multi-line or ``-o``) → SlurmNode."""
    text = require_text(text, "the output of 'scontrol show node NAME'")
    node = _NODE_RE.match(text.lstrip())
    state = _STATE_RE.search(text)
    if node is None or state is None:
        raise ParseError(
            "expected the output of 'scontrol show node NAME' (NodeName=... State=...), found "
            f"{first_line(text)!r}"
        )
    reason = None
    for line in text.splitlines():
        match = _REASON_RE.search(line)
        if match and "Reason=" in line:
            reason = match.group(1).strip() or None
    states = frozenset(s.rstrip("*~#!%$@^-") for s in state.group(1).split("+"))
    return SlurmNode(node.group(1), states, reason)


def drain_command(node: SlurmNode, reason: str | None, resume: bool) -> list[str] | None:
    """The scontrol argv to run, or None: with ``reason`` (already ``gpuhost: ...``) drain the
    node (unless an operator drained it, or gpuhost did for that reason); with ``resume`` lift
    gpuhost's own drain (never an operator's)."""
    if reason is not None:
        if node.drained and not node.drained_by_gpuhost:
            return None  # an operator's drain and reason stay
        if node.drained and node.reason == reason:
            return None
        return ["scontrol", "update", f"nodename={node.name}", "state=drain", f"reason={reason}"]
    if resume and node.drained_by_gpuhost:
        return ["scontrol", "update", f"nodename={node.name}", "state=resume"]
    return None


def short_hostname() -> str:
    return socket.gethostname().split(".")[0]


def _scontrol(argv: list[str]) -> str:
    return run_tool(argv, "--drain: scontrol (Slurm's client) is not installed on this machine")


def show_node(node_name: str) -> SlurmNode:
    """``scontrol show node NAME``, parsed."""
    node = parse_show_node(_scontrol(["scontrol", "show", "node", node_name]))
    if node.name != node_name:  # gpuhost acts on the name it read: never on another node
        raise ParseError(f"scontrol show node {node_name}: answered for node {node.name!r:.80}")
    return node


def drain_or_resume(node: SlurmNode, reason: str | None, resume: bool) -> str | None:
    """Drain or resume ``node`` as ``drain_command`` says; what was done (None: nothing)."""
    argv = drain_command(node, reason, resume)
    if argv is None:
        return None
    _scontrol(argv)
    return f"{'drained' if reason else 'resumed'} Slurm node {node.name}"
