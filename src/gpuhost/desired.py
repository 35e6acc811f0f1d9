"""The desired state of one host: what gpuhost installs, pins, holds and expects there.

One model, built from a profile plus the host's inventory data (:meth:`DesiredState.from_profile`)
and read back from the provision marker ``/etc/gpuhost/profile``, which is its serialisation
(:meth:`DesiredState.to_marker` / :meth:`DesiredState.from_marker`; the two round-trip).
Provision installs it (``deploys``: ``StackSpec`` is this class), the marker records it, the
audit and the checks compare hosts with it. Package names come from it through
``deploys.spec.package_plan``. Field names are the marker's: ``cudnn``, ``container_toolkit``,
``clocks_mode``, ``graphics_mhz``, ``memory_mhz``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuhost.parsers.profile_marker import MARKER_SCHEMA, ProfileMarker

# profile clock policy -> what provision does with the clocks (marker "clocks.mode")
CLOCK_MODES = {"none": "off", "max": "auto", "explicit": "auto"}


@dataclass(frozen=True)
class DesiredState:
    """A profile resolved for one host (kernel module flavour and fabric manager decided)."""

    profile: str
    source: str
    os: tuple[str, ...]
    driver_version: str
    driver_branch: str
    # open | proprietary; "auto" only in a state read from a profile for no particular GPUs
    # (``from_profile(profile, None)``: the audit's view, where "auto" is not compared)
    kernel_module: str = "proprietary"
    cuda_versions: tuple[str, ...] = ()
    cuda_default: str | None = None
    cudnn: str | None = None
    container_toolkit: str | None = None
    fabric_manager: bool = False
    clocks_mode: str = "auto"  # auto (max or explicit clocks) | off (leave clocks alone)
    graphics_mhz: int | None = None
    memory_mhz: int | None = None
    persistence: bool = True
    cdi: bool = False  # a CDI spec kept at the driver's version (profile field cdi)
    # (package, exact Debian version): the profile's companion packages, pinned exactly
    companions: tuple[tuple[str, str], ...] = ()

    @property
    def clock_policy(self) -> str:
        """The profile's clock policy this state came from: ``none``, ``explicit`` (both clocks
        given) or ``max``."""
        if self.clocks_mode == "off":
            return "none"
        if self.graphics_mhz is not None and self.memory_mhz is not None:
            return "explicit"
        return "max"

    @classmethod
    def from_profile(
        cls, profile: Any, gpus: list[str] | None, host_data: Mapping[str, Any] | None = None
    ) -> DesiredState:
        """A ``gpuhost.matrix.Profile`` resolved for a host: kernel module ``auto`` decided for
        ``gpus`` by the matrix (``gpus`` None: left ``auto``, as the profile declares it),
        fabric manager ``auto`` from ``gpuhost_fabric_manager``."""
        from gpuhost.matrix import load_matrix
        from gpuhost.matrix.profiles import kernel_module_for

        data = host_data or {}
        module = profile.kernel_module
        if gpus is not None:
            module = kernel_module_for(load_matrix(), profile, gpus)
        fabric = profile.fabric_manager
        if not isinstance(fabric, bool):
            fabric = bool(data.get("gpuhost_fabric_manager"))
        return cls(
            profile=profile.name,
            source=profile.source,
            os=tuple(profile.os),
            driver_version=profile.driver_version,
            driver_branch=str(profile.driver_branch),
            kernel_module=module,
            cuda_versions=tuple(profile.cuda_versions),
            cuda_default=profile.cuda_default or None,
            cudnn=profile.cudnn,
            container_toolkit=profile.container_toolkit,
            fabric_manager=fabric,
            clocks_mode=CLOCK_MODES[profile.clocks.policy],
            graphics_mhz=profile.clocks.graphics_mhz,
            memory_mhz=profile.clocks.memory_mhz,
            persistence=profile.persistence,
            cdi=profile.cdi,
            companions=tuple(sorted(profile.companions.items())),
        )

    def to_marker(self) -> dict[str, Any]:
        """The JSON written to /etc/gpuhost/profile (schema 1, format: docs/provision.md)."""
        return {
            "schema": MARKER_SCHEMA,
            "profile": self.profile,
            "source": self.source,
            "os": list(self.os),
            "driver": {
                "version": self.driver_version,
                "branch": self.driver_branch,
                "kernel_module": self.kernel_module,
            },
            "cuda": {"versions": list(self.cuda_versions), "default": self.cuda_default},
            "cudnn": self.cudnn,
            "container_toolkit": self.container_toolkit,
            "fabric_manager": self.fabric_manager,
            "persistence": self.persistence,
            "cdi": self.cdi,
            "companions": dict(self.companions),
            "clocks": {
                "mode": self.clocks_mode,
                "graphics_mhz": self.graphics_mhz,
                "memory_mhz": self.memory_mhz,
            },
        }

    @classmethod
    def from_marker(cls, marker: ProfileMarker) -> DesiredState | None:
        """The state a schema-1 marker records; None for a legacy marker (a profile name only,
        no versions) or one without a driver version, source or branch."""
        if marker.legacy or not (marker.source and marker.driver_version and marker.driver_branch):
            return None
        return cls(
            profile=marker.profile,
            source=marker.source,
            os=marker.os,
            driver_version=marker.driver_version,
            driver_branch=marker.driver_branch,
            kernel_module=marker.kernel_module or "proprietary",
            cuda_versions=marker.cuda_versions,
            cuda_default=marker.cuda_default,
            cudnn=marker.cudnn,
            container_toolkit=marker.container_toolkit,
            fabric_manager=bool(marker.fabric_manager),
            clocks_mode=marker.clocks_mode or "auto",
            graphics_mhz=marker.graphics_mhz,
            memory_mhz=marker.memory_mhz,
            persistence=True if marker.persistence is None else marker.persistence,
            cdi=bool(marker.cdi),
            companions=marker.companions,
        )


@dataclass(frozen=True)
class PrecompiledModules:
    """Module packages built for each kernel (their version is the kernel's), and the kernel
    metapackages that must move with them; templates with ``{kernel}`` (a kernel release,
    ``uname -r``), ``{kernel_flavour}`` (``generic``) and ``{kernel_track}`` (the installed image
    metapackage bringing the kernel, without ``linux-image-``: ``generic-hwe-22.04``)."""

    flavour: str  # the modules metapackage following the kernels of linux-image-<kernel track>
    kernel: list[str]  # the packages of one kernel release
    kernel_metapackages: list[str]
