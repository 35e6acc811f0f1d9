"""Judge a concrete stack (:func:`check_stack`) and propose the newest compatible one
(:func:`resolve_stack`), both from the compatibility matrix.

Rule ids (stable, used in JSON output and by waivers later):

==========================  ========  =====================================================
rule                        severity  meaning
==========================  ========  =====================================================
gpu_unknown                 warn      GPU name not in the matrix; GPU checks skipped
gpu_low_confidence          info      GPU row rests on a single non-NVIDIA source
cuda_unknown                warn      CUDA release not in the matrix
cuda_driver                 info      driver meets the toolkit's minimum
cuda_driver_minor_compat    warn      below the toolkit minimum, above the major's floor
cuda_driver_floor           error     below the major's minor-version-compat floor
cuda_arch_unsupported       error     CUDA dropped / does not yet support the architecture
cuda_arch_unknown           warn      the data does not say whether CUDA supports it
driver_arch_unsupported     error     driver branch newer than the architecture's last
driver_arch_too_old         error     driver older than the first CUDA for the architecture
driver_branch_unknown       info      branch not in the matrix
driver_branch_eol           warn      branch past end of life
cudnn_unknown               warn      cuDNN release not in the matrix
cudnn_cuda_range            error     cuDNN has no package for this CUDA
cudnn_arch                  error     cuDNN not built for the GPU
cudnn_driver                error     driver below the cuDNN package floor
framework_unknown           warn      framework or release not in the matrix
framework_not_cuda          warn      a CPU/ROCm build of the framework
framework_variant           error     no wheel for that CUDA variant
framework_cuda_driver       error     driver cannot serve the wheel's CUDA
framework_arch              error     wheel not built for the GPU's compute capability
framework_arch_unknown      warn      the wheel's architecture list is not known
framework_cudnn_arch        error     the wheel's bundled cuDNN is not built for the GPU
framework_ok                info      a wheel variant that fits
framework_other_variant     info      PyPI's default wheel does not fit; this variant does
framework_default_unknown   warn      which build plain pip install gets is not known
framework_cuda_major        error     TensorFlow built against another CUDA major
framework_cudnn_major       error     TensorFlow built against another cuDNN major
tensorflow_untested_cuda    warn      CUDA other than TensorFlow's tested one
tensorflow_untested_cudnn   warn      cuDNN other than TensorFlow's tested one
fabric_manager_version      error     Fabric Manager version differs from the driver
container_toolkit_driver    error     driver below the container toolkit's minimum
==========================  ========  =====================================================
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace
from typing import Any

from gpuhost.errors import IncompatibleError, UnknownNameError
from gpuhost.matrix.findings import Finding, Severity
from gpuhost.matrix.gpus import gpu_info, unknown_gpu_hint
from gpuhost.matrix.lookup import (
    PYPI_TF,
    FrameworkSpec,
    arch_cuda_range,
    cc_covered,
    cuda_key,
    cuda_supports_arch,
    cudnn_packages,
    default_torch_variant,
    driver_first_for_arch,
    eol_passed,
    find_cudnn,
    find_tensorflow,
    find_torch,
    known_cuda,
    known_driver_versions,
    minor_floor,
    newest_cuda_served,
    newest_cudnn,
    package_covers,
    package_runs_on,
    parse_framework,
    release_text,
    tensorflow_release,
    torch_install_command,
    variant_runs_on,
    wheel_release,
)
from gpuhost.matrix.model import (
    Architecture,
    CudaMinor,
    GpuInfo,
    Matrix,
    TensorflowRelease,
    TorchRelease,
    TorchVariant,
    WheelRelease,
)
from gpuhost.versions import Version, driver_branch, parse_version, same_series

V = parse_version


# The rules an unknown GPU escapes (named in its gpu_unknown warning).
ARCH_RULES = (
    "cuda_arch_unsupported",
    "driver_arch_unsupported",
    "driver_arch_too_old",
    "cudnn_arch",
    "framework_arch",
    "kernel_module_flavour",
)


class _Out:
    """Accumulates findings for one check."""

    def __init__(self, matrix: Matrix) -> None:
        self.matrix = matrix
        self.items: list[Finding] = []

    def add(self, rule: str, severity: Severity, message: str, source: str) -> None:
        self.items.append(Finding(rule, severity, message, self.matrix.url(source)))


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


def _gpus(out: _Out, names: list[str]) -> list[tuple[GpuInfo, Architecture]]:
    found = []
    for name in names:
        info = gpu_info(out.matrix, name)
        if info is None:
            out.add(
                "gpu_unknown",
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
                "gpu_low_confidence",
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


def _label(info: GpuInfo) -> str:
    return f"{info.name} ({info.architecture}, cc {info.compute_capability})"


def check_stack(
    matrix: Matrix,
    *,
    gpus: list[str] | tuple[str, ...] = (),
    driver: str | None = None,
    cuda: str | None = None,
    cudnn: str | None = None,
    frameworks: list[str] | tuple[str, ...] = (),
    fabric_manager: str | None = None,
    container_toolkit: str | None = None,
    as_of: dt.date | None = None,
) -> list[Finding]:
    """Judge a concrete stack; return findings (see the module docstring for rule ids).

    ``gpus``: names as users type them or nvidia-smi prints them. ``driver``/``cuda``/``cudnn``:
    version strings (``fabric_manager``: the installed nvidia-fabricmanager version, any package
    decoration already stripped). ``frameworks``: ``torch==2.5.1+cu124``, ``tensorflow==2.18.0``.
    ``as_of``: the date driver end-of-life is judged on (default today).
    Raises VersionError for a value that is not a version (bad input, exit 2); a well-formed but
    unknown version or GPU gives a warning instead.
    """
    out = _Out(matrix)
    as_of = as_of or dt.date.today()
    drv = V(driver, field="--driver") if driver is not None else None
    if drv is not None:
        driver_branch(drv)
    cv = V(cuda, field="--cuda") if cuda is not None else None
    cdv = V(cudnn, field="--cudnn") if cudnn is not None else None
    specs = [parse_framework(f) for f in frameworks]
    hw = _gpus(out, list(gpus))

    minor = _check_cuda_driver(out, cv, drv)
    if cv is not None:
        _check_cuda_arch(out, cv, hw)
    if drv is not None:
        _check_driver(out, drv, hw, as_of)
    if cdv is not None:
        _check_cudnn(out, cdv, cv, minor, drv, hw)
    for spec in specs:
        if spec.name == "torch" and spec.known:
            _check_torch(out, spec, drv, hw)
        elif spec.name == "tensorflow":
            _check_tensorflow(out, spec, cv, cdv, drv, hw)
        else:
            out.add(
                "framework_unknown",
                "warning",
                f'framework "{spec.raw}" is not in the matrix (known: torch, tensorflow); '
                "not checked",
                "pytorch-release-md",
            )
    if fabric_manager is not None and drv is not None:
        fm = V(fabric_manager, field="--fabric-manager")
        if fm != drv:
            out.add(
                "fabric_manager_version",
                "error",
                f"nvidia-fabricmanager {fabric_manager} differs from driver {driver}; Fabric "
                f"Manager refuses to start unless both are the same version; fix: install "
                f"nvidia-fabricmanager {driver}",
                matrix.policies["fabric_manager"].source,
            )
    if container_toolkit is not None and drv is not None:
        policy = matrix.policies["container_toolkit"]
        need = str(policy.values["min_driver"])
        if drv < V(need, field="policies.container_toolkit.min_driver"):
            out.add(
                "container_toolkit_driver",
                "error",
                f"nvidia-container-toolkit {container_toolkit} needs driver >= {need}; found "
                f"{driver}; fix: upgrade the driver",
                policy.source,
            )
    found = judged_set(gpus, driver, cuda, cudnn, frameworks, fabric_manager, container_toolkit)
    return [
        replace(
            f,
            found=f.found or found,
            expected=f.expected or f"a set the compatibility matrix accepts (rule {f.rule})",
        )
        for f in out.items
    ]


def judged_set(
    gpus: list[str] | tuple[str, ...] = (),
    driver: str | None = None,
    cuda: str | None = None,
    cudnn: str | None = None,
    frameworks: list[str] | tuple[str, ...] = (),
    fabric_manager: str | None = None,
    container_toolkit: str | None = None,
) -> str:
    """The versions ``check_stack`` judged, as a finding's ``found``."""
    parts = [f"driver {driver or 'none'}", f"CUDA {cuda or 'none'}"]
    if cudnn:
        parts.append(f"cuDNN {cudnn}")
    if gpus:
        parts.append(f"GPUs {', '.join(sorted(set(gpus)))}")
    parts.extend(sorted(frameworks))
    if fabric_manager:
        parts.append(f"fabric manager {fabric_manager}")
    if container_toolkit:
        parts.append(f"container toolkit {container_toolkit}")
    return "; ".join(parts)


def _check_cuda_driver(out: _Out, cv: Version | None, drv: Version | None) -> CudaMinor | None:
    if cv is None:
        return None
    m = out.matrix
    minor = m.cuda_minor(cuda_key(cv))
    if minor is None:
        out.add(
            "cuda_unknown",
            "warning",
            f"CUDA {cv} is not in the compatibility matrix (it lists {known_cuda(m)}); its driver "
            "requirement was not checked"
            + newer_than_data(m, cv, [c.version for c in m.cuda], UPDATE_DATA),
            "cuda-release-notes",
        )
    floor = minor_floor(m, cv.release[0])
    if drv is None:
        return minor
    if minor is None:
        if floor and drv < V(floor, field="floor"):
            out.add(
                "cuda_driver_floor",
                "error",
                f"driver {drv} is below {floor}, the oldest driver that runs anything built with "
                f"CUDA {cv.release[0]}.x; fix: upgrade the driver to >= {floor}",
                m.minor_compat[cv.release[0]].source,
            )
        return None
    rel = minor.release_for(cv)
    need = V(rel.min_driver, field="driver")
    if drv >= need:
        out.add(
            "cuda_driver",
            "info",
            f"driver {drv} meets CUDA {rel.label} (needs >= {rel.min_driver})",
            rel.source,
        )
    elif floor is not None and drv >= V(floor, field="floor"):
        out.add(
            "cuda_driver_minor_compat",
            "warning",
            f"driver {drv} is below CUDA {rel.label}'s minimum {rel.min_driver} but at or above "
            f"the CUDA {minor.major}.x minor-version-compatibility floor {floor}: applications run "
            "with reduced features (no PTX JIT of newer code; some APIs fail with "
            f"cudaErrorCallRequiresNewerDriver); fix: upgrade the driver to >= {rel.min_driver}",
            m.minor_compat[minor.major].source,
        )
    else:
        served = newest_cuda_served(m, drv)
        alt = f", or use CUDA {served.version} or older" if served else ""
        floor_text = f"below the CUDA {minor.major}.x floor {floor}" if floor else "too old"
        out.add(
            "cuda_driver_floor",
            "error",
            f"driver {drv} is {floor_text}: nothing built with CUDA {minor.major}.x runs on it "
            f"(CUDA {rel.label} needs >= {rel.min_driver}); fix: upgrade the driver to >= "
            f"{rel.min_driver}{alt}",
            m.minor_compat[minor.major].source if floor else rel.source,
        )
    return minor


def _check_cuda_arch(out: _Out, cv: Version, hw: list[tuple[GpuInfo, Architecture]]) -> None:
    for info, arch in hw:
        ok = cuda_supports_arch(arch, info.compute_capability, cv)
        if ok is False:
            first = arch.first_cuda_for(info.compute_capability)
            dropped = first is None or V(cuda_key(cv), field="c") >= V(first, field="c")
            what = "dropped" if dropped else "does not yet support"
            out.add(
                "cuda_arch_unsupported",
                "error",
                f"CUDA {cv} {what} {_label(info)}: it is supported by "
                f"{arch_cuda_range(arch, info.compute_capability)}; fix: use a CUDA release in "
                "that range",
                arch.source,
            )
        elif ok is None:
            out.add(
                "cuda_arch_unknown",
                "warning",
                f"no source in the matrix says which CUDA release first supports {_label(info)}; "
                f"CUDA {cv} was not checked against it",
                arch.source,
            )


def _check_driver(
    out: _Out, drv: Version, hw: list[tuple[GpuInfo, Architecture]], as_of: dt.date
) -> None:
    m = out.matrix
    number = driver_branch(drv)
    for info, arch in hw:
        last = arch.last_driver_branch
        if last is not None and number > last:
            known = known_driver_versions(m, last)
            hint = f" (e.g. >= {known[0]})" if known else ""
            out.add(
                "driver_arch_unsupported",
                "error",
                f"driver {drv} (R{number}) does not support {_label(info)}: R{last} is the last "
                f"branch for {arch.name}; fix: install an R{last} driver{hint}",
                arch.source,
            )
        first = driver_first_for_arch(m, arch, info.compute_capability)
        if first is not None and drv < V(first[1], field="driver"):
            out.add(
                "driver_arch_too_old",
                "error",
                f"driver {drv} predates {_label(info)}: CUDA {first[0]}, the first release for "
                f"it, needs >= {first[1]}; fix: upgrade the driver to >= {first[1]}",
                arch.source,
            )
    branch = m.branch(number)
    if branch is None:
        out.add(
            "driver_branch_unknown",
            "info",
            f"driver branch R{number} is not in the matrix; its support status is unknown"
            + newer_than_data(
                m,
                V(str(number), field="b"),
                [str(b.branch) for b in m.driver_branches],
                UPDATE_DATA,
            ),
            "driver-support-615",
        )
        return
    if eol_passed(branch, as_of):
        when = "" if branch.eol == "ended" else f" since {branch.eol}"
        out.add(
            "driver_branch_eol",
            "warning",
            f"driver branch R{number} ({branch.type}) is end of life{when}: no more security "
            "fixes; fix: move to a supported LTSB/PB branch",
            branch.source,
        )


def _check_cudnn(
    out: _Out,
    cdv: Version,
    cv: Version | None,
    minor: CudaMinor | None,
    drv: Version | None,
    hw: list[tuple[GpuInfo, Architecture]],
) -> None:
    m = out.matrix
    rel = find_cudnn(m, cdv)
    if rel is None:
        known = ", ".join(r.version for r in m.cudnn)
        out.add(
            "cudnn_unknown",
            "warning",
            f"cuDNN {cdv} is not in the compatibility matrix (it lists {known}); its CUDA, driver "
            "and architecture limits were not checked"
            + newer_than_data(m, cdv, [r.version for r in m.cudnn], UPDATE_DATA),
            "cudnn-9.17.0",
        )
        return
    cuda = minor.version if minor is not None else None
    pkgs = cudnn_packages(rel, cuda)
    if cv is not None and not pkgs:
        ranges = "; ".join(f"{p.cuda[0]} to {p.cuda[-1]}" for p in rel.packages)
        alt = _newest_cudnn_for(m, cuda_key(cv), [i.compute_capability for i, _ in hw], drv)
        out.add(
            "cudnn_cuda_range",
            "error",
            f"cuDNN {rel.version} has no package for CUDA {cuda_key(cv)} (its packages cover CUDA "
            f"{ranges}); fix: {alt}",
            rel.source,
        )
        return
    for info, arch in hw:
        if not any(package_runs_on(p, info.compute_capability, arch) for p in pkgs):
            alt = _newest_cudnn_for(m, cuda, [info.compute_capability], drv)
            out.add(
                "cudnn_arch",
                "error",
                f"cuDNN {rel.version} is not built for {_label(info)}; fix: {alt}",
                rel.source,
            )
    floors = [V(p.min_driver, field="d") for p in pkgs if p.min_driver]
    if drv is not None and floors and drv < min(floors):
        out.add(
            "cudnn_driver",
            "error",
            f"driver {drv} is below cuDNN {rel.version}'s floor {min(floors)}"
            f"{' for CUDA ' + cuda if cuda else ''}; fix: upgrade the driver to >= {min(floors)}",
            rel.source,
        )


def _newest_cudnn_for(m: Matrix, cuda: str | None, ccs: list[str], drv: Version | None) -> str:
    if cuda is None:
        return "pick a cuDNN release whose support matrix lists this GPU"
    found = newest_cudnn(m, cuda, ccs, drv)
    if found is None:
        return f"no cuDNN release in the matrix fits CUDA {cuda} on this hardware"
    return f"use cuDNN {found[0].version} (newest listed for CUDA {cuda} on this hardware)"


def _framework_cuda_floor(m: Matrix, cuda: str, drv: Version | None) -> tuple[int, str | None]:
    """A framework built with CUDA ``cuda``: its CUDA major and, when the driver ``drv`` is below
    that major's minor-version-compatibility floor, the floor (None when the driver meets it or is
    unknown)."""
    major = int(cuda.split(".")[0])
    floor = minor_floor(m, major)
    if drv is not None and floor and drv < V(floor, field="floor"):
        return major, floor
    return major, None


def _variant_problems(
    out: _Out,
    label: str,
    var: TorchVariant,
    drv: Version | None,
    hw: list[tuple[GpuInfo, Architecture]],
) -> list[tuple[str, Severity, str, str]]:
    m = out.matrix
    problems: list[tuple[str, Severity, str, str]] = []
    major, floor = _framework_cuda_floor(m, var.cuda, drv)
    if floor is not None:
        problems.append(
            (
                "framework_cuda_driver",
                "error",
                f"{label} bundles CUDA {var.cuda}; driver {drv} is below the CUDA {major}.x floor "
                f"{floor}; fix: upgrade the driver to >= {floor} or use a wheel built for an "
                "older CUDA",
                "pytorch-driver-floor",
            )
        )
    for info, arch in hw:
        runs = variant_runs_on(var, info, arch)
        if runs is False:
            built = (
                f"is built for {', '.join(var.archs)}, not for {_label(info)}"
                if var.archs is not None
                else f"is built with CUDA {var.cuda}, which does not support {_label(info)}"
            )
            fix = _torch_for_gpu(m, info)
            problems.append(
                (
                    "framework_arch",
                    "error",
                    f"{label} {built}; fix: {fix}",
                    var.archs_source or "arch-matrix",
                )
            )
        elif (cudnn_source := _bundled_cudnn_misses(m, var, info.compute_capability)) is not None:
            problems.append(
                (
                    "framework_cudnn_arch",
                    "error",
                    f"{label} bundles cuDNN {var.cudnn}, whose packages for CUDA {var.cuda} are "
                    f"not built for {_label(info)}; fix: {_torch_for_gpu(m, info)}",
                    cudnn_source,
                )
            )
        if runs is None:
            problems.append(
                (
                    "framework_arch_unknown",
                    "warning",
                    f"the architectures {label} is built for are not known from a source; cannot "
                    f"confirm it runs on {_label(info)} (check torch.cuda.get_arch_list() on the "
                    "host)",
                    "pytorch-release-md",
                )
            )
    return problems


def _bundled_cudnn_misses(m: Matrix, var: TorchVariant, cc: str) -> str | None:
    """The cuDNN row's source when the matrix knows the wheel's bundled cuDNN and none of its
    packages for the wheel's CUDA has code for ``cc``; None otherwise (also when unknown)."""
    rel = find_cudnn(m, V(var.cudnn, field="cudnn")) if var.cudnn else None
    pkgs = cudnn_packages(rel, var.cuda) if rel is not None else []
    if rel is None or not pkgs or any(package_covers(p, cc) for p in pkgs):
        return None
    return rel.source


def _torch_for_gpu(m: Matrix, info: GpuInfo) -> str:
    ordered = [r for r in m.pytorch if r.confidence == "single-source"]
    ordered += [r for r in m.pytorch if r.confidence != "single-source"]
    for rel in reversed(ordered):
        for var in reversed(rel.variants):
            if (
                var.archs is not None
                and cc_covered(var.archs, info.compute_capability)
                and _bundled_cudnn_misses(m, var, info.compute_capability) is None
            ):
                cc = info.compute_capability
                return f"use torch {rel.version} {var.tag} (its wheels cover cc {cc})"
    return f"no PyTorch wheel in the matrix is known to cover cc {info.compute_capability}"


def _check_torch(
    out: _Out, spec: FrameworkSpec, drv: Version | None, hw: list[tuple[GpuInfo, Architecture]]
) -> None:
    m = out.matrix
    if spec.version is None:
        out.add(
            "framework_unknown",
            "warning",
            f'"{spec.raw}": give a version (torch==2.5.1) to check it',
            "pytorch-release-md",
        )
        return
    rel = find_torch(m, spec.version)
    local = spec.version.local
    wheel = wheel_release(m, "torch", spec.version) if local is None else None
    default = default_torch_variant(rel, wheel) if wheel is not None else None
    if wheel is not None and default is not None:
        _check_torch_default(out, rel, wheel.version, default, drv, hw)
        return
    if rel is None:
        known = ", ".join(r.version for r in m.pytorch)
        if wheel is not None:  # on PyPI, but neither its metadata nor a matrix row says more
            out.add(
                "framework_unknown",
                "warning",
                f"torch {wheel.version} is on PyPI (released {wheel.released}) but which CUDA "
                f"its wheels bundle is not known: {_no_cuda_why(wheel)} and the matrix has no "
                f"row for it (it lists {known}); not checked; fix: check torch.version.cuda and "
                "torch.cuda.get_arch_list() on the host, or pin a listed release",
                "pypi-metadata",
            )
            return
        out.add(
            "framework_unknown",
            "warning",
            f"torch {spec.version} is not in the matrix (it lists {known}); not checked"
            + newer_than_data(out.matrix, spec.version, known.split(", "), UPDATE_WHEELS),
            "pytorch-release-md",
        )
        return
    if wheel is not None:
        why = _no_cuda_why(wheel)
        out.add(
            "framework_default_unknown",
            "warning",
            f"which CUDA build a plain 'pip install torch=={wheel.version}' gets is not known "
            f"({why}); every variant of torch {rel.version} was judged instead",
            "pypi-metadata",
        )
    variants = list(rel.variants)
    if local is not None:
        chosen = [v for v in variants if v.tag == local]
        if not chosen:
            if not local.startswith("cu"):
                out.add(
                    "framework_not_cuda",
                    "warning",
                    f"torch {spec.version} is not a CUDA build; it will not use NVIDIA GPUs",
                    rel.source,
                )
                return
            tags = ", ".join(v.tag for v in variants)
            out.add(
                "framework_variant",
                "error",
                f"torch {rel.version} has no {local} wheel (it has {tags}); fix: pick one of those",
                rel.source,
            )
            return
        variants = chosen
    results = []
    for var in variants:
        label = f"torch {spec.version}" if local else f"torch {spec.version}+{var.tag}"
        results.append((var, _variant_problems(out, label, var, drv, hw)))
    fitting = [(v, p) for v, p in results if not any(s == "error" for _, s, _, _ in p)]
    if local is None and fitting:
        var, problems = ([f for f in fitting if f[0].channel == "stable"] or fitting)[-1]
        out.add(
            "framework_ok",
            "info",
            f"torch {spec.version}: the {var.tag} wheel (CUDA {var.cuda}) fits this stack",
            rel.source,
        )
        for rule, sev, msg, src in problems:
            out.add(rule, sev, msg, src)
        return
    for var, problems in results:
        for rule, sev, msg, src in problems:
            out.add(rule, sev, msg, src)
        if local is not None and not any(sev == "error" for _, sev, _, _ in problems):
            out.add(
                "framework_ok",
                "info",
                f"torch {spec.version}: the {var.tag} wheel (CUDA {var.cuda}"
                + (f", cuDNN {var.cudnn}" if var.cudnn else "")
                + ") fits this stack; install: "
                + torch_install_command(m, release_text(spec.version), var, False),
                rel.source,
            )


def _no_cuda_why(wheel: WheelRelease) -> str:
    """Why PyPI's data does not tell which CUDA a release's default wheel bundles."""
    if "x86_64" in wheel.no_metadata:
        return "the index publishes no core metadata for its Linux x86_64 wheels"
    return "its Linux x86_64 wheel on PyPI pins no CUDA libraries"


def _check_torch_default(
    out: _Out,
    rel: TorchRelease | None,
    version: str,
    default: TorchVariant,
    drv: Version | None,
    hw: list[tuple[GpuInfo, Architecture]],
) -> None:
    """``torch==X`` without a local tag: judge the wheel pip installs from PyPI; when it does not
    fit, name a variant that does and the command that installs it."""
    m = out.matrix
    libs = f"CUDA {default.cuda}" + (f", cuDNN {default.cudnn}" if default.cudnn else "")
    label = f"torch {version} (PyPI's default wheel, {default.tag})"
    problems = _variant_problems(out, label, default, drv, hw)
    for rule, sev, msg, src in problems:
        out.add(rule, sev, msg, src)
    if not any(sev == "error" for _, sev, _, _ in problems):
        out.add(
            "framework_ok",
            "info",
            f"torch {version}: PyPI's default wheel ({default.tag}: {libs}) fits this stack; "
            f"install: {torch_install_command(m, version, default, True)}",
            "pypi-metadata",
        )
        return
    others = [v for v in (rel.variants if rel is not None else ()) if v.tag != default.tag]
    fitting = [
        v
        for v in others
        if not any(sev == "error" for _, sev, _, _ in _variant_problems(out, "", v, drv, hw))
    ]
    if not fitting:
        return
    sure = [v for v in fitting if all(variant_runs_on(v, i, a) for i, a in hw)]
    pool = sure or fitting
    var = ([v for v in pool if v.channel == "stable"] or pool)[-1]
    out.add(
        "framework_other_variant",
        "info",
        f"torch {version}: the {var.tag} wheel (CUDA {var.cuda}) fits this stack instead of "
        f"PyPI's {default.tag}; install it with: {torch_install_command(m, version, var, False)}",
        "pytorch-previous-versions",
    )


def _check_tensorflow(
    out: _Out,
    spec: FrameworkSpec,
    cv: Version | None,
    cdv: Version | None,
    drv: Version | None,
    hw: list[tuple[GpuInfo, Architecture]],
) -> None:
    m = out.matrix
    rel = tensorflow_release(m, spec.version) if spec.version is not None else None
    if rel is None:
        known = ", ".join(r.version for r in m.tensorflow)
        out.add(
            "framework_unknown",
            "warning",
            f'"{spec.raw}" is not in the matrix (TensorFlow releases listed: {known}); not checked'
            + (
                newer_than_data(m, spec.version, known.split(", "), UPDATE_WHEELS)
                if spec.version is not None
                else ""
            ),
            "tensorflow-tested",
        )
        return
    first = len(out.items)
    label = f"TensorFlow {spec.version}"
    tested = "was tested with" if rel.source != PYPI_TF else "pins (and-cuda)"
    built = V(rel.cuda, field="c").release[0]
    built_cudnn = V(rel.cudnn, field="c").release[0]
    if cv is not None and cv.release[0] != built:
        out.add(
            "framework_cuda_major",
            "error",
            f"{label} is built against CUDA {built} (it loads the CUDA {built} libraries); the "
            f"stack has CUDA {cv}, so it does not run on the GPU at all; fix: install CUDA "
            f"{rel.cuda}, or pip install 'tensorflow[and-cuda]=={rel.version}'",
            rel.source,
        )
    elif cv is not None and cuda_key(cv) != rel.cuda and not _at_least(rel, cv, rel.cuda):
        out.add(
            "tensorflow_untested_cuda",
            "warning",
            f"{label} {tested} CUDA {rel.cuda}; the "
            f"stack has CUDA {cv}; fix: use CUDA {rel.cuda} (pip install "
            "tensorflow[and-cuda] brings its tested CUDA libraries)",
            rel.source,
        )
    if cdv is not None and cdv.release[0] != built_cudnn:
        out.add(
            "framework_cudnn_major",
            "error",
            f"{label} is built against cuDNN {built_cudnn} (it loads libcudnn.so.{built_cudnn}); "
            f"the stack has cuDNN {cdv}, so it does not run on the GPU at all; fix: install "
            f"cuDNN {rel.cudnn}",
            rel.source,
        )
    elif (
        cdv is not None
        and cdv.release[:2] != V(rel.cudnn, field="c").release[:2]
        and not _at_least(rel, cdv, rel.cudnn)
    ):
        out.add(
            "tensorflow_untested_cudnn",
            "warning",
            f"{label} {tested} cuDNN {rel.cudnn}; "
            f"the stack has cuDNN {cdv}; fix: use cuDNN {rel.cudnn}",
            rel.source,
        )
    major, floor = _framework_cuda_floor(m, rel.cuda, drv)
    if floor is not None:
        out.add(
            "framework_cuda_driver",
            "error",
            f"{label} is built with CUDA {rel.cuda}; driver "
            f"{drv} is below the CUDA {major}.x floor {floor}; fix: upgrade the driver to >= "
            f"{floor}",
            m.minor_compat[major].source,
        )
    for info, arch in hw:
        if cuda_supports_arch(arch, info.compute_capability, V(rel.cuda, field="c")) is False:
            # PTX is only ever compiled forward, to newer GPUs: a CUDA that has no code for this
            # architecture cannot produce anything it runs.
            out.add(
                "framework_arch",
                "error",
                f"{label} is built with CUDA {rel.cuda}, which does not support {_label(info)} "
                f"({arch_cuda_range(arch, info.compute_capability)}); fix: a TensorFlow release "
                "built with a CUDA in that range, or a newer GPU",
                arch.source,
            )
    if len(out.items) == first:  # nothing against it
        how = "tested with"
        if rel.source == PYPI_TF:
            how = "its and-cuda extra asks for at least" if rel.at_least else "its and-cuda pins"
        out.add(
            "framework_ok",
            "info",
            f"{label} ({how} CUDA {rel.cuda}, cuDNN {rel.cudnn}) fits this stack; install: "
            f"pip install 'tensorflow[and-cuda]=={rel.version}'",
            rel.source,
        )


def _at_least(rel: TensorflowRelease, found: Version, floor: str) -> bool:
    """An and-cuda range (>=) that ``found`` satisfies: same major, not older."""
    need = V(floor, field="c")
    return rel.at_least and found.release[0] == need.release[0] and found >= need


# --------------------------------------------------------------------------------------------
# resolve


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
) -> Resolution:
    """Propose the newest supported, mutually compatible driver branch, CUDA, cuDNN and wheels.

    Driver branches considered are LTSB/PB branches not past end of life on ``as_of`` (default
    today) that every GPU supports. ``cuda`` restricts the CUDA series ("12" or "12.4").
    ``os`` is recorded in the explanation (OS-specific package sets are profiles).
    Raises :class:`NoCompatibleSet` (exit 1) with reasons when nothing fits, VersionError or
    UnknownNameError for bad input (exit 2).
    """
    as_of = as_of or dt.date.today()
    out = _Out(matrix)
    hw = _gpus(out, list(gpus))
    explain: list[str] = []
    for f in out.items:
        if f.rule == "gpu_unknown":
            explain.append(f.message)
    for info, arch in hw:
        explain.append(
            f"{info.name}: {info.model}, {arch.name}, compute capability {info.compute_capability}"
        )
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
    series = V(cuda, field="--cuda") if cuda is not None else None
    specs = [parse_framework(f) for f in frameworks]
    torch_spec = next((s for s in specs if s.name == "torch"), None)
    tf_spec = next((s for s in specs if s.name == "tensorflow"), None)
    for s in specs:
        if not s.known:
            raise UnknownNameError(
                f'--framework: "{s.raw}" is not a known framework (torch, tensorflow)'
            )
    ccs = [info.compute_capability for info, _ in hw]
    reasons: list[str] = []

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
    if reasons:
        raise NoCompatibleSet(reasons)

    floor_needed = V(torch_choice[1].cuda, field="c").release[0] if torch_choice else None
    candidates: list[tuple[CudaMinor, int, Version]] = []
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
                lowest = known_driver_versions(matrix, b.branch)[0]
                candidates.append((minor, b.branch, max(need, lowest)))
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
    minor, branch, drv_min = pick
    supports = (
        "newest release (no source says which CUDA first supports "
        + ", ".join(_label(i) for i in undated)
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
    chosen = matrix.branch(branch)
    assert chosen is not None
    explain.append(
        f"driver R{branch} ({chosen.type}, EOL {chosen.eol}): newest supported branch for this "
        f"hardware; minimum version {drv_min}"
    )
    cudnn_text: str | None = None
    if tf_rel is not None:
        cudnn_text = tf_rel.cudnn
        explain.append(
            f"TensorFlow {tf_rel.version} was tested with CUDA {tf_rel.cuda} and cuDNN "
            f"{tf_rel.cudnn}"
        )
    else:
        found = newest_cudnn(matrix, minor.version, ccs, drv_min)
        if found:
            cudnn_text = found[0].version
            explain.append(
                f"cuDNN {found[0].version}: newest release with a package for CUDA "
                f"{minor.version} built for this hardware"
            )
        else:
            explain.append(
                f"no cuDNN release in the matrix has a package for CUDA {minor.version} "
                "on this hardware"
            )
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
                f"CUDA {minor.version} does not support {_label(info)} (supported by "
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
        names = ", ".join(_label(i) for i, _ in hw)
        reasons.append(
            f"no torch {rel.version} wheel ({', '.join(v.tag for v in variants)}) is "
            f"built for {names}"
        )
        return None
    sure = [v for v in fitting if all(variant_runs_on(v, i, a) for i, a in hw)]
    pool = sure or fitting
    stable = [v for v in pool if v.channel == "stable"]
    return version_text, (stable or pool)[-1]
