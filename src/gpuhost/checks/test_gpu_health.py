"""GPU health from nvidia-smi and the kernel log: persistence, clocks, ECC, retired pages,
remapped rows, Xid errors, PCIe link, clock event reasons, NVSwitch fabric, recovery action.
Without a working nvidia-smi each check FAILs with the host's state (not installed, driver not
loaded, no GPU). The nvidia-smi judgements are the audit's rules (gpu.persistence, gpu.clocks,
gpu.ecc, gpu.retired-pages, gpu.remapped-rows, gpu.pcie-link, gpu.clock-events, gpu.fabric,
gpu.recovery-action) and Xid codes are judged by the fault catalog (gpuhost.faults): a check
fails on errors and warnings, each line naming the finding id and its action."""

from __future__ import annotations

from typing import Any

import pytest

from gpuhost.checks.checklib import HostFacts, fail_with, need_gpus, need_spec
from gpuhost.checks_support import gpu, xid
from gpuhost.checks_support.expected import Expected
from gpuhost.checks_support.gpu import FAILING
from gpuhost.errors import ParseError
from gpuhost.facts.host_facts import ServiceState
from gpuhost.faults.judge import (
    expectation_findings,
    finding_line,
    nvlink_error_findings,
    nvlink_findings,
    xid_findings,
)
from gpuhost.faults.node_class import expectation_for
from gpuhost.gpus.catalog import labelled
from gpuhost.gpus.node_classes import node_override
from gpuhost.operations.clocks import UNIT_NAME as CLOCKS_UNIT
from gpuhost.parsers.smi_misc import parse_nvlink_errors, parse_nvlink_status

# nvidia-smi's NVLink views (empty output: no NVLink to judge; an error line is kept as a note)
NVLINK_STATUS = "LC_ALL=C nvidia-smi nvlink -s 2>&1 || true"
NVLINK_ERRORS = "LC_ALL=C nvidia-smi nvlink -e 2>&1 || true"


def test_persistence_mode_on(host: Any, facts: HostFacts, expected: Expected) -> None:
    """Persistence mode is on for every GPU (when the profile asks for it): the audit's
    gpu.persistence rule."""
    spec, _plan = need_spec(expected)
    if not spec.persistence:
        pytest.skip(f"profile {spec.profile} leaves persistence mode off (persistence: false)")
    report = need_gpus(facts)
    running = host.service("nvidia-persistenced").is_running
    daemon = ServiceState("nvidia-persistenced", "active" if running else "inactive")
    fail_with(
        gpu.persistence_problems(report, daemon),
        f"{facts.name}: persistence mode off (fix: systemctl enable --now nvidia-persistenced)",
    )


def test_persistence_daemon_running(host: Any, facts: HostFacts, expected: Expected) -> None:
    """nvidia-persistenced is enabled and running (keeps persistence across reboots)."""
    spec, _plan = need_spec(expected)
    if not spec.persistence:
        pytest.skip(f"profile {spec.profile} leaves persistence mode off (persistence: false)")
    service = host.service("nvidia-persistenced")
    problems = []
    if not service.is_running:
        problems.append(
            "nvidia-persistenced is not running (see: systemctl status nvidia-persistenced)"
        )
    if not service.is_enabled:
        problems.append("nvidia-persistenced is not enabled at boot")
    fail_with(problems, f"{facts.name}: persistence daemon")


def test_clocks_as_profile(host: Any, facts: HostFacts, expected: Expected) -> None:
    """Clocks as the profile says: application clocks read back; the clocks service (which also
    sets locked clocks, not readable back) ran successfully."""
    spec, _plan = need_spec(expected)
    if spec.clocks_mode == "off":
        pytest.skip(
            f"profile {spec.profile} leaves clocks at the driver's defaults (clocks.policy: none)"
        )
    report = need_gpus(facts)
    problems = gpu.clock_problems(report, spec)
    service = host.service(CLOCKS_UNIT)
    if not service.is_enabled:
        problems.append(f"{CLOCKS_UNIT} is not enabled: clocks are lost at the next boot")
    if not service.is_running:  # a oneshot with RemainAfterExit: active once it succeeded
        problems.append(
            f"{CLOCKS_UNIT} has not run successfully since boot "
            f"(see: systemctl status {CLOCKS_UNIT})"
        )
    fail_with(problems, f"{facts.name}: clocks (mode {spec.clocks_mode})")


def test_no_uncorrectable_ecc_errors(facts: HostFacts) -> None:
    """No GPU counts uncorrectable ECC errors since the driver loaded."""
    report = need_gpus(facts)
    fail_with(
        gpu.ecc_problems(report),
        f"{facts.name}: uncorrectable ECC errors "
        "(drain the host; reset the GPU; replace it if they come back)",
    )


def test_no_pending_retired_pages(facts: HostFacts) -> None:
    """No GPU has page retirement pending (pre-Ampere GPUs)."""
    report = need_gpus(facts)
    fail_with(gpu.retired_page_problems(report), f"{facts.name}: retired pages pending")


def test_no_remapped_row_failures(facts: HostFacts) -> None:
    """No GPU has a row-remapping failure or remapped rows waiting for a reset (Ampere+)."""
    report = need_gpus(facts)
    fail_with(gpu.remapped_row_problems(report), f"{facts.name}: row remapping")


def test_no_troubling_xid_since_boot(facts: HostFacts) -> None:
    """The kernel log since boot has no Xid the fault catalog (src/gpuhost/data/faults.yaml, from
    NVIDIA's Xid catalog) calls a warning or an error; each one is a line naming its finding id
    and action (a recovery action the driver logged, Xid 154, is preferred). Also fails when the
    log cannot be read, and when no NVIDIA driver is loaded (then the log cannot show GPU
    faults)."""
    raw = facts.run(xid.KERNEL_LOG_COMMAND)
    log = xid.parse_kernel_log(raw)
    if log.error:
        pytest.fail(f"{facts.name}: cannot read the kernel log: {log.error}", pytrace=False)
    report = facts.smi
    gpus = report.gpus if report is not None and report.ok else []
    bad = [f for f in xid_findings(xid.xid_events(log.nvrm_lines), gpus) if f.severity in FAILING]
    fail_with(
        [finding_line(f) for f in bad],
        f"{facts.name}: Xid errors in the kernel log ({log.source}) since boot",
    )
    if facts.module is None:
        pytest.fail(
            f"{facts.name}: no Xid in the kernel log ({log.source}), but the NVIDIA driver is not "
            "loaded, so the log cannot show GPU faults",
            pytrace=False,
        )


def test_clocks_fabric_and_recovery(facts: HostFacts) -> None:
    """No GPU has its clocks held down by the hardware or a thermal limit (clock event reasons),
    an NVSwitch fabric registration that is not complete, or a recovery action the driver asks
    for: the audit's gpu.clock-events, gpu.fabric and gpu.recovery-action rules."""
    report = need_gpus(facts)
    fail_with(
        gpu.rule_problems("gpu.clock-events", report)
        + gpu.rule_problems("gpu.fabric", report)
        + gpu.rule_problems("gpu.recovery-action", report),
        f"{facts.name}: GPU faults",
    )


def test_node_class_and_nvlink(facts: HostFacts, inventory_data: dict[str, Any]) -> None:
    """The node has what its GPU model's node class (data/node_classes.yaml) and the inventory's
    override (gpuhost_node, older gpuhost_expect) say: GPU count, memory, PCIe width
    (gpu.missing, gpu.memory, gpu.pcie-width); every NVLink link active and as many as expected,
    no NVLink error counted (gpu.nvlink.down, gpu.nvlink.errors). A GPU model without a class
    and no override: NVLink only."""
    report = need_gpus(facts)
    expect = expectation_for(
        labelled(report.gpus[0].name or "", report.gpus[0].pci_device_id),
        node_override(inventory_data),
        len(report.gpus),
    )
    found = expectation_findings(report, expect) if expect is not None else []
    try:
        found += nvlink_findings(parse_nvlink_status(facts.run(NVLINK_STATUS)), expect)
        found += nvlink_error_findings(parse_nvlink_errors(facts.run(NVLINK_ERRORS)))
    except ParseError as exc:
        pytest.fail(f"{facts.name}: nvidia-smi nvlink: {exc}", pytrace=False)
    fail_with(
        [finding_line(f) for f in found if f.severity in FAILING],
        f"{facts.name}: node class / NVLink",
    )


def test_pcie_link_at_max(facts: HostFacts) -> None:
    """Every GPU's PCIe link runs at its max width, and at its max generation when busy."""
    report = need_gpus(facts)
    pstates = gpu.parse_pstates(facts.run(gpu.PSTATE_COMMAND))
    fail_with(
        gpu.pcie_problems(report, pstates),
        f"{facts.name}: PCIe link below the GPU's max "
        "(reseat the GPU or riser; check the slot and BIOS link settings)",
    )
