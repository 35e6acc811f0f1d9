"""The health tier's Kubernetes side (opt-in, ``gpuhost check --tier health --k8s``).

Where a node runs kubelet, gpuhost's health judgement can keep GPU pods off it as
node-problem-detector does: when the health tier drains, the node gets the condition
``GpuhostGpuHealthy`` (status ``False``, reason the action in CamelCase, message the health
line) and the taint ``gpuhost.io/gpu-unhealthy=<action>:NoSchedule``; when gpuhost's drain is
lifted both are removed. Only gpuhost's own condition type and taint key are ever touched.

``kubectl get node NAME -o json`` is read with a pure parser (``parse_node``); ``commands``
decides (pure) which kubectl argv to run: ``kubectl taint`` for the taint, ``kubectl patch node
--subresource=status`` (kubectl 1.24 or newer) with a strategic merge patch for the condition
(``$patch: delete`` to remove it). kubectl finds its cluster as it always does
(``$KUBECONFIG``, ``~/.kube/config``); the credentials must allow patching nodes and
nodes/status.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any

from gpuhost.errors import ParseError
from gpuhost.node_tool import run_tool
from gpuhost.parsers._common import first_line, require_text

CONDITION = "GpuhostGpuHealthy"
TAINT_KEY = "gpuhost.io/gpu-unhealthy"
TAINT_EFFECT = "NoSchedule"


@dataclass(frozen=True)
class K8sNode:
    name: str
    taint: str | None  # the value of gpuhost's NoSchedule taint (None: not there)
    condition: tuple[str, str, str] | None  # gpuhost's condition: (status, reason, message)


def parse_node(text: str) -> K8sNode:
    """``kubectl get node NAME -o json`` → gpuhost's taint and condition on it."""
    text = require_text(text, "the output of 'kubectl get node NAME -o json'")
    try:
        data: Any = json.loads(text)
        name = data["metadata"]["name"]
        taints = (data.get("spec") or {}).get("taints") or []
        conditions = (data.get("status") or {}).get("conditions") or []
        taint = next(
            (
                str(t.get("value", ""))
                for t in taints
                if t.get("key") == TAINT_KEY and t.get("effect") == TAINT_EFFECT
            ),
            None,
        )
        condition = next(
            (
                (str(c.get("status")), str(c.get("reason", "")), str(c.get("message", "")))
                for c in conditions
                if c.get("type") == CONDITION
            ),
            None,
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ParseError(
            "expected the output of 'kubectl get node NAME -o json' (a Node object), found "
            f"{first_line(text)!r}"
        ) from None
    if not isinstance(name, str):
        raise ParseError("kubectl get node: metadata.name is not a string")
    return K8sNode(name, taint, condition)


def camel(action: str) -> str:
    """``reset-gpu`` → ``ResetGpu`` (a condition's reason is one CamelCase word)."""
    return "".join(part[:1].upper() + part[1:] for part in action.split("-"))


def condition_patch(status: str, reason: str, message: str, now: str) -> str:
    """The strategic merge patch setting gpuhost's condition (merged by its type)."""
    condition = {
        "type": CONDITION,
        "status": status,
        "reason": reason,
        "message": message,
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }
    return json.dumps({"status": {"conditions": [condition]}}, separators=(",", ":"))


def removal_patch() -> str:
    return json.dumps(
        {"status": {"conditions": [{"$patch": "delete", "type": CONDITION}]}},
        separators=(",", ":"),
    )


def _patch(name: str, patch: str) -> list[str]:
    return [
        "kubectl",
        "patch",
        "node",
        name,
        "--subresource=status",
        "--type=strategic",
        "-p",
        patch,
    ]


def commands(
    node: K8sNode, action: str | None, line: str, resume: bool, now: str
) -> list[list[str]]:
    """The kubectl argv to run: with ``action`` (the health tier drains) the taint and the
    condition set (each only when not already so); with ``resume`` both removed where gpuhost's
    are there; else nothing."""
    out: list[list[str]] = []
    if action is not None:
        if node.taint != action:
            out.append(
                [
                    "kubectl",
                    "taint",
                    "node",
                    node.name,
                    f"{TAINT_KEY}={action}:{TAINT_EFFECT}",
                    "--overwrite",
                ]
            )
        if node.condition is None or node.condition != ("False", camel(action), line):
            out.append(_patch(node.name, condition_patch("False", camel(action), line, now)))
    elif resume:
        if node.taint is not None:
            out.append(["kubectl", "taint", "node", node.name, f"{TAINT_KEY}:{TAINT_EFFECT}-"])
        if node.condition is not None:
            out.append(_patch(node.name, removal_patch()))
    return out


def node_name() -> str:
    """kubelet's default node name: this machine's host name, lower case."""
    return socket.gethostname().lower()


def _kubectl(argv: list[str]) -> str:
    return run_tool(argv, "--k8s: kubectl is not installed on this machine (or not on PATH)")


def get_node(name: str) -> K8sNode:
    """``kubectl get node NAME -o json``, parsed."""
    node = parse_node(_kubectl(["kubectl", "get", "node", name, "-o", "json"]))
    if node.name != name:  # gpuhost acts on the name it read: never on another node
        raise ParseError(f"kubectl get node {name}: answered for node {node.name!r:.80}")
    return node


def mark_or_clear(
    node: K8sNode, action: str | None, line: str, resume: bool, now: str
) -> str | None:
    """Taint/condition ``node`` as ``commands`` says; what was done (None: nothing)."""
    todo = commands(node, action, line, resume, now)
    for argv in todo:
        _kubectl(argv)
    if not todo:
        return None
    if action is not None:
        return f"tainted Kubernetes node {node.name} ({TAINT_KEY}={action}:{TAINT_EFFECT})"
    return f"removed gpuhost's taint and condition from Kubernetes node {node.name}"
