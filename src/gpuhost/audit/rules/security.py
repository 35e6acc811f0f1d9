"""NVIDIA's security bulletins on the installed driver and container toolkit
(``security.driver``, ``security.container-toolkit``)."""

from __future__ import annotations

from gpuhost.audit.rules.context import AuditContext, result_with, skip_result
from gpuhost.audit.rules.installed import loaded_driver_version, userspace_driver_version
from gpuhost.errors import VersionError
from gpuhost.findings import RuleResult


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
