"""The readable terminal report (the default output of ``gpuhost audit``).

For a fleet, ``host_line`` is printed as each host finishes (streaming), then ``findings_text``
and ``fleet_text`` once all are in. A single host gets ``host_block`` (its stack) and its findings.
Two answers, never mixed: the VERDICT column and the findings are the compatibility and health
answer; the SECURITY column and the security findings (``security.*``) the exposure to NVIDIA's
security bulletins, listed and counted apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from gpuhost.audit.host import HostReport
from gpuhost.audit.summary import stack_of
from gpuhost.datadir import described
from gpuhost.findings import severity_rank
from gpuhost.terminal import colour_enabled, verdict_word, wrap_last

# Columns of the fleet table: (title, width). Values longer than their column are printed whole
# (the row shifts); the GPUs column comes last and wraps under itself at the terminal's width.
COLUMNS = (
    ("HOST", 24),
    ("VERDICT", 11),
    ("SECURITY", 11),
    ("DRIVER", 13),
    ("CUDA", 9),
    ("FINDINGS", 26),
)
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
    "vbios": "VBIOS",
    "gsp_firmware": "GSP firmware",
    "hca_firmware": "HCA firmware",
    "bios": "BIOS",
}


def _counts(report: HostReport) -> str:
    findings = report.findings
    errors = sum(1 for f in findings if f.severity == "error")
    warnings = sum(1 for f in findings if f.severity == "warning")
    return f"{errors} error(s), {warnings} warning(s)"


def _row(values: tuple[str, ...]) -> str:
    """The fixed columns, each padded to its width or printed whole when longer."""
    return "".join(f"{value:<{width}} " for value, (_, width) in zip(values, COLUMNS, strict=True))


def header_line() -> str:
    return _row(tuple(title for title, _ in COLUMNS)) + "GPUS"


def host_line(report: HostReport, stream: IO[str] | None = None, width: int | None = None) -> str:
    """One row per host, printed as soon as the host is done. Nothing is cut: the last column
    (GPUs, or why the host was unreachable) wraps at ``width`` (default: the terminal's).
    On a terminal (``stream``) the verdict is coloured."""
    if not report.reachable:
        reason = report.findings[0].found or "unreachable" if report.findings else "unreachable"
        values = (report.name, "UNREACHABLE", "-", "-", "-", _counts(report))
        last = reason
    else:
        stack = stack_of(report.facts.to_dict() if report.facts else None)
        driver = stack["driver_loaded"]
        if driver == "-":
            driver = stack["driver_installed"]
        cuda = cuda_shown(stack)
        security = report.security_verdict.upper()
        values = (report.name, report.verdict.upper(), security, driver, cuda, _counts(report))
        last = stack["gpus"]
    line = wrap_last(_row(values), last, width)
    if stream is not None and colour_enabled(stream):
        plain = values[1]
        verdict = "unreachable" if not report.reachable else report.verdict
        start = line.index(plain, len(values[0]))
        line = line[:start] + verdict_word(verdict, stream, 0) + line[start + len(plain) :]
    return line


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


def findings_text(report: HostReport, show_info: bool = True, security: bool = False) -> str:
    """The host's compatibility and health findings (``security``: its security findings)."""
    lines = []
    for finding in report.security_findings if security else report.findings:
        if finding.severity == "info" and not show_info:
            continue
        lines.append(f"  {finding.severity.upper():<8} {finding.rule}: {finding.message}")
    return "\n".join(lines)


def grouped_findings_text(
    reports: list[HostReport], show_info: bool = False, security: bool = False
) -> str:
    """Findings of a fleet, each distinct one once with the hosts it was found on: the
    compatibility and health findings, or (``security``) the security findings."""
    hosts_of: dict[tuple[int, str, str, str], list[str]] = {}
    for report in reports:
        for finding in report.security_findings if security else report.findings:
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


def cuda_shown(stack: Mapping[str, str]) -> str:
    """The CUDA a one-word column shows: the default toolkit, else the toolkits installed (Debian's
    nvidia-cuda-toolkit has no /usr/local/cuda default), so a host line and its stack agree."""
    return stack["cuda_default"] if stack["cuda_default"] != "-" else stack["cuda_toolkits"]


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
                f"CUDA {cuda_shown(stack)}, cuDNN {stack['cudnn']}, GPUs {stack['gpus']} "
                f"({hosts})"
            )
        for outlier in summary.get("outliers") or []:
            differs = "; ".join(
                f"{STACK_LABELS.get(k, k)} {v['found']} (majority {v['majority']})"
                for k, v in outlier["differs"].items()
            )
            lines.append(f"  outlier {outlier['host']}: {differs}")
    lines.extend(drift_lines(summary))
    counts = summary.get("findings") or {}
    verdicts = summary.get("verdicts") or {}
    lines.append(
        f"verdict: {summary.get('verdict')} - {summary.get('hosts')} host(s): "
        f"{verdicts.get('ok', 0)} ok, {verdicts.get('warning', 0)} warning, "
        f"{verdicts.get('error', 0)} error, {verdicts.get('unreachable', 0)} unreachable; "
        f"findings: {counts.get('error', 0)} error(s), {counts.get('warning', 0)} warning(s), "
        f"{counts.get('info', 0)} info"
    )
    security = summary.get("security") or {}
    if security and summary.get("reachable"):  # some host was judged
        exposed = security.get("verdicts") or {}
        found = security.get("findings") or {}
        lines.append(
            f"security: {security.get('verdict')} - NVIDIA security bulletins affect "
            f"{exposed.get('error', 0) + exposed.get('warning', 0)} host(s): "
            f"{exposed.get('error', 0)} error, {exposed.get('warning', 0)} warning; "
            f"findings: {found.get('error', 0)} error(s), {found.get('warning', 0)} warning(s) "
            "(apart from the verdict; exit status: --fail-on security)"
        )
    return "\n".join(lines)


def drift_lines(summary: Mapping[str, Any]) -> list[str]:
    """One line per node class and firmware field that differs between its hosts."""
    return [
        f"  WARNING  {drift['rule']} in {drift['node_class']}: "
        f"{STACK_LABELS.get(drift['field'], drift['field'])} "
        + "; ".join(f"{v} on {', '.join(h)}" for v, h in drift["versions"].items())
        for drift in summary.get("firmware_drift") or []
    ]


def quiet_text(reports: list[HostReport], summary: dict[str, Any]) -> str:
    """``audit --quiet``: the error findings (verdict and security) and the summary's verdict
    and security lines."""
    summary_text = fleet_text(summary)
    errors = [
        line
        for security in (False, True)
        for line in grouped_findings_text(reports, security=security).splitlines()
        if line.lstrip().startswith("ERROR ")
    ]
    verdict = [
        line for line in summary_text.splitlines() if line.startswith(("verdict:", "security:"))
    ]
    return "\n".join(errors + (verdict or summary_text.splitlines()[-1:]))


def closing_text(
    reports: list[HostReport], report: Mapping[str, Any], local: bool, quiet: bool
) -> str:
    """What ``gpuhost audit`` prints after the host lines: this machine's stack (``local``) or
    the fleet's grouped findings, the security findings apart, the data's date and the summary;
    with ``quiet`` only the error findings and the verdict lines (``quiet_text``)."""
    if quiet:
        return quiet_text(reports, report["summary"])
    parts = []
    if local:
        parts.append(host_block(reports[0]))
        text = findings_text(reports[0])
        parts.append(f"findings:\n{text}" if text else "findings: none")
        text = findings_text(reports[0], security=True)
        parts.append(f"security:\n{text}" if text else "security: no known advisory")
    else:
        text = grouped_findings_text(reports)
        parts.append(f"findings:\n{text}" if text else "findings: no errors or warnings")
        text = grouped_findings_text(reports, security=True)
        if text:
            parts.append(f"security:\n{text}")
    parts.append(f"data: {described(report['data'])}")
    parts.append(fleet_text(report["summary"]))
    return "\n".join(parts)
