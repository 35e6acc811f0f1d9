"""Per-GPU fault judgements on one nvidia-smi report's GPU: memory (ECC, retired pages,
remapped rows), the PCIe link, clocks held down, the NVSwitch fabric and the driver's recovery
action. Pure: a ``GpuInfo`` in, findings out, each with the fault catalog's action (``judge``
adds it); the audit's GPU rules, the checks and the health tier all call these.
"""

from __future__ import annotations

from gpuhost.faults.catalog import load_catalog
from gpuhost.findings import ERROR, INFO, WARNING, Finding
from gpuhost.parsers.nvidia_smi import GpuInfo


def gpu_label(gpu: GpuInfo) -> str:
    where = gpu.pci_bus_id or (f"index {gpu.index}" if gpu.index is not None else "?")
    return f"GPU {gpu.index if gpu.index is not None else '?'} ({gpu.name or 'unknown'}, {where})"


def ecc_findings(gpu: GpuInfo) -> list[Finding]:
    findings = []
    ecc = gpu.ecc
    label = gpu_label(gpu)
    if ecc.volatile_uncorrectable or ecc.aggregate_uncorrectable:
        findings.append(
            Finding(
                "gpu.ecc-uncorrectable",
                ERROR,
                f"{label} has uncorrectable ECC errors (volatile "
                f"{ecc.volatile_uncorrectable or 0}, aggregate "
                f"{ecc.aggregate_uncorrectable or 0}); "
                "expected 0",
                found=f"{label}: uncorrectable ECC errors volatile "
                f"{ecc.volatile_uncorrectable or 0}, aggregate {ecc.aggregate_uncorrectable or 0}",
                expected="0 uncorrectable ECC errors",
                fix="drain the host, reset the GPU (nvidia-smi -r) or reboot, and run "
                "dcgmi diag -r 3; replace the GPU if errors recur",
            )
        )
    elif ecc.volatile_correctable:
        findings.append(
            Finding(
                "gpu.ecc-correctable",
                INFO,
                f"{label} corrected {ecc.volatile_correctable} ECC error(s) since the driver "
                "loaded; expected few",
                found=f"{label}: {ecc.volatile_correctable} corrected ECC error(s)",
                expected="few corrected ECC errors",
                fix="none now; watch the rate",
            )
        )
    if ecc.mode_pending is not None and ecc.mode_current != ecc.mode_pending:
        findings.append(
            Finding(
                "gpu.ecc-pending",
                WARNING,
                f"{label} ECC mode changes from {ecc.mode_current} to {ecc.mode_pending} at "
                "the "
                "next GPU reset",
                found=f"{label}: ECC mode {ecc.mode_current}, pending {ecc.mode_pending}",
                expected="current and pending ECC mode equal",
                fix="reset the GPU or reboot",
            )
        )
    return findings


def retired_pages_findings(gpu: GpuInfo) -> list[Finding]:
    pages = gpu.retired_pages
    total = (pages.single_bit or 0) + (pages.double_bit or 0)
    if pages.pending:
        return [
            Finding(
                "gpu.retired-pages-pending",
                ERROR,
                f"{gpu_label(gpu)} has memory pages waiting to be retired ({total} retired); "
                "expected none pending",
                found=f"{gpu_label(gpu)}: page retirement pending ({total} retired)",
                expected="no page retirement pending",
                fix="drain the host and reset the GPU or reboot",
            )
        ]
    if total:
        return [
            Finding(
                "gpu.retired-pages",
                WARNING,
                f"{gpu_label(gpu)} has {total} retired memory page(s) (single-bit "
                f"{pages.single_bit or 0}, double-bit {pages.double_bit or 0}); expected 0",
                found=f"{gpu_label(gpu)}: {total} retired page(s)",
                expected="0 retired pages",
                fix="watch the count; replace the GPU when it keeps growing",
            )
        ]
    return []


def remapped_rows_findings(gpu: GpuInfo) -> list[Finding]:
    rows = gpu.remapped_rows
    label = gpu_label(gpu)
    if rows.failure:
        return [
            Finding(
                "gpu.remap-failure",
                ERROR,
                f"{label} failed to remap a memory row (no spare rows left); expected none",
                found=f"{label}: row remapping failure",
                expected="no row remapping failure",
                fix="take the GPU out of service and replace it",
            )
        ]
    if rows.pending:
        return [
            Finding(
                "gpu.remap-pending",
                ERROR,
                f"{label} has a row remapping pending; expected none",
                found=f"{label}: row remapping pending",
                expected="no row remapping pending",
                fix="drain the host and reset the GPU (nvidia-smi -r) or reboot",
            )
        ]
    if rows.uncorrectable:
        return [
            Finding(
                "gpu.remapped-rows",
                WARNING,
                f"{label} has {rows.uncorrectable} row(s) remapped for uncorrectable errors "
                f"(correctable {rows.correctable or 0}); expected 0",
                found=f"{label}: {rows.uncorrectable} row(s) remapped (uncorrectable)",
                expected="0 remapped rows",
                fix="watch the count",
            )
        ]
    return []


def pcie_findings(gpu: GpuInfo, busy: bool = False) -> list[Finding]:
    findings = []
    link = gpu.pcie
    label = gpu_label(gpu)
    if link.width_current and link.width_max and link.width_current < link.width_max:
        findings.append(
            Finding(
                "gpu.pcie-width",
                WARNING,
                f"{label} PCIe link is x{link.width_current}, below its max x{link.width_max}; "
                "expected the full width",
                found=f"{label}: PCIe x{link.width_current}",
                expected=f"PCIe x{link.width_max}",
                fix="reseat the GPU or check the riser/slot",
            )
        )
    if link.gen_current and link.gen_max and link.gen_current < link.gen_max and busy:
        findings.append(
            Finding(
                "gpu.pcie-gen",
                WARNING,
                f"{label} PCIe link runs at gen {link.gen_current} while busy (P0), below its "
                f"max gen {link.gen_max}; expected the full generation under load",
                found=f"{label}: PCIe gen {link.gen_current} while busy (P0)",
                expected=f"PCIe gen {link.gen_max} under load",
                fix="check the slot, riser and BIOS link settings",
            )
        )
    elif link.gen_current and link.gen_max and link.gen_current < link.gen_max:
        findings.append(
            Finding(
                "gpu.pcie-gen",
                INFO,
                f"{label} PCIe link runs at gen {link.gen_current}, below its max gen "
                f"{link.gen_max}; normal for an idle GPU (power saving)",
                found=f"{label}: PCIe gen {link.gen_current}",
                expected=f"PCIe gen {link.gen_max} under load",
                fix="none for an idle GPU; check under load if transfers are slow",
                action="none",  # the catalog's action is for a busy GPU's link
            )
        )
    return findings


# ClockEvents field -> (finding id, what it means); worst first: a GPU with HW thermal slowdown
# also shows HW slowdown, and only the most specific reason is reported.
CLOCK_EVENTS = (
    ("hw_thermal", "gpu.clocks.hw-thermal", "HW thermal slowdown (temperature too high)"),
    ("power_brake", "gpu.clocks.power-brake", "HW power brake slowdown (external power brake)"),
    ("hw_slowdown", "gpu.clocks.hw-slowdown", "HW slowdown (clocks cut by half or more)"),
    ("sw_thermal", "gpu.clocks.sw-thermal", "SW thermal slowdown (above max operating temp)"),
)


def clock_event_findings(gpu: GpuInfo) -> list[Finding]:
    """Clocks held down by the hardware or a thermal limit ("Clocks Event Reasons")."""
    events = gpu.clock_events
    label = gpu_label(gpu)
    findings = []
    for field_name, rule, what in CLOCK_EVENTS:
        if not getattr(events, field_name):
            continue
        if rule == "gpu.clocks.hw-slowdown" and (events.hw_thermal or events.power_brake):
            continue  # the specific reason is reported
        findings.append(
            catalog_finding(
                rule,
                f"{label} clocks are held down: {what} active; expected not active",
                found=f"{label}: {what} active",
                expected="no clock event reason but idle, application clocks or power cap",
            )
        )
    return findings


FABRIC_DONE = "completed"
FABRIC_OK = "success"


def fabric_findings(gpu: GpuInfo) -> list[Finding]:
    """The GPU's NVSwitch fabric registration (only where nvidia-smi reports one)."""
    fabric = gpu.fabric
    label = gpu_label(gpu)
    if fabric.state is None:
        return []
    if fabric.state.lower() != FABRIC_DONE:
        return [
            catalog_finding(
                "gpu.fabric.state",
                f"{label} fabric state is {fabric.state!r}; expected 'Completed' (CUDA work "
                "across NVLink fails until the fabric manager registers the GPU)",
                found=f"{label}: fabric state {fabric.state}",
                expected="fabric state Completed, status Success",
            )
        ]
    if fabric.status is not None and fabric.status.lower() != FABRIC_OK:
        return [
            catalog_finding(
                "gpu.fabric.status",
                f"{label} fabric registration completed with status {fabric.status!r}; "
                "expected 'Success'",
                found=f"{label}: fabric status {fabric.status}",
                expected="fabric status Success",
            )
        ]
    return []


def recovery_findings(gpu: GpuInfo) -> list[Finding]:
    """The recovery action the driver reports for the GPU (nvidia-smi "GPU Recovery Action"),
    when it asks for one."""
    text = gpu.recovery_action
    if text is None:
        return []
    catalog = load_catalog()
    recovery = catalog.recovery(None, text)
    if recovery is not None and recovery.action == "none":
        return []
    label = gpu_label(gpu)
    action = recovery.action if recovery else "inspect-hardware"
    return [
        catalog_finding(
            "gpu.recovery-action",
            f"{label}: the driver asks for a recovery action: {text!r}; expected None",
            found=f"{label}: GPU Recovery Action {text}",
            expected="GPU Recovery Action None",
            action=action,
        )
    ]


# What each action means for the operator (a row's own `fix` is used first).
ACTION_FIX = {
    "none": "nothing to do for the node (restart the application if it failed)",
    "watch": "none now; watch whether it recurs or grows",
    "reset-gpu": "drain the node, reset the GPU (nvidia-smi -r -i INDEX) or reboot, then run "
    "dcgmi diag -r 3; replace the GPU if it recurs",
    "reboot": "drain the node and reboot it; replace the GPU if it recurs",
    "drain": "drain the node and find the cause (nvidia-fabricmanager, NVLink, the kernel log)",
    "inspect-hardware": "drain the node and inspect the hardware (seating, riser, cooling, "
    "power); return the part if it recurs",
}


def catalog_finding(
    rule: str,
    message: str,
    *,
    found: str,
    expected: str,
    action: str | None = None,
    severity: str | None = None,
) -> Finding:
    """A finding of catalog row ``rule``: its severity, action, source and fix (the action's
    unless the row has its own)."""
    catalog = load_catalog()
    row = catalog.row(rule) or catalog.xid_row(int(rule.rsplit(".", 1)[1]))
    chosen = action or row.action
    return Finding(
        rule,
        severity or row.severity,
        message,
        source=catalog.source_url(row),
        found=found,
        expected=expected,
        fix=row.fix if row.fix and chosen == row.action else ACTION_FIX[chosen],
        action=chosen,
    )
