"""Propose the newest supported, mutually compatible driver branch, CUDA, cuDNN and wheels for
some GPUs and frameworks (:func:`resolve_stack`)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from gpuhost.errors import IncompatibleError, UnknownNameError
from gpuhost.findings import Finding
from gpuhost.matrix.advisories import Advisories, BranchFix, branch_fix, load_advisories
from gpuhost.matrix.judging import (
    Out,
    gpu_label,
    known_gpus,
)
from gpuhost.matrix.lookup import (
    FrameworkSpec,
    arch_cuda_range,
    cuda_supports_arch,
    default_torch_variant,
    eol_passed,
    find_cudnn,
    find_tensorflow,
    find_torch,
    known_driver_versions,
    minor_floor,
    newest_cudnn,
    parse_framework,
    torch_install_command,
    variant_runs_on,
    wheel_release,
)
from gpuhost.matrix.model import (
    Architecture,
    CudaMinor,
    DriverBranch,
    GpuInfo,
    Matrix,
    TensorflowRelease,
    TorchVariant,
)
from gpuhost.versions import Version, driver_branch, parse_version, same_series

V = parse_version


@dataclass(frozen=True)
class Resolution:
    """The newest supported, mutually compatible set (answer of :func:`resolve_stack`)."""

    driver_branch: int
    driver_min_version: str
    cuda: str
    cudnn: str | None
    frameworks: dict[str, str]
    explain: tuple[str, ...]
    findings: tuple[Finding, ...] = field(default=())
    install: dict[str, str] = field(default_factory=dict)  # framework -> pip command

    def to_json(self) -> dict[str, Any]:
        """The JSON shape of ``gpuhost matrix resolve --json``."""
        return {
            "driver": {"branch": str(self.driver_branch), "min_version": self.driver_min_version},
            "cuda": self.cuda,
            "cudnn": self.cudnn,
            "frameworks": dict(self.frameworks),
            "install": dict(self.install),
            "explain": list(self.explain),
        }


class NoCompatibleSet(IncompatibleError):
    """No version set satisfies the request; ``reasons`` says why (exit code 1)."""

    def __init__(self, reasons: list[str]) -> None:
        self.reasons = reasons
        super().__init__("no compatible version set: " + "; ".join(reasons))


def resolve_stack(
    matrix: Matrix,
    *,
    gpus: list[str] | tuple[str, ...] = (),
    frameworks: list[str] | tuple[str, ...] = (),
    cuda: str | None = None,
    os: str | None = None,
    as_of: dt.date | None = None,
    advisories: Advisories | None = None,
) -> Resolution:
    """Propose the newest supported, mutually compatible driver branch, CUDA, cuDNN and wheels.

    Driver branches considered are LTSB/PB branches not past end of life on ``as_of`` (default
    today) that every GPU supports and that NVIDIA's security bulletins (``advisories``, default
    the loaded data) do not leave without a fix; the minimum driver proposed is at least the
    first one every bulletin naming its branch calls fixed. With a framework, the cuDNN proposed
    is the one its wheel pins when the data knows it. ``cuda`` restricts the CUDA series
    ("12" or "12.4").
    ``os`` is recorded in the explanation (OS-specific package sets are profiles).
    Raises :class:`NoCompatibleSet` (exit 1) with reasons when nothing fits, VersionError or
    UnknownNameError for bad input (exit 2).
    """
    as_of = as_of or dt.date.today()
    out = Out(matrix)
    hw = known_gpus(out, list(gpus))
    explain = [f.message for f in out.items if f.rule == "gpu.unknown"]
    explain += [
        f"{info.name}: {info.model}, {arch.name}, compute capability {info.compute_capability}"
        for info, arch in hw
    ]
    _refuse_boards(matrix, hw)
    series = V(cuda, field="--cuda") if cuda is not None else None
    reasons: list[str] = []
    torch_choice, tf_rel = _pick_frameworks(matrix, frameworks, hw, reasons)
    branches, fixes, unfixed = _branches(matrix, hw, as_of, advisories, reasons)
    if reasons:
        raise NoCompatibleSet(reasons)
    candidates = _candidates(matrix, branches, fixes, series, tf_rel, torch_choice, hw, reasons)
    minor, branch, drv_min = _pick(matrix, candidates, torch_choice, hw, explain)
    chosen = matrix.branch(branch)
    assert chosen is not None
    explain.append(
        f"driver R{branch} ({chosen.type}, EOL {chosen.eol}): newest supported branch for this "
        f"hardware; minimum version {drv_min}" + _fixed_text(fixes[branch], drv_min)
    )
    explain += [
        f"driver R{f.branch} not proposed: {_unfixed_text(f)}" for f in unfixed if f.branch > branch
    ]
    ccs = [info.compute_capability for info, _ in hw]
    cudnn_text, why = _cudnn_choice(matrix, minor, ccs, drv_min, tf_rel, torch_choice)
    explain.append(why)
    fw, install = _framework_answer(matrix, torch_choice, tf_rel, hw, explain)
    if os:
        explain.append(
            f"os {os}: provision it from a profile for {os} (gpuhost matrix profile list; check "
            "one with gpuhost matrix profile verify NAME)"
        )
    if tf_rel:
        install["tensorflow"] = f"pip install 'tensorflow[and-cuda]=={tf_rel.version}'"
    return Resolution(
        branch,
        str(drv_min),
        minor.version,
        cudnn_text,
        fw,
        tuple(explain),
        tuple(out.items),
        install,
    )


_Candidate = tuple[CudaMinor, int, Version]  # a CUDA minor, the branch for it, its minimum


def _refuse_boards(matrix: Matrix, hw: list[tuple[GpuInfo, Architecture]]) -> None:
    """A board whose driver comes from Jetson Linux gets no set (NoCompatibleSet says why)."""
    board = [
        f"{info.name} ({arch.name}) gets its driver, CUDA and cuDNN from Jetson Linux (L4T), the "
        "board support package that JetPack installs, not from NVIDIA's driver branches: gpuhost "
        "proposes no set for it; use the versions of its JetPack release (source: "
        f"{matrix.url(arch.driver_from_source or arch.source)})"
        for info, arch in hw
        if arch.driver_from == "l4t"
    ]
    if board:
        raise NoCompatibleSet(board)


def _pick_frameworks(
    matrix: Matrix,
    frameworks: list[str] | tuple[str, ...],
    hw: list[tuple[GpuInfo, Architecture]],
    reasons: list[str],
) -> tuple[tuple[str, TorchVariant] | None, TensorflowRelease | None]:
    """The torch wheel (reasons appended when none fits) and TensorFlow release asked for;
    UnknownNameError for a framework or release the matrix does not know."""
    specs = [parse_framework(f) for f in frameworks]
    torch_spec = next((s for s in specs if s.name == "torch"), None)
    tf_spec = next((s for s in specs if s.name == "tensorflow"), None)
    for s in specs:
        if not s.known:
            raise UnknownNameError(
                f'--framework: "{s.raw}" is not a known framework (torch, tensorflow)'
            )
    torch_choice = _pick_torch(matrix, torch_spec, hw, reasons)
    tf_rel = None
    if tf_spec is not None:
        tf_rel = (
            find_tensorflow(matrix, tf_spec.version) if tf_spec.version else matrix.tensorflow[-1]
        )
        if tf_rel is None:
            known = ", ".join(r.version for r in matrix.tensorflow)
            raise UnknownNameError(
                f"--framework: TensorFlow {tf_spec.version} is not in the matrix (known: {known})"
            )
    return torch_choice, tf_rel


def _branches(
    matrix: Matrix,
    hw: list[tuple[GpuInfo, Architecture]],
    as_of: dt.date,
    advisories: Advisories | None,
    reasons: list[str],
) -> tuple[list[DriverBranch], dict[int, BranchFix], list[BranchFix]]:
    """The supported branches every GPU allows, newest first, that NVIDIA's bulletins do not
    leave without a fix; each considered branch's fix; the ones left without (reasons appended
    when no branch remains)."""
    cap = min((a.last_driver_branch for _, a in hw if a.last_driver_branch), default=None)
    branches = [
        b
        for b in reversed(matrix.driver_branches)
        if b.type in ("LTSB", "PB")
        and eol_passed(b, as_of) is False
        and (cap is None or b.branch <= cap)
        and known_driver_versions(matrix, b.branch)
    ]
    if not branches:
        reasons.append(
            f"no supported (LTSB/PB, not end of life on {as_of}) driver branch"
            + (f" up to R{cap}, the last for this hardware" if cap else "")
        )
    fixes = {b.branch: branch_fix(advisories or load_advisories(), b.branch) for b in branches}
    unfixed = [fixes[b.branch] for b in branches if fixes[b.branch].unfixed]
    branches = [b for b in branches if not fixes[b.branch].unfixed]
    if not branches and unfixed:
        reasons.append(
            "every supported driver branch for this hardware is left without a fix by NVIDIA's "
            "security bulletins: " + "; ".join(_unfixed_text(f) for f in unfixed)
        )
    return branches, fixes, unfixed


def _candidates(
    matrix: Matrix,
    branches: list[DriverBranch],
    fixes: dict[int, BranchFix],
    series: Version | None,
    tf_rel: TensorflowRelease | None,
    torch_choice: tuple[str, TorchVariant] | None,
    hw: list[tuple[GpuInfo, Architecture]],
    reasons: list[str],
) -> list[_Candidate]:
    """Every CUDA minor the request allows, newest first, with the newest branch that drives it
    and the lowest driver to propose; NoCompatibleSet when there is none."""
    floor_needed = V(torch_choice[1].cuda, field="c").release[0] if torch_choice else None
    candidates: list[_Candidate] = []
    for minor in reversed(matrix.cuda):
        mv = V(minor.version, field="cuda")
        why = _reject_cuda(matrix, minor, mv, series, tf_rel, hw)
        if why:
            if series is not None and same_series(mv, series):
                reasons.append(why)
            continue
        need = V(minor.newest.min_driver, field="driver")
        if floor_needed is not None:
            floor = minor_floor(matrix, floor_needed)
            if floor and V(floor, field="f") > need:
                need = V(floor, field="f")
        for b in branches:
            if b.branch >= driver_branch(need):
                lowest = max(need, known_driver_versions(matrix, b.branch)[0])
                fixed = fixes[b.branch].first_fixed
                if fixed is not None:
                    lowest = max(lowest, V(fixed, field="advisories fixed"))
                candidates.append((minor, b.branch, lowest))
                break
        else:
            if series is not None:
                reasons.append(
                    f"CUDA {minor.version} needs driver >= {need}, newer than every "
                    "supported branch this hardware allows"
                )
    if not candidates:
        if not reasons:
            reasons.append(
                "no CUDA release in the matrix supports this hardware with a supported "
                "driver branch"
            )
        raise NoCompatibleSet(reasons)
    return candidates


def _pick(
    matrix: Matrix,
    candidates: list[_Candidate],
    torch_choice: tuple[str, TorchVariant] | None,
    hw: list[tuple[GpuInfo, Architecture]],
    explain: list[str],
) -> _Candidate:
    """The candidate to propose (the torch wheel's CUDA, else the newest with a cuDNN, else the
    newest), with the line explaining its CUDA appended to ``explain``."""
    ccs = [info.compute_capability for info, _ in hw]
    preferred = [c for c in candidates if torch_choice and c[0].version == torch_choice[1].cuda]
    # A GPU whose architecture no source dates (Jetson Thor, cc 11.0): every CUDA is "not known
    # to lack it", so the newest major is proposed; preferring an old CUDA because an old
    # cuDNN's open-ended "SM 3.5 and later" covers any cc proposed CUDA 11.7 for a 2025 GPU.
    undated = [
        info
        for info, arch in hw
        if cuda_supports_arch(
            arch, info.compute_capability, V(candidates[0][0].version, field="cuda")
        )
        is None
    ]
    with_cudnn = [c for c in candidates if newest_cudnn(matrix, c[0].version, ccs, c[2])]
    if undated:  # only the newest CUDA major is offered
        newest_major = V(candidates[0][0].version, field="cuda").release[0]
        with_cudnn = [
            c for c in with_cudnn if V(c[0].version, field="cuda").release[0] == newest_major
        ]
    pick = (preferred or with_cudnn or candidates)[0]
    minor = pick[0]
    supports = (
        "newest release (no source says which CUDA first supports "
        + ", ".join(gpu_label(i) for i in undated)
        + ")"
        if undated
        else "newest release that supports this hardware"
    )
    explain.append(
        f"CUDA {minor.version}: {supports}"
        + (
            f" and matches the torch {torch_choice[1].tag} wheel"
            if preferred and torch_choice
            else ""
        )
        + f"; {minor.newest.label} needs driver >= {minor.newest.min_driver}"
    )
    return pick


def _framework_answer(
    matrix: Matrix,
    torch_choice: tuple[str, TorchVariant] | None,
    tf_rel: TensorflowRelease | None,
    hw: list[tuple[GpuInfo, Architecture]],
    explain: list[str],
) -> tuple[dict[str, str], dict[str, str]]:
    """The frameworks proposed and torch's install command (explained in ``explain``)."""
    fw: dict[str, str] = {}
    install: dict[str, str] = {}
    if torch_choice:
        rel_version, var = torch_choice
        fw["torch"] = f"{rel_version}+{var.tag}"
        install["torch"] = _torch_install(matrix, rel_version, var)
        explain.append(f"install torch with: {install['torch']}")
        sure = all(variant_runs_on(var, i, a) for i, a in hw)
        built = "built for this hardware" if sure else "not known to exclude this hardware"
        explain.append(
            f"torch {fw['torch']}: newest wheel variant {built} "
            f"(bundles CUDA {var.cuda}{', cuDNN ' + var.cudnn if var.cudnn else ''})"
        )
    if tf_rel:
        fw["tensorflow"] = tf_rel.version
    return fw, install


def _fixed_text(fix: BranchFix, minimum: Version) -> str:
    """Why the minimum is what it is, when NVIDIA's bulletins set it."""
    if fix.first_fixed is None or V(fix.first_fixed, field="fixed") != minimum:
        return ""
    bulletins = ", ".join(a.id for a in fix.bulletins)
    return (
        f" (the first R{fix.branch} driver that NVIDIA security bulletin(s) {bulletins} call fixed)"
    )


def _unfixed_text(fix: BranchFix) -> str:
    bulletins = ", ".join(f"{a.id} ({a.date})" for a in fix.unfixed)
    return f"NVIDIA security bulletin(s) {bulletins} fix newer branches but not R{fix.branch}"


def _cudnn_choice(
    m: Matrix,
    minor: CudaMinor,
    ccs: list[str],
    drv_min: Version,
    tf_rel: TensorflowRelease | None,
    torch_choice: tuple[str, TorchVariant] | None,
) -> tuple[str | None, str]:
    """The cuDNN to propose and why: TensorFlow's tested one; else the one the torch wheel pins
    (when the data knows it); else the newest the matrix has for the CUDA and hardware."""
    if tf_rel is not None:
        return tf_rel.cudnn, (
            f"TensorFlow {tf_rel.version} was tested with CUDA {tf_rel.cuda} and cuDNN "
            f"{tf_rel.cudnn}"
        )
    if torch_choice is not None and torch_choice[1].cudnn:
        version, var = torch_choice
        bundled = V(torch_choice[1].cudnn, field="cudnn")
        pinned = ".".join(str(x) for x in bundled.release[:3])  # 9.24.0.43 -> 9.24.0
        unlisted = find_cudnn(m, V(pinned, field="cudnn")) is None
        return pinned, (
            f"cuDNN {pinned}: the one the torch {version}+{var.tag} wheel pins ({bundled})"
            + ("; the matrix has no row for it, so its limits were not checked" if unlisted else "")
        )
    found = newest_cudnn(m, minor.version, ccs, drv_min)
    if found:
        return found[0].version, (
            f"cuDNN {found[0].version}: newest release with a package for CUDA {minor.version} "
            "built for this hardware"
        )
    return None, (
        f"no cuDNN release in the matrix has a package for CUDA {minor.version} on this hardware"
    )


def _torch_install(m: Matrix, version: str, var: TorchVariant) -> str:
    """pip's command for torch ``version`` ``var``: plain when it is PyPI's default wheel."""
    wheel = wheel_release(m, "torch", V(version, field="torch"))
    default = (
        default_torch_variant(find_torch(m, V(version, field="torch")), wheel) if wheel else None
    )
    is_default = default is not None and default.tag == var.tag and wheel is not None
    shown = wheel.version if is_default and wheel is not None else version
    return torch_install_command(m, shown, var, is_default)


def _reject_cuda(
    m: Matrix,
    minor: CudaMinor,
    mv: Version,
    series: Version | None,
    tf_rel: Any,
    hw: list[tuple[GpuInfo, Architecture]],
) -> str | None:
    if series is not None and not same_series(mv, series) and not same_series(series, mv):
        return f"CUDA {minor.version} is outside the requested {series}"
    if minor.confidence == "single-source":
        return f"CUDA {minor.version} rests on a single source"
    if tf_rel is not None and minor.version != tf_rel.cuda:
        return (
            f"TensorFlow {tf_rel.version} was tested with CUDA {tf_rel.cuda}, not {minor.version}"
        )
    for info, arch in hw:
        if cuda_supports_arch(arch, info.compute_capability, mv) is False:
            return (
                f"CUDA {minor.version} does not support {gpu_label(info)} (supported by "
                f"{arch_cuda_range(arch, info.compute_capability)})"
            )
    return None


def _pick_torch(
    m: Matrix,
    spec: FrameworkSpec | None,
    hw: list[tuple[GpuInfo, Architecture]],
    reasons: list[str],
) -> tuple[str, TorchVariant] | None:
    if spec is None:
        return None
    if spec.version is None:
        releases = [r for r in reversed(m.pytorch) if r.confidence != "single-source"]
        confirmed = [
            r
            for r in releases
            if any(all(variant_runs_on(v, i, a) for i, a in hw) for v in r.variants)
        ]
        rel = (confirmed or releases)[0]
        version_text = rel.version
    else:
        found = find_torch(m, spec.version)
        if found is None:
            known = ", ".join(r.version for r in m.pytorch)
            raise UnknownNameError(
                f"--framework: torch {spec.version} is not in the matrix (known: {known})"
            )
        rel = found
        version_text = str(Version(".".join(str(x) for x in spec.version.release)))
    local = spec.version.local if spec.version is not None else None
    wheel = wheel_release(m, "torch", V(version_text, field="torch")) if local is None else None
    default = default_torch_variant(rel, wheel) if wheel is not None else None
    if wheel is not None and default is not None:
        version_text = wheel.version
        if all(variant_runs_on(default, i, a) is not False for i, a in hw):
            return version_text, default  # what plain pip install gets, when it can run
    variants = [v for v in rel.variants if local is None or v.tag == local]
    if not variants:
        reasons.append(
            f"torch {rel.version} has no {local} wheel (it has "
            f"{', '.join(v.tag for v in rel.variants)})"
        )
        return None
    fitting = [v for v in variants if all(variant_runs_on(v, i, a) is not False for i, a in hw)]
    if not fitting:
        names = ", ".join(gpu_label(i) for i, _ in hw)
        reasons.append(
            f"no torch {rel.version} wheel ({', '.join(v.tag for v in variants)}) is "
            f"built for {names}"
        )
        return None
    sure = [v for v in fitting if all(variant_runs_on(v, i, a) for i, a in hw)]
    pool = sure or fitting
    stable = [v for v in pool if v.channel == "stable"]
    return version_text, (stable or pool)[-1]
