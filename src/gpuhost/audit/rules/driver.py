"""Driver rules: nvidia-smi's state, a reboot owed, mixed driver packages, the next boot's
module (``driver.state``, ``driver.reboot-needed``, ``driver.packages-mixed``,
``kernel.next-boot-module``)."""

from __future__ import annotations

from gpuhost.audit.rules.context import AuditContext, ok_result, one_finding, skip_result
from gpuhost.audit.rules.installed import coupled_packages, userspace_driver_version
from gpuhost.audit.rules.precompiled import check_precompiled_next_boot
from gpuhost.facts.host_facts import HostFacts
from gpuhost.findings import ERROR, WARNING, RuleResult

NO_GPU_ON_BUS_FIX = (
    "no NVIDIA device on the PCI bus (lspci -d 10de: lists none), so the module has nothing to "
    "drive: check the GPU is seated, powered and passed through to this machine, or run the "
    "audit on a GPU host"
)
SMI_STATE_RULES = {
    "driver-library-mismatch": (
        "driver.library-mismatch",
        "the loaded kernel module and the installed userspace driver differ (an upgrade without "
        "a reboot)",
        "reboot the host (or unload and reload the nvidia modules) so the module matches the "
        "installed driver",
    ),
    "driver-not-loaded": (
        "driver.not-loaded",
        "nvidia-smi cannot communicate with the NVIDIA driver: no NVIDIA kernel module is loaded",
        "load it (modprobe nvidia) or reboot; check that a module is built for the running kernel "
        "(dkms status) and, with Secure Boot on, that it is signed",
    ),
    "no-devices": (
        "gpu.no-devices",
        "the driver is loaded but sees no GPU",
        "check the GPU is seated and powered (lspci -d 10de:), that the installed driver branch "
        "supports it, and the kernel log (dmesg | grep NVRM)",
    ),
    "gpu-lost": (
        "gpu.lost",
        "a GPU has fallen off the bus",
        "drain the host and reboot it; if it recurs, check power, cooling and the PCIe slot "
        "(hardware fault)",
    ),
    "nvml-missing": (
        "driver.nvml-missing",
        "nvidia-smi cannot load the NVML library (libnvidia-ml.so)",
        "install the userspace driver package that provides libnvidia-ml.so.1 "
        "(libnvidia-ml1 / libnvidia-compute-<branch>) at the kernel module's version",
    ),
    "unknown-error": (
        "driver.smi-error",
        "nvidia-smi failed",
        "run nvidia-smi on the host and read the kernel log (dmesg | grep NVRM)",
    ),
}


def _driver_context(facts: HostFacts) -> str:
    """What the host shows about the driver, for messages: packages, module, dkms, kernel."""
    parts = []
    userspace = userspace_driver_version(facts)
    parts.append(f"installed driver {userspace}" if userspace else "no driver package installed")
    module = facts.driver.loaded_module
    parts.append(
        f"loaded module {module.version} ({module.flavor})" if module else "no nvidia module loaded"
    )
    builds = [e for e in facts.dkms if e.module.startswith("nvidia")]
    if builds:
        shown = ", ".join(
            f"{e.module} {e.version} for {e.kernel or '?'}: {e.status}" for e in builds
        )
        parts.append(f"dkms: {shown}")
    if facts.kernel.running:
        parts.append(f"running kernel {facts.kernel.running}")
    if facts.secure_boot.enabled:
        parts.append("Secure Boot on")
    return "; ".join(parts)


def _without_smi(rule: str, facts: HostFacts) -> RuleResult:
    """No nvidia-smi installed: a driver without it, GPUs without a driver, or no GPU at all."""
    pci = facts.driver.pci_gpus
    if coupled_packages(facts) or facts.driver.loaded_module is not None:
        return one_finding(
            rule,
            "driver.smi-missing",
            WARNING,
            f"nvidia-smi is not installed ({_driver_context(facts)}), so GPU state, ECC, "
            "clocks and persistence could not be checked; expected nvidia-smi from the "
            "driver's packages",
            found=f"no nvidia-smi; {_driver_context(facts)}",
            expected="nvidia-smi from the driver's packages",
            fix="install nvidia-smi (Debian) or nvidia-utils-<branch>",
        )
    if pci:
        listed = ", ".join(f"{g.address} [10de:{g.device_id.removeprefix('0x')}]" for g in pci)
        return one_finding(
            rule,
            "driver.missing",
            ERROR,
            f"{len(pci)} NVIDIA GPU(s) on the PCI bus ({listed}) but no NVIDIA driver is "
            "installed; expected a driver from the host's profile",
            found=f"{len(pci)} NVIDIA GPU(s) on the PCI bus ({listed}), no NVIDIA driver",
            expected="the NVIDIA driver of the host's profile",
            fix="gpuhost provision",
        )
    return one_finding(
        rule,
        "gpu.none",
        WARNING,
        "no NVIDIA GPU found: no NVIDIA display/3D controller on the PCI bus, no NVIDIA "
        "driver and no nvidia-smi installed; the GPU checks were skipped. Expected on a GPU "
        "host: a GPU visible to nvidia-smi",
        found="no NVIDIA GPU on the PCI bus, no NVIDIA driver, no nvidia-smi",
        expected="a GPU visible to nvidia-smi (on a GPU host)",
        fix="run the audit on a GPU host, or provision this one (gpuhost provision)",
    )


def _smi_failed(rule: str, facts: HostFacts) -> RuleResult | None:
    """nvidia-smi ran and failed (an error state, or nothing printed); None when it reported."""
    smi = facts.driver.smi
    if smi.state in SMI_STATE_RULES:
        rule_id, what, fix = SMI_STATE_RULES[smi.state]
        if smi.state == "driver-not-loaded" and not facts.driver.pci_gpus:
            # loading the module cannot help: it has no device to drive
            what += ", and no NVIDIA GPU is on the PCI bus"
            fix = NO_GPU_ON_BUS_FIX
        said = f"; nvidia-smi said: {smi.message!r}" if smi.message else ""
        rc = f" (exit {facts.driver.smi_rc})" if facts.driver.smi_rc else ""
        return one_finding(
            rule,
            rule_id,
            ERROR,
            f"{what}{rc}{said}; found: {_driver_context(facts)}; expected: nvidia-smi "
            "reports every GPU",
            found=f"nvidia-smi {smi.state}{rc}{said}; {_driver_context(facts)}",
            expected="nvidia-smi reports every GPU",
            fix=fix,
        )
    if smi.state == "absent":
        return one_finding(
            rule,
            "driver.smi-error",
            ERROR,
            f"nvidia-smi printed nothing (exit {facts.driver.smi_rc}); found: "
            f"{_driver_context(facts)}",
            found=f"nvidia-smi printed nothing (exit {facts.driver.smi_rc}); "
            f"{_driver_context(facts)}",
            expected="nvidia-smi reports every GPU",
            fix="run nvidia-smi on the host and read the kernel log (dmesg | grep NVRM)",
        )
    return None


def _gpus_listed(rule: str, facts: HostFacts) -> RuleResult:
    """nvidia-smi reported: at least one GPU, and every GPU on the PCI bus."""
    smi = facts.driver.smi
    pci = facts.driver.pci_gpus
    if not smi.gpus:
        return one_finding(
            rule,
            "gpu.no-devices",
            ERROR,
            f"nvidia-smi lists no GPU (driver {smi.driver_version}); expected at least one",
            found=f"nvidia-smi lists no GPU (driver {smi.driver_version})",
            expected="at least one GPU",
            fix="check lspci -d 10de: and the kernel log (dmesg | grep NVRM)",
        )
    if pci and len(smi.gpus) < len(pci):
        return one_finding(
            rule,
            "gpu.missing",
            ERROR,
            f"nvidia-smi lists {len(smi.gpus)} GPU(s) but {len(pci)} NVIDIA GPU(s) are on "
            "the PCI bus",
            found=f"{len(smi.gpus)} GPU(s) in nvidia-smi, {len(pci)} on the PCI bus",
            expected=f"all {len(pci)} GPU(s) on the PCI bus visible to nvidia-smi",
            fix="check the kernel log (dmesg | grep NVRM) for GPUs the driver refused",
        )
    return ok_result(rule)


def check_driver_state(ctx: AuditContext) -> RuleResult:
    rule = "driver.state"
    facts = ctx.facts
    if not facts.driver.smi_installed:
        return _without_smi(rule, facts)
    failed = _smi_failed(rule, facts)
    return failed if failed is not None else _gpus_listed(rule, facts)


def check_reboot_needed(ctx: AuditContext) -> RuleResult:
    rule = "driver.reboot-needed"
    facts = ctx.facts
    module = facts.driver.loaded_module
    userspace = userspace_driver_version(facts)
    if module is None:
        return skip_result(rule, "no NVIDIA kernel module loaded")
    if userspace is None:
        return skip_result(rule, "installed userspace driver version unknown")
    if module.version == userspace:
        return ok_result(rule)
    return one_finding(
        rule,
        rule,
        ERROR,
        f"loaded kernel module {module.version} differs from the installed userspace "
        "driver "
        f"{userspace}; CUDA programs fail with a driver/library mismatch until the host "
        "reboots",
        found=f"loaded kernel module {module.version}, userspace driver {userspace}",
        expected="the loaded module at the installed driver's version",
        fix="drain and reboot the host",
    )


def check_packages_mixed(ctx: AuditContext) -> RuleResult:
    rule = "driver.packages-mixed"
    coupled = coupled_packages(ctx.facts)
    if not coupled:
        return skip_result(rule, "no driver packages installed")
    versions = sorted(set(coupled.values()))
    if len(versions) == 1:
        return ok_result(rule)
    by_version = {v: sorted(n for n, pv in coupled.items() if pv == v) for v in versions}
    shown = "; ".join(f"{v}: {', '.join(names[:6])}" for v, names in by_version.items())
    return one_finding(
        rule,
        rule,
        ERROR,
        f"driver packages are at different versions ({shown}); expected one driver version "
        "for "
        "all of them",
        found=f"driver packages at {', '.join(versions)} ({shown})",
        expected="every driver package at one version",
        fix="install every coupled package at one version (gpuhost provision)",
    )


def check_next_boot_kernel(ctx: AuditContext) -> RuleResult:
    rule = "kernel.next-boot-module"
    facts = ctx.facts
    builds = [e for e in facts.dkms if e.module.startswith("nvidia")]
    if not builds:  # Ubuntu's archive: precompiled module packages per kernel
        return check_precompiled_next_boot(ctx)
    next_boot = facts.kernel.next_boot
    if next_boot is None:
        return skip_result(
            rule, "next-boot kernel unknown (no grubby, /vmlinuz link or /boot/vmlinuz-*)"
        )
    built = {e.kernel for e in builds if e.kernel and e.status.startswith("installed")}
    if next_boot in built:
        return ok_result(rule)
    have = ", ".join(sorted(k for k in built if k)) or "none"
    return one_finding(
        rule,
        rule,
        ERROR,
        f"the next-boot kernel {next_boot} has no NVIDIA module built by DKMS (built for: "
        f"{have}); "
        "the GPU will be unusable after the next reboot",
        found=f"next-boot kernel {next_boot}; NVIDIA module built for: {have}",
        expected=f"an NVIDIA module built by DKMS for {next_boot}",
        fix=f"install the headers of {next_boot} and run dkms autoinstall -k {next_boot} (or keep "
        f"booting {facts.kernel.running})",
    )
