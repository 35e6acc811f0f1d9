"""The audit's rules: HostFacts (+ the expected profile) in, findings out. Pure.

Every check has a stable id (``RULES``); a check may emit findings under more specific ids that
start with its own (``driver.state`` emits ``driver.not-loaded``, ``gpu.lost``, ...), listed in
``RULE_IDS`` and docs/audit-report.md. A check that cannot apply to a host (no GPU visible, no
profile named, sshd -T not readable) returns a skip with the reason instead of a pass.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from gpuhost.audit.coupled import is_coupled
from gpuhost.audit.expected import compares_kernel_module
from gpuhost.audit.findings import ERROR, INFO, WARNING, Finding, RuleResult, rule_doc
from gpuhost.desired import DesiredState
from gpuhost.errors import VersionError
from gpuhost.facts.host_facts import HostFacts
from gpuhost.operations.clocks import uses_application_clocks
from gpuhost.parsers.nvidia_smi import GpuInfo
from gpuhost.parsers.profile_marker import MARKER_PATH
from gpuhost.parsers.sshd import (
    SshdConfig,
    keyboard_interactive_password,
    password_authentication,
    permit_root_login,
    sshd_value,
)
from gpuhost.probe.script import DEFAULT_PYTHONS
from gpuhost.versions import extends_version, upstream_of_package_version

NVIDIA_REPO_HINT = "developer.download.nvidia.com"
PREFERENCES_PATH = "/etc/apt/preferences.d/gpuhost-nvidia"  # operations.apt_pin writes it


@dataclass(frozen=True)
class AuditContext:
    """One host's facts and what it is expected to run."""

    facts: HostFacts
    expected: DesiredState | None = None
    profile_name: str | None = None
    profile_source: str | None = None  # "inventory" or "marker"
    profile_error: str | None = None  # the named profile does not exist
    matrix_results: tuple[RuleResult, ...] = field(default_factory=tuple)
    # indexes of GPUs known to be busy (P0): only the checks read performance states; with a
    # busy GPU a PCIe generation below its max is a warning, not the idle GPU's power saving
    busy_gpus: frozenset[int] = frozenset()


# --- helpers ---------------------------------------------------------------------------------


def _ok(rule: str) -> RuleResult:
    return RuleResult(rule)


def _skip(rule: str, reason: str) -> RuleResult:
    return RuleResult(rule, skipped=reason)


def _found(rule: str, findings: Iterable[Finding]) -> RuleResult:
    return RuleResult(rule, tuple(findings))


def _one(
    rule: str,
    finding_id: str,
    severity: str,
    message: str,
    *,
    found: str | None,
    expected: str | None,
    fix: str | None,
    source: str | None = None,
) -> RuleResult:
    """A result with one finding (``finding_id``: the rule's own id or a more specific one).

    Every finding fills ``found``, ``expected`` and ``fix`` beside its message (None only where
    one does not apply); ``source`` defaults to the rule's documentation (``run_rules``)."""
    finding = Finding(
        finding_id, severity, message, source=source, found=found, expected=expected, fix=fix
    )
    return _found(rule, [finding])


def upstream_version(version: str | None) -> str | None:
    if not version:
        return None
    try:
        return upstream_of_package_version(version)
    except VersionError:
        return None


def coupled_packages(facts: HostFacts) -> dict[str, str]:
    """Installed packages coupled to the driver version → their upstream versions."""
    found = {}
    for package in facts.packages.packages:
        if is_coupled(package.name):
            upstream = upstream_version(package.version)
            if upstream:
                found[package.name] = upstream
    return found


def userspace_driver_version(facts: HostFacts) -> str | None:
    """The installed userspace driver: the coupled packages' version (the most common one), else
    the NVML library version nvidia-smi reports."""
    versions = list(coupled_packages(facts).values())
    if versions:
        return max(set(versions), key=lambda v: (versions.count(v), v))
    nvml = facts.driver.smi.nvml_version
    if nvml:
        parts = nvml.split(".")
        # XML reports e.g. "12.535.104.05": the CUDA major, then the driver version.
        return ".".join(parts[1:]) if len(parts) == 4 and len(parts[0]) <= 2 else nvml
    return None


def loaded_driver_version(facts: HostFacts) -> str | None:
    module = facts.driver.loaded_module
    if module is not None:
        return module.version
    return facts.driver.smi.driver_version if facts.driver.smi.ok else None


def _gpu_label(gpu: GpuInfo) -> str:
    where = gpu.pci_bus_id or (f"index {gpu.index}" if gpu.index is not None else "?")
    return f"GPU {gpu.index if gpu.index is not None else '?'} ({gpu.name or 'unknown'}, {where})"


def _visible_gpus(facts: HostFacts) -> list[GpuInfo] | None:
    """GPUs nvidia-smi reported, or None when nvidia-smi could not report (rules then skip)."""
    smi = facts.driver.smi
    if not smi.ok or not smi.gpus:
        return None
    return list(smi.gpus)


NO_GPU_REASON = "no GPU reported by nvidia-smi on this host"


def _per_gpu(
    ctx: AuditContext, rule: str, judge: Callable[[GpuInfo], Iterable[Finding]]
) -> RuleResult:
    """Run ``judge`` on every GPU nvidia-smi reported and collect its findings; skip the rule
    when nvidia-smi reported none."""
    gpus = _visible_gpus(ctx.facts)
    if gpus is None:
        return _skip(rule, NO_GPU_REASON)
    return _found(rule, [finding for gpu in gpus for finding in judge(gpu)])


# --- driver and GPU state --------------------------------------------------------------------

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


def check_driver_state(ctx: AuditContext) -> RuleResult:
    rule = "driver.state"
    facts = ctx.facts
    smi = facts.driver.smi
    coupled = coupled_packages(facts)
    pci = facts.driver.pci_gpus
    has_driver = bool(coupled) or facts.driver.loaded_module is not None
    if not facts.driver.smi_installed:
        if has_driver:
            return _one(
                rule,
                "driver.smi-missing",
                WARNING,
                f"nvidia-smi is not installed ({_driver_context(facts)}), so GPU state, "
                "ECC, "
                "clocks and persistence could not be checked; expected nvidia-smi from the "
                "driver's packages",
                found=f"no nvidia-smi; {_driver_context(facts)}",
                expected="nvidia-smi from the driver's packages",
                fix="install nvidia-smi (Debian) or nvidia-utils-<branch>",
            )
        if pci:
            listed = ", ".join(f"{g.address} [10de:{g.device_id.removeprefix('0x')}]" for g in pci)
            return _one(
                rule,
                "driver.missing",
                ERROR,
                f"{len(pci)} NVIDIA GPU(s) on the PCI bus ({listed}) but no NVIDIA driver "
                "is "
                "installed; expected a driver from the host's profile",
                found=f"{len(pci)} NVIDIA GPU(s) on the PCI bus ({listed}), no NVIDIA driver",
                expected="the NVIDIA driver of the host's profile",
                fix="gpuhost provision",
            )
        return _one(
            rule,
            "gpu.none",
            WARNING,
            "no NVIDIA GPU found: no NVIDIA display/3D controller on the PCI bus, no "
            "NVIDIA "
            "driver and no nvidia-smi installed; the GPU checks were skipped. Expected on "
            "a GPU "
            "host: a GPU visible to nvidia-smi",
            found="no NVIDIA GPU on the PCI bus, no NVIDIA driver, no nvidia-smi",
            expected="a GPU visible to nvidia-smi (on a GPU host)",
            fix="run the audit on a GPU host, or provision this one (gpuhost provision)",
        )
    if smi.state in SMI_STATE_RULES:
        rule_id, what, fix = SMI_STATE_RULES[smi.state]
        if smi.state == "driver-not-loaded" and not pci:
            # loading the module cannot help: it has no device to drive
            what += ", and no NVIDIA GPU is on the PCI bus"
            fix = NO_GPU_ON_BUS_FIX
        said = f"; nvidia-smi said: {smi.message!r}" if smi.message else ""
        rc = f" (exit {facts.driver.smi_rc})" if facts.driver.smi_rc else ""
        return _one(
            rule,
            rule_id,
            ERROR,
            f"{what}{rc}{said}; found: {_driver_context(facts)}; expected: nvidia-smi "
            "reports "
            f"every GPU",
            found=f"nvidia-smi {smi.state}{rc}{said}; {_driver_context(facts)}",
            expected="nvidia-smi reports every GPU",
            fix=fix,
        )
    if smi.state == "absent":
        return _one(
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
    if not smi.gpus:
        return _one(
            rule,
            "gpu.no-devices",
            ERROR,
            f"nvidia-smi lists no GPU (driver {smi.driver_version}); expected at least "
            "one",
            found=f"nvidia-smi lists no GPU (driver {smi.driver_version})",
            expected="at least one GPU",
            fix="check lspci -d 10de: and the kernel log (dmesg | grep NVRM)",
        )
    if pci and len(smi.gpus) < len(pci):
        return _one(
            rule,
            "gpu.missing",
            ERROR,
            f"nvidia-smi lists {len(smi.gpus)} GPU(s) but {len(pci)} NVIDIA GPU(s) are on "
            "the PCI "
            "bus",
            found=f"{len(smi.gpus)} GPU(s) in nvidia-smi, {len(pci)} on the PCI bus",
            expected=f"all {len(pci)} GPU(s) on the PCI bus visible to nvidia-smi",
            fix="check the kernel log (dmesg | grep NVRM) for GPUs the driver refused",
        )
    return _ok(rule)


def check_reboot_needed(ctx: AuditContext) -> RuleResult:
    rule = "driver.reboot-needed"
    facts = ctx.facts
    module = facts.driver.loaded_module
    userspace = userspace_driver_version(facts)
    if module is None:
        return _skip(rule, "no NVIDIA kernel module loaded")
    if userspace is None:
        return _skip(rule, "installed userspace driver version unknown")
    if module.version == userspace:
        return _ok(rule)
    return _one(
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
        return _skip(rule, "no driver packages installed")
    versions = sorted(set(coupled.values()))
    if len(versions) == 1:
        return _ok(rule)
    by_version = {v: sorted(n for n, pv in coupled.items() if pv == v) for v in versions}
    shown = "; ".join(f"{v}: {', '.join(names[:6])}" for v, names in by_version.items())
    return _one(
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
    if not builds:
        return _skip(rule, "the NVIDIA module is not built by DKMS on this host")
    next_boot = facts.kernel.next_boot
    if next_boot is None:
        return _skip(rule, "next-boot kernel unknown (no grubby, /vmlinuz link or /boot/vmlinuz-*)")
    built = {e.kernel for e in builds if e.kernel and e.status.startswith("installed")}
    if next_boot in built:
        return _ok(rule)
    have = ", ".join(sorted(k for k in built if k)) or "none"
    return _one(
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


def check_fabric_manager(ctx: AuditContext) -> RuleResult:
    rule = "fabricmanager"
    fm = ctx.facts.fabric_manager
    if not fm.installed:
        return _skip(rule, "NVIDIA fabric manager not installed")
    findings = []
    driver = loaded_driver_version(ctx.facts) or userspace_driver_version(ctx.facts)
    if fm.version and driver and fm.version != driver:
        findings.append(
            Finding(
                "fabricmanager.version",
                ERROR,
                f"fabric manager {fm.version} differs from driver {driver}; NVSwitch systems "
                "refuse "
                "to start CUDA jobs until both match",
                found=f"fabric manager {fm.version}, driver {driver}",
                expected=f"fabric manager {driver} (the driver's version)",
                fix=f"install nvidia-fabricmanager at the driver's version {driver}",
            )
        )
    state = fm.service.active if fm.service else None
    if state is not None and state != "active":
        findings.append(
            Finding(
                "fabricmanager.inactive",
                WARNING,
                f"nvidia-fabricmanager.service is {state}; expected active on NVSwitch systems",
                found=f"nvidia-fabricmanager.service {state}",
                expected="nvidia-fabricmanager.service active",
                fix="systemctl enable --now nvidia-fabricmanager",
            )
        )
    return _found(rule, findings)


def _origin_label(origin: str | None) -> str:
    if not origin:
        return "a configured repository"
    if NVIDIA_REPO_HINT in origin:
        return f"the NVIDIA CUDA repository ({origin})"
    return origin


def check_driver_held(ctx: AuditContext) -> RuleResult:
    rule = "driver.held"
    facts = ctx.facts
    coupled = coupled_packages(facts)
    if not coupled:
        return _skip(rule, "no driver packages installed")
    held = set(facts.packages.held)
    pinned = {p.name for p in facts.packages.policy if p.pinned}
    loose = sorted(n for n in coupled if n not in held and n not in pinned)
    if not loose:
        return _found(rule, _layer_findings(ctx, coupled, held))
    pending = [p for p in facts.packages.policy if p.name in loose and p.upgrade_pending]
    if pending:
        shown = "; ".join(
            f"{p.name} {p.installed} -> {p.candidate} from {_origin_label(p.candidate_origin)}"
            for p in pending[:5]
        )
        more = f" (and {len(pending) - 5} more)" if len(pending) > 5 else ""
        return _one(
            rule,
            "driver.upgrade-pending",
            ERROR,
            f"the next package upgrade replaces the driver: {shown}{more}; the running "
            "module "
            "then no longer matches the libraries (CUDA fails until a reboot); expected "
            "the "
            f"driver packages held or pinned",
            found=f"upgrade pending: {shown}{more}",
            expected="the driver packages held or pinned",
            fix=f"apt-mark hold {' '.join(loose)} (or gpuhost provision, which pins the profile's "
            "version)",
        )
    how = "apt-mark hold" if facts.packages.manager == "dpkg" else "dnf versionlock add"
    return _one(
        rule,
        "driver.unheld",
        WARNING,
        f"driver packages are neither held nor pinned: {', '.join(loose[:8])}"
        f"{' ...' if len(loose) > 8 else ''}; an upgrade can replace the driver under "
        "running "
        f"jobs",
        found=f"neither held nor pinned: {', '.join(loose)}",
        expected="the driver packages held or pinned",
        fix=f"{how} {' '.join(loose)} (or gpuhost provision)",
    )


def _layer_findings(ctx: AuditContext, coupled: dict[str, str], held: set[str]) -> list[Finding]:
    """On a host a profile applies to (provision holds *and* pins every coupled package), one
    layer removed while the other still keeps the driver: holds released by hand, the pin
    priority lowered or the preferences file deleted (Debian family)."""
    facts = ctx.facts
    if ctx.expected is None or facts.packages.manager != "dpkg":
        return []
    findings = []
    unheld = sorted(n for n in coupled if n not in held)
    if unheld:
        findings.append(
            Finding(
                "driver.hold-removed",
                WARNING,
                f"driver packages are pinned but no longer held: {', '.join(unheld[:8])}"
                f"{' ...' if len(unheld) > 8 else ''}; gpuhost holds every coupled package "
                "so that removing the pins alone cannot move the driver",
                found=f"not held: {', '.join(unheld)}",
                expected="every coupled driver package held (apt-mark hold)",
                fix=f"gpuhost provision (or apt-mark hold {' '.join(unheld)})",
            )
        )
    if facts.packages.policy_known:
        loose = sorted(
            (p.name, p.installed_priority)
            for p in facts.packages.policy
            if p.name in coupled and p.installed and not p.pinned
        )
        if loose:
            shown = ", ".join(
                f"{n} (priority {prio if prio is not None else '?'})" for n, prio in loose
            )
            few = ", ".join(
                f"{n} (priority {prio if prio is not None else '?'})" for n, prio in loose[:4]
            ) + (f" and {len(loose) - 4} more" if len(loose) > 4 else "")
            findings.append(
                Finding(
                    "driver.pin-missing",
                    WARNING,
                    f"the installed driver packages are not pinned: {few}; gpuhost pins them "
                    f"at priority 1001 in {PREFERENCES_PATH} (deleted or edited since)",
                    found=f"pin priority below 1000: {shown}",
                    expected=f"priority 1001 for the installed version ({PREFERENCES_PATH})",
                    fix="gpuhost provision",
                )
            )
    return findings


def check_packages_unfinished(ctx: AuditContext) -> RuleResult:
    rule = "driver.packages-unfinished"
    facts = ctx.facts
    if facts.packages.manager != "dpkg":
        return _skip(rule, "not a dpkg host")
    unfinished = sorted(
        f"{p.name} ({p.status})"
        for p in facts.packages.packages
        if p.installed and p.status[1:2] != "i"
    )
    if not unfinished:
        return _ok(rule)
    shown = ", ".join(unfinished[:8]) + (" ..." if len(unfinished) > 8 else "")
    return _one(
        rule,
        rule,
        ERROR,
        f"NVIDIA packages are not fully installed: {shown}; an install or upgrade stopped "
        "midway (dpkg status U unpacked, F half-configured, H half-installed, W/t awaiting "
        "triggers), so the driver may not load and apt refuses other installs",
        found=f"dpkg status: {shown}",
        expected="every NVIDIA package fully installed (status ii or hi)",
        fix="gpuhost provision (it runs dpkg --configure -a first), or dpkg --configure -a",
    )


def check_persistence(ctx: AuditContext) -> RuleResult:
    rule = "gpu.persistence"
    gpus = _visible_gpus(ctx.facts)
    if gpus is None:
        return _skip(rule, NO_GPU_REASON)
    expected = ctx.expected.persistence if ctx.expected else None
    if expected is False:
        return _skip(
            rule,
            f"profile {ctx.expected.profile if ctx.expected else ''} does not ask for "
            "persistence mode",
        )
    off = [g for g in gpus if g.persistence_mode is False]
    if not off:
        return _ok(rule)
    daemon = ctx.facts.persistenced
    state = (
        f"nvidia-persistenced is {daemon.active}"
        if daemon and daemon.active
        else ("nvidia-persistenced is not running")
    )
    return _one(
        rule,
        rule,
        ERROR if expected else WARNING,
        f"persistence mode is off on {len(off)} of {len(gpus)} GPU(s) "
        f"({', '.join(_gpu_label(g) for g in off[:4])}); {state}; expected on, so the "
        "driver "
        "stays initialised between jobs",
        found=f"persistence mode off on {', '.join(_gpu_label(g) for g in off)}; {state}",
        expected="persistence mode on for every GPU",
        fix="systemctl enable --now nvidia-persistenced",
    )


def _wanted_clocks(expected: DesiredState, gpu: GpuInfo) -> dict[str, int | None]:
    """Application clocks (MHz) the profile asks for on this GPU."""
    if expected.clock_policy == "explicit":
        return {"graphics": expected.graphics_mhz, "memory": expected.memory_mhz}
    # "max": application clocks at the GPU's maximum
    return {"graphics": gpu.clocks.max_graphics, "memory": gpu.clocks.max_mem}


def check_clocks(ctx: AuditContext) -> RuleResult:
    rule = "gpu.clocks"
    expected = ctx.expected
    if expected is None:
        return _skip(rule, "no profile named for this host")
    if expected.clock_policy not in ("max", "explicit"):
        return _skip(rule, f"profile {expected.profile} leaves the clocks alone")

    def judge(gpu: GpuInfo) -> list[Finding]:
        clocks = gpu.clocks
        if not uses_application_clocks(gpu, "auto"):
            return []  # provision sets locked clocks there (not readable back), as it does
        found = {"graphics": clocks.applications_graphics, "memory": clocks.applications_mem}
        wrong = [
            f"application {kind} clock {found[kind]} MHz (expected {want} MHz)"
            for kind, want in _wanted_clocks(expected, gpu).items()
            if want is not None and found[kind] is not None and found[kind] != want
        ]
        if not wrong:
            return []
        return [
            Finding(
                rule,
                WARNING,
                f"{_gpu_label(gpu)} clocks differ from profile {expected.profile} "
                f"({expected.clock_policy}): {', '.join(wrong)}",
                found=f"{_gpu_label(gpu)}: "
                + ", ".join(f"{kind} {found[kind]} MHz" for kind in found),
                expected=f"profile {expected.profile} ({expected.clock_policy}): "
                + ", ".join(
                    f"{kind} {want} MHz"
                    for kind, want in _wanted_clocks(expected, gpu).items()
                    if want is not None
                ),
                fix="gpuhost provision (re-applies the clock settings)",
                source=f"profile {expected.profile}",
            )
        ]

    return _per_gpu(ctx, rule, judge)


def _ecc_findings(gpu: GpuInfo) -> list[Finding]:
    findings = []
    ecc = gpu.ecc
    label = _gpu_label(gpu)
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
    return _per_gpu(ctx, "gpu.ecc", _ecc_findings)


def _retired_pages_findings(gpu: GpuInfo) -> list[Finding]:
    pages = gpu.retired_pages
    total = (pages.single_bit or 0) + (pages.double_bit or 0)
    if pages.pending:
        return [
            Finding(
                "gpu.retired-pages-pending",
                ERROR,
                f"{_gpu_label(gpu)} has memory pages waiting to be retired ({total} retired); "
                "expected none pending",
                found=f"{_gpu_label(gpu)}: page retirement pending ({total} retired)",
                expected="no page retirement pending",
                fix="drain the host and reset the GPU or reboot",
            )
        ]
    if total:
        return [
            Finding(
                "gpu.retired-pages",
                WARNING,
                f"{_gpu_label(gpu)} has {total} retired memory page(s) (single-bit "
                f"{pages.single_bit or 0}, double-bit {pages.double_bit or 0}); expected 0",
                found=f"{_gpu_label(gpu)}: {total} retired page(s)",
                expected="0 retired pages",
                fix="watch the count; replace the GPU when it keeps growing",
            )
        ]
    return []


def check_retired_pages(ctx: AuditContext) -> RuleResult:
    return _per_gpu(ctx, "gpu.retired-pages", _retired_pages_findings)


def _remapped_rows_findings(gpu: GpuInfo) -> list[Finding]:
    rows = gpu.remapped_rows
    label = _gpu_label(gpu)
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
    return _per_gpu(ctx, "gpu.remapped-rows", _remapped_rows_findings)


def _pcie_findings(gpu: GpuInfo, busy: bool = False) -> list[Finding]:
    findings = []
    link = gpu.pcie
    label = _gpu_label(gpu)
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

    return _per_gpu(ctx, "gpu.pcie-link", judge)


@dataclass(frozen=True)
class SshdRule:
    """An sshd setting the audit flags: does this ``sshd -T`` config have it, and what to say."""

    finding_id: str
    severity: str
    applies: Callable[[SshdConfig], bool]
    message: str
    found: str
    expected: str
    fix: str


# Every one is checked; a host can have several.
SSHD_RULES: tuple[SshdRule, ...] = (
    SshdRule(
        "ssh.password-auth",
        WARNING,
        password_authentication,
        "sshd accepts passwords (PasswordAuthentication yes); expected public keys only",
        "PasswordAuthentication yes",
        "PasswordAuthentication no (public keys only)",
        "gpuhost harden (sets PasswordAuthentication no after checking key access)",
    ),
    SshdRule(
        "ssh.keyboard-interactive",
        WARNING,
        keyboard_interactive_password,
        "sshd accepts keyboard-interactive (PAM password) logins; expected public keys "
        "only",
        "KbdInteractiveAuthentication yes with PAM passwords",
        "KbdInteractiveAuthentication no (public keys only)",
        "gpuhost harden (KbdInteractiveAuthentication no)",
    ),
    SshdRule(
        "ssh.root-login",
        WARNING,
        lambda config: permit_root_login(config) == "yes",
        "sshd lets root log in with a password (PermitRootLogin yes); expected "
        "prohibit-password or no",
        "PermitRootLogin yes",
        "PermitRootLogin prohibit-password or no",
        "gpuhost harden",
    ),
    SshdRule(
        "ssh.empty-passwords",
        ERROR,
        lambda config: sshd_value(config, "permitemptypasswords") == "yes",
        "sshd accepts empty passwords (PermitEmptyPasswords yes); expected no",
        "PermitEmptyPasswords yes",
        "PermitEmptyPasswords no",
        "gpuhost harden",
    ),
)


def check_sshd(ctx: AuditContext) -> RuleResult:
    rule = "ssh"
    sshd = ctx.facts.sshd
    if not sshd.available:
        return _skip(rule, "sshd -T could not run (sshd not installed, or the audit is not root)")
    config = sshd.config
    return _found(
        rule,
        [
            Finding(
                sshd_rule.finding_id,
                sshd_rule.severity,
                sshd_rule.message,
                found=sshd_rule.found,
                expected=sshd_rule.expected,
                fix=sshd_rule.fix,
            )
            for sshd_rule in SSHD_RULES
            if sshd_rule.applies(config)
        ],
    )


def _cudnn_matches(found: str | None, expected: str) -> bool:
    """cuDNN: ``cudnn_version.h`` gives three fields (9.5.1), packages and some profiles four
    (9.5.1.17): either may extend the other."""
    return extends_version(found, expected) or (
        found is not None and extends_version(expected, found)
    )


def _cudnn_packages(packages: Mapping[str, str], expected: DesiredState) -> list[str]:
    """Versions of the installed cuDNN packages that can serve the profile: a package built for
    one CUDA major (``libcudnn9-cuda-12``) serves only a profile whose default CUDA has that
    major; a package naming no CUDA major serves any."""
    major = (expected.cuda_default or "").split(".")[0]
    versions = []
    for name, version in packages.items():
        built_for = re.search(r"-cuda-(\d+)$", name)
        if not major or built_for is None or built_for.group(1) == major:
            versions.append(version)
    return versions


def _have(what: str, version: str | None) -> str:
    """'driver 535.261.03 found' or 'no driver installed' (never 'driver not installed found')."""
    return f"{what} {version} found" if version else f"no {what} installed"


def check_profile(ctx: AuditContext) -> RuleResult:
    rule = "profile"
    if ctx.profile_error:
        return _found(
            rule,
            [
                Finding(
                    "profile.unknown",
                    ERROR,
                    ctx.profile_error,
                    found=f"profile {ctx.profile_name!r} (from {ctx.profile_source}), not defined",
                    expected="a profile defined in gpuhost's profiles or a --profiles file",
                    fix="name a profile from gpuhost's profiles or pass --profiles FILE that "
                    "defines it",
                )
            ],
        )
    expected = ctx.expected
    if expected is None:
        return _skip(
            rule, "no profile named (inventory data gpuhost_profile or /etc/gpuhost/profile)"
        )
    facts = ctx.facts
    findings = []
    source = f"profile {expected.profile} (from {ctx.profile_source})"
    marker = facts.provision_marker
    if marker and ctx.profile_source == "inventory" and marker.profile != expected.profile:
        findings.append(
            Finding(
                "profile.marker",
                WARNING,
                f"the inventory names profile {expected.profile} but the host was provisioned with "
                f"{marker.profile} ({MARKER_PATH})",
                found=f"{MARKER_PATH} names profile {marker.profile}",
                expected=f"profile {expected.profile} (inventory)",
                fix="gpuhost provision with the intended profile",
                source=source,
            )
        )
    elif (
        marker
        and marker.profile == expected.profile
        and marker.driver_version
        and expected.driver_version
        and marker.driver_version != expected.driver_version
    ):
        findings.append(
            Finding(
                "profile.marker",
                WARNING,
                f"the host was provisioned with profile {expected.profile} at driver "
                f"{marker.driver_version} ({MARKER_PATH}), the profile now pins "
                f"{expected.driver_version}",
                found=f"{MARKER_PATH}: profile {expected.profile} at driver "
                f"{marker.driver_version}",
                expected=f"driver {expected.driver_version}",
                fix="gpuhost upgrade to the profile's versions",
                source=source,
            )
        )
    pinned = f"profile {expected.profile} pins"
    installed = userspace_driver_version(facts)
    driver = loaded_driver_version(facts) or installed
    if expected.driver_version and driver != expected.driver_version:
        if installed == expected.driver_version:  # installed right; the old module still loaded
            fix = "reboot the host (drain it first) so the installed driver's module loads"
            what = f"loaded driver {driver} (installed {installed})"
        else:
            fix = "gpuhost upgrade (or gpuhost provision on a fresh host)"
            what = _have("driver", driver)
        findings.append(
            Finding(
                "profile.driver",
                ERROR,
                f"{what}, {pinned} {expected.driver_version}",
                found=f"driver {driver or 'not installed'}",
                expected=f"driver {expected.driver_version}",
                fix=fix,
                source=source,
            )
        )
    module = facts.driver.loaded_module
    if compares_kernel_module(expected) and module and module.flavor != expected.kernel_module:
        findings.append(
            Finding(
                "profile.kernel-module",
                ERROR,
                f"the {module.flavor} kernel module is loaded, {pinned} the "
                f"{expected.kernel_module} "
                "one",
                found=f"{module.flavor} kernel module",
                expected=f"{expected.kernel_module} kernel module",
                fix="gpuhost provision (installs the profile's module flavour) and reboot",
                source=source,
            )
        )
    installed_cuda = [t.version for t in facts.cuda.toolkits if t.version]
    if facts.cuda.nvcc_version and not installed_cuda:
        installed_cuda = [facts.cuda.nvcc_version]
    for version in expected.cuda_versions:
        if not any(extends_version(v, version) for v in installed_cuda):
            findings.append(
                Finding(
                    "profile.cuda",
                    ERROR,
                    f"CUDA toolkit {version} is not installed (found: "
                    f"{', '.join(installed_cuda) or 'none'}), {pinned} it",
                    found=f"CUDA {', '.join(installed_cuda) or 'none'}",
                    expected=f"CUDA {version}",
                    fix="gpuhost provision",
                    source=source,
                )
            )
    default = facts.cuda.default_version
    if expected.cuda_default and default and not extends_version(default, expected.cuda_default):
        findings.append(
            Finding(
                "profile.cuda-default",
                WARNING,
                f"/usr/local/cuda points to CUDA {default}, {pinned} {expected.cuda_default} as "
                "the "
                "default",
                found=f"/usr/local/cuda -> CUDA {default}",
                expected=f"/usr/local/cuda -> CUDA {expected.cuda_default}",
                fix="gpuhost provision (resets the link)",
                source=source,
            )
        )
    # a version read from the header or library, and the packages that can serve the profile
    # (a version known only from a package is one of those packages)
    from_files = [] if (facts.cudnn.source or "").startswith("package") else [facts.cudnn.version]
    cudnn_found = [*from_files, *_cudnn_packages(facts.cudnn.packages, expected)]
    if expected.cudnn and not any(_cudnn_matches(v, expected.cudnn) for v in cudnn_found):
        findings.append(
            Finding(
                "profile.cudnn",
                ERROR,
                f"{_have('cuDNN', facts.cudnn.version)}, {pinned} {expected.cudnn}",
                found=f"cuDNN {facts.cudnn.version or 'not installed'}",
                expected=f"cuDNN {expected.cudnn}",
                fix="gpuhost provision",
                source=source,
            )
        )
    toolkit = facts.container.toolkit_version
    if expected.container_toolkit and not extends_version(toolkit, expected.container_toolkit):
        findings.append(
            Finding(
                "profile.container-toolkit",
                ERROR,
                f"{_have('NVIDIA container toolkit', toolkit)}, {pinned} "
                f"{expected.container_toolkit}",
                found=f"NVIDIA container toolkit {toolkit or 'not installed'}",
                expected=f"NVIDIA container toolkit {expected.container_toolkit}",
                fix="gpuhost provision",
                source=source,
            )
        )
    return _found(rule, findings)


def check_cuda_link(ctx: AuditContext) -> RuleResult:
    rule = "cuda.default-link"
    cuda = ctx.facts.cuda
    if not cuda.toolkits:
        return _skip(rule, "no CUDA toolkit under /usr/local")
    paths = {t.path for t in cuda.toolkits}
    if cuda.default_path is None:
        return _one(
            rule,
            rule,
            INFO,
            f"CUDA toolkits {', '.join(sorted(paths))} are installed but /usr/local/cuda "
            "does not "
            "exist; tools that look there find none",
            found=f"CUDA toolkits {', '.join(sorted(paths))}, no /usr/local/cuda",
            expected="/usr/local/cuda pointing at an installed toolkit",
            fix="gpuhost provision (sets the link)",
        )
    if cuda.default_path not in paths:
        return _one(
            rule,
            rule,
            WARNING,
            f"/usr/local/cuda points to {cuda.default_path}, which is not an installed "
            "toolkit "
            f"({', '.join(sorted(paths))})",
            found=f"/usr/local/cuda -> {cuda.default_path}",
            expected=f"/usr/local/cuda -> one of {', '.join(sorted(paths))}",
            fix="point it at an installed toolkit (gpuhost provision)",
        )
    return _ok(rule)


def check_container_runtime(ctx: AuditContext) -> RuleResult:
    rule = "container.nvidia-runtime"
    container = ctx.facts.container
    if container.toolkit_version is None:
        if container.docker_default_runtime == "nvidia":
            return _one(
                rule,
                rule,
                ERROR,
                "Docker's default runtime is nvidia but the NVIDIA container toolkit is "
                "not "
                "installed; every container start fails",
                found="Docker default runtime nvidia, no NVIDIA container toolkit",
                expected="the NVIDIA container toolkit installed where Docker's default "
                "runtime is nvidia",
                fix="install nvidia-container-toolkit or remove default-runtime from "
                "/etc/docker/daemon.json",
            )
        return _skip(rule, "NVIDIA container toolkit not installed")
    findings = []
    docker = "docker" in container.runtimes or "dockerd" in container.runtimes
    if docker and not container.docker_nvidia_runtime:
        findings.append(
            Finding(
                rule,
                WARNING,
                f"NVIDIA container toolkit {container.toolkit_version} is installed but Docker "
                "has no nvidia runtime in /etc/docker/daemon.json; expected it configured",
                found="Docker without an nvidia runtime in /etc/docker/daemon.json",
                expected="the nvidia runtime configured in Docker",
                fix="nvidia-ctk runtime configure --runtime=docker && systemctl restart docker",
            )
        )
    if "containerd" in container.runtimes and container.containerd_nvidia_runtime is False:
        findings.append(
            Finding(
                rule,
                WARNING,
                f"NVIDIA container toolkit {container.toolkit_version} is installed but "
                "containerd's "
                "config has no nvidia runtime",
                found="containerd without an nvidia runtime",
                expected="the nvidia runtime configured in containerd",
                fix="nvidia-ctk runtime configure --runtime=containerd",
            )
        )
    return _found(rule, findings)


def _security(rule: str, version: str | None, what: str, **kw: str | None) -> RuleResult:
    """NVIDIA's security bulletins (data/advisories.yaml) judged on one installed version."""
    from gpuhost.matrix.advisories import load_advisories, security_findings

    if not version:
        return _skip(rule, f"no {what} installed")
    try:
        return _found(rule, security_findings(load_advisories(), **kw))
    except VersionError as exc:
        return _skip(rule, f"{what} version {version!r} cannot be judged ({exc})")


def check_security_driver(ctx: AuditContext) -> RuleResult:
    driver = loaded_driver_version(ctx.facts) or userspace_driver_version(ctx.facts)
    return _security("security.driver", driver, "NVIDIA driver", driver=driver)


def check_security_container_toolkit(ctx: AuditContext) -> RuleResult:
    toolkit = ctx.facts.container.toolkit_version
    return _security(
        "security.container-toolkit",
        toolkit,
        "NVIDIA container toolkit",
        container_toolkit=toolkit,
    )


def check_frameworks(ctx: AuditContext) -> RuleResult:
    rule = "frameworks.probe"
    frameworks = [f for f in ctx.facts.frameworks if f.found]
    # an interpreter the operator named (--python, gpuhost_pythons) that is not there: its
    # frameworks were not judged (the default python3 may be absent on a host without Python)
    missing = [
        Finding(
            rule,
            WARNING,
            f"{fw.python}: no such interpreter on the host; its torch/TensorFlow builds were not "
            "checked",
            found=f"{fw.python}: not found",
            expected=f"{fw.python} runnable on the host",
            fix="fix the path in --python or gpuhost_pythons (the interpreter of the venv or "
            "conda env the jobs use)",
        )
        for fw in ctx.facts.frameworks
        if not fw.found and fw.error is None and fw.python not in DEFAULT_PYTHONS
    ]
    if not frameworks:
        if missing:
            return _found(rule, missing)
        return _skip(rule, "no Python interpreter named for frameworks was found on the host")
    findings = missing
    for fw in frameworks:
        for what, error in (
            ("probe", fw.error),
            ("torch", fw.torch_error),
            ("TensorFlow", fw.tensorflow_error),
        ):
            if error:
                findings.append(
                    Finding(
                        rule,
                        WARNING,
                        f"{fw.python}: reading {what} failed ({error}); its CUDA build was not "
                        "checked",
                        found=f"{fw.python}: reading {what} failed ({error})",
                        expected=f"{what} readable by {fw.python}",
                        fix="run the interpreter by hand and import it",
                    )
                )
        if fw.torch_cuda_initialized:
            findings.append(
                Finding(
                    rule,
                    WARNING,
                    f"{fw.python}: importing torch initialised CUDA (a sitecustomize or plugin "
                    "does "
                    "GPU work at import); expected no GPU work during an audit",
                    found=f"{fw.python}: importing torch initialised CUDA",
                    expected="no GPU work when torch is imported",
                    fix="find the sitecustomize or plugin that touches the GPU at import",
                )
            )
    return _found(rule, findings)


def check_probe(ctx: AuditContext) -> RuleResult:
    rule = "host.probe"
    problems = ctx.facts.problems
    if not problems:
        return _ok(rule)
    return _one(
        rule,
        "host.probe-incomplete",
        WARNING,
        f"parts of the host could not be read: {'; '.join(problems[:5])}"
        f"{' ...' if len(problems) > 5 else ''}; the rules that need them were skipped",
        found="; ".join(problems),
        expected="every part of the probe readable",
        fix="run gpuhost parse on the failing part, or the probe by hand on the host",
    )


RuleCheck = Callable[[AuditContext], RuleResult]

RULES: dict[str, RuleCheck] = {
    "host.probe": check_probe,
    "driver.state": check_driver_state,
    "driver.reboot-needed": check_reboot_needed,
    "driver.packages-mixed": check_packages_mixed,
    "driver.held": check_driver_held,
    "driver.packages-unfinished": check_packages_unfinished,
    "kernel.next-boot-module": check_next_boot_kernel,
    "fabricmanager": check_fabric_manager,
    "profile": check_profile,
    "gpu.persistence": check_persistence,
    "gpu.clocks": check_clocks,
    "gpu.ecc": check_ecc,
    "gpu.retired-pages": check_retired_pages,
    "gpu.remapped-rows": check_remapped_rows,
    "gpu.pcie-link": check_pcie,
    "cuda.default-link": check_cuda_link,
    "container.nvidia-runtime": check_container_runtime,
    "frameworks.probe": check_frameworks,
    "security.driver": check_security_driver,
    "security.container-toolkit": check_security_container_toolkit,
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
    "fabricmanager.version",
    "fabricmanager.inactive",
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
    "cuda.default-link",
    "container.nvidia-runtime",
    "frameworks.probe",
    "security.driver",
    "security.container-toolkit",
    "ssh.password-auth",
    "ssh.keyboard-interactive",
    "ssh.root-login",
    "ssh.empty-passwords",
)


def run_rules(ctx: AuditContext) -> list[RuleResult]:
    """Every rule's result for one host, matrix results included, in a stable order.

    A finding that names no ``source`` gets its rule's documentation (``rule_doc``)."""
    results = [check(ctx) for check in RULES.values()] + list(ctx.matrix_results)
    return [
        replace(
            result,
            findings=tuple(
                f if f.source else replace(f, source=rule_doc(f.rule)) for f in result.findings
            ),
        )
        for result in results
    ]
