"""Every compatibility-matrix rule, judged on what the host really runs (via ``check_stack``).

The matrix's findings keep their rule ids under the ``matrix.`` prefix
(``matrix.cuda.driver-floor``) and their source URL at the end of the message. Each installed
CUDA toolkit is judged against the running driver; findings repeated across toolkits are kept once.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpuhost.audit.rules.installed import (
    installed_cuda_versions,
    loaded_driver_version,
    userspace_driver_version,
)
from gpuhost.errors import GpuhostError
from gpuhost.facts.host_facts import HostFacts
from gpuhost.findings import WARNING, Finding, RuleResult, rule_doc, split_fix

RULE = "matrix"


def _gpus(facts: HostFacts, matrix: Any) -> list[str]:
    """Each GPU by nvidia-smi's name; with the PCI ID it reported where the name alone is not
    known (a name the table view cut short, "Graphics Device"): the ID then decides."""
    from gpuhost.gpus.catalog import labelled
    from gpuhost.matrix.gpus import gpu_info

    return [
        g.name if gpu_info(matrix, g.name) is not None else labelled(g.name, g.pci_device_id)
        for g in facts.driver.smi.gpus
        if g.name
    ]


def stack_inputs(facts: HostFacts, matrix: Any) -> dict[str, Any]:
    """The values check_stack judges, read from the host (None where the host has none)."""
    frameworks = []
    for fw in facts.frameworks:
        if fw.torch_version:
            frameworks.append(f"torch=={fw.torch_version}")
        if fw.tensorflow_version:
            frameworks.append(f"tensorflow=={fw.tensorflow_version}")
    return {
        "gpus": _gpus(facts, matrix),
        "driver": loaded_driver_version(facts) or userspace_driver_version(facts),
        "cudnn": facts.cudnn.version,
        "frameworks": sorted(set(frameworks)),
        "container_toolkit": facts.container.toolkit_version,
    }


def matrix_results(facts: HostFacts, matrix: Any) -> tuple[RuleResult, ...]:
    """One RuleResult ("matrix") with every matrix finding for this host."""
    from gpuhost.matrix import check_stack
    from gpuhost.matrix.check import judged_set

    inputs = stack_inputs(facts, matrix)
    if not any(inputs.values()) and not facts.cuda.toolkits and not facts.cuda.nvcc_version:
        return (RuleResult(RULE, skipped="no GPU, driver, CUDA, cuDNN or framework to judge"),)
    findings: list[Finding] = []
    seen: set[tuple[str, str]] = set()
    cudas: list[str | None] = list(installed_cuda_versions(facts)) or [None]
    for index, cuda in enumerate(cudas):
        # The first call judges the whole stack; the others only add each extra toolkit.
        args = dict(inputs) if index == 0 else {"gpus": inputs["gpus"], "driver": inputs["driver"]}
        try:
            raw = check_stack(matrix, cuda=cuda, **args)
        except GpuhostError as exc:
            findings.append(
                Finding(
                    "matrix.input",
                    WARNING,
                    f"a version found on the host could not be judged by the matrix: {exc}",
                    source=rule_doc("matrix.input"),
                    found=f"{judged_set(cuda=cuda, **args)} ({exc})",
                    expected="versions the compatibility matrix can read",
                    fix="check the version the host reports (gpuhost parse on its output)",
                )
            )
            continue
        for item in raw:
            key = (item.rule, item.message)
            if key in seen:
                continue
            seen.add(key)
            source = f" (source: {item.source})" if item.source else ""
            findings.append(
                replace(
                    item,
                    rule=f"matrix.{item.rule}",
                    message=f"{split_fix(item.message)[0]}{source}",  # the fix follows
                    source=item.source or rule_doc(f"matrix.{item.rule}"),
                )
            )
    return (RuleResult(RULE, tuple(findings)),)
