"""What ``gpuhost matrix`` prints: findings, a resolution, the matrix summary, one GPU, one
framework release (lines of text, or one JSON document as one entry)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from gpuhost.errors import ConfigError
from gpuhost.findings import Finding, fails, verdict
from gpuhost.gpus.catalog import pci_id_of
from gpuhost.matrix.advisories import Exposure
from gpuhost.matrix.gpus import gpu_info, unknown_gpu_hint
from gpuhost.matrix.lookup import arch_cuda_range, cc_covered, cudnn_packages, package_runs_on
from gpuhost.matrix.model import Matrix
from gpuhost.matrix.resolve import Resolution

_MARK = {"info": "ok  ", "warning": "WARN", "error": "FAIL"}


def answer_code(findings: list[Finding], security: Exposure, fail_on: str) -> int:
    """Exit 1 on an incompatible set, or with ``fail_on`` "security" on an exposure rated an
    error; else 0."""
    return 1 if fails(verdict(findings), security.verdict, fail_on) else 0


def answer_lines(
    findings: list[Finding],
    security: Exposure,
    as_json: bool,
    fail_on: str,
    data: dict[str, Any],
) -> list[str]:
    """The two answers, never mixed: the compatibility verdict of ``findings`` and the security
    exposure (``fail_on``: whether the exit status counts it). ``data``: the knowledge data's
    date and origin (``--json``)."""
    if as_json:
        answer: dict[str, Any] = {
            "verdict": verdict(findings),
            "findings": [f.to_json() for f in findings],
            "security": security.to_json(),
            "data": data,
        }
        return [json.dumps(answer, indent=2)]
    lines = []
    for f in findings:
        lines.append(f"{_MARK[f.severity]} {f.rule}: {f.message}")
        lines.append(f"     source: {f.source}")
    lines.append(f"verdict: {verdict(findings)}")
    for f in security.findings:
        lines.append(f"{_MARK[f.severity]} {f.rule}: {f.message}")
        lines.append(f"     source: {f.source}")
    if security.checked:
        counted = "" if fail_on == "security" else " (in the exit status with --fail-on security)"
        lines.append(f"security: {security.verdict}{counted}")
    return lines


def no_set_lines(
    reasons: list[str], as_json: bool, data: dict[str, Any] | None = None
) -> list[str]:
    """``matrix resolve`` when no compatible set exists. ``data``: the knowledge data's date and
    origin (``--json``), as every answer carries it."""
    if as_json:
        empty: dict[str, Any] = {"driver": None, "cuda": None, "cudnn": None, "frameworks": {}}
        empty["explain"] = reasons
        if data is not None:
            empty["data"] = data
        return [json.dumps(empty, indent=2)]
    return ["no compatible set:", *(f"  - {reason}" for reason in reasons)]


def resolution_lines(
    res: Resolution, as_json: bool, data: dict[str, Any] | None = None
) -> list[str]:
    """``matrix resolve``'s proposal; ``data`` as in :func:`no_set_lines`."""
    if as_json:
        doc = res.to_json()
        if data is not None:
            doc["data"] = data
        return [json.dumps(doc, indent=2)]
    lines = [
        f"driver:  R{res.driver_branch} (>= {res.driver_min_version})",
        f"cuda:    {res.cuda}",
        f"cudnn:   {res.cudnn or 'none'}",
    ]
    lines.extend(f"{name + ':':8} {pin}" for name, pin in res.frameworks.items())
    return [*lines, "why:", *(f"  - {line}" for line in res.explain)]


def summary_lines(m: Matrix) -> list[str]:
    """The CUDA releases with their driver floors, and how much else the matrix lists."""
    lines = [f"{'CUDA':6} {'GA driver':>12} {'newest update':>14} {'minor-compat floor':>19}"]
    for minor in reversed(m.cuda):
        floor = m.minor_compat[minor.major].min_driver
        lines.append(
            f"{minor.version:6} {minor.ga.min_driver:>12} {minor.newest.min_driver:>14} {floor:>19}"
        )
    lines.append(
        f"\n{len(m.gpus)} GPU models, {len(m.cudnn)} cuDNN releases, {len(m.pytorch)} "
        f"PyTorch releases, {len(m.tensorflow)} TensorFlow releases; "
        "gpuhost matrix render writes everything to docs/matrix.md"
    )
    return lines


def gpu_lines(m: Matrix, gpu: str) -> list[str]:
    """What the matrix knows about one GPU; ConfigError when it lists no such GPU."""
    info = gpu_info(m, gpu)
    if info is None and pci_id_of(gpu):
        raise ConfigError(f'--gpu "{gpu}": {unknown_gpu_hint(m, gpu)}')
    if info is None:
        raise ConfigError(
            f'--gpu "{gpu}": not a GPU the compatibility matrix lists; {unknown_gpu_hint(m, gpu)}'
        )
    arch = m.architecture_of(info.compute_capability)
    assert arch is not None
    cc = info.compute_capability
    last = f"R{info.last_driver_branch}" if info.last_driver_branch else "current"
    fm = {None: "depends on the system (NVSwitch)", False: "not used (PCIe)"}.get(
        info.fabric_manager, "yes"
    )
    cudnn = [
        r.version
        for r in m.cudnn
        if any(package_runs_on(p, cc, arch) for p in cudnn_packages(r, None))
    ]
    wheels = [
        f"{t.version} {v.tag}"
        for t in m.pytorch
        for v in t.variants
        if v.archs is not None and cc_covered(v.archs, cc)
    ]
    return [
        f"{info.name}: {info.model}",
        f"  PCI ID              {info.pci_id or 'not known from the name (give --gpu 10de:XXXX)'}",
        f"  compute capability  {cc} ({info.architecture}; source {info.source}, "
        f"{info.confidence})",
        f"  CUDA                {arch_cuda_range(arch, cc)}",
        f"  last driver branch  {last}",
        f"  clocks              {info.clock_policy}"
        f"{' (GPU and memory)' if info.locked_memory_clocks else ''}",
        f"  kernel modules      {', '.join(info.kernel_modules)}",
        f"  fabric manager      {fm}",
        f"  cuDNN               {', '.join(cudnn) or 'none listed'}",
        f"  torch wheels        {', '.join(wheels) or 'none confirmed'}",
    ]


def framework_lines(answer: dict[str, Any], as_json: bool) -> list[str]:
    """One framework release (``matrix.frameworks.framework_answer``)."""
    if as_json:
        return [json.dumps(answer, indent=2)]
    head = f"{answer['framework']} {answer['version']}"
    if "released" in answer:
        head += f" (released {answer['released']}, Python {', '.join(answer['python'])})"
    lines = [head]
    default = answer["default_variant"]
    if default is None:
        lines.append(f"  default build   unknown: {answer.get('default_variant_unknown')}")
    else:
        libs = ", ".join(
            f"{k} {default[k]}" for k in ("cuda", "cudnn", "cublas", "nccl") if default.get(k)
        )
        floor = "" if default.get("exact", True) else " (or newer)"
        lines.append(f"  default build   {default['variant']}: {libs}{floor}")
        lines.append(f"                  {default['install']}")
    for var in answer["variants"]:
        archs = ", ".join(var["archs"]) if var["archs"] else "archs unknown"
        cudnn = f", cuDNN {var['cudnn']}" if var["cudnn"] else ""
        lines.append(f"  {var['variant']:15} CUDA {var['cuda']}{cudnn}, {var['channel']}, {archs}")
        lines.append(f"                  {var['install']}")
    if "tested" in answer:
        t = answer["tested"]
        lines.append(f"  tested with     CUDA {t['cuda']}, cuDNN {t['cudnn']} ({t['version']})")
    if "archs" in answer:
        built = ", ".join(answer["archs"]) if answer["archs"] else "unknown (not in the matrix)"
        lines.append(f"  built for       {built}")
    lines.extend(f"  source          {url}" for url in answer["sources"])
    return lines


def validated_lines(m: Matrix, shipped: bool) -> list[str]:
    """``matrix validate``: what the valid matrix holds; for the ``shipped`` one also the GPU
    peaks the smoke test judges against (loaded, so validated, here)."""
    from gpuhost.matrix.peaks import default_peaks_path, load_peaks

    lines = [
        f"{m.path}: valid ({len(m.cuda)} CUDA releases, {len(m.architectures)} "
        f"architectures, {len(m.gpus)} GPU models, {len(m.cudnn)} cuDNN, "
        f"{len(m.pytorch)} PyTorch, {len(m.tensorflow)} TensorFlow, "
        f"{len(m.driver_branches)} driver branches)"
    ]
    if shipped:
        peaks = load_peaks()
        lines.append(
            f"{default_peaks_path()}: valid ({len(peaks.gpus)} GPU models with published peaks, "
            f"{len(peaks.no_reference)} listed without)"
        )
    return lines


def as_of_date(value: str | None) -> dt.date | None:
    """``--as-of YYYY-MM-DD`` (None: today, decided by the judgement)."""
    if value is None:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError as exc:
        raise ConfigError(f'--as-of: "{value}" is not a date (expected YYYY-MM-DD)') from exc


def check_os_option(os_id: str | None) -> None:
    """``matrix resolve --os``: an OS some package source of gpuhost has names for."""
    from gpuhost.datafiles import installable_os

    if os_id is not None and os_id not in installable_os():
        raise ConfigError(
            f"--os {os_id!r}: not an OS gpuhost can provision; expected one of "
            f"{', '.join(installable_os())} (docs/provision.md lists what each is tested on)"
        )
