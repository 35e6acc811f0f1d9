"""The one GPU fault judgement: parsed inputs in, findings (each with its catalog action) out.

Pure. The audit's GPU rules, the static checks, the health tier and (through the audit report)
the Prometheus textfile all judge with these functions, so one fault gets one id, one severity
and one action everywhere.

.. code:: python

    findings = judge(FaultInputs(report, xid=events, nvlink=links, aer=counters,
                                 expect=expectation_for(name, override, len(gpus))))
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuhost.faults.catalog import RecoveryAction, load_catalog, with_action
from gpuhost.faults.gpu import (
    FABRIC_DONE,
    FABRIC_OK,
    catalog_finding,
    clock_event_findings,
    ecc_findings,
    fabric_findings,
    gpu_label,
    pcie_findings,
    recovery_findings,
    remapped_rows_findings,
    retired_pages_findings,
)
from gpuhost.faults.node_class import NodeExpectation
from gpuhost.findings import Finding
from gpuhost.parsers.aer import AerCounters
from gpuhost.parsers.nvidia_smi import GpuInfo, SmiReport
from gpuhost.parsers.xid import XidEvent, short_bus_id

INACTIVE = "<inactive>"


@dataclass(frozen=True)
class FaultInputs:
    """What the judgement reads; None: not read (nothing judged from it).

    ``nvlink``: ``parse_nvlink_status`` per GPU; ``nvlink_errors``: ``parse_nvlink_errors``;
    ``aer``: per GPU bus id (any form) its
    counter files by kind ("correctable", "fatal", "nonfatal"); ``busy``: indexes of GPUs in P0.
    """

    report: SmiReport | None
    xid: list[XidEvent] | None = None
    nvlink: list[dict[str, Any]] | None = None
    nvlink_errors: list[dict[str, Any]] | None = None
    aer: Mapping[str, Mapping[str, AerCounters]] | None = None
    expect: NodeExpectation | None = None
    busy: frozenset[int] = field(default_factory=frozenset)


def finding_line(finding: Finding) -> str:
    """The one line a check or the health tier prints for a finding, naming its id and action:
    ``[gpu.xid.79, action: reboot] Xid 79 (GPU has fallen off the bus) on ...``."""
    action = f", action: {finding.action}" if finding.action else ""
    return f"[{finding.rule}{action}] {finding.message}"


def gpu_findings(gpu: GpuInfo, busy: bool = False) -> list[Finding]:
    """Everything nvidia-smi's report shows about one GPU, with actions."""
    found = (
        ecc_findings(gpu)
        + retired_pages_findings(gpu)
        + remapped_rows_findings(gpu)
        + pcie_findings(gpu, busy)
        + clock_event_findings(gpu)
        + fabric_findings(gpu)
        + recovery_findings(gpu)
    )
    return [with_action(f) for f in found]


def _recoveries(
    events: Iterable[XidEvent], gpus: Iterable[GpuInfo]
) -> dict[str, RecoveryAction]:
    """Per GPU (short bus id) the recovery action the driver asks for: the last Xid 154 of
    that GPU, else nvidia-smi's GPU Recovery Action."""
    catalog = load_catalog()
    found: dict[str, RecoveryAction] = {}
    for event in events:
        if event.code == 154 and (event.recovery_code is not None or event.recovery_text):
            recovery = catalog.recovery(event.recovery_code, event.recovery_text)
            bus = short_bus_id(event.bus_id)
            if recovery is not None and bus:
                found[bus] = recovery
    for gpu in gpus:
        bus = short_bus_id(gpu.pci_bus_id)
        if bus and bus not in found and gpu.recovery_action:
            recovery = catalog.recovery(None, gpu.recovery_action)
            if recovery is not None:
                found[bus] = recovery
    return found


def xid_findings(events: list[XidEvent], gpus: Iterable[GpuInfo] = ()) -> list[Finding]:
    """One finding per Xid code and GPU (``gpu.xid.<code>``), counted; the action is the
    catalog's, or the recovery action the driver reported for that GPU (Xid 154 or nvidia-smi),
    which is preferred for every fault on it that is not informational."""
    catalog = load_catalog()
    recoveries = _recoveries(events, list(gpus))
    grouped: dict[tuple[int, str], list[XidEvent]] = {}
    for event in events:
        grouped.setdefault((event.code, short_bus_id(event.bus_id) or "?"), []).append(event)
    findings = []
    for (code, bus), group in sorted(grouped.items()):
        row = catalog.xid_row(code)
        recovery = recoveries.get(bus)
        action, severity = row.action, row.severity
        if code == 154:
            action = recovery.action if recovery else row.action
            severity = "info" if action == "none" else ("error" if action != "watch" else severity)
        elif recovery is not None and row.severity != "info":
            action = recovery.action
        times = f" x{len(group)}" if len(group) > 1 else ""
        last = " ".join(group[-1].text.split())[:200]
        findings.append(
            catalog_finding(
                row.id,
                f"Xid {code} ({row.title}) on {bus}{times} since boot; expected none",
                found=f"{bus}: {last}",
                expected=f"no Xid {code}",
                action=action,
                severity=severity,
            )
        )
    return findings


def _links(entry: Mapping[str, Any]) -> tuple[int, list[int]]:
    """(active links, inactive link numbers) of one GPU's ``nvlink -s`` entry."""
    links: Mapping[int, str] = entry.get("links") or {}
    down = sorted(n for n, value in links.items() if INACTIVE in value.lower())
    return len(links) - len(down), down


def nvlink_findings(
    status: list[dict[str, Any]], expect: NodeExpectation | None = None
) -> list[Finding]:
    """NVLink links down (``<inactive>``), or fewer active links than the node class expects."""
    wanted = expect.nvlinks_per_gpu if expect else None
    findings = []
    for entry in status:
        label = f"GPU {entry.get('index')} ({entry.get('name') or 'unknown'})"
        note = (entry.get("note") or "").lower()
        if not entry.get("links") and "inactive" not in note:
            continue  # no NVLink on this GPU, or not queryable (MIG mode): nothing to judge
        active, down = _links(entry)
        short = wanted is not None and active < wanted
        if not down and not short:
            continue
        said = f"links {', '.join(map(str, down))} inactive" if down else "no inactive link"
        expected = f"{wanted} active links" if wanted is not None else "every link active"
        findings.append(
            catalog_finding(
                "gpu.nvlink.down",
                f"{label} has {active} active NVLink link(s) ({said}); expected {expected}",
                found=f"{label}: {active} active NVLink links; {said}",
                expected=expected,
            )
        )
    return findings


def nvlink_error_findings(counters: list[dict[str, Any]]) -> list[Finding]:
    """NVLink error counters (``nvlink -e``): replay, recovery and CRC errors counted on a
    GPU's links."""
    findings = []
    for entry in counters:
        label = f"GPU {entry.get('index')} ({entry.get('name') or 'unknown'})"
        links: Mapping[int, Mapping[str, int]] = entry.get("links") or {}
        counted = {
            (link, name): count
            for link, values in sorted(links.items())
            for name, count in values.items()
            if count
        }
        if not counted:
            continue
        said = ", ".join(f"link {link} {name} {count}" for (link, name), count in counted.items())
        findings.append(
            catalog_finding(
                "gpu.nvlink.errors",
                f"{label} NVLink error counters: {said[:300]}; expected 0",
                found=f"{label}: {said[:300]}",
                expected="0 NVLink replay, recovery and CRC errors",
            )
        )
    return findings


def aer_findings(counters: Mapping[str, Mapping[str, AerCounters]]) -> list[Finding]:
    """PCIe AER counters of each GPU's device: uncorrectable (fatal, non-fatal) ones are an
    error, correctable ones informational."""
    findings = []
    for bus, files in sorted(counters.items()):
        bad = {kind: files[kind].total for kind in ("fatal", "nonfatal") if kind in files}
        corrected = files["correctable"].total if "correctable" in files else 0
        if any(bad.values()):
            counts = ", ".join(f"{kind} {n}" for kind, n in bad.items())
            findings.append(
                catalog_finding(
                    "gpu.pcie.aer-fatal",
                    f"PCIe device {bus} counted uncorrectable AER errors ({counts}); expected 0",
                    found=f"{bus}: AER {counts}",
                    expected="0 uncorrectable AER errors",
                )
            )
        if corrected:
            findings.append(
                catalog_finding(
                    "gpu.pcie.aer-correctable",
                    f"PCIe device {bus} counted {corrected} correctable AER error(s); expected few",
                    found=f"{bus}: {corrected} correctable AER errors",
                    expected="few correctable AER errors",
                )
            )
    return findings


def expectation_findings(report: SmiReport, expect: NodeExpectation) -> list[Finding]:
    """What the node should have against what nvidia-smi shows: GPU count, memory, PCIe width
    (a lost GPU or a narrowed link is caught even when the rest looks healthy)."""
    findings = []
    where = f"node class {expect.name}"
    if expect.gpus is not None and len(report.gpus) < expect.gpus:
        findings.append(
            catalog_finding(
                "gpu.missing",
                f"nvidia-smi lists {len(report.gpus)} GPU(s); expected {expect.gpus} ({where})",
                found=f"{len(report.gpus)} GPU(s)",
                expected=f"{expect.gpus} GPUs ({where})",
            )
        )
    for gpu in report.gpus:
        findings += _gpu_expectation(gpu, expect, where)
    return findings


def fabric_manager_findings(
    installed: bool, expect: NodeExpectation, report: SmiReport | None = None
) -> list[Finding]:
    """An NVSwitch node class (``fabric_manager: true``) without NVIDIA Fabric Manager installed
    on the host, unless nvidia-smi shows every GPU's fabric registration done (state Completed,
    status Success): then a fabric manager runs elsewhere (e.g. in the GPU Operator's driver
    container) and the fabric is up."""
    if not expect.fabric_manager or installed:
        return []
    if report is not None and report.gpus and all(_fabric_up(gpu) for gpu in report.gpus):
        return []
    return [
        catalog_finding(
            "gpu.fabric-manager",
            f"NVIDIA Fabric Manager is not installed; expected on node class {expect.name} "
            "(NVSwitch: CUDA cannot use the GPUs without it)",
            found="nv-fabricmanager not installed",
            expected=f"nvidia-fabricmanager at the driver's version (node class {expect.name})",
        )
    ]


def _fabric_up(gpu: GpuInfo) -> bool:
    state, status = gpu.fabric.state, gpu.fabric.status
    return (state or "").lower() == FABRIC_DONE and (status or "").lower() == FABRIC_OK


def _gpu_expectation(gpu: GpuInfo, expect: NodeExpectation, where: str) -> list[Finding]:
    label = gpu_label(gpu)
    found = []
    memory = gpu.memory_total_mib
    if expect.memory_mib is not None and memory is not None and memory < expect.memory_mib:
        found.append(
            catalog_finding(
                "gpu.memory",
                f"{label} has {memory} MiB; expected {expect.memory_mib} MiB ({where})",
                found=f"{label}: {memory} MiB",
                expected=f"{expect.memory_mib} MiB ({where})",
            )
        )
    width = gpu.pcie.width_current
    narrow = expect.pcie_width is not None and width is not None and width < expect.pcie_width
    # below the GPU's own max, the per-GPU judgement (gpu.pcie-width) already says it
    said = gpu.pcie.width_max is not None and width is not None and width < gpu.pcie.width_max
    if narrow and not said:
        found.append(
            catalog_finding(
                "gpu.pcie-width",
                f"{label} PCIe link is x{width}; expected x{expect.pcie_width} ({where})",
                found=f"{label}: PCIe x{width}",
                expected=f"PCIe x{expect.pcie_width} ({where})",
            )
        )
    return found


def judge(inputs: FaultInputs) -> list[Finding]:
    """Every fault the inputs show, with its action; [] for a healthy node. Without a usable
    nvidia-smi report only the kernel log, NVLink and AER inputs are judged (the caller says
    why nvidia-smi could not vouch for the GPUs)."""
    report = inputs.report
    gpus = list(report.gpus) if report is not None and report.ok else []
    findings: list[Finding] = []
    for gpu in gpus:
        findings += gpu_findings(gpu, gpu.index is not None and gpu.index in inputs.busy)
    if inputs.expect is not None and report is not None and report.ok:
        findings += expectation_findings(report, inputs.expect)
    if inputs.xid:
        findings += xid_findings(inputs.xid, gpus)
    if inputs.nvlink:
        findings += nvlink_findings(inputs.nvlink, inputs.expect)
    if inputs.nvlink_errors:
        findings += nvlink_error_findings(inputs.nvlink_errors)
    if inputs.aer:
        findings += aer_findings(inputs.aer)
    return findings
