"""What the audit expects a host to run: the host's :class:`gpuhost.desired.DesiredState`.

The profile's name comes from inventory data (``gpuhost_profile``) or, failing that, the host's
marker file ``/etc/gpuhost/profile`` (written by ``gpuhost provision``). Profiles are loaded by
``gpuhost.matrix.load_profiles`` (data/profiles.yaml plus ``--profiles FILE``). The audit reads
the same desired state provision installs and the checks compare with; what provision decides on
the host (kernel module ``auto``) comes from the host's marker, and is not compared without one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from gpuhost.datafiles import package_sets
from gpuhost.desired import DesiredState
from gpuhost.parsers.profile_marker import ProfileMarker

KERNEL_MODULES = ("open", "proprietary")


def expected_state(
    profile: Any, host_data: Mapping[str, Any], marker: ProfileMarker | None
) -> DesiredState:
    """The desired state of a host named to run ``profile`` (a ``gpuhost.matrix.Profile``):
    kernel module ``auto`` resolved from the marker when it records this profile, and what the
    host's data leaves out of provision dropped (``gpuhost_install_cuda: false``: no CUDA)."""
    state = DesiredState.from_profile(profile, None, host_data)
    return without_unmanaged(with_marker_resolution(state, marker), host_data)


def compares_kernel_module(state: DesiredState) -> bool:
    """Whether the state names a kernel module flavour (not ``auto``, left unresolved)."""
    return state.kernel_module in KERNEL_MODULES


def with_marker_resolution(state: DesiredState, marker: ProfileMarker | None) -> DesiredState:
    """Fill in what the profile leaves to provision-time resolution from the host's marker, when
    the marker records this profile: ``kernel_module: auto`` → the flavour provision installed."""
    if marker is None or marker.legacy or marker.profile != state.profile:
        return state
    if not compares_kernel_module(state) and marker.kernel_module in KERNEL_MODULES:
        return replace(state, kernel_module=marker.kernel_module)
    return state


def installs_cuda(source: str) -> bool:
    """Whether provision installs a CUDA toolkit from ``source`` on some OS (Ubuntu's archive:
    none, data/package_sets.yaml ``cuda_toolkit: []``)."""
    entries = package_sets()["sources"].get(source) or {}
    return any(
        isinstance(entry, dict) and entry.get("cuda_toolkit")
        for key, entry in entries.items()
        if not str(key).startswith("_")
    )


def without_unmanaged(state: DesiredState, host_data: Mapping[str, Any]) -> DesiredState:
    """Drop what provision leaves out, so the audit reports no drift for it:
    ``gpuhost_install_cuda: false`` in the host's inventory data, or a package source with no
    CUDA toolkit (no CUDA toolkit installed by gpuhost)."""
    if host_data.get("gpuhost_install_cuda") is False or not installs_cuda(state.source):
        return replace(state, cuda_versions=(), cuda_default=None)
    return state
