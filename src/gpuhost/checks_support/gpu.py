"""Judging an nvidia-smi report: each function returns one line per problem (empty: healthy).

The report comes from ``nvidia-smi -q -x`` parsed by ``gpuhost.parsers.nvidia_smi``. The GPU
health judgements are the audit's own rules (``gpuhost.audit.rules``: same ids, same thresholds),
so an audit and a check of the same host agree; a check fails on the rule's errors and warnings
and each line names the finding id.
"""

from __future__ import annotations

import re

from gpuhost.audit.rules import RULES, SMI_STATE_RULES, AuditContext
from gpuhost.desired import DesiredState
from gpuhost.facts.host_facts import DriverFacts, HostFacts, PackageFacts, ServiceState
from gpuhost.faults.catalog import with_action
from gpuhost.faults.judge import finding_line
from gpuhost.findings import ERROR, WARNING, Finding
from gpuhost.parsers.driver import KernelModule
from gpuhost.parsers.nvidia_smi import SmiReport
from gpuhost.parsers.packages import Package
from gpuhost.probe.script import SMI_NOT_FOUND, SMI_XML_CODE

SMI_COMMAND = SMI_XML_CODE  # provision's SmiQuery fact runs the same command
PSTATE_COMMAND = (
    "LC_ALL=C nvidia-smi --query-gpu=index,pstate --format=csv,noheader 2>/dev/null || true"
)
MODULE_COMMAND = "cat /proc/driver/nvidia/version 2>/dev/null || true"
NOT_FOUND = SMI_NOT_FOUND
PSTATE_RE = re.compile(r"^\s*(\d+)\s*,\s*(P\d+)\s*$")
FAILING = (ERROR, WARNING)  # finding severities a check fails on (info passes)


def unavailable_reason(
    smi_output: str, report: SmiReport | None, module: KernelModule | None
) -> str | None:
    """Why nvidia-smi cannot vouch for the GPUs, in the host's own words, with the audit's rule
    id and fix for a known nvidia-smi error state; None when it can."""
    loaded = (
        f"the NVIDIA kernel module {module.version} is loaded"
        if module
        else "the NVIDIA kernel module is not loaded (/proc/driver/nvidia/version is absent)"
    )
    if smi_output.strip() == NOT_FOUND:
        return f"nvidia-smi is not installed; {loaded}"
    if report is None:
        return f"nvidia-smi printed output gpuhost cannot read: {smi_output.strip()[:200]!r}"
    if not report.ok:
        said = report.message or report.state
        known = SMI_STATE_RULES.get(report.state)
        advice = f" [{known[0]}: {known[1]}; fix: {known[2]}]" if known else ""
        return f"nvidia-smi reports {report.state}: {said!r}; {loaded}{advice}"
    if not report.gpus:
        return f"nvidia-smi lists no GPU; {loaded}"
    return None


def rule_findings(
    rule: str,
    report: SmiReport,
    expected: DesiredState | None = None,
    busy: frozenset[int] = frozenset(),
    persistenced: ServiceState | None = None,
) -> list[Finding]:
    """The audit's own rule ``rule`` (``gpu.ecc``, ``gpu.pcie-link``, ...: RULES in
    gpuhost.audit.rules, same ids and thresholds as ``gpuhost audit``) on this nvidia-smi
    report; ``busy``: indexes of GPUs in P0 (PCIe generation is judged on those)."""
    facts = HostFacts(driver=DriverFacts(smi=report, smi_installed=True), persistenced=persistenced)
    ctx = AuditContext(facts, expected=expected, busy_gpus=busy)
    return [with_action(f) for f in RULES[rule](ctx).findings]


def rule_problems(
    rule: str,
    report: SmiReport,
    expected: DesiredState | None = None,
    busy: frozenset[int] = frozenset(),
    persistenced: ServiceState | None = None,
    severities: tuple[str, ...] = FAILING,
) -> list[str]:
    """One line per finding of ``rule`` a check fails on (errors and warnings; info passes),
    each naming its audit finding id and action (``faults.judge.finding_line``):
    ``[gpu.ecc-uncorrectable, action: reset-gpu] GPU 0 (...) has ...``."""
    return [
        finding_line(f)
        for f in rule_findings(rule, report, expected, busy, persistenced)
        if f.severity in severities
    ]


# the audit's profile rule findings about the loaded driver (the rest of that rule judges CUDA,
# cuDNN and the container toolkit, which the checks read their own way)
DRIVER_FINDINGS = ("profile.driver", "profile.kernel-module")


def profile_driver_problems(
    report: SmiReport | None,
    module: KernelModule | None,
    spec: DesiredState,
    packages: list[Package] | None = None,
    ids: tuple[str, ...] = DRIVER_FINDINGS,
) -> list[str]:
    """The audit's ``profile`` rule on the loaded driver against ``spec`` (``profile.driver``:
    the loaded module's version is the profile's, with the reboot fix when the installed
    packages already are; ``profile.kernel-module``: its flavour), one line per finding among
    ``ids``, naming the finding id. ``packages``: the host's installed driver packages."""
    return [finding_line(f) for f in profile_driver_findings(report, module, spec, packages, ids)]


def profile_driver_findings(
    report: SmiReport | None,
    module: KernelModule | None,
    spec: DesiredState,
    packages: list[Package] | None = None,
    ids: tuple[str, ...] = DRIVER_FINDINGS,
) -> list[Finding]:
    """The findings behind :func:`profile_driver_problems`."""
    smi = report if report is not None else SmiReport(state="absent", source="empty")
    facts = HostFacts(
        driver=DriverFacts(smi=smi, smi_installed=report is not None, loaded_module=module),
        packages=PackageFacts(manager="dpkg" if packages else None, packages=packages or []),
    )
    ctx = AuditContext(facts, expected=spec, profile_name=spec.profile, profile_source="marker")
    return [f for f in RULES["profile"](ctx).findings if f.rule in ids]


def persistence_problems(report: SmiReport, persistenced: ServiceState | None = None) -> list[str]:
    return rule_problems("gpu.persistence", report, persistenced=persistenced)


def clock_problems(report: SmiReport, spec: DesiredState) -> list[str]:
    """The audit's clocks rule for the profile ``spec`` (application clocks where provision sets
    them; locked clocks cannot be read back, the clocks service result vouches for them)."""
    return rule_problems("gpu.clocks", report, spec)


def ecc_problems(report: SmiReport, severities: tuple[str, ...] = FAILING) -> list[str]:
    return rule_problems("gpu.ecc", report, severities=severities)


def retired_page_problems(report: SmiReport, severities: tuple[str, ...] = FAILING) -> list[str]:
    return rule_problems("gpu.retired-pages", report, severities=severities)


def remapped_row_problems(report: SmiReport, severities: tuple[str, ...] = FAILING) -> list[str]:
    return rule_problems("gpu.remapped-rows", report, severities=severities)


def parse_pstates(text: str) -> dict[int, str]:
    """``index, pstate`` CSV lines → {index: "P0"}; other lines are ignored."""
    found = {}
    for line in text.splitlines():
        match = PSTATE_RE.match(line)
        if match:
            found[int(match.group(1))] = match.group(2)
    return found


def busy_gpus(pstates: dict[int, str]) -> frozenset[int]:
    """Indexes of the GPUs in P0 (working) from ``parse_pstates``."""
    return frozenset(index for index, state in pstates.items() if state == "P0")


def pcie_problems(report: SmiReport, pstates: dict[int, str]) -> list[str]:
    """The audit's PCIe rule: width below the GPU's max is always a problem (seating, riser,
    slot); a lower generation only in P0 (idle GPUs lower their link speed to save power)."""
    return rule_problems("gpu.pcie-link", report, busy=busy_gpus(pstates))
