"""The host against its pinned profile: marker, driver, module flavour, CUDA, cuDNN and the
container toolkit (``profile``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from gpuhost.audit.expected import compares_kernel_module
from gpuhost.audit.rules.context import AuditContext, result_with, skip_result
from gpuhost.audit.rules.installed import loaded_driver_version, userspace_driver_version
from gpuhost.desired import DesiredState
from gpuhost.findings import ERROR, WARNING, Finding, RuleResult
from gpuhost.parsers.profile_marker import MARKER_PATH
from gpuhost.versions import extends_version


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


def _pins(expected: DesiredState) -> str:
    return f"profile {expected.profile} pins"


def _marker_findings(ctx: AuditContext, expected: DesiredState, source: str) -> list[Finding]:
    """The provision marker names another profile, or the profile's driver moved since."""
    marker = ctx.facts.provision_marker
    if marker and ctx.profile_source == "inventory" and marker.profile != expected.profile:
        return [
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
        ]
    if (
        marker
        and marker.profile == expected.profile
        and marker.driver_version
        and expected.driver_version
        and marker.driver_version != expected.driver_version
    ):
        return [
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
        ]
    return []


def _driver_findings(ctx: AuditContext, expected: DesiredState, source: str) -> list[Finding]:
    """The driver version (loaded, else installed) and the loaded module's flavour."""
    facts = ctx.facts
    findings = []
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
                f"{what}, {_pins(expected)} {expected.driver_version}",
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
                f"the {module.flavor} kernel module is loaded, {_pins(expected)} the "
                f"{expected.kernel_module} one",
                found=f"{module.flavor} kernel module",
                expected=f"{expected.kernel_module} kernel module",
                fix="gpuhost provision (installs the profile's module flavour) and reboot",
                source=source,
            )
        )
    return findings


def _cuda_findings(ctx: AuditContext, expected: DesiredState, source: str) -> list[Finding]:
    """Every pinned CUDA toolkit installed, /usr/local/cuda at the profile's default."""
    cuda = ctx.facts.cuda
    findings = []
    installed_cuda = [t.version for t in cuda.toolkits if t.version]
    if cuda.nvcc_version and not installed_cuda:
        installed_cuda = [cuda.nvcc_version]
    for version in expected.cuda_versions:
        if not any(extends_version(v, version) for v in installed_cuda):
            findings.append(
                Finding(
                    "profile.cuda",
                    ERROR,
                    f"CUDA toolkit {version} is not installed (found: "
                    f"{', '.join(installed_cuda) or 'none'}), {_pins(expected)} it",
                    found=f"CUDA {', '.join(installed_cuda) or 'none'}",
                    expected=f"CUDA {version}",
                    fix="gpuhost provision",
                    source=source,
                )
            )
    default = cuda.default_version
    if expected.cuda_default and default and not extends_version(default, expected.cuda_default):
        findings.append(
            Finding(
                "profile.cuda-default",
                WARNING,
                f"/usr/local/cuda points to CUDA {default}, {_pins(expected)} "
                f"{expected.cuda_default} as the default",
                found=f"/usr/local/cuda -> CUDA {default}",
                expected=f"/usr/local/cuda -> CUDA {expected.cuda_default}",
                fix="gpuhost provision (resets the link)",
                source=source,
            )
        )
    return findings


def _cudnn_findings(ctx: AuditContext, expected: DesiredState, source: str) -> list[Finding]:
    cudnn = ctx.facts.cudnn
    # a version read from the header or library, and the packages that can serve the profile
    # (a version known only from a package is one of those packages)
    from_files = [] if (cudnn.source or "").startswith("package") else [cudnn.version]
    cudnn_found = [*from_files, *_cudnn_packages(cudnn.packages, expected)]
    if not expected.cudnn or any(_cudnn_matches(v, expected.cudnn) for v in cudnn_found):
        return []
    return [
        Finding(
            "profile.cudnn",
            ERROR,
            f"{_have('cuDNN', cudnn.version)}, {_pins(expected)} {expected.cudnn}",
            found=f"cuDNN {cudnn.version or 'not installed'}",
            expected=f"cuDNN {expected.cudnn}",
            fix="gpuhost provision",
            source=source,
        )
    ]


def _container_toolkit_findings(
    ctx: AuditContext, expected: DesiredState, source: str
) -> list[Finding]:
    toolkit = ctx.facts.container.toolkit_version
    if not expected.container_toolkit or extends_version(toolkit, expected.container_toolkit):
        return []
    return [
        Finding(
            "profile.container-toolkit",
            ERROR,
            f"{_have('NVIDIA container toolkit', toolkit)}, {_pins(expected)} "
            f"{expected.container_toolkit}",
            found=f"NVIDIA container toolkit {toolkit or 'not installed'}",
            expected=f"NVIDIA container toolkit {expected.container_toolkit}",
            fix="gpuhost provision",
            source=source,
        )
    ]


# The parts of the profile judged, in the order their findings are reported.
_PROFILE_JUDGES: tuple[Callable[[AuditContext, DesiredState, str], list[Finding]], ...] = (
    _marker_findings,
    _driver_findings,
    _cuda_findings,
    _cudnn_findings,
    _container_toolkit_findings,
)


def check_profile(ctx: AuditContext) -> RuleResult:
    rule = "profile"
    if ctx.profile_error:
        return result_with(
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
        return skip_result(
            rule, "no profile named (inventory data gpuhost_profile or /etc/gpuhost/profile)"
        )
    source = f"profile {expected.profile} (from {ctx.profile_source})"
    return result_with(
        rule, [finding for judge in _PROFILE_JUDGES for finding in judge(ctx, expected, source)]
    )
