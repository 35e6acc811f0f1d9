"""What a host is expected to run: its pinned profile, reduced to what the audit compares.

The profile's name comes from inventory data (``gpuhost_profile``) or, failing that, the host's
marker file ``/etc/gpuhost/profile`` (written by ``gpuhost provision``). Profiles are loaded by
``gpuhost.matrix.load_profiles``; this module only reads the fields the rules compare, so the
rules do not depend on how profiles are stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ExpectedStack:
    """``None`` everywhere means "the profile does not say"."""

    name: str
    driver_version: str | None = None
    driver_branch: str | None = None
    kernel_module: str | None = None  # "open" or "proprietary"
    cuda_versions: tuple[str, ...] = ()
    cuda_default: str | None = None
    cudnn: str | None = None
    container_toolkit: str | None = None
    persistence: bool | None = None
    clocks: Mapping[str, Any] = field(default_factory=dict)


def _get(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _text(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def _version_of(component: Any) -> str | None:
    """A component given as a plain version or as an object with ``version``."""
    if component is None or isinstance(component, (str, int, float)):
        return _text(component)
    return _text(_get(component, "version"))


def expected_from_profile(name: str, profile: Any) -> ExpectedStack:
    """Read a profile object (dataclass or mapping) into an ExpectedStack."""
    driver = _get(profile, "driver")
    cuda = _get(profile, "cuda")
    versions = _get(cuda, "versions") if cuda is not None and not isinstance(cuda, str) else None
    if isinstance(cuda, str):
        versions = [cuda]
    clocks = _get(profile, "clocks")
    persistence = _get(profile, "persistence")
    if not isinstance(persistence, bool):
        persistence = _get(persistence, "enabled") if persistence is not None else None
    return ExpectedStack(
        name=name,
        driver_version=_version_of(driver),
        driver_branch=_text(_get(driver, "branch")) if not isinstance(driver, str) else None,
        kernel_module=_text(_get(driver, "kernel_module")) if not isinstance(driver, str) else None,
        cuda_versions=tuple(str(v) for v in (versions or [])),
        cuda_default=_text(_get(cuda, "default")) if not isinstance(cuda, str) else _text(cuda),
        cudnn=_version_of(_get(profile, "cudnn")),
        container_toolkit=_version_of(_get(profile, "container_toolkit")),
        persistence=persistence if isinstance(persistence, bool) else None,
        clocks=clocks if isinstance(clocks, Mapping) else _as_mapping(clocks),
    )


def _as_mapping(obj: Any) -> Mapping[str, Any]:
    if obj is None:
        return {}
    if hasattr(obj, "__dataclass_fields__"):
        return {k: getattr(obj, k) for k in obj.__dataclass_fields__}
    return {}
