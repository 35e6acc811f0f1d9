"""What a host is expected to run: its pinned profile, reduced to what the audit compares.

The profile's name comes from inventory data (``gpuhost_profile``) or, failing that, the host's
marker file ``/etc/gpuhost/profile`` (written by ``gpuhost provision``). Profiles are loaded by
``gpuhost.matrix.load_profiles`` (data/profiles.yaml plus ``--profiles FILE``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from gpuhost.desired import DesiredState
from gpuhost.parsers.profile_marker import ProfileMarker


@dataclass(frozen=True)
class ExpectedStack:
    """``None`` / empty means "the profile does not say"."""

    profile: str
    driver_version: str | None = None
    driver_branch: str | None = None
    kernel_module: str | None = None  # "open" or "proprietary" ("auto" is not compared)
    cuda_versions: tuple[str, ...] = ()
    cuda_default: str | None = None
    cudnn: str | None = None
    container_toolkit: str | None = None
    persistence: bool | None = None
    clock_policy: str | None = None  # "max", "explicit" or "none"
    graphics_mhz: int | None = None
    memory_mhz: int | None = None


def _text(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def expected_from_profile(name: str, profile: Any) -> ExpectedStack:
    """Read a ``gpuhost.matrix.Profile`` (or any object/mapping with its field names)."""

    def get(field: str) -> Any:
        if isinstance(profile, dict):
            return profile.get(field)
        return getattr(profile, field, None)

    clocks = get("clocks")
    clock = (
        (lambda key: clocks.get(key))
        if isinstance(clocks, dict)
        else (lambda key: getattr(clocks, key, None))
    )
    module = _text(get("kernel_module"))
    persistence = get("persistence")
    return ExpectedStack(
        profile=name,
        driver_version=_text(get("driver_version")),
        driver_branch=_text(get("driver_branch")),
        kernel_module=module if module in ("open", "proprietary") else None,
        cuda_versions=tuple(str(v) for v in (get("cuda_versions") or ())),
        cuda_default=_text(get("cuda_default")),
        cudnn=_text(get("cudnn")),
        container_toolkit=_text(get("container_toolkit")),
        persistence=persistence if isinstance(persistence, bool) else None,
        clock_policy=_text(clock("policy")) if clocks is not None else None,
        graphics_mhz=clock("graphics_mhz") if clocks is not None else None,
        memory_mhz=clock("memory_mhz") if clocks is not None else None,
    )


KERNEL_MODULES = ("open", "proprietary")


def expected_from_desired(state: DesiredState) -> ExpectedStack:
    """What a host resolved for provision (the checks' view) is expected to run."""
    return ExpectedStack(
        profile=state.profile,
        driver_version=state.driver_version,
        driver_branch=state.driver_branch,
        kernel_module=state.kernel_module if state.kernel_module in KERNEL_MODULES else None,
        cuda_versions=state.cuda_versions,
        cuda_default=state.cuda_default,
        cudnn=state.cudnn,
        container_toolkit=state.container_toolkit,
        persistence=state.persistence,
        clock_policy=state.clock_policy,
        graphics_mhz=state.graphics_mhz,
        memory_mhz=state.memory_mhz,
    )


def with_marker_resolution(expected: ExpectedStack, marker: ProfileMarker | None) -> ExpectedStack:
    """Fill in what the profile leaves to provision-time resolution from the host's marker, when
    the marker records this profile: ``kernel_module: auto`` → the flavour provision installed."""
    if marker is None or marker.legacy or marker.profile != expected.profile:
        return expected
    if expected.kernel_module is None and marker.kernel_module in ("open", "proprietary"):
        return replace(expected, kernel_module=marker.kernel_module)
    return expected


def without_unmanaged(expected: ExpectedStack, host_data: Any) -> ExpectedStack:
    """Drop what the host's inventory data tells provision to leave out, so the audit reports no
    drift for it: ``gpuhost_install_cuda: false`` (no CUDA toolkit installed by gpuhost)."""
    if host_data.get("gpuhost_install_cuda") is False:
        return replace(expected, cuda_versions=(), cuda_default=None)
    return expected
