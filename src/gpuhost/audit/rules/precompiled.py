"""The next boot's NVIDIA module where it comes precompiled (Ubuntu's archive): a package
``linux-modules-nvidia-<branch>[-server][-open]-<kernel>`` per kernel release, built and signed by
Canonical, whose dependency on ``nvidia-kernel-common-<branch>...`` dpkg enforces. The rule id is
``kernel.next-boot-module``'s (driver.py judges DKMS builds the same way)."""

from __future__ import annotations

import re

from gpuhost.audit.rules.context import AuditContext, ok_result, one_finding, skip_result
from gpuhost.audit.rules.installed import userspace_driver_version
from gpuhost.findings import ERROR, RuleResult

RULE = "kernel.next-boot-module"
#: a per-kernel module package; the flavour metapackage (``...-open-generic``) has no kernel
MODULE_PACKAGE_RE = re.compile(
    r"^linux-modules-nvidia-(?P<branch>\d+)(?:-server)?(?:-open)?-"
    r"(?P<kernel>\d+\.\d+\.\d+-\d+-[a-z][a-z0-9-]*)$"
)


def module_packages(names: list[str]) -> dict[str, set[str]]:
    """kernel release -> driver branches of the per-kernel module packages among ``names``."""
    out: dict[str, set[str]] = {}
    for name in names:
        match = MODULE_PACKAGE_RE.match(name)
        if match:
            out.setdefault(match["kernel"], set()).add(match["branch"])
    return out


def check_precompiled_next_boot(ctx: AuditContext) -> RuleResult:
    """The next boot's kernel has a module package of the installed driver's branch."""
    facts = ctx.facts
    names = [p.name for p in facts.packages.packages if p.installed]
    modules = module_packages(names)
    if not modules:
        return skip_result(
            RULE, "no NVIDIA module built by DKMS or installed as a precompiled package"
        )
    next_boot = facts.kernel.next_boot
    if next_boot is None:
        return skip_result(
            RULE, "next-boot kernel unknown (no grubby, /vmlinuz link or /boot/vmlinuz-*)"
        )
    driver = userspace_driver_version(facts)
    branch = driver.split(".")[0] if driver else None
    if branch is None:
        return skip_result(RULE, "installed userspace driver version unknown")
    if branch in modules.get(next_boot, set()):
        return ok_result(RULE)
    have = ", ".join(sorted(k for k, b in modules.items() if branch in b)) or "none"
    return one_finding(
        RULE,
        RULE,
        ERROR,
        f"the next-boot kernel {next_boot} has no precompiled NVIDIA module package for driver "
        f"{driver} (installed for: {have}); the GPU will be unusable after the next reboot",
        found=f"next-boot kernel {next_boot}; NVIDIA module packages for: {have}",
        expected=f"linux-modules-nvidia-{branch}-...-{next_boot} installed",
        fix="run gpuhost provision (it installs the next boot's kernel's module package that "
        f"the pinned driver satisfies, or names the driver that kernel needs), or keep booting "
        f"{facts.kernel.running}",
    )
