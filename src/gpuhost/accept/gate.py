"""The acceptance gate: a node takes no job until it passed (``gpuhost accept --gate``).

Slurm (``--gate slurm``, scontrol on this machine): every selected node must already be drained
(a new or repaired node is drained until accepted; anything else is one ConfigError line before
any host is touched). gpuhost then owns the drain: its reason becomes ``gpuhost: acceptance
running``; after the run a passing node is resumed, any other keeps its drain with the reason
``gpuhost: acceptance failed: <first problem>`` (``could not run``, ``interrupted``). A node
whose drain an operator changed during the run is left alone.

Kubernetes (``--gate k8s``): the taint ``gpuhost.io/acceptance=running:NoSchedule`` before the
run; removed when the node passes, else set to ``failed``/``could-not-run``/``interrupted``.
``slurm_plan``/``final_reason``/``taint_argv`` are pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpuhost.checks_support.health_decide import REASON_LIMIT
from gpuhost.errors import ConfigError
from gpuhost.node_tool import K8S_NODE, SLURM_NODE, checked_node_name, run_tool
from gpuhost.slurm import REASON_PREFIX, SlurmNode, show_node

GATES = ("slurm", "k8s")
RUNNING = REASON_PREFIX + "acceptance running"
ACCEPT_TAINT = "gpuhost.io/acceptance"


def node_names(hosts: Sequence[tuple[str, Mapping[str, object]]], gate: str) -> dict[str, str]:
    """{host: Slurm/Kubernetes node name} (inventory data ``gpuhost_slurm_node``, else the
    host's name; checked)."""
    from gpuhost.checks_support.inventory import LOCAL
    from gpuhost.slurm import short_hostname

    rule = SLURM_NODE if gate == "slurm" else K8S_NODE
    names = {}
    for host, data in hosts:
        given = data.get("gpuhost_slurm_node") if gate == "slurm" else None
        default = short_hostname() if host == LOCAL else host
        if gate == "k8s" and host == LOCAL:
            default = default.lower()
        names[host] = checked_node_name(
            str(given) if given else None, default, f"{host}: node name", rule
        )
    return names


def not_drained(nodes: Mapping[str, SlurmNode]) -> str | None:
    """The one line refusing the run when a node is not drained (pure)."""
    open_nodes = [
        f"{host} (Slurm node {n.name}: {'+'.join(sorted(n.states))})"
        for host, n in nodes.items()
        if not n.drained
    ]
    if not open_nodes:
        return None
    return (
        f"--gate slurm: {', '.join(open_nodes[:5])} not drained; expected every node drained "
        "before its acceptance run (scontrol update nodename=NODE state=drain reason=new)"
    )


def final_reason(verdict: str, first_line: str | None, interrupted: bool) -> str | None:
    """The drain reason after the run; None: resume (pure)."""
    if interrupted:
        return REASON_PREFIX + "acceptance interrupted"
    if verdict == "pass":
        return None
    words = "failed" if verdict == "fail" else "could not run"
    reason = f"{REASON_PREFIX}acceptance {words}: {first_line or 'see the acceptance record'}"
    return reason[:REASON_LIMIT]


def _scontrol(argv: list[str]) -> str:
    return run_tool(argv, "--gate slurm: scontrol (Slurm's client) is not installed here")


def slurm_before(names: Mapping[str, str]) -> None:
    """Every node drained (else ConfigError), then gpuhost's reason on each."""
    nodes = {host: show_node(name) for host, name in names.items()}
    problem = not_drained(nodes)
    if problem:
        raise ConfigError(problem)
    for node in nodes.values():
        _scontrol(
            ["scontrol", "update", f"nodename={node.name}", "state=drain", f"reason={RUNNING}"]
        )


def slurm_after(name: str, reason: str | None) -> str:
    """Resume or keep drained with ``reason``; what was done."""
    node = show_node(name)
    if not node.drained_by_gpuhost:
        return f"Slurm node {name}: left as it is (its drain was changed during the run)"
    if reason is None:
        _scontrol(["scontrol", "update", f"nodename={name}", "state=resume"])
        return f"Slurm node {name}: accepted, resumed"
    _scontrol(["scontrol", "update", f"nodename={name}", "state=drain", f"reason={reason}"])
    return f"Slurm node {name}: stays drained ({reason})"


def taint_argv(name: str, value: str | None) -> list[str]:
    """kubectl's argv: ``value`` set (NoSchedule), None: removed (pure)."""
    if value is None:
        return ["kubectl", "taint", "node", name, f"{ACCEPT_TAINT}:NoSchedule-"]
    return ["kubectl", "taint", "node", name, f"{ACCEPT_TAINT}={value}:NoSchedule", "--overwrite"]


def _kubectl(argv: list[str]) -> str:
    return run_tool(argv, "--gate k8s: kubectl is not installed on this machine (or not on PATH)")


def k8s_before(names: Mapping[str, str]) -> None:
    for name in names.values():
        _kubectl(taint_argv(name, "running"))


def k8s_after(name: str, verdict: str, interrupted: bool) -> str:
    value = "interrupted" if interrupted else None if verdict == "pass" else verdict
    _kubectl(taint_argv(name, value))
    if value is None:
        return f"Kubernetes node {name}: accepted, taint {ACCEPT_TAINT} removed"
    return f"Kubernetes node {name}: tainted {ACCEPT_TAINT}={value}:NoSchedule"


def before(gate: str | None, names: Mapping[str, str]) -> None:
    if gate == "slurm":
        slurm_before(names)
    elif gate == "k8s":
        k8s_before(names)


def after(
    gate: str | None, name: str, verdict: str, first: str | None, interrupted: bool
) -> str | None:
    if gate == "slurm":
        return slurm_after(name, final_reason(verdict, first, interrupted))
    if gate == "k8s":
        return k8s_after(name, verdict, interrupted)
    return None
