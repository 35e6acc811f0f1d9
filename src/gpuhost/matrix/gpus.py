"""GPU names -> what the matrix knows about them.

Names come from users ("H100", "rtx4090") and from ``nvidia-smi`` ("NVIDIA H100 80GB HBM3",
"Tesla V100-SXM2-32GB", "NVIDIA H200 (MIG enabled)"). :func:`normalise_name` reduces both to the
keys the matrix lists, so one data row covers every memory size and form factor of a model.
"""

from __future__ import annotations

from gpuhost.gpus.catalog import Sku, ambiguity, identify, name_part, pci_id_in, pci_id_of
from gpuhost.gpus.names import normalise_name
from gpuhost.matrix.model import Gpu, GpuInfo, Matrix

__all__ = ["gpu_info", "normalise_name", "unknown_gpu_hint"]

def _candidates(matrix: Matrix, key: str, truncated: bool) -> list[Gpu]:
    """The GPU row a key selects: the exact name, or for a name nvidia-smi's table cut short
    ("NVIDIA GeForce RTX 30...") the rows of every name starting so, when they all share one
    compute capability (else none: the name does not tell)."""
    exact = [g for g in matrix.gpus if key in g.names]
    if exact or not truncated:
        return exact[:1]
    found = [g for g in matrix.gpus if any(n.startswith(key) for n in g.names)]
    return found[:1] if len({g.compute_capability for g in found}) == 1 else []


def _matrix_row(matrix: Matrix, name: str) -> Gpu | None:
    truncated = name.rstrip().endswith(("...", "\u2026"))
    key = normalise_name(name.rstrip().rstrip(".\u2026"))
    found = _candidates(matrix, key, truncated) if key else []
    return found[0] if found else None


def gpu_info(matrix: Matrix, name: str) -> GpuInfo | None:
    """What gpuhost knows about GPU ``name``: a user's short name, nvidia-smi's name, or a PCI ID
    (``10de:2330``, ``0x233010DE``).

    The matrix's GPU rows answer first (a name nvidia-smi's table truncated, "NVIDIA
    A100-SXM...", matches when every model it can be shares one compute capability); the GPU
    catalog (:mod:`gpuhost.gpus.catalog`: the PCI ID database and NVIDIA's CUDA GPU tables)
    answers the rest. Returns None when neither knows the compute capability (callers report
    "unknown GPU"; for a PCI ID :func:`unknown_gpu_hint` says what the database calls it).
    """
    if not isinstance(name, str):
        return None
    sku = identify(name)
    row = _matrix_row(matrix, name_part(name)) if not pci_id_of(name) else None
    if row is None and sku is not None and pci_id_in(name):
        row = _matrix_row(matrix, sku.name)
    if row is not None:
        return _info(matrix, name, row.model, row.compute_capability, row.kernel_modules,
                     matrix.url(row.source), row.confidence, sku)
    if sku is None or sku.compute_capability is None:
        return None
    return _info(matrix, name, sku.name, sku.compute_capability, (), sku.url or sku.source,
                 sku.confidence, sku)


def _info(
    matrix: Matrix,
    name: str,
    model: str,
    cc: str,
    kernel_modules: tuple[str, ...],
    source: str,
    confidence: str,
    sku: Sku | None,
) -> GpuInfo | None:
    arch = matrix.architecture_of(cc)
    if arch is None:  # a catalog chip of an architecture the matrix does not list
        return None
    return GpuInfo(
        name=name,
        model=model,
        compute_capability=cc,
        architecture=arch.name,
        clock_policy=arch.clock_policy,
        locked_memory_clocks=arch.locked_memory_clocks,
        kernel_modules=kernel_modules or arch.kernel_modules,
        fabric_manager=False if "PCIE" in f"{name} {sku.name if sku else ''}".upper() else None,
        last_driver_branch=arch.last_driver_branch,
        source=source,
        confidence=confidence,
        pci_id=sku.pci_id if sku else None,
    )


def unknown_gpu_hint(matrix: Matrix, name: str) -> str:
    """What to say of a GPU name the matrix does not know: the nearest known names, else the
    newest models it lists ("did you mean A100? known names include ...")."""
    import difflib

    if pci_id_of(name):
        sku = identify(name)
        return sku.unknown_line if sku else f"unknown GPU {name}"
    several = ambiguity(name)
    if several:
        return several
    every = [n for gpu in matrix.gpus for n in gpu.names]
    near = difflib.get_close_matches(normalise_name(name) or name.upper(), every, n=3, cutoff=0.6)
    examples = ", ".join(g.names[0] for g in matrix.gpus[-12:])
    said = f"did you mean {' or '.join(near)}? " if near else ""
    return f"{said}known names include {examples}"
