"""What the matrix's checker and resolver share: the findings accumulator, the GPUs of a
request (each matched to its matrix row and architecture), and the texts both use."""

from __future__ import annotations

from gpuhost.findings import Finding, Severity
from gpuhost.matrix.gpus import gpu_info, unknown_gpu_hint
from gpuhost.matrix.model import Architecture, GpuInfo, Matrix
from gpuhost.versions import Version, parse_version

V = parse_version


# The rules an unknown GPU escapes (named in its gpu.unknown warning).
ARCH_RULES = (
    "cuda.arch-unsupported",
    "driver.arch-unsupported",
    "driver.arch-too-old",
    "cudnn.arch",
    "framework.arch",
    "kernel-module.flavour",
)


class Out:
    """Accumulates findings for one check."""

    def __init__(self, matrix: Matrix) -> None:
        self.matrix = matrix
        self.items: list[Finding] = []
        # GPUs of the request the matrix does not know (set by known_gpus): no verdict that
        # needs a GPU's compute capability may be "ok" while one is unknown.
        self.unknown_gpus: list[str] = []

    def add(self, rule: str, severity: Severity, message: str, source: str) -> None:
        self.items.append(Finding(rule, severity, message, self.matrix.url(source)))

    def fits(self, what: str, message: str, source: str) -> None:
        """``framework.ok`` for ``what`` (a wheel), unless a GPU of the request is unknown: then
        the fit rests on a missing fact, and it is ``framework.arch-unknown`` (a warning)."""
        if not self.unknown_gpus:
            self.add("framework.ok", "info", message, source)
            return
        names = ", ".join(f'"{n}"' for n in self.unknown_gpus)
        self.add(
            "framework.arch-unknown",
            "warning",
            f"unknown: whether {what} has code for GPU {names} (not in the compatibility matrix, "
            "so its compute capability is not known); the rest of the stack was judged: " + message,
            source,
        )


def newer_than_data(m: Matrix, found: Version, known: list[str], how: str) -> str:
    """The tail of an 'unknown version' message: when ``found`` is newer than every ``known``
    one, the data is older than the release, and ``how`` says how to get newer data."""
    newest = max((V(k, field="matrix data") for k in known), default=None)
    if newest is None or found <= newest:
        return ""
    checked = f" (checked {m.updated})" if m.updated else ""
    return f"; it is newer than every release the matrix data{checked} lists: {how}"


UPDATE_DATA = "update gpuhost for newer data (maintainers: add the row with its source)"
UPDATE_WHEELS = "update gpuhost for newer data (maintainers: gpuhost matrix sync)"


def known_gpus(out: Out, names: list[str]) -> list[tuple[GpuInfo, Architecture]]:
    found = []
    for name in names:
        info = gpu_info(out.matrix, name)
        if info is None:
            out.unknown_gpus.append(name)
            out.add(
                "gpu.unknown",
                "warning",
                f'GPU "{name}" is not in the compatibility matrix, so the rules that need its '
                f"compute capability were not applied to it ({', '.join(ARCH_RULES)}); "
                f"{unknown_gpu_hint(out.matrix, name)}; fix: use a listed name or add the model "
                "with its source to matrix.yaml",
                "cuda-gpus",
            )
            continue
        arch = out.matrix.architecture_of(info.compute_capability)
        assert arch is not None  # the validator guarantees every GPU's cc has an architecture
        if info.confidence == "single-source":
            out.add(
                "gpu.low-confidence",
                "info",
                f"{info.model}: compute capability {info.compute_capability} rests on a single "
                "non-NVIDIA source",
                _gpu_source(out.matrix, info),
            )
        found.append((info, arch))
    return found


def _gpu_source(matrix: Matrix, info: GpuInfo) -> str:
    for gpu in matrix.gpus:
        if gpu.model == info.model:
            return gpu.source
    return "cuda-gpus"  # pragma: no cover


def gpu_label(info: GpuInfo) -> str:
    return f"{info.name} ({info.architecture}, cc {info.compute_capability})"
