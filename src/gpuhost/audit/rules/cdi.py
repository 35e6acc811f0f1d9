"""CDI specs kept true (``container.cdi``): a Container Device Interface spec generated for
another driver names library files that are gone, and GPU containers started through CDI
(podman, containerd/Kubernetes in CDI mode) fail until it is regenerated
(``container.cdi-stale``, ``container.cdi-unreadable``)."""

from __future__ import annotations

from gpuhost.audit.rules.context import AuditContext, ok_result, result_with, skip_result
from gpuhost.audit.rules.installed import loaded_driver_version, userspace_driver_version
from gpuhost.findings import ERROR, WARNING, Finding, RuleResult
from gpuhost.parsers.cdi import stale_specs

RULE = "container.cdi"


def regenerate_command(path: str) -> str:
    """The toolkit's own generator, writing the spec where it is."""
    return f"nvidia-ctk cdi generate --output={path}"


def check_cdi(ctx: AuditContext) -> RuleResult:
    specs = ctx.facts.cdi
    if not specs:
        return skip_result(RULE, "no CDI spec in /etc/cdi or /var/run/cdi")
    driver = userspace_driver_version(ctx.facts) or loaded_driver_version(ctx.facts)
    findings = [
        Finding(
            "container.cdi-unreadable",
            WARNING,
            f"CDI spec {s.path} cannot be read ({s.error}); container engines skip or refuse it",
            found=s.error,
            expected="a CDI spec (YAML or JSON with cdiVersion and kind)",
            fix=f"regenerate or remove it ({regenerate_command(s.path)})",
        )
        for s in specs
        if s.error is not None
    ]
    if driver is None:
        if findings:
            return result_with(RULE, findings)
        return skip_result(RULE, "no NVIDIA driver installed to compare the CDI specs with")
    for spec in stale_specs(specs, driver):
        named = ", ".join(spec.driver_versions)
        findings.append(
            Finding(
                "container.cdi-stale",
                ERROR,
                f"CDI spec {spec.path} names NVIDIA driver {named} but driver {driver} is "
                "installed: GPU containers started through CDI fail (its library files are "
                "gone)",
                found=f"{spec.path} generated for driver {named}",
                expected=f"a spec for driver {driver}",
                fix=regenerate_command(spec.path),
            )
        )
    return result_with(RULE, findings) if findings else ok_result(RULE)
