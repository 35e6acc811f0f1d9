"""The RDMA fabric's ports (``fabric.ports``) and their error counters between runs
(``fabric.counters``), judged by gpuhost.fabric.judge against the node class / gpuhost_fabric."""

from __future__ import annotations

from gpuhost.audit.rules.context import AuditContext, result_with, skip_result
from gpuhost.fabric import judge
from gpuhost.findings import RuleResult


def fabric_skip(ctx: AuditContext, rule: str) -> RuleResult | None:
    """The skip of a fabric rule on a host with no RDMA port and nothing that requires one."""
    reason = judge.absent_reason(ctx.facts.fabric.ports, ctx.fabric_expected)
    return skip_result(rule, reason) if reason else None


def check_fabric_ports(ctx: AuditContext) -> RuleResult:
    rule = "fabric.ports"
    skipped = fabric_skip(ctx, rule)
    if skipped is not None:
        return skipped
    if ctx.fabric_expected is None:
        return skip_result(
            rule,
            f"{len(ctx.facts.fabric.ports)} RDMA port(s) but no expected count or rate: no node "
            "class of data/node_classes.yaml matches the GPUs; set inventory data gpuhost_node",
        )
    return result_with(rule, judge.port_findings(ctx.facts.fabric.ports, ctx.fabric_expected))


def check_fabric_counters(ctx: AuditContext) -> RuleResult:
    rule = "fabric.counters"
    skipped = fabric_skip(ctx, rule)
    if skipped is not None:
        return skipped
    if not any(port.counters for port in ctx.facts.fabric.ports):
        return skip_result(rule, "no RDMA error counter could be read")
    if ctx.fabric_previous is None:
        return skip_result(rule, "first run: the counters are the baseline for the next one")
    return result_with(rule, judge.counter_findings(ctx.facts.fabric.ports, ctx.fabric_previous))
