"""Parts of the host the probe could not read (``host.probe``)."""

from __future__ import annotations

from gpuhost.audit.rules.context import AuditContext, ok_result, one_finding
from gpuhost.findings import WARNING, RuleResult


def check_probe(ctx: AuditContext) -> RuleResult:
    rule = "host.probe"
    problems = ctx.facts.problems
    if not problems:
        return ok_result(rule)
    return one_finding(
        rule,
        "host.probe-incomplete",
        WARNING,
        f"parts of the host could not be read: {'; '.join(problems[:5])}"
        f"{' ...' if len(problems) > 5 else ''}; the rules that need them were skipped",
        found="; ".join(problems),
        expected="every part of the probe readable",
        fix="run gpuhost parse on the failing part, or the probe by hand on the host",
    )
