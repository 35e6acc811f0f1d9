"""Judge a concrete stack against the compatibility matrix (:func:`check_stack`); the framework
rules (torch, TensorFlow) are in :mod:`gpuhost.matrix.framework_rules`.

Rule ids (stable, used in JSON output and by waivers later):

==========================  ========  =====================================================
rule                        severity  meaning
==========================  ========  =====================================================
gpu.unknown                 warn      GPU name not in the matrix; GPU checks skipped
gpu.low-confidence          info      GPU row rests on a single non-NVIDIA source
cuda.unknown                warn      CUDA release not in the matrix
cuda.driver                 info      driver meets the toolkit's minimum
cuda.driver-minor-compat    warn      below the toolkit minimum, above the major's floor
cuda.driver-floor           error     below the major's minor-version-compat floor
cuda.driver-unknown         warn      no driver floor known for the CUDA major
cuda.arch-unsupported       error     CUDA dropped / does not yet support the architecture
cuda.arch-unknown           warn      the data does not say whether CUDA supports it
driver.arch-unsupported     error     driver branch newer than the architecture's last
driver.arch-too-old         error     driver older than the first CUDA for the architecture
driver.branch-unknown       warn      branch not in the matrix (support status unknown)
driver.branch-eol           warn      branch past end of life
cudnn.unknown               warn      cuDNN release not in the matrix
cudnn.cuda-range            error     cuDNN has no package for this CUDA
cudnn.arch                  error     cuDNN not built for the GPU
cudnn.driver                error     driver below the cuDNN package floor
framework.unknown           warn      framework or release not in the matrix
framework.not-cuda          warn      a CPU/ROCm build of the framework
framework.variant           error     no wheel for that CUDA variant
framework.cuda-driver       error     driver cannot serve the wheel's CUDA
framework.arch              error     wheel not built for the GPU's compute capability
framework.arch-unknown      warn      the wheel's architecture list is not known
framework.cudnn-arch        error     the wheel's bundled cuDNN is not built for the GPU
framework.ok                info      a wheel variant that fits
framework.other-variant     info      PyPI's default wheel does not fit; this variant does
framework.default-unknown   warn      which build plain pip install gets is not known
framework.cuda-major        error     TensorFlow built against another CUDA major
framework.cudnn-major       error     TensorFlow built against another cuDNN major
tensorflow.untested-cuda    warn      CUDA other than TensorFlow's tested one
tensorflow.untested-cudnn   warn      cuDNN other than TensorFlow's tested one
fabric-manager.version      error     Fabric Manager version differs from the driver
container-toolkit.driver    error     driver below the container toolkit's minimum
==========================  ========  =====================================================

``verify_profile`` adds ``kernel-module.flavour`` and ``kernel-module.arch``; the security rules
(``security.driver``, ``security.container-toolkit``) are in :mod:`gpuhost.matrix.advisories`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

from gpuhost.findings import Finding
from gpuhost.matrix.framework_rules import check_tensorflow, check_torch
from gpuhost.matrix.judging import (
    UPDATE_DATA,
    Out,
    gpu_label,
    known_gpus,
    newer_than_data,
)
from gpuhost.matrix.lookup import (
    arch_cuda_range,
    cuda_key,
    cuda_supports_arch,
    cudnn_packages,
    driver_first_for_arch,
    eol_passed,
    find_cudnn,
    known_cuda,
    known_driver_versions,
    minor_floor,
    newest_cuda_served,
    newest_cudnn,
    package_runs_on,
    parse_framework,
)
from gpuhost.matrix.model import (
    Architecture,
    CudaMinor,
    GpuInfo,
    Matrix,
)
from gpuhost.versions import Version, driver_branch, parse_version

V = parse_version


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
    out = Out(matrix)
    as_of = as_of or dt.date.today()
    drv = V(driver, field="--driver") if driver is not None else None
    if drv is not None:
        driver_branch(drv)
    cv = V(cuda, field="--cuda") if cuda is not None else None
    cdv = V(cudnn, field="--cudnn") if cudnn is not None else None
    specs = [parse_framework(f) for f in frameworks]
    hw = known_gpus(out, list(gpus))

    minor = _check_cuda_driver(out, cv, drv)
    if cv is not None:
        _check_cuda_arch(out, cv, hw)
    if drv is not None:
        _check_driver(out, drv, hw, as_of)
    if cdv is not None:
        _check_cudnn(out, cdv, cv, minor, drv, hw)
    for spec in specs:
        if spec.name == "torch" and spec.known:
            check_torch(out, spec, drv, hw)
        elif spec.name == "tensorflow":
            check_tensorflow(out, spec, cv, cdv, drv, hw)
        else:
            out.add(
                "framework.unknown",
                "warning",
                f'framework "{spec.raw}" is not in the matrix (known: torch, tensorflow); '
                "not checked",
                "pytorch-release-md",
            )
    if drv is not None:
        _check_companions(out, drv, str(driver), fabric_manager, container_toolkit)
    found = judged_set(gpus, driver, cuda, cudnn, frameworks, fabric_manager, container_toolkit)
    return [
        replace(
            f,
            found=f.found or found,
            expected=f.expected or f"a set the compatibility matrix accepts (rule {f.rule})",
        )
        for f in out.items
    ]


def _check_companions(
    out: Out,
    drv: Version,
    driver: str,
    fabric_manager: str | None,
    container_toolkit: str | None,
) -> None:
    """Fabric Manager must be the driver's version (``driver`` as given, ``drv`` parsed); the
    container toolkit needs a driver floor."""
    matrix = out.matrix
    if fabric_manager is not None:
        fm = V(fabric_manager, field="--fabric-manager")
        if fm != drv:
            out.add(
                "fabric-manager.version",
                "error",
                f"nvidia-fabricmanager {fabric_manager} differs from driver {driver}; Fabric "
                f"Manager refuses to start unless both are the same version; fix: install "
                f"nvidia-fabricmanager {driver}",
                matrix.policies["fabric_manager"].source,
            )
    if container_toolkit is not None:
        policy = matrix.policies["container_toolkit"]
        need = str(policy.values["min_driver"])
        if drv < V(need, field="policies.container_toolkit.min_driver"):
            out.add(
                "container-toolkit.driver",
                "error",
                f"nvidia-container-toolkit {container_toolkit} needs driver >= {need}; found "
                f"{driver}; fix: upgrade the driver",
                policy.source,
            )


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


def _check_cuda_driver(out: Out, cv: Version | None, drv: Version | None) -> CudaMinor | None:
    if cv is None:
        return None
    m = out.matrix
    minor = m.cuda_minor(cuda_key(cv))
    floor = minor_floor(m, cv.release[0])
    if minor is None:
        judged = (
            f"only the CUDA {cv.release[0]}.x minor-version-compatibility floor {floor} applies"
            if floor
            else "its driver requirement was not checked"
        )
        out.add(
            "cuda.unknown",
            "warning",
            f"CUDA {cv} is not in the compatibility matrix (it lists {known_cuda(m)}): its exact "
            f"driver minimum and architectures are not known; {judged}"
            + newer_than_data(m, cv, [c.version for c in m.cuda], UPDATE_DATA),
            "cuda-release-notes",
        )
    if drv is None:
        return minor
    if minor is None:
        _unknown_minor_driver(out, cv, drv, floor)
        return None
    rel = minor.release_for(cv)
    need = V(rel.min_driver, field="driver")
    if drv >= need:
        out.add(
            "cuda.driver",
            "info",
            f"driver {drv} meets CUDA {rel.label} (needs >= {rel.min_driver})",
            rel.source,
        )
    elif floor is not None and drv >= V(floor, field="floor"):
        out.add(
            "cuda.driver-minor-compat",
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
            "cuda.driver-floor",
            "error",
            f"driver {drv} is {floor_text}: nothing built with CUDA {minor.major}.x runs on it "
            f"(CUDA {rel.label} needs >= {rel.min_driver}); fix: upgrade the driver to >= "
            f"{rel.min_driver}{alt}",
            m.minor_compat[minor.major].source if floor else rel.source,
        )
    return minor


def _unknown_minor_driver(out: Out, cv: Version, drv: Version, floor: str | None) -> None:
    """A CUDA release the data does not list, judged by its major's minor-version-compatibility
    floor (NVIDIA: every CUDA X.y runs on the X.x floor driver with reduced features): below it is
    an error, at or above it a warning, since the release's own minimum is not in the data."""
    m = out.matrix
    major = cv.release[0]
    if floor is None:
        out.add(
            "cuda.driver-unknown",
            "warning",
            f"unknown: the matrix has no driver floor for CUDA {major}.x, so driver {drv} was not "
            f"judged against CUDA {cv}",
            "cuda-minor-version-compat",
        )
        return
    source = m.minor_compat[major].source
    if drv < V(floor, field="floor"):
        out.add(
            "cuda.driver-floor",
            "error",
            f"driver {drv} is below {floor}, the CUDA {major}.x minor-version-compatibility floor: "
            f"nothing built with CUDA {major}.x runs on it (the exact minimum driver of CUDA "
            f"{cv} is not in the matrix data); fix: upgrade the driver to >= {floor}",
            source,
        )
        return
    out.add(
        "cuda.driver-minor-compat",
        "warning",
        f"driver {drv} meets the CUDA {major}.x minor-version-compatibility floor {floor}, so "
        f"CUDA {cv} applications run on it, possibly with reduced features (no PTX JIT of newer "
        f"code; some APIs fail with cudaErrorCallRequiresNewerDriver); unknown: the exact minimum "
        f"driver of CUDA {cv} is not in the matrix data; fix: update gpuhost's data, or use the "
        f"driver CUDA {cv}'s release notes name",
        source,
    )


def _check_cuda_arch(out: Out, cv: Version, hw: list[tuple[GpuInfo, Architecture]]) -> None:
    for info, arch in hw:
        ok = cuda_supports_arch(arch, info.compute_capability, cv)
        if ok is False:
            first = arch.first_cuda_for(info.compute_capability)
            dropped = first is None or V(cuda_key(cv), field="c") >= V(first, field="c")
            what = "dropped" if dropped else "does not yet support"
            out.add(
                "cuda.arch-unsupported",
                "error",
                f"CUDA {cv} {what} {gpu_label(info)}: it is supported by "
                f"{arch_cuda_range(arch, info.compute_capability)}; fix: use a CUDA release in "
                "that range",
                arch.source,
            )
        elif ok is None:
            out.add(
                "cuda.arch-unknown",
                "warning",
                "no source in the matrix says which CUDA release first supports "
                f"{gpu_label(info)}; CUDA {cv} was not checked against it",
                arch.source,
            )


def _check_driver(
    out: Out, drv: Version, hw: list[tuple[GpuInfo, Architecture]], as_of: dt.date
) -> None:
    m = out.matrix
    number = driver_branch(drv)
    for info, arch in hw:
        last = arch.last_driver_branch
        if last is not None and number > last:
            known = known_driver_versions(m, last)
            hint = f" (e.g. >= {known[0]})" if known else ""
            out.add(
                "driver.arch-unsupported",
                "error",
                f"driver {drv} (R{number}) does not support {gpu_label(info)}: R{last} is the last "
                f"branch for {arch.name}; fix: install an R{last} driver{hint}",
                arch.source,
            )
        first = driver_first_for_arch(m, arch, info.compute_capability)
        if first is not None and drv < V(first[1], field="driver"):
            out.add(
                "driver.arch-too-old",
                "error",
                f"driver {drv} predates {gpu_label(info)}: CUDA {first[0]}, the first release for "
                f"it, needs >= {first[1]}; fix: upgrade the driver to >= {first[1]}",
                arch.source,
            )
    branch = m.branch(number)
    if branch is None:
        out.add(
            "driver.branch-unknown",
            "warning",
            f"unknown: driver branch R{number} is not in the matrix, so whether it is still "
            "supported (end of life, security fixes) was not judged"
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
            "driver.branch-eol",
            "warning",
            f"driver branch R{number} ({branch.type}) is end of life{when}: no more security "
            "fixes; fix: move to a supported LTSB/PB branch",
            branch.source,
        )


def _check_cudnn(
    out: Out,
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
            "cudnn.unknown",
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
            "cudnn.cuda-range",
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
                "cudnn.arch",
                "error",
                f"cuDNN {rel.version} is not built for {gpu_label(info)}; fix: {alt}",
                rel.source,
            )
    floors = [V(p.min_driver, field="d") for p in pkgs if p.min_driver]
    if drv is not None and floors and drv < min(floors):
        out.add(
            "cudnn.driver",
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
