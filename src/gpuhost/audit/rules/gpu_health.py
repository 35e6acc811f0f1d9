"""GPU health, judged per GPU: ECC errors, retired pages, remapped rows, the PCIe link
(``gpu.ecc``, ``gpu.retired-pages``, ``gpu.remapped-rows``, ``gpu.pcie-link``)."""

from __future__ import annotations

from gpuhost.audit.rules.context import AuditContext, gpu_label, per_gpu
from gpuhost.findings import ERROR, INFO, WARNING, Finding, RuleResult
from gpuhost.parsers.nvidia_smi import GpuInfo


def _ecc_findings(gpu: GpuInfo) -> list[Finding]:
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


def check_ecc(ctx: AuditContext) -> RuleResult:
    return per_gpu(ctx, "gpu.ecc", _ecc_findings)


def _retired_pages_findings(gpu: GpuInfo) -> list[Finding]:
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


def check_retired_pages(ctx: AuditContext) -> RuleResult:
    return per_gpu(ctx, "gpu.retired-pages", _retired_pages_findings)


def _remapped_rows_findings(gpu: GpuInfo) -> list[Finding]:
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


def check_remapped_rows(ctx: AuditContext) -> RuleResult:
    return per_gpu(ctx, "gpu.remapped-rows", _remapped_rows_findings)


def _pcie_findings(gpu: GpuInfo, busy: bool = False) -> list[Finding]:
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
            )
        )
    return findings


def check_pcie(ctx: AuditContext) -> RuleResult:
    def judge(gpu: GpuInfo) -> list[Finding]:
        return _pcie_findings(gpu, gpu.index is not None and gpu.index in ctx.busy_gpus)

    return per_gpu(ctx, "gpu.pcie-link", judge)
