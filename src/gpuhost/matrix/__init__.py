"""The compatibility matrix and its resolver (see docs/architecture.md, "Matrix").

Public API:

- ``load_matrix(path=None) -> Matrix`` (the shipped matrix is cached)
- ``gpu_info(matrix, name) -> GpuInfo | None``
- ``check_stack(matrix, *, gpus, driver, cuda, cudnn, frameworks, ...) -> list[Finding]``
- ``verdict(findings) -> "ok" | "warning" | "error"`` (``gpuhost.findings``)
- ``resolve_stack(matrix, *, gpus, frameworks, cuda, os, ...) -> Resolution``
- ``load_profiles(extra_file=None) -> dict[str, Profile]``
- ``verify_profile(matrix, profile, gpus) -> list[Finding]``
- ``render_markdown(matrix) -> str`` (docs/matrix.md)
"""

from gpuhost.findings import Finding, verdict
from gpuhost.matrix.check import check_stack
from gpuhost.matrix.gpus import gpu_info, normalise_name
from gpuhost.matrix.load import build_matrix, default_matrix_path, load_matrix
from gpuhost.matrix.model import GpuInfo, Matrix
from gpuhost.matrix.profiles import Profile, load_profiles, verify_profile
from gpuhost.matrix.render import render_markdown
from gpuhost.matrix.resolve import NoCompatibleSet, Resolution, resolve_stack

__all__ = [
    "Finding",
    "Profile",
    "load_profiles",
    "render_markdown",
    "verify_profile",
    "NoCompatibleSet",
    "Resolution",
    "check_stack",
    "resolve_stack",
    "verdict",
    "GpuInfo",
    "Matrix",
    "build_matrix",
    "default_matrix_path",
    "gpu_info",
    "load_matrix",
    "normalise_name",
]
