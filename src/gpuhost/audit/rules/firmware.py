"""Firmware: one VBIOS per GPU model on a host (``firmware.vbios-mixed``) and the pinned baseline
(``firmware.baseline``, ``firmware.unread``: the node class's or the inventory's
``gpuhost_node.firmware``). Drift between hosts is the summary's (``audit/summary.py``)."""

from __future__ import annotations

from collections import defaultdict

from gpuhost.audit.rules.context import (
    NO_GPU_REASON,
    AuditContext,
    result_with,
    skip_result,
)
from gpuhost.facts.host_facts import FirmwareFacts
from gpuhost.findings import WARNING, Finding, RuleResult
from gpuhost.gpus.node_classes import FirmwareBaseline

LABELS = {"vbios": "VBIOS", "gsp": "GSP firmware", "hca": "HCA firmware", "bios": "BIOS"}
_VBIOS_FIX = (
    "update the GPUs to one VBIOS with the server vendor's firmware package (or nvflash where "
    "the vendor allows it), then reboot"
)


def _spread(where_by_version: dict[str, list[str]]) -> str:
    return "; ".join(
        f"{version} on {', '.join(sorted(where))}"
        for version, where in sorted(where_by_version.items())
    )


def check_vbios_mixed(ctx: AuditContext) -> RuleResult:
    rule = "firmware.vbios-mixed"
    gpus = ctx.facts.firmware.gpus
    if not gpus:
        return skip_result(rule, NO_GPU_REASON)
    if not any(g.vbios for g in gpus):
        return skip_result(rule, "nvidia-smi reported no VBIOS version")
    models: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for index, gpu in enumerate(gpus):
        if gpu.vbios:
            models[gpu.name or "GPU"][gpu.vbios].append(gpu.bus_id or f"GPU {index}")
    findings = [
        Finding(
            rule,
            WARNING,
            f"the {name} GPUs run {len(versions)} VBIOS versions ({_spread(versions)}); GPUs "
            "of one model in one node normally run one",
            found=_spread(versions),
            expected=f"one VBIOS version on every {name}",
            fix=_VBIOS_FIX,
        )
        for name, versions in sorted(models.items())
        if len(versions) > 1
    ]
    return result_with(rule, findings)


def observed(field: str, firmware: FirmwareFacts) -> tuple[list[tuple[str, str | None]], str]:
    """What the host shows of one baseline field: [(where, version or None)], and why it is
    empty when it is."""
    if field in ("vbios", "gsp"):
        values = [
            (g.bus_id or f"GPU {i}", g.vbios if field == "vbios" else g.gsp)
            for i, g in enumerate(firmware.gpus)
        ]
        return values, NO_GPU_REASON
    if not firmware.read:
        return [], "the probe did not read the firmware files"
    if field == "hca":
        return list(firmware.hca.items()), "no /sys/class/infiniband/*/fw_ver on this host"
    return [("BIOS", firmware.bios_version)], ""


def _field_findings(
    field: str, baseline: FirmwareBaseline, firmware: FirmwareFacts
) -> list[Finding]:
    label = LABELS[field]
    allowed = baseline.versions[field]
    expected = f"{' or '.join(allowed)} ({baseline.name})"
    values, why_empty = observed(field, firmware)
    unread = [where for where, version in values if version is None]
    if not values or unread:
        found = f"not read: {why_empty}" if not values else f"not shown for {', '.join(unread)}"
        return [
            Finding(
                "firmware.unread",
                WARNING,
                f"{label} could not be checked against the baseline ({found})",
                found=found,
                expected=expected,
                fix=f"read the {label} version on the host and compare it with the baseline",
            )
        ]
    wrong: dict[str, list[str]] = defaultdict(list)
    for where, version in values:
        if version not in allowed:
            wrong[str(version)].append(where)
    if not wrong:
        return []
    return [
        Finding(
            "firmware.baseline",
            WARNING,
            f"{label} {_spread(wrong)} differs from the baseline {expected}",
            found=_spread(wrong),
            expected=expected,
            fix=f"update the {label} to {allowed[0]} (the vendor's firmware package), or change "
            "the baseline if the new version is the one wanted",
        )
    ]


def check_firmware_baseline(ctx: AuditContext) -> RuleResult:
    rule = "firmware.baseline"
    if ctx.firmware is None:
        return skip_result(
            rule, "no firmware baseline pinned (node class firmware or gpuhost_node.firmware)"
        )
    findings = [
        finding
        for field in LABELS
        if field in ctx.firmware.versions
        for finding in _field_findings(field, ctx.firmware, ctx.facts.firmware)
    ]
    return result_with(rule, findings)
