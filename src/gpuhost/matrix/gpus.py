"""GPU names -> what the matrix knows about them.

Names come from users ("H100", "rtx4090") and from ``nvidia-smi`` ("NVIDIA H100 80GB HBM3",
"Tesla V100-SXM2-32GB", "NVIDIA H200 (MIG enabled)"). :func:`normalise_name` reduces both to the
keys the matrix lists, so one data row covers every memory size and form factor of a model.
"""

from __future__ import annotations

import re

from gpuhost.matrix.model import Gpu, GpuInfo, Matrix

_VENDOR_WORDS = {"NVIDIA", "TESLA", "GEFORCE"}
# Words that name a memory size, memory type or form factor, not a different chip.
_VARIANT_WORDS = {
    "PCIE",
    "SXM",
    "SXM2",
    "SXM3",
    "SXM4",
    "SXM5",
    "SXM6",
    "NVL",
    "HBM2",
    "HBM2E",
    "HBM3",
    "HBM3E",
    "SFF",
    "GENERATION",
    "EDITION",
    "SERVER",
    "WORKSTATION",
    "MAX",
    "Q",
    "WITH",
    "DESIGN",
}
_MEMORY_RE = re.compile(r"^\d+(GB|G|GIB|MB)$")
_COUNT_RE = re.compile(r"^\s*\d+\s*[xX]\s+")
_GLUED_RE = re.compile(r"^(RTX|GTX|GT)(\d{3,4})$")


def normalise_name(name: str) -> str:
    """Reduce a GPU name to its matrix key: "NVIDIA A100-SXM4-80GB" -> "A100".

    Returns "" when nothing is left (an empty or vendor-only name).
    """
    text = re.sub(r"\([^)]*\)", " ", name)  # "(MIG enabled)", "(PCI 10de:2b85)"
    text = _COUNT_RE.sub("", text)  # "8x NVIDIA H100" as written in inventories
    tokens: list[str] = []
    for raw in re.split(r"[\s\-_/,]+", text.upper()):
        if not raw:
            continue
        glued = _GLUED_RE.match(raw)
        parts = [glued.group(1), glued.group(2)] if glued else [raw]
        for tok in parts:
            if tok in _VENDOR_WORDS and not tokens:
                continue
            if tok in _VARIANT_WORDS or _MEMORY_RE.match(tok):
                continue
            tokens.append(tok)
    return " ".join(tokens)


def _candidates(matrix: Matrix, key: str, truncated: bool) -> list[Gpu]:
    """The GPU row a key selects: the exact name, or for a name nvidia-smi's table cut short
    ("NVIDIA GeForce RTX 30...") the rows of every name starting so, when they all share one
    compute capability (else none: the name does not tell)."""
    exact = [g for g in matrix.gpus if key in g.names]
    if exact or not truncated:
        return exact[:1]
    found = [g for g in matrix.gpus if any(n.startswith(key) for n in g.names)]
    return found[:1] if len({g.compute_capability for g in found}) == 1 else []


def gpu_info(matrix: Matrix, name: str) -> GpuInfo | None:
    """What the matrix knows about GPU ``name`` (user short name or nvidia-smi name).

    A name nvidia-smi's table truncated ("NVIDIA A100-SXM...", "NVIDIA GeForce RTX 30...")
    matches when every model it can be shares one compute capability. Returns None when the
    name matches no model in the matrix (callers report "unknown GPU").
    """
    if not isinstance(name, str):
        return None
    truncated = name.rstrip().endswith(("...", "\u2026"))
    key = normalise_name(name.rstrip().rstrip(".\u2026"))
    if not key:
        return None
    for gpu in _candidates(matrix, key, truncated):
        arch = matrix.architecture_of(gpu.compute_capability)
        if arch is None:  # pragma: no cover - the validator forbids this
            return None
        upper = name.upper()
        fabric: bool | None = False if "PCIE" in upper else None
        return GpuInfo(
            name=name,
            model=gpu.model,
            compute_capability=gpu.compute_capability,
            architecture=arch.name,
            clock_policy=arch.clock_policy,
            locked_memory_clocks=arch.locked_memory_clocks,
            kernel_modules=gpu.kernel_modules or arch.kernel_modules,
            fabric_manager=fabric,
            last_driver_branch=arch.last_driver_branch,
            source=matrix.url(gpu.source),
            confidence=gpu.confidence,
        )
    return None


def unknown_gpu_hint(matrix: Matrix, name: str) -> str:
    """What to say of a GPU name the matrix does not know: the nearest known names, else the
    newest models it lists ("did you mean A100? known names include ...")."""
    import difflib

    every = [n for gpu in matrix.gpus for n in gpu.names]
    near = difflib.get_close_matches(normalise_name(name) or name.upper(), every, n=3, cutoff=0.6)
    examples = ", ".join(g.names[0] for g in matrix.gpus[-12:])
    said = f"did you mean {' or '.join(near)}? " if near else ""
    return f"{said}known names include {examples}"
