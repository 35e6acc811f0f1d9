"""The torch and TensorFlow builds the named interpreters carry (``frameworks.probe``)."""

from __future__ import annotations

from gpuhost.audit.rules.context import AuditContext, result_with, skip_result
from gpuhost.findings import WARNING, Finding, RuleResult
from gpuhost.probe.script import DEFAULT_PYTHONS


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
            return result_with(rule, missing)
        return skip_result(rule, "no Python interpreter named for frameworks was found on the host")
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
    return result_with(rule, findings)
