"""The NVSwitch fabric manager: at the driver's version, its service active
(``fabricmanager``)."""

from __future__ import annotations

from gpuhost.audit.rules.context import AuditContext, result_with, skip_result
from gpuhost.audit.rules.installed import loaded_driver_version, userspace_driver_version
from gpuhost.findings import ERROR, WARNING, Finding, RuleResult


def check_fabric_manager(ctx: AuditContext) -> RuleResult:
    rule = "fabricmanager"
    fm = ctx.facts.fabric_manager
    if not fm.installed:
        return skip_result(rule, "NVIDIA fabric manager not installed")
    findings = []
    driver = loaded_driver_version(ctx.facts) or userspace_driver_version(ctx.facts)
    if fm.version and driver and fm.version != driver:
        findings.append(
            Finding(
                "fabricmanager.version",
                ERROR,
                f"fabric manager {fm.version} differs from driver {driver}; NVSwitch systems "
                "refuse "
                "to start CUDA jobs until both match",
                found=f"fabric manager {fm.version}, driver {driver}",
                expected=f"fabric manager {driver} (the driver's version)",
                fix=f"install nvidia-fabricmanager at the driver's version {driver}",
            )
        )
    state = fm.service.active if fm.service else None
    if state is not None and state != "active":
        findings.append(
            Finding(
                "fabricmanager.inactive",
                WARNING,
                f"nvidia-fabricmanager.service is {state}; expected active on NVSwitch systems",
                found=f"nvidia-fabricmanager.service {state}",
                expected="nvidia-fabricmanager.service active",
                fix="systemctl enable --now nvidia-fabricmanager",
            )
        )
    return result_with(rule, findings)
