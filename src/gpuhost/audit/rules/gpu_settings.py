"""GPU settings a profile asks for: persistence mode and application clocks
(``gpu.persistence``, ``gpu.clocks``)."""

from __future__ import annotations

from gpuhost.audit.rules.context import (
    NO_GPU_REASON,
    AuditContext,
    gpu_label,
    ok_result,
    one_finding,
    per_gpu,
    skip_result,
    visible_gpus,
)
from gpuhost.desired import DesiredState
from gpuhost.findings import ERROR, WARNING, Finding, RuleResult
from gpuhost.operations.clocks import uses_application_clocks
from gpuhost.parsers.nvidia_smi import GpuInfo


def check_persistence(ctx: AuditContext) -> RuleResult:
    rule = "gpu.persistence"
    gpus = visible_gpus(ctx.facts)
    if gpus is None:
        return skip_result(rule, NO_GPU_REASON)
    expected = ctx.expected.persistence if ctx.expected else None
    if expected is False:
        return skip_result(
            rule,
            f"profile {ctx.expected.profile if ctx.expected else ''} does not ask for "
            "persistence mode",
        )
    off = [g for g in gpus if g.persistence_mode is False]
    if not off:
        return ok_result(rule)
    daemon = ctx.facts.persistenced
    state = (
        f"nvidia-persistenced is {daemon.active}"
        if daemon and daemon.active
        else ("nvidia-persistenced is not running")
    )
    return one_finding(
        rule,
        rule,
        ERROR if expected else WARNING,
        f"persistence mode is off on {len(off)} of {len(gpus)} GPU(s) "
        f"({', '.join(gpu_label(g) for g in off[:4])}); {state}; expected on, so the "
        "driver "
        "stays initialised between jobs",
        found=f"persistence mode off on {', '.join(gpu_label(g) for g in off)}; {state}",
        expected="persistence mode on for every GPU",
        fix="systemctl enable --now nvidia-persistenced",
    )


def _wanted_clocks(expected: DesiredState, gpu: GpuInfo) -> dict[str, int | None]:
    """Application clocks (MHz) the profile asks for on this GPU."""
    if expected.clock_policy == "explicit":
        return {"graphics": expected.graphics_mhz, "memory": expected.memory_mhz}
    # "max": application clocks at the GPU's maximum
    return {"graphics": gpu.clocks.max_graphics, "memory": gpu.clocks.max_mem}


def check_clocks(ctx: AuditContext) -> RuleResult:
    rule = "gpu.clocks"
    expected = ctx.expected
    if expected is None:
        return skip_result(rule, "no profile named for this host")
    if expected.clock_policy not in ("max", "explicit"):
        return skip_result(rule, f"profile {expected.profile} leaves the clocks alone")

    def judge(gpu: GpuInfo) -> list[Finding]:
        clocks = gpu.clocks
        if not uses_application_clocks(gpu, "auto"):
            return []  # provision sets locked clocks there (not readable back), as it does
        found = {"graphics": clocks.applications_graphics, "memory": clocks.applications_mem}
        wrong = [
            f"application {kind} clock {found[kind]} MHz (expected {want} MHz)"
            for kind, want in _wanted_clocks(expected, gpu).items()
            if want is not None and found[kind] is not None and found[kind] != want
        ]
        if not wrong:
            return []
        return [
            Finding(
                rule,
                WARNING,
                f"{gpu_label(gpu)} clocks differ from profile {expected.profile} "
                f"({expected.clock_policy}): {', '.join(wrong)}",
                found=f"{gpu_label(gpu)}: "
                + ", ".join(f"{kind} {found[kind]} MHz" for kind in found),
                expected=f"profile {expected.profile} ({expected.clock_policy}): "
                + ", ".join(
                    f"{kind} {want} MHz"
                    for kind, want in _wanted_clocks(expected, gpu).items()
                    if want is not None
                ),
                fix="gpuhost provision (re-applies the clock settings)",
                source=f"profile {expected.profile}",
            )
        ]

    return per_gpu(ctx, rule, judge)
