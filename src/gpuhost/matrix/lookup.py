"""Questions answered from the matrix tables (pure functions, no judgement).

Shared by the checker and the resolver so both read the data the same way.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from dataclasses import dataclass

from gpuhost.errors import VersionError
from gpuhost.matrix.model import (
    Architecture,
    CudaMinor,
    CudnnPackage,
    CudnnRelease,
    DriverBranch,
    GpuInfo,
    Matrix,
    TensorflowArchs,
    TensorflowRelease,
    TorchRelease,
    TorchVariant,
    WheelRelease,
)
from gpuhost.versions import (
    Version,
    driver_branch,
    parse_framework_version,
    parse_version,
    same_series,
)

V = parse_version

_SPEC_RE = re.compile(
    r"^\s*([A-Za-z][A-Za-z0-9_.\-]*)(\[[A-Za-z0-9_,\-]*\])?\s*(?:==\s*(\S+))?\s*$"
)
_FRAMEWORK_NAMES = {
    "torch": "torch",
    "pytorch": "torch",
    "tensorflow": "tensorflow",
    "tensorflow-gpu": "tensorflow",
    "tensorflow_gpu": "tensorflow",
    "tf": "tensorflow",
}


@dataclass(frozen=True)
class FrameworkSpec:
    """A parsed ``--framework`` value: ``torch==2.5.1+cu124`` -> ("torch", 2.5.1+cu124)."""

    raw: str
    name: str  # "torch", "tensorflow" or the unknown name as given
    version: Version | None
    known: bool


def parse_framework(spec: str) -> FrameworkSpec:
    """Parse ``NAME`` or ``NAME==VERSION`` (NAME: torch, pytorch, tensorflow, tensorflow[and-cuda]).

    Raises VersionError when the text is not of that form or the version does not parse.
    """
    m = _SPEC_RE.match(spec) if isinstance(spec, str) else None
    if not m:
        raise VersionError(
            f'--framework: "{spec}" is not NAME or NAME==VERSION (e.g. "torch==2.5.1+cu124", '
            '"tensorflow==2.18.0")'
        )
    name = m.group(1).lower()
    version = (
        parse_framework_version(m.group(3), field=f"--framework {name}") if m.group(3) else None
    )
    canonical = _FRAMEWORK_NAMES.get(name)
    return FrameworkSpec(spec, canonical or name, version, canonical is not None)


def cuda_key(v: Version) -> str:
    """The matrix key of a CUDA version: 12.4.1 -> "12.4"."""
    rel = v.release + (0,)
    return f"{rel[0]}.{rel[1]}"


def known_cuda(matrix: Matrix) -> str:
    return f"{matrix.cuda[0].version} to {matrix.cuda[-1].version}"


def minor_floor(matrix: Matrix, major: int) -> str | None:
    row = matrix.minor_compat.get(major)
    return row.min_driver if row else None


def cuda_supports_arch(arch: Architecture, cc: str, cuda: Version) -> bool | None:
    """True/False whether CUDA ``cuda`` builds for ``cc``; None when the data does not say."""
    first = arch.first_cuda_for(cc)
    if arch.last_cuda is not None:
        major, _, minor = arch.last_cuda.partition(".")
        if minor == "x":
            if cuda.release[0] > int(major):
                return False
        elif Version(cuda_key(cuda)) > V(arch.last_cuda, field="last_cuda"):
            return False
    if first is None:
        return None
    return Version(cuda_key(cuda)) >= V(first, field="first_cuda")


def arch_cuda_range(arch: Architecture, cc: str) -> str:
    first = arch.first_cuda_for(cc) or "unknown"
    last = arch.last_cuda or "current"
    return f"CUDA {first} to {last}"


def driver_first_for_arch(matrix: Matrix, arch: Architecture, cc: str) -> tuple[str, str] | None:
    """(CUDA, driver) of the first CUDA release for ``cc`` when that release is in the matrix."""
    first = arch.first_cuda_for(cc)
    minor = matrix.cuda_minor(first) if first else None
    return (minor.version, minor.ga.min_driver) if minor else None


def eol_passed(branch: DriverBranch, as_of: dt.date) -> bool | None:
    """True when the branch is past its end of life on ``as_of``; None when unknown."""
    if branch.eol is None:
        return None
    if branch.eol == "ended":
        return True
    if branch.eol == "n/a":
        return False
    year, month = (int(x) for x in branch.eol.split("-"))
    first_after = dt.date(year + (month == 12), month % 12 + 1, 1)
    return as_of >= first_after


def known_driver_versions(matrix: Matrix, branch: int) -> list[Version]:
    """Driver versions of ``branch`` that a source names (CUDA table minimums), oldest first."""
    found = {
        V(rel.min_driver, field="driver")
        for minor in matrix.cuda
        for rel in minor.releases
        if driver_branch(rel.min_driver) == branch
    }
    for row in matrix.minor_compat.values():
        if driver_branch(row.min_driver) == branch:
            found.add(V(row.min_driver, field="driver"))
    return sorted(found)


def newest_cuda_served(matrix: Matrix, driver: Version) -> CudaMinor | None:
    """The newest CUDA minor whose every listed release has its full features on ``driver``."""
    best = None
    for minor in matrix.cuda:
        if V(minor.newest.min_driver, field="driver") <= driver:
            best = minor
    return best


def find_cudnn(matrix: Matrix, v: Version) -> CudnnRelease | None:
    """The cuDNN row for ``v`` ("9.10.2.21" -> 9.10.2; "9.5" -> newest 9.5.x row)."""
    best = None
    for rel in matrix.cudnn:
        row = V(rel.version, field="cudnn").release
        n = min(len(row), len(v.release))
        if row[:n] == v.release[:n]:
            best = rel
    return best


def cc_covered(ccs: tuple[str, ...], cc: str) -> bool:
    """Whether binaries built for ``ccs`` run on a GPU of ``cc`` (policies.binary_compatibility)."""
    gmaj, gmin = (int(x) for x in cc.split("."))
    for entry in ccs:
        ptx = entry.endswith("+PTX")
        base = entry.removesuffix("+PTX")
        specific = base.endswith("a")
        base = base.removesuffix("a")
        emaj, emin = (int(x) for x in base.split("."))
        if specific:
            if (emaj, emin) == (gmaj, gmin):
                return True
        elif ptx and (emaj, emin) <= (gmaj, gmin) or emaj == gmaj and emin <= gmin:
            return True
    return False


def package_covers(pkg: CudnnPackage, cc: str) -> bool:
    if pkg.compute_capabilities is not None:
        return cc_covered(pkg.compute_capabilities, cc)
    if pkg.min_compute_capability is not None:
        return V(cc, field="cc") >= V(pkg.min_compute_capability, field="cc")
    return False


def package_runs_on(pkg: CudnnPackage, cc: str, arch: Architecture) -> bool:
    """A cuDNN package has code for ``cc`` and is built with a CUDA that supports the GPU's
    architecture: old packages say "SM 3.5 and later", which cannot include a GPU no CUDA of
    theirs knows (cuDNN 8.5.0 for CUDA 11.x on a Blackwell card)."""
    if not package_covers(pkg, cc):
        return False
    return any(cuda_supports_arch(arch, cc, V(c, field="cuda")) is not False for c in pkg.cuda)


def cudnn_packages(rel: CudnnRelease, cuda: str | None) -> list[CudnnPackage]:
    return [p for p in rel.packages if cuda is None or cuda in p.cuda]


def newest_cudnn(
    matrix: Matrix, cuda: str, ccs: list[str], driver: Version | None
) -> tuple[CudnnRelease, CudnnPackage] | None:
    """Newest cuDNN with a package for ``cuda`` covering ``ccs`` whose floor ``driver`` meets."""
    for rel in reversed(matrix.cudnn):
        for pkg in cudnn_packages(rel, cuda):
            if not all(package_covers(pkg, cc) for cc in ccs):
                continue
            if driver is not None and pkg.min_driver and driver < V(pkg.min_driver, field="d"):
                continue
            return rel, pkg
    return None


def find_torch(matrix: Matrix, v: Version) -> TorchRelease | None:
    key = ".".join(str(x) for x in (v.release + (0,))[:2])
    for rel in matrix.pytorch:
        if rel.version == key:
            return rel
    return None


def find_tensorflow(matrix: Matrix, v: Version) -> TensorflowRelease | None:
    base = Version(".".join(str(x) for x in v.release))
    best = None
    for rel in matrix.tensorflow:
        rv = V(rel.version, field="tensorflow")
        if rv == base:
            return rel
        if rv.release[:2] == (base.release + (0,))[:2]:
            best = rel
    return best


def tensorflow_archs(matrix: Matrix, version: str) -> TensorflowArchs | None:
    """The build architectures of TensorFlow ``version``'s series (2.17.1 -> the 2.17 row), or
    None."""
    series = ".".join(version.split(".")[:2])
    for row in matrix.tensorflow_archs:
        if row.series == series:
            return row
    return None


def variant_runs_on(var: TorchVariant, gpu: GpuInfo, arch: Architecture) -> bool | None:
    """Whether a wheel variant has code for ``gpu``: True/False, None when the data cannot say."""
    if var.archs is not None:
        return cc_covered(var.archs, gpu.compute_capability)
    supported = cuda_supports_arch(arch, gpu.compute_capability, V(var.cuda, field="cuda"))
    return None if supported else supported


def wheel_release(matrix: Matrix, framework: str, v: Version) -> WheelRelease | None:
    """The PyPI release row for ``v`` (2.5.1 exactly, 2.15.0.post1 exactly; "2.5" = the newest
    2.5.x synced; a post release of a synced release is answered by that release's row when its
    own row is not synced)."""
    rows = [w for w in matrix.wheels if w.framework == framework]
    parsed = [(w, parse_framework_version(w.version, field="wheels")) for w in rows]
    want = v.release
    if len(want) >= 3:
        exact = [w for w, wv in parsed if wv.release == want[:3] and wv.post == v.post]
        same_release = [w for w, wv in parsed if wv.release == want[:3]]
        found = exact or same_release
        return found[0] if found else None
    same = [w for w, wv in parsed if wv.release[: len(want)] == want]
    return same[-1] if same else None


def release_text(v: Version) -> str:
    """``2.5.1+cu124`` -> "2.5.1" (the public version, no local tag); keeps ".postN"."""
    post = f".post{v.post}" if v.post is not None else ""
    return ".".join(str(x) for x in v.release) + post


def default_torch_variant(rel: TorchRelease | None, wheel: WheelRelease) -> TorchVariant | None:
    """The variant a plain ``pip install torch==X`` gets on Linux x86_64 (None: not known, or a
    CPU build): the matrix row of the same CUDA, with the cuDNN the wheel pins."""
    build = wheel.default
    if build is None or build.cuda is None:
        return None
    for var in rel.variants if rel is not None else ():
        if var.cuda == build.cuda:
            return dataclasses.replace(var, cudnn=build.cudnn or var.cudnn, channel="stable")
    return TorchVariant(build.cuda, "stable", build.cudnn, None, None, None, "PyPI default wheel")


def torch_install_command(matrix: Matrix, version: str, var: TorchVariant, default: bool) -> str:
    """The pip command that installs ``var`` of torch ``version``."""
    if default:
        return f"pip install torch=={version}"
    policy = matrix.policies.get("pytorch_wheels")
    template = str(policy.values.get("index_url", "")) if policy else ""
    if "{variant}" not in template:
        return f"pip install torch=={version}+{var.tag} (from PyTorch's {var.tag} index)"
    return f"pip install torch=={version} --index-url {template.format(variant=var.tag)}"


# The source key of a TensorFlow row answered from its wheels' metadata on PyPI.
PYPI_TF = "pypi-metadata-tensorflow"


def tensorflow_release(matrix: Matrix, v: Version) -> TensorflowRelease | None:
    """What TensorFlow ``v`` is built with: its tested configuration when the matrix lists that
    exact release, else its ``and-cuda`` pins on PyPI, else the tested row of its minor series."""
    rel = find_tensorflow(matrix, v)
    if rel is not None and rel.version == release_text(v):
        return rel
    wheel = wheel_release(matrix, "tensorflow", v)
    build = wheel.default if wheel is not None else None
    if wheel is not None and build is not None and build.cuda and build.cudnn:
        return TensorflowRelease(
            wheel.version, build.cuda, build.cudnn, PYPI_TF, "primary", not build.exact
        )
    return rel


def in_series(v: Version, series: Version) -> bool:
    return same_series(v, series)
