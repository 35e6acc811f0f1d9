"""The audit's rules: HostFacts (+ the expected profile) in, findings out. Pure.

Every check has a stable id (``RULES``); a check may emit findings under more specific ids that
start with its own (``driver.state`` emits ``driver.not-loaded``, ``gpu.lost``, ...), listed in
``RULE_IDS`` and docs/audit-report.md. A check that cannot apply to a host (no GPU visible, no
profile named, sshd -T not readable) returns a skip with the reason instead of a pass.

One module per concern (the checks and the helpers they alone use); this package is the
registry: the checks' order, the ids, and ``run_rules``.

- ``context``: ``AuditContext`` and the result helpers every rule uses (``per_gpu`` ...)
- ``installed``: the driver versions the host has installed and loaded
- ``host_probe``, ``driver``, ``signing``, ``packages``, ``fabric`` (fabric manager),
  ``fabric_ports``, ``fabric_rdma`` (the RDMA fabric), ``firmware``, ``profile``, ``gpu_settings``,
  ``gpu_health``, ``cuda``, ``container``, ``cdi``, ``frameworks``, ``security``, ``ssh``: the
  checks
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from gpuhost.audit.rules.cdi import check_cdi
from gpuhost.audit.rules.container import check_container_runtime
from gpuhost.audit.rules.context import NO_GPU_REASON, AuditContext
from gpuhost.audit.rules.cuda import check_cuda_link
from gpuhost.audit.rules.driver import (
    SMI_STATE_RULES,
    check_driver_state,
    check_next_boot_kernel,
    check_packages_mixed,
    check_reboot_needed,
)
from gpuhost.audit.rules.fabric import check_fabric_manager
from gpuhost.audit.rules.fabric_ports import check_fabric_counters, check_fabric_ports
from gpuhost.audit.rules.fabric_rdma import check_affinity, check_gpudirect, check_pcie_path
from gpuhost.audit.rules.firmware import check_firmware_baseline, check_vbios_mixed
from gpuhost.audit.rules.frameworks import check_frameworks
from gpuhost.audit.rules.gpu_faults import check_nvlink, check_pcie_aer, check_xid
from gpuhost.audit.rules.gpu_health import (
    check_clock_events,
    check_ecc,
    check_fabric,
    check_node_class,
    check_pcie,
    check_recovery_action,
    check_remapped_rows,
    check_retired_pages,
)
from gpuhost.audit.rules.gpu_settings import check_clocks, check_persistence
from gpuhost.audit.rules.host_probe import check_probe
from gpuhost.audit.rules.installed import (
    coupled_packages,
    loaded_driver_version,
    upstream_version,
    userspace_driver_version,
)
from gpuhost.audit.rules.packages import check_driver_held, check_packages_unfinished
from gpuhost.audit.rules.profile import check_profile
from gpuhost.audit.rules.security import (
    check_security_container_toolkit,
    check_security_cuda_toolkit,
    check_security_driver,
)
from gpuhost.audit.rules.signing import check_module_signature
from gpuhost.audit.rules.ssh import SSHD_RULES, SshdRule, check_sshd
from gpuhost.faults.catalog import with_action
from gpuhost.findings import RuleResult, rule_doc

__all__ = [
    "NO_GPU_REASON",
    "RULES",
    "RULE_IDS",
    "SMI_STATE_RULES",
    "SSHD_RULES",
    "AuditContext",
    "RuleCheck",
    "SshdRule",
    "check_cdi",
    "check_clock_events",
    "check_clocks",
    "check_container_runtime",
    "check_cuda_link",
    "check_driver_held",
    "check_driver_state",
    "check_ecc",
    "check_affinity",
    "check_fabric",
    "check_fabric_counters",
    "check_node_class",
    "check_nvlink",
    "check_pcie_aer",
    "check_fabric_manager",
    "check_firmware_baseline",
    "check_vbios_mixed",
    "check_fabric_ports",
    "check_gpudirect",
    "check_pcie_path",
    "check_frameworks",
    "check_module_signature",
    "check_next_boot_kernel",
    "check_packages_mixed",
    "check_packages_unfinished",
    "check_pcie",
    "check_persistence",
    "check_probe",
    "check_profile",
    "check_reboot_needed",
    "check_recovery_action",
    "check_remapped_rows",
    "check_retired_pages",
    "check_security_container_toolkit",
    "check_security_cuda_toolkit",
    "check_security_driver",
    "check_xid",
    "check_sshd",
    "coupled_packages",
    "loaded_driver_version",
    "run_rules",
    "upstream_version",
    "userspace_driver_version",
]

RuleCheck = Callable[[AuditContext], RuleResult]

RULES: dict[str, RuleCheck] = {
    "host.probe": check_probe,
    "driver.state": check_driver_state,
    "driver.reboot-needed": check_reboot_needed,
    "driver.packages-mixed": check_packages_mixed,
    "driver.held": check_driver_held,
    "driver.packages-unfinished": check_packages_unfinished,
    "kernel.next-boot-module": check_next_boot_kernel,
    "kernel.module-signature": check_module_signature,
    "fabricmanager": check_fabric_manager,
    "fabric.ports": check_fabric_ports,
    "fabric.counters": check_fabric_counters,
    "fabric.gpudirect": check_gpudirect,
    "fabric.pcie": check_pcie_path,
    "fabric.affinity": check_affinity,
    "profile": check_profile,
    "gpu.persistence": check_persistence,
    "gpu.clocks": check_clocks,
    "gpu.ecc": check_ecc,
    "gpu.retired-pages": check_retired_pages,
    "gpu.remapped-rows": check_remapped_rows,
    "gpu.pcie-link": check_pcie,
    "gpu.clock-events": check_clock_events,
    "gpu.fabric": check_fabric,
    "gpu.recovery-action": check_recovery_action,
    "gpu.node-class": check_node_class,
    "gpu.xid": check_xid,
    "gpu.nvlink": check_nvlink,
    "gpu.pcie-aer": check_pcie_aer,
    "firmware.vbios-mixed": check_vbios_mixed,
    "firmware.baseline": check_firmware_baseline,
    "cuda.default-link": check_cuda_link,
    "container.nvidia-runtime": check_container_runtime,
    "container.cdi": check_cdi,
    "frameworks.probe": check_frameworks,
    "security.driver": check_security_driver,
    "security.container-toolkit": check_security_container_toolkit,
    "security.cuda-toolkit": check_security_cuda_toolkit,
    "ssh": check_sshd,
}

# Every finding id a rule above can emit (docs/audit-report.md lists them with their meaning).
RULE_IDS: tuple[str, ...] = (
    "host.unreachable",
    "host.probe-failed",
    "host.probe-incomplete",
    "gpu.none",
    "driver.missing",
    "driver.smi-missing",
    "driver.not-loaded",
    "driver.library-mismatch",
    "driver.nvml-missing",
    "driver.smi-error",
    "gpu.no-devices",
    "gpu.lost",
    "gpu.missing",
    "driver.reboot-needed",
    "driver.packages-mixed",
    "driver.upgrade-pending",
    "driver.unheld",
    "driver.hold-removed",
    "driver.pin-missing",
    "driver.packages-unfinished",
    "kernel.next-boot-module",
    "kernel.module-unsigned",
    "kernel.module-key-not-enrolled",
    "kernel.module-key-pending",
    "fabricmanager.version",
    "fabricmanager.inactive",
    "fabric.ports-missing",
    "fabric.port-down",
    "fabric.port-rate",
    "fabric.link-layer",
    "fabric.counters-growing",
    "fabric.peermem",
    "fabric.acs",
    "fabric.iommu",
    "fabric.affinity",
    "profile.unknown",
    "profile.marker",
    "profile.driver",
    "profile.kernel-module",
    "profile.cuda",
    "profile.cuda-default",
    "profile.cudnn",
    "profile.container-toolkit",
    "gpu.persistence",
    "gpu.clocks",
    "gpu.ecc-uncorrectable",
    "gpu.ecc-correctable",
    "gpu.ecc-pending",
    "gpu.retired-pages",
    "gpu.retired-pages-pending",
    "gpu.remapped-rows",
    "gpu.remap-pending",
    "gpu.remap-failure",
    "gpu.pcie-width",
    "gpu.pcie-gen",
    "gpu.clocks.hw-slowdown",
    "gpu.clocks.hw-thermal",
    "gpu.clocks.power-brake",
    "gpu.clocks.sw-thermal",
    "gpu.fabric.state",
    "gpu.fabric.status",
    "gpu.recovery-action",
    "firmware.vbios-mixed",
    "firmware.baseline",
    "firmware.unread",
    "cuda.default-link",
    "container.nvidia-runtime",
    "container.cdi-stale",
    "container.cdi-unreadable",
    "frameworks.probe",
    "security.driver",
    "security.container-toolkit",
    "security.cuda-toolkit",
    "ssh.password-auth",
    "ssh.keyboard-interactive",
    "ssh.root-login",
    "ssh.empty-passwords",
)


def run_rules(ctx: AuditContext) -> list[RuleResult]:
    """Every rule's result for one host, matrix results included, in a stable order.

    A finding that names no ``source`` gets its rule's documentation (``rule_doc``), one the
    fault catalog knows its action (``faults.catalog.with_action``)."""
    results = [check(ctx) for check in RULES.values()] + list(ctx.matrix_results)
    return [
        replace(
            result,
            findings=tuple(
                with_action(f if f.source else replace(f, source=rule_doc(f.rule)))
                for f in result.findings
            ),
        )
        for result in results
    ]
