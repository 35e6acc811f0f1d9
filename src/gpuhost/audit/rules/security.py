"""NVIDIA's security bulletins on the installed driver, container toolkit and CUDA toolkits
(``security.driver``, ``security.container-toolkit``, ``security.cuda-toolkit``).

The GPU Operator's bulletins (``security.gpu-operator``) are judged by ``matrix check
--gpu-operator`` only: the Operator's release is a cluster object (its Helm release and
Deployment image tag); nothing on a node reliably shows it (docs/knowledge.md)."""

from __future__ import annotations

from gpuhost.audit.rules.context import AuditContext, result_with, skip_result
from gpuhost.audit.rules.installed import (
    installed_cuda_versions,
    loaded_driver_version,
    userspace_driver_version,
)
from gpuhost.errors import VersionError
from gpuhost.findings import Finding, RuleResult


def _security(rule: str, version: str | None, what: str, **kw: str | None) -> RuleResult:
    """NVIDIA's security bulletins (data/advisories.yaml) judged on one installed version."""
    from gpuhost.matrix.advisories import load_advisories, security_findings

    if not version:
        return skip_result(rule, f"no {what} installed")
    try:
        return result_with(rule, security_findings(load_advisories(), **kw))
    except VersionError as exc:
        return skip_result(rule, f"{what} version {version!r} cannot be judged ({exc})")


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


def check_security_cuda_toolkit(ctx: AuditContext) -> RuleResult:
    """Each installed CUDA toolkit (the default one, every /usr/local/cuda-X.Y, else nvcc's)
    against NVIDIA's CUDA Toolkit bulletins."""
    from gpuhost.matrix.advisories import load_advisories, security_findings

    rule = "security.cuda-toolkit"
    versions = installed_cuda_versions(ctx.facts)
    if not versions:
        return skip_result(rule, "no CUDA toolkit installed")
    found: list[Finding] = []
    for version in versions:
        try:
            found += security_findings(load_advisories(), cuda=version)
        except VersionError as exc:
            return skip_result(rule, f"CUDA toolkit version {version!r} cannot be judged ({exc})")
    return result_with(rule, found)
