"""What every audit rule works on and returns: the host's context, results, per-GPU runs."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from gpuhost.desired import DesiredState
from gpuhost.fabric.expected import FabricExpectation
from gpuhost.facts.host_facts import HostFacts
from gpuhost.faults.gpu import gpu_label
from gpuhost.faults.node_class import NodeExpectation
from gpuhost.findings import Finding, RuleResult
from gpuhost.gpus.node_classes import FirmwareBaseline

__all__ = [
    "NO_GPU_REASON",
    "AuditContext",
    "gpu_label",
    "ok_result",
    "one_finding",
    "per_gpu",
    "result_with",
    "skip_result",
    "visible_gpus",
]
from gpuhost.parsers.nvidia_smi import GpuInfo


@dataclass(frozen=True)
class AuditContext:
    """One host's facts and what it is expected to run."""

    facts: HostFacts
    expected: DesiredState | None = None
    profile_name: str | None = None
    profile_source: str | None = None  # "inventory" or "marker"
    profile_error: str | None = None  # the named profile does not exist
    matrix_results: tuple[RuleResult, ...] = field(default_factory=tuple)
    # indexes of GPUs known to be busy (P0): only the checks read performance states; with a
    # busy GPU a PCIe generation below its max is a warning, not the idle GPU's power saving
    busy_gpus: frozenset[int] = frozenset()
    # what the fabric should be (node class / gpuhost_fabric; None: nothing expected) and the
    # RDMA error counters of the previous run (None: no baseline)
    fabric_expected: FabricExpectation | None = None
    fabric_previous: dict[str, dict[str, int]] | None = None
    # what the node should have (its GPU model's node class, the inventory's gpuhost_node)
    node: NodeExpectation | None = None
    # the firmware it is pinned to (its node class's, the inventory's gpuhost_node.firmware)
    firmware: FirmwareBaseline | None = None


def ok_result(rule: str) -> RuleResult:
    return RuleResult(rule)


def skip_result(rule: str, reason: str) -> RuleResult:
    return RuleResult(rule, skipped=reason)


def result_with(rule: str, findings: Iterable[Finding]) -> RuleResult:
    return RuleResult(rule, tuple(findings))


def one_finding(
    rule: str,
    finding_id: str,
    severity: str,
    message: str,
    *,
    found: str | None,
    expected: str | None,
    fix: str | None,
    source: str | None = None,
) -> RuleResult:
    """A result with one finding (``finding_id``: the rule's own id or a more specific one).

    Every finding fills ``found``, ``expected`` and ``fix`` beside its message (None only where
    one does not apply); ``source`` defaults to the rule's documentation (``run_rules``)."""
    finding = Finding(
        finding_id, severity, message, source=source, found=found, expected=expected, fix=fix
    )
    return result_with(rule, [finding])


def visible_gpus(facts: HostFacts) -> list[GpuInfo] | None:
    """GPUs nvidia-smi reported, or None when nvidia-smi could not report (rules then skip)."""
    smi = facts.driver.smi
    if not smi.ok or not smi.gpus:
        return None
    return list(smi.gpus)


NO_GPU_REASON = "no GPU reported by nvidia-smi on this host"


def per_gpu(
    ctx: AuditContext, rule: str, judge: Callable[[GpuInfo], Iterable[Finding]]
) -> RuleResult:
    """Run ``judge`` on every GPU nvidia-smi reported and collect its findings; skip the rule
    when nvidia-smi reported none."""
    gpus = visible_gpus(ctx.facts)
    if gpus is None:
        return skip_result(rule, NO_GPU_REASON)
    return result_with(rule, [finding for gpu in gpus for finding in judge(gpu)])
