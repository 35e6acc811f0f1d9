"""Render the matrix as Markdown (docs/matrix.md); a test keeps the file in step with the data."""

from __future__ import annotations

from gpuhost.matrix.advisories import Advisories, load_advisories
from gpuhost.matrix.model import Matrix
from gpuhost.matrix.peaks import Peaks, load_peaks


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return out + [""]


def _wheels(m: Matrix) -> list[str]:
    lines = [
        "## What pip installs: the PyPI wheels' own pins",
        "",
        "From `src/gpuhost/data/wheels.yaml` (`gpuhost matrix sync`): the libraries each release's "
        "Linux x86_64 wheel pins (TensorFlow: its `and-cuda` extra; `>=` = a minimum, not a pin). "
        '"no metadata" = PyPI publishes no core metadata for those wheels, so it is not known.',
        "",
    ]
    rows = []
    for w in reversed(m.wheels):
        b = w.default
        if b is None:
            libs = ["no metadata" if "x86_64" in w.no_metadata else "no wheel"] + [""] * 3
        elif b.cuda is None:
            libs = ["no CUDA pins", "", "", ""]
        else:
            floor = "" if b.exact else ">= "
            libs = [b.cuda, floor + (b.cudnn or ""), floor + (b.cublas or ""), b.nccl or ""]
        rows.append([w.framework, w.version, w.released, *libs, ", ".join(w.python)])
    return lines + _table(
        ["framework", "release", "released", "CUDA", "cuDNN", "cuBLAS", "NCCL", "Python"], rows
    )


def _advisories(advs: Advisories) -> list[str]:
    lines = [
        "## NVIDIA security bulletins (Linux driver, container toolkit, GPU Operator, CUDA)",
        "",
        "From `src/gpuhost/data/advisories.yaml` (`gpuhost matrix advisories-sync`, NVIDIA's CSAF "
        f"documents). A version below the fixed one is affected; error at CVSS >= "
        f"{advs.error_at_cvss}. CUDA Toolkit: the newest fixed release of the bulletin (each CVE "
        "has its own, Linux products only).",
        "",
    ]
    rows = [
        [
            f"[{a.id}]({a.url})",
            a.date,
            a.component,
            ", ".join(_fixed_label(k, v) for k, v in a.fixed.items()),
            str(a.highest_cvss) if a.highest_cvss is not None else "not given",
            ", ".join(c.id for c in a.cves),
        ]
        for a in reversed(advs.rows)
    ]
    return lines + _table(["bulletin", "date", "component", "fixed in", "CVSS", "CVEs"], rows)


def _fixed_label(key: str, version: str) -> str:
    """``R580 580.95.05``, ``1.17.8`` (the toolkit), ``GPU Operator 25.3.2``, ``CUDA 13.1.0``."""
    if key.isdigit():
        return f"R{key} {version}"
    return {"gpu-operator": "GPU Operator ", "cuda": "CUDA "}.get(key, "") + version


def _num(value: float | None) -> str:
    return "unknown" if value is None else f"{value:g}"


def _peaks(peaks: Peaks) -> list[str]:
    lines = [
        "## GPU peaks: what the smoke test measures against",
        "",
        "From `src/gpuhost/data/gpu_peaks.yaml` (docs/checks-smoke.md): dense tensor TFLOP/s "
        '("*": the datasheet printed a with-sparsity figure, halved here), memory and NVLink GB/s, '
        "and the PCIe link whose per-direction rate the H2D/D2H copies are judged against. "
        "Required fractions: " + ", ".join(f"{k} {v:g}" for k, v in peaks.min_ratio.items()) + ".",
        "",
    ]
    rows = []
    for g in peaks.gpus:
        star = "*" if g.sparse_halved else ""
        link = f"Gen{g.pcie_gen} x{g.pcie_width}" if g.pcie_gen else "unknown"
        rows.append(
            [
                g.model,
                ", ".join(g.names),
                _num(g.fp16_tensor_tflops) + star,
                _num(g.bf16_tensor_tflops) + (star if g.bf16_tensor_tflops else ""),
                _num(g.tf32_tensor_tflops) + (star if g.tf32_tensor_tflops else ""),
                _num(g.memory_gbps),
                _num(g.nvlink_gbps),
                link,
                f"[{g.source}]({peaks.sources[g.source].url})",
                g.confidence,
            ]
        )
    lines += _table(
        [
            "model",
            "nvidia-smi names",
            "FP16",
            "BF16",
            "TF32",
            "memory GB/s",
            "NVLink GB/s",
            "PCIe",
            "source",
            "confidence",
        ],
        rows,
    )
    lines += ["No reference (no source read):", ""]
    lines += [f"- {model}: {reason}" for model, reason in peaks.no_reference]
    lines += ["", "Sources of the peaks:", ""]
    lines += [f"- `{k}`: [{src.title}]({src.url})" for k, src in peaks.sources.items()]
    return lines + [""]


def render_markdown(
    matrix: Matrix, advisories: Advisories | None = None, peaks: Peaks | None = None
) -> str:
    """The whole matrix as Markdown, newest rows first, every row with its source key."""
    m = matrix
    lines = _intro() + _cuda(m) + _architectures(m) + _gpu_models(m) + _cudnn(m) + _pytorch(m)
    lines += ["## TensorFlow (tested build configurations)", ""]
    lines += _table(
        ["TensorFlow", "CUDA", "cuDNN", "source"],
        [[t.version, t.cuda, t.cudnn, t.source] for t in reversed(m.tensorflow)],
    )
    lines += [
        "## TensorFlow wheels: built for",
        "",
        "Compute capabilities in each series' official Linux x86_64 wheel, from the wheel's own "
        "`build_info.py` (`+PTX`: PTX that newer GPUs JIT-compile). A GPU none of them covers "
        "gets `framework.arch`; a series not listed gets `framework.arch-unknown`, never ok.",
        "",
    ]
    lines += _table(
        ["series", "built for", "source", "confidence"],
        [
            [t.series, ", ".join(t.archs), t.source, t.confidence]
            for t in reversed(m.tensorflow_archs)
        ],
    )
    lines += _wheels(m)
    lines += _advisories(advisories if advisories is not None else load_advisories())
    lines += _peaks(peaks if peaks is not None else load_peaks())
    lines += _branches_policies_sources(m)
    return "\n".join(lines) + "\n"


def _intro() -> list[str]:
    return [
        "# Compatibility matrix",
        "",
        "Generated from `src/gpuhost/data/matrix.yaml` by `gpuhost matrix render`; do not edit.",
        'Every row names its source (listed at the end) and how sure it is. "unknown" means no',
        "source confirmed a value, so gpuhost does not rely on one.",
        "",
        "`matrix check` and the audit never answer ok on a missing fact: a GPU, driver branch,",
        "CUDA, cuDNN or framework release the data does not list, or a wheel whose architectures",
        'are not known, is a warning that starts with or names "unknown" (an unknown GPU turns',
        "each wheel's `framework.ok` into `framework.arch-unknown`). A CUDA release newer than",
        "the data is judged by its major's minor-version-compatibility floor",
        "(`cuda.driver-floor` below it, `cuda.driver-minor-compat` at or above it, saying the",
        "release's exact minimum is not in the data).",
        "",
        "Two tables are generated from their sources rather than written by hand: what each",
        "torch / TensorFlow wheel on PyPI pins (`gpuhost matrix sync --write`, from PyPI's JSON",
        "API and the wheels' core metadata; `--check` in CI) and NVIDIA's security bulletins",
        "(`gpuhost matrix advisories-sync --from <checkout of github.com/NVIDIA/product-security>",
        "--write`).",
        "",
    ]


def _cuda(m: Matrix) -> list[str]:
    rows = []
    for minor in reversed(m.cuda):
        floor = m.minor_compat.get(minor.major)
        for rel in reversed(minor.releases):
            rows.append(
                [
                    rel.label,
                    rel.version,
                    f">= {rel.min_driver}",
                    f">= {floor.min_driver}" if floor else "none",
                    rel.source,
                    rel.confidence,
                ]
            )
    return ["## CUDA toolkit: minimum Linux driver", ""] + _table(
        [
            "CUDA",
            "version",
            "driver (full features)",
            "driver (minor-version compat)",
            "source",
            "confidence",
        ],
        rows,
    )


def _architectures(m: Matrix) -> list[str]:
    return ["## Architectures", ""] + _table(
        [
            "architecture",
            "compute capability",
            "first CUDA",
            "last CUDA",
            "last driver branch",
            "clocks",
            "kernel modules",
            "source",
        ],
        [
            [
                a.name,
                ", ".join(a.compute_capabilities),
                (a.first_cuda or "unknown")
                + "".join(f" ({c}: {v})" for c, v in a.first_cuda_by_cc.items()),
                a.last_cuda or "current",
                f"R{a.last_driver_branch}" if a.last_driver_branch else "current",
                a.clock_policy + (" (+memory)" if a.locked_memory_clocks else ""),
                ", ".join(a.kernel_modules),
                a.source,
            ]
            for a in reversed(m.architectures)
        ],
    )


def _gpu_models(m: Matrix) -> list[str]:
    from gpuhost.gpus.catalog import load_catalog

    catalog = load_catalog()
    intro = [
        "## GPU models",
        "",
        "These rows answer first. Any other GPU is looked up in the GPU catalog",
        f"(`gpu_catalog.yaml`, generated from the PCI ID database {catalog.version} and NVIDIA's",
        f"CUDA GPU tables: {len(catalog.devices)} NVIDIA GPU device IDs, {len(catalog.chips)}",
        f"chips with a sourced compute capability, {len(catalog.gpus)} table GPUs by name; every",
        "SKU of a chip inherits the chip's compute capability). `--gpu` takes a name or a PCI ID",
        "(`10de:2330`); docs/knowledge.md, \"The GPU catalog\".",
        "",
    ]
    return intro + _table(
        ["model", "names", "compute capability", "source", "confidence"],
        [
            [g.model, ", ".join(g.names), g.compute_capability, g.source, g.confidence]
            for g in sorted(m.gpus, key=lambda g: (-float(g.compute_capability), g.model))
        ],
    )


def _cudnn(m: Matrix) -> list[str]:
    rows = []
    for crel in reversed(m.cudnn):
        for pkg in crel.packages:
            ccs = (
                ", ".join(pkg.compute_capabilities)
                if pkg.compute_capabilities
                else f">= {pkg.min_compute_capability}"
            )
            rows.append(
                [
                    crel.version,
                    ", ".join(pkg.cuda),
                    f">= {pkg.min_driver}" if pkg.min_driver else "unknown",
                    ccs,
                    crel.source,
                ]
            )
    headers = ["cuDNN", "CUDA", "driver", "compute capabilities", "source"]
    return ["## cuDNN", ""] + _table(headers, rows)


def _pytorch(m: Matrix) -> list[str]:
    rows = []
    for tr in reversed(m.pytorch):
        for var in tr.variants:
            rows.append(
                [
                    tr.version,
                    var.tag,
                    var.channel,
                    var.cudnn or "unknown",
                    ", ".join(var.archs) if var.archs else "unknown",
                    tr.source + (f"; archs: {var.archs_source}" if var.archs_source else ""),
                    tr.confidence,
                ]
            )
    return ["## PyTorch wheels", ""] + _table(
        ["torch", "variant", "channel", "bundled cuDNN", "built for", "source", "confidence"], rows
    )


def _branches_policies_sources(m: Matrix) -> list[str]:
    lines = ["## Driver branches", ""]
    lines += _table(
        ["branch", "type", "end of life", "source", "confidence", "note"],
        [
            [f"R{b.branch}", b.type, b.eol or "unknown", b.source, b.confidence, b.note]
            for b in reversed(m.driver_branches)
        ],
    )
    lines += ["## Policies", ""]
    for name, pol in m.policies.items():
        lines.append(f"- **{name}**: {pol.rule} ({pol.source}, {pol.confidence})")
    lines += ["", "## Sources", ""]
    for key, src in m.sources.items():
        lines.append(f"- `{key}`: [{src.title}]({src.url})")
    return lines
