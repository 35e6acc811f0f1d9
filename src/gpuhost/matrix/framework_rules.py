"""The framework rules of :func:`gpuhost.matrix.check.check_stack`: a torch wheel (PyPI's default
or a variant) or a TensorFlow release judged against the driver, CUDA, cuDNN and GPUs (rule ids
listed in :mod:`gpuhost.matrix.check`)."""

from __future__ import annotations

from gpuhost.findings import Severity
from gpuhost.matrix.judging import (
    UPDATE_WHEELS,
    Out,
    gpu_label,
    newer_than_data,
)
from gpuhost.matrix.lookup import (
    PYPI_TF,
    FrameworkSpec,
    arch_cuda_range,
    cc_covered,
    cuda_key,
    cuda_supports_arch,
    cudnn_packages,
    default_torch_variant,
    find_cudnn,
    find_torch,
    minor_floor,
    package_covers,
    release_text,
    tensorflow_archs,
    tensorflow_release,
    torch_install_command,
    variant_runs_on,
    wheel_release,
)
from gpuhost.matrix.model import (
    Architecture,
    GpuInfo,
    Matrix,
    TensorflowRelease,
    TorchRelease,
    TorchVariant,
    WheelRelease,
)
from gpuhost.versions import Version, parse_version

V = parse_version


def framework_cuda_floor(m: Matrix, cuda: str, drv: Version | None) -> tuple[int, str | None]:
    """A framework built with CUDA ``cuda``: its CUDA major and, when the driver ``drv`` is below
    that major's minor-version-compatibility floor, the floor (None when the driver meets it or is
    unknown)."""
    major = int(cuda.split(".")[0])
    floor = minor_floor(m, major)
    if drv is not None and floor and drv < V(floor, field="floor"):
        return major, floor
    return major, None


def _variant_problems(
    out: Out,
    label: str,
    var: TorchVariant,
    drv: Version | None,
    hw: list[tuple[GpuInfo, Architecture]],
) -> list[tuple[str, Severity, str, str]]:
    m = out.matrix
    problems: list[tuple[str, Severity, str, str]] = []
    major, floor = framework_cuda_floor(m, var.cuda, drv)
    if floor is not None:
        problems.append(
            (
                "framework.cuda-driver",
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
                f"is built for {', '.join(var.archs)}, not for {gpu_label(info)}"
                if var.archs is not None
                else f"is built with CUDA {var.cuda}, which does not support {gpu_label(info)}"
            )
            fix = _torch_for_gpu(m, info)
            problems.append(
                (
                    "framework.arch",
                    "error",
                    f"{label} {built}; fix: {fix}",
                    var.archs_source or "arch-matrix",
                )
            )
        elif (cudnn_source := _bundled_cudnn_misses(m, var, info.compute_capability)) is not None:
            problems.append(
                (
                    "framework.cudnn-arch",
                    "error",
                    f"{label} bundles cuDNN {var.cudnn}, whose packages for CUDA {var.cuda} are "
                    f"not built for {gpu_label(info)}; fix: {_torch_for_gpu(m, info)}",
                    cudnn_source,
                )
            )
        if runs is None:
            problems.append(
                (
                    "framework.arch-unknown",
                    "warning",
                    f"the architectures {label} is built for are not known from a source; cannot "
                    f"confirm it runs on {gpu_label(info)} (check torch.cuda.get_arch_list() on "
                    "the host)",
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


def check_torch(
    out: Out, spec: FrameworkSpec, drv: Version | None, hw: list[tuple[GpuInfo, Architecture]]
) -> None:
    m = out.matrix
    if spec.version is None:
        out.add(
            "framework.unknown",
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
        _torch_not_listed(out, spec.version, wheel)
        return
    if wheel is not None:
        why = _no_cuda_why(wheel)
        out.add(
            "framework.default-unknown",
            "warning",
            f"which CUDA build a plain 'pip install torch=={wheel.version}' gets is not known "
            f"({why}); every variant of torch {rel.version} was judged instead",
            "pypi-metadata",
        )
    variants = _torch_variants(out, spec.version, rel)
    if variants:
        _judge_torch_variants(out, spec.version, rel, variants, drv, hw)


def _torch_not_listed(out: Out, version: Version, wheel: WheelRelease | None) -> None:
    """``torch==X`` the matrix has no row for: a warning, saying what PyPI knows of it."""
    known = ", ".join(r.version for r in out.matrix.pytorch)
    if wheel is not None:  # on PyPI, but neither its metadata nor a matrix row says more
        out.add(
            "framework.unknown",
            "warning",
            f"torch {wheel.version} is on PyPI (released {wheel.released}) but which CUDA "
            f"its wheels bundle is not known: {_no_cuda_why(wheel)} and the matrix has no "
            f"row for it (it lists {known}); not checked; fix: check torch.version.cuda and "
            "torch.cuda.get_arch_list() on the host, or pin a listed release",
            "pypi-metadata",
        )
        return
    out.add(
        "framework.unknown",
        "warning",
        f"torch {version} is not in the matrix (it lists {known}); not checked"
        + newer_than_data(out.matrix, version, known.split(", "), UPDATE_WHEELS),
        "pytorch-release-md",
    )


def _torch_variants(out: Out, version: Version, rel: TorchRelease) -> list[TorchVariant]:
    """The variants of ``rel`` to judge: all of them, or the one ``version``'s local tag names
    (none, with a finding, when it is not a CUDA build or not one of the release's)."""
    variants = list(rel.variants)
    local = version.local
    if local is None:
        return variants
    chosen = [v for v in variants if v.tag == local]
    if chosen:
        return chosen
    if not local.startswith("cu"):
        out.add(
            "framework.not-cuda",
            "warning",
            f"torch {version} is not a CUDA build; it will not use NVIDIA GPUs",
            rel.source,
        )
        return []
    tags = ", ".join(v.tag for v in variants)
    out.add(
        "framework.variant",
        "error",
        f"torch {rel.version} has no {local} wheel (it has {tags}); fix: pick one of those",
        rel.source,
    )
    return []


def _judge_torch_variants(
    out: Out,
    version: Version,
    rel: TorchRelease,
    variants: list[TorchVariant],
    drv: Version | None,
    hw: list[tuple[GpuInfo, Architecture]],
) -> None:
    """Without a local tag: the newest fitting variant (stable first) and its problems, else
    every variant's problems; with one: that variant's problems, or that it fits."""
    local = version.local
    results = []
    for var in variants:
        label = f"torch {version}" if local else f"torch {version}+{var.tag}"
        results.append((var, _variant_problems(out, label, var, drv, hw)))
    fitting = [(v, p) for v, p in results if not any(s == "error" for _, s, _, _ in p)]
    if local is None and fitting:
        var, problems = ([f for f in fitting if f[0].channel == "stable"] or fitting)[-1]
        out.fits(
            f"torch {version}+{var.tag}",
            f"torch {version}: the {var.tag} wheel (CUDA {var.cuda}) fits this stack",
            rel.source,
        )
        for rule, sev, msg, src in problems:
            out.add(rule, sev, msg, src)
        return
    for var, problems in results:
        for rule, sev, msg, src in problems:
            out.add(rule, sev, msg, src)
        if local is not None and not any(sev == "error" for _, sev, _, _ in problems):
            out.fits(
                f"torch {version}",
                f"torch {version}: the {var.tag} wheel (CUDA {var.cuda}"
                + (f", cuDNN {var.cudnn}" if var.cudnn else "")
                + ") fits this stack; install: "
                + torch_install_command(out.matrix, release_text(version), var, False),
                rel.source,
            )


def _no_cuda_why(wheel: WheelRelease) -> str:
    """Why PyPI's data does not tell which CUDA a release's default wheel bundles."""
    if "x86_64" in wheel.no_metadata:
        return "the index publishes no core metadata for its Linux x86_64 wheels"
    return "its Linux x86_64 wheel on PyPI pins no CUDA libraries"


def _check_torch_default(
    out: Out,
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
        out.fits(
            f"torch {version} ({default.tag})",
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
        "framework.other-variant",
        "info",
        f"torch {version}: the {var.tag} wheel (CUDA {var.cuda}) fits this stack instead of "
        f"PyPI's {default.tag}; install it with: {torch_install_command(m, version, var, False)}",
        "pytorch-previous-versions",
    )


def check_tensorflow(
    out: Out,
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
            "framework.unknown",
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
    _tf_cuda_cudnn(out, rel, label, cv, cdv)
    _tf_driver_arch(out, rel, label, drv, hw)
    if len(out.items) == first:  # nothing against it
        how = "tested with"
        if rel.source == PYPI_TF:
            how = "its and-cuda extra asks for at least" if rel.at_least else "its and-cuda pins"
        out.fits(
            label,
            f"{label} ({how} CUDA {rel.cuda}, cuDNN {rel.cudnn}) fits this stack; install: "
            f"pip install 'tensorflow[and-cuda]=={rel.version}'",
            rel.source,
        )


def _at_least(rel: TensorflowRelease, found: Version, floor: str) -> bool:
    """An and-cuda range (>=) that ``found`` satisfies: same major, not older."""
    need = V(floor, field="c")
    return rel.at_least and found.release[0] == need.release[0] and found >= need


def _tf_cuda_cudnn(
    out: Out, rel: TensorflowRelease, label: str, cv: Version | None, cdv: Version | None
) -> None:
    """The stack's CUDA and cuDNN against what the TensorFlow release is built with."""
    tested = "was tested with" if rel.source != PYPI_TF else "pins (and-cuda)"
    built = V(rel.cuda, field="c").release[0]
    built_cudnn = V(rel.cudnn, field="c").release[0]
    if cv is not None and cv.release[0] != built:
        out.add(
            "framework.cuda-major",
            "error",
            f"{label} is built against CUDA {built} (it loads the CUDA {built} libraries); the "
            f"stack has CUDA {cv}, so it does not run on the GPU at all; fix: install CUDA "
            f"{rel.cuda}, or pip install 'tensorflow[and-cuda]=={rel.version}'",
            rel.source,
        )
    elif cv is not None and cuda_key(cv) != rel.cuda and not _at_least(rel, cv, rel.cuda):
        out.add(
            "tensorflow.untested-cuda",
            "warning",
            f"{label} {tested} CUDA {rel.cuda}; the "
            f"stack has CUDA {cv}; fix: use CUDA {rel.cuda} (pip install "
            "tensorflow[and-cuda] brings its tested CUDA libraries)",
            rel.source,
        )
    if cdv is not None and cdv.release[0] != built_cudnn:
        out.add(
            "framework.cudnn-major",
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
            "tensorflow.untested-cudnn",
            "warning",
            f"{label} {tested} cuDNN {rel.cudnn}; "
            f"the stack has cuDNN {cdv}; fix: use cuDNN {rel.cudnn}",
            rel.source,
        )


def _tf_driver_arch(
    out: Out,
    rel: TensorflowRelease,
    label: str,
    drv: Version | None,
    hw: list[tuple[GpuInfo, Architecture]],
) -> None:
    """The driver against the release's CUDA floor; each GPU against the CUDA it is built with."""
    m = out.matrix
    major, floor = framework_cuda_floor(m, rel.cuda, drv)
    if floor is not None:
        out.add(
            "framework.cuda-driver",
            "error",
            f"{label} is built with CUDA {rel.cuda}; driver "
            f"{drv} is below the CUDA {major}.x floor {floor}; fix: upgrade the driver to >= "
            f"{floor}",
            m.minor_compat[major].source,
        )
    built_for = tensorflow_archs(m, rel.version)
    for info, arch in hw:
        if cuda_supports_arch(arch, info.compute_capability, V(rel.cuda, field="c")) is False:
            # PTX is only ever compiled forward, to newer GPUs: a CUDA that has no code for this
            # architecture cannot produce anything it runs.
            out.add(
                "framework.arch",
                "error",
                f"{label} is built with CUDA {rel.cuda}, which does not support {gpu_label(info)} "
                f"({arch_cuda_range(arch, info.compute_capability)}); fix: a TensorFlow release "
                "built with a CUDA in that range, or a newer GPU",
                arch.source,
            )
        elif built_for is None:
            out.add(
                "framework.arch-unknown",
                "warning",
                f"unknown: which compute capabilities {label}'s wheels are built for is not in "
                f"the matrix (tensorflow_archs lists {_tf_series(m)}); cannot confirm it runs "
                f"on {gpu_label(info)} (check tf.sysconfig.get_build_info() on the host)",
                "tensorflow-tested",
            )
        elif not cc_covered(built_for.archs, info.compute_capability):
            out.add(
                "framework.arch",
                "error",
                f"{label}'s official wheels are built for compute capabilities "
                f"{', '.join(built_for.archs)}, not for {gpu_label(info)}: TensorFlow has no "
                "kernels it can run there; fix: a TensorFlow release built for it, or build "
                "TensorFlow from source with its compute capability",
                built_for.source,
            )


def _tf_series(m: Matrix) -> str:
    series = [t.series for t in m.tensorflow_archs]
    return f"{series[0]} to {series[-1]}" if series else "none"
