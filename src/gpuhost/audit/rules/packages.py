"""Driver packages as the package manager keeps them: held and pinned, fully installed
(``driver.held``, ``driver.packages-unfinished``)."""

from __future__ import annotations

from gpuhost import pkgmgr
from gpuhost.audit.rules.context import (
    AuditContext,
    ok_result,
    one_finding,
    result_with,
    skip_result,
)
from gpuhost.audit.rules.installed import coupled_packages
from gpuhost.findings import ERROR, WARNING, Finding, RuleResult
from gpuhost.pkgmgr import APT

NVIDIA_REPO_HINT = "developer.download.nvidia.com"
PREFERENCES_PATH = "/etc/apt/preferences.d/gpuhost-nvidia"  # operations.apt_pin writes it


def _origin_label(origin: str | None) -> str:
    if not origin:
        return "a configured repository"
    if NVIDIA_REPO_HINT in origin:
        return f"the NVIDIA CUDA repository ({origin})"
    return origin


def check_driver_held(ctx: AuditContext) -> RuleResult:
    rule = "driver.held"
    facts = ctx.facts
    coupled = coupled_packages(facts)
    if not coupled:
        return skip_result(rule, "no driver packages installed")
    held = set(facts.packages.held)
    pinned = {p.name for p in facts.packages.policy if p.pinned}
    loose = sorted(n for n in coupled if n not in held and n not in pinned)
    if not loose:
        return result_with(rule, _layer_findings(ctx, coupled, held))
    pending = [p for p in facts.packages.policy if p.name in loose and p.upgrade_pending]
    if pending:
        shown = "; ".join(
            f"{p.name} {p.installed} -> {p.candidate} from {_origin_label(p.candidate_origin)}"
            for p in pending[:5]
        )
        more = f" (and {len(pending) - 5} more)" if len(pending) > 5 else ""
        return one_finding(
            rule,
            "driver.upgrade-pending",
            ERROR,
            f"the next package upgrade replaces the driver: {shown}{more}; the running "
            "module "
            "then no longer matches the libraries (CUDA fails until a reboot); expected "
            "the "
            f"driver packages held or pinned",
            found=f"upgrade pending: {shown}{more}",
            expected="the driver packages held or pinned",
            fix=f"{APT.hold_hint(loose)} (or gpuhost provision, which pins the profile's "
            "version)",
        )
    manager = pkgmgr.for_database(facts.packages.manager) or APT
    return one_finding(
        rule,
        "driver.unheld",
        WARNING,
        f"driver packages are neither held nor pinned: {', '.join(loose[:8])}"
        f"{' ...' if len(loose) > 8 else ''}; an upgrade can replace the driver under "
        "running "
        f"jobs",
        found=f"neither held nor pinned: {', '.join(loose)}",
        expected="the driver packages held or pinned",
        fix=f"{manager.hold_hint(loose)} (or gpuhost provision)",
    )


def _layer_findings(ctx: AuditContext, coupled: dict[str, str], held: set[str]) -> list[Finding]:
    """On a host a profile applies to (provision holds *and* pins every coupled package), one
    layer removed while the other still keeps the driver: holds released by hand, the pin
    priority lowered or the preferences file deleted (Debian family)."""
    facts = ctx.facts
    if ctx.expected is None or facts.packages.manager != "dpkg":
        return []
    findings = []
    unheld = sorted(n for n in coupled if n not in held)
    if unheld:
        findings.append(
            Finding(
                "driver.hold-removed",
                WARNING,
                f"driver packages are pinned but no longer held: {', '.join(unheld[:8])}"
                f"{' ...' if len(unheld) > 8 else ''}; gpuhost holds every coupled package "
                "so that removing the pins alone cannot move the driver",
                found=f"not held: {', '.join(unheld)}",
                expected=f"every coupled driver package held ({APT.hold_hint([])})",
                fix=f"gpuhost provision (or {APT.hold_hint(unheld)})",
            )
        )
    if facts.packages.policy_known:
        loose = sorted(
            (p.name, p.installed_priority)
            for p in facts.packages.policy
            if p.name in coupled and p.installed and not p.pinned
        )
        if loose:
            shown = ", ".join(
                f"{n} (priority {prio if prio is not None else '?'})" for n, prio in loose
            )
            few = ", ".join(
                f"{n} (priority {prio if prio is not None else '?'})" for n, prio in loose[:4]
            ) + (f" and {len(loose) - 4} more" if len(loose) > 4 else "")
            findings.append(
                Finding(
                    "driver.pin-missing",
                    WARNING,
                    f"the installed driver packages are not pinned: {few}; gpuhost pins them "
                    f"at priority 1001 in {PREFERENCES_PATH} (deleted or edited since)",
                    found=f"pin priority below 1000: {shown}",
                    expected=f"priority 1001 for the installed version ({PREFERENCES_PATH})",
                    fix="gpuhost provision",
                )
            )
    return findings


def check_packages_unfinished(ctx: AuditContext) -> RuleResult:
    rule = "driver.packages-unfinished"
    facts = ctx.facts
    if facts.packages.manager != "dpkg":
        return skip_result(rule, "not a dpkg host")
    unfinished = sorted(
        f"{p.name} ({p.status})"
        for p in facts.packages.packages
        if p.installed and p.status[1:2] != "i"
    )
    if not unfinished:
        return ok_result(rule)
    shown = ", ".join(unfinished[:8]) + (" ..." if len(unfinished) > 8 else "")
    return one_finding(
        rule,
        rule,
        ERROR,
        f"NVIDIA packages are not fully installed: {shown}; an install or upgrade stopped "
        "midway (dpkg status U unpacked, F half-configured, H half-installed, W/t awaiting "
        "triggers), so the driver may not load and apt refuses other installs",
        found=f"dpkg status: {shown}",
        expected="every NVIDIA package fully installed (status ii or hi)",
        fix=f"gpuhost provision (it finishes them first), or {APT.finish_command()}",
    )
