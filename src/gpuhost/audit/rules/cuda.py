"""The /usr/local/cuda link (``cuda.default-link``)."""

from __future__ import annotations

from gpuhost.audit.rules.context import AuditContext, ok_result, one_finding, skip_result
from gpuhost.findings import INFO, WARNING, RuleResult


def check_cuda_link(ctx: AuditContext) -> RuleResult:
    rule = "cuda.default-link"
    cuda = ctx.facts.cuda
    if not cuda.toolkits:
        return skip_result(rule, "no CUDA toolkit under /usr/local")
    paths = {t.path for t in cuda.toolkits}
    if cuda.default_path is None:
        return one_finding(
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
        return one_finding(
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
    return ok_result(rule)
