"""What the matrix knows about one framework release (``gpuhost matrix show --framework``).

The default variant is what a plain ``pip install torch==X`` (``tensorflow[and-cuda]==X``) gets
on Linux x86_64, from the wheels' own metadata (data/wheels.yaml); the other torch variants come
from matrix.yaml with the command that installs each.
"""

from __future__ import annotations

from typing import Any

from gpuhost.errors import UnknownNameError
from gpuhost.matrix.lookup import (
    default_torch_variant,
    find_tensorflow,
    find_torch,
    parse_framework,
    release_text,
    tensorflow_archs,
    torch_install_command,
    wheel_release,
)
from gpuhost.matrix.model import Matrix, TorchVariant, WheelRelease
from gpuhost.matrix.wheels import DEFAULT_INDEX, WheelBuild, project_url


def framework_answer(matrix: Matrix, spec_text: str) -> dict[str, Any]:
    """The JSON answer for ``torch==2.5.1`` / ``tensorflow==2.19.0``.

    Raises VersionError for a malformed spec and UnknownNameError (exit 2) for a framework or
    release the matrix and the synced wheels do not know.
    """
    spec = parse_framework(spec_text)
    if not spec.known or spec.version is None:
        raise UnknownNameError(
            f'--framework: "{spec_text}" is not torch==VERSION or tensorflow==VERSION'
        )
    wheel = wheel_release(matrix, spec.name, spec.version)
    if spec.name == "torch":
        return _torch(matrix, spec.version, wheel)
    return _tensorflow(matrix, spec.version, wheel)


def _known(matrix: Matrix, framework: str) -> str:
    versions = [w.version for w in matrix.wheels if w.framework == framework]
    return f"{versions[0]} to {versions[-1]}" if versions else "none"


def _build(build: WheelBuild) -> dict[str, Any]:
    return {
        "cuda": build.cuda,
        "runtime": build.runtime,
        "cudnn": build.cudnn,
        "cublas": build.cublas,
        "nccl": build.nccl,
        "exact": build.exact,
    }


def _platforms(wheel: WheelRelease) -> dict[str, Any]:
    out: dict[str, Any] = {m: _build(b) for m, b in wheel.builds.items()}
    for machine in wheel.no_metadata:
        out[machine] = None
    return out


def _variant(matrix: Matrix, version: str, var: TorchVariant, default: bool) -> dict[str, Any]:
    return {
        "variant": var.tag,
        "cuda": var.cuda,
        "cudnn": var.cudnn,
        "channel": var.channel,
        "archs": list(var.archs) if var.archs is not None else None,
        "archs_source": matrix.url(var.archs_source) if var.archs_source else None,
        "install": torch_install_command(matrix, version, var, default),
    }


def _torch(matrix: Matrix, v: Any, wheel: WheelRelease | None) -> dict[str, Any]:
    rel = find_torch(matrix, v)
    if rel is None and wheel is None:
        raise UnknownNameError(
            f"--framework: torch {v} is neither on PyPI as synced (torch {_known(matrix, 'torch')}"
            f") nor in the matrix"
        )
    version = wheel.version if wheel is not None else release_text(v)
    default = default_torch_variant(rel, wheel) if wheel is not None else None
    answer: dict[str, Any] = {"framework": "torch", "version": version}
    sources = []
    if wheel is not None:
        answer["released"] = wheel.released
        answer["python"] = list(wheel.python)
        answer["platforms"] = _platforms(wheel)
        sources.append(project_url(DEFAULT_INDEX, answer["framework"]))
    if default is not None:
        answer["default_variant"] = _variant(matrix, version, default, True) | (
            _build(wheel.builds["x86_64"]) if wheel is not None else {}
        )
    else:
        answer["default_variant"] = None
        answer["default_variant_unknown"] = (
            "PyPI publishes no core metadata for this release's Linux x86_64 wheels"
            if wheel is not None and "x86_64" in wheel.no_metadata
            else "not synced from PyPI"
            if wheel is None
            else "the Linux x86_64 wheel pins no CUDA libraries"
        )
    others = [
        var for var in (rel.variants if rel else ()) if default is None or var.tag != default.tag
    ]
    answer["variants"] = [_variant(matrix, version, var, False) for var in others]
    if rel is not None:
        sources.append(matrix.url(rel.source))
        sources.append(matrix.url("pytorch-previous-versions"))
        sources += [matrix.url(var.archs_source) for var in rel.variants if var.archs_source]
    answer["sources"] = list(dict.fromkeys(sources))
    return answer


def _tensorflow(matrix: Matrix, v: Any, wheel: WheelRelease | None) -> dict[str, Any]:
    tested = find_tensorflow(matrix, v)
    exact_tested = tested is not None and tested.version == release_text(v)
    if wheel is None and not exact_tested:
        raise UnknownNameError(
            f"--framework: tensorflow {v} is neither on PyPI as synced (tensorflow "
            f"{_known(matrix, 'tensorflow')}) nor in the matrix's tested configurations"
        )
    version = wheel.version if wheel is not None else release_text(v)
    answer: dict[str, Any] = {"framework": "tensorflow", "version": version}
    sources = []
    build = wheel.default if wheel is not None else None
    if wheel is not None:
        answer["released"] = wheel.released
        answer["python"] = list(wheel.python)
        answer["platforms"] = _platforms(wheel)
        sources.append(project_url(DEFAULT_INDEX, answer["framework"]))
    if build is not None and build.cuda is not None:
        answer["default_variant"] = {
            "variant": "and-cuda",
            **_build(build),
            "install": f"pip install 'tensorflow[and-cuda]=={version}'",
        }
    else:
        answer["default_variant"] = None
        answer["default_variant_unknown"] = (
            "PyPI publishes no core metadata for this release's Linux x86_64 wheels"
            if wheel is not None and "x86_64" in wheel.no_metadata
            else "the and-cuda extra pins no CUDA libraries"
            if wheel is not None
            else "not synced from PyPI"
        )
    answer["variants"] = []
    if tested is not None and tested.version.split(".")[:2] == version.split(".")[:2]:
        answer["tested"] = {"version": tested.version, "cuda": tested.cuda, "cudnn": tested.cudnn}
        sources.append(matrix.url(tested.source))
    built = tensorflow_archs(matrix, version)
    answer["archs"] = list(built.archs) if built is not None else None  # None: not known
    if built is not None:
        sources.append(matrix.url(built.source))
    answer["sources"] = list(dict.fromkeys(sources))
    return answer
