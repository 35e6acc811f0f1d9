"""The readable terminal report (the default output of ``gpuhost audit``).

For a fleet, ``host_line`` is printed as each host finishes (streaming), then ``findings_text``
and ``fleet_text`` once all are in. A single host gets ``host_block`` (its stack) and its findings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuhost.audit.findings import severity_rank
from gpuhost.audit.host import HostReport
from gpuhost.audit.summary import stack_of

LINE_FORMAT = "{name:<24} {verdict:<11} {driver:<13} {cuda:<9} {gpus:<28} {counts}"
STACK_LABELS = {
    "os": "OS",
    "kernel": "kernel",
    "gpus": "GPUs",
    "driver_loaded": "driver (loaded)",
    "driver_installed": "driver (packages)",
    "kernel_module": "kernel module",
    "cuda_toolkits": "CUDA toolkits",
    "cuda_default": "CUDA default",
    "cudnn": "cuDNN",
    "container_toolkit": "container toolkit",
    "fabric_manager": "fabric manager",
    "frameworks": "frameworks",
}


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "~"


def _counts(report: HostReport) -> str:
    findings = report.findings
    errors = sum(1 for f in findings if f.severity == "error")
    warnings = sum(1 for f in findings if f.severity == "warning")
    return f"{errors} error(s), {warnings} warning(s)"


def header_line() -> str:
    return LINE_FORMAT.format(
        name="HOST", verdict="VERDICT", driver="DRIVER", cuda="CUDA", gpus="GPUS", counts="FINDINGS"
    )


def host_line(report: HostReport) -> str:
    """One line per host, printed as soon as the host is done."""
    if not report.reachable:
        reason = report.findings[0].message if report.findings else "unreachable"
        return LINE_FORMAT.format(
            name=_cut(report.name, 24),
            verdict="UNREACHABLE",
            driver="-",
            cuda="-",
            gpus="-",
            counts=_cut(reason, 60),
        )
    stack = stack_of(report.facts.to_dict() if report.facts else None)
    driver = stack["driver_loaded"] if stack["driver_loaded"] != "-" else stack["driver_installed"]
    return LINE_FORMAT.format(
        name=_cut(report.name, 24),
        verdict=report.verdict.upper(),
        driver=_cut(driver, 13),
        cuda=_cut(
            stack["cuda_default"] if stack["cuda_default"] != "-" else stack["cuda_toolkits"], 9
        ),
        gpus=_cut(stack["gpus"], 28),
        counts=_counts(report),
    )


def host_block(report: HostReport) -> str:
    """A single host's stack, one component a line."""
    lines = [f"gpuhost audit: {report.name}"]
    if report.facts is None:
        return "\n".join(lines)
    facts = report.facts
    stack = stack_of(facts.to_dict())
    smi = facts.driver.smi
    if smi.state != "ok":
        detail = {
            "absent": "nvidia-smi not installed"
            if not facts.driver.smi_installed
            else "nvidia-smi printed nothing",
        }.get(smi.state, f"nvidia-smi: {smi.state}")
        pci = len(facts.driver.pci_gpus)
        stack["gpus"] = f"none visible ({detail}; {pci} NVIDIA GPU(s) on the PCI bus)"
    for key, label in STACK_LABELS.items():
        lines.append(f"  {label:<18} {stack[key]}")
    return "\n".join(lines)


def findings_text(report: HostReport, show_info: bool = True) -> str:
    lines = []
    for finding in report.findings:
        if finding.severity == "info" and not show_info:
            continue
        lines.append(f"  {finding.severity.upper():<8} {finding.rule}: {finding.message}")
    return "\n".join(lines)


def grouped_findings_text(reports: list[HostReport], show_info: bool = False) -> str:
    """Findings of a fleet, each distinct one once with the hosts it was found on."""
    hosts_of: dict[tuple[int, str, str, str], list[str]] = {}
    for report in reports:
        for finding in report.findings:
            if finding.severity == "info" and not show_info:
                continue
            key = (severity_rank(finding.severity), finding.rule, finding.severity, finding.message)
            hosts_of.setdefault(key, []).append(report.name)
    lines = []
    for (_, rule, severity, message), names in sorted(hosts_of.items()):
        names.sort()
        shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
        lines.append(f"  {severity.upper():<8} {rule} on {len(names)} host(s) ({shown}): {message}")
    return "\n".join(lines)


def fleet_text(summary: Mapping[str, Any]) -> str:
    """Stack groups, outliers and the overall verdict."""
    lines = []
    groups = summary.get("stacks") or []
    if len(groups) > 1 or summary.get("hosts", 0) > 1:
        lines.append(
            f"stacks: {len(groups)} distinct among {summary.get('reachable', 0)} reachable host(s)"
        )
        for number, group in enumerate(groups, start=1):
            stack = group["stack"]
            hosts = ", ".join(group["hosts"][:8]) + (" ..." if group["count"] > 8 else "")
            lines.append(
                f"  [{number}] {group['count']} host(s): driver {stack['driver_loaded']}, "
                f"CUDA {stack['cuda_default']}, cuDNN {stack['cudnn']}, GPUs {stack['gpus']} "
                f"({hosts})"
            )
        for outlier in summary.get("outliers") or []:
            differs = "; ".join(
                f"{STACK_LABELS.get(k, k)} {v['found']} (majority {v['majority']})"
                for k, v in outlier["differs"].items()
            )
            lines.append(f"  outlier {outlier['host']}: {differs}")
    counts = summary.get("findings") or {}
    verdicts = summary.get("verdicts") or {}
    lines.append(
        f"verdict: {summary.get('verdict')} - {summary.get('hosts')} host(s): "
        f"{verdicts.get('ok', 0)} ok, {verdicts.get('warning', 0)} warning, "
        f"{verdicts.get('error', 0)} error, {verdicts.get('unreachable', 0)} unreachable; "
        f"findings: {counts.get('error', 0)} error(s), {counts.get('warning', 0)} warning(s), "
        f"{counts.get('info', 0)} info"
    )
    return "\n".join(lines)
