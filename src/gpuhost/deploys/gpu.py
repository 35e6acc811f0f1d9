"""Packaged deploys configuring the GPUs and the environment."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy

from gpuhost.desired import DesiredState
from gpuhost.operations import clocks, env, fabric_manager, persistence


@deploy("Configure persistence mode")
def configure_persistence(spec: DesiredState) -> None:
    if spec.persistence:
        persistence.enabled(name="nvidia-persistenced enabled and running")


@deploy("Configure fabric manager")
def configure_fabric_manager(spec: DesiredState) -> None:
    """NVSwitch boards: NVIDIA's package leaves its daemon disabled; gpuhost enables it."""
    if spec.fabric_manager:
        fabric_manager.running(name="nvidia-fabricmanager enabled and running")


@deploy("Configure GPU clocks")
def configure_gpu_clocks(spec: DesiredState) -> None:
    clocks.applied(
        name=f"GPU clocks ({spec.clocks_mode})",
        mode=spec.clocks_mode,
        graphics=spec.graphics_mhz,
        memory=spec.memory_mhz,
    )


@deploy("Configure environment")
def configure_environment(spec: DesiredState) -> None:
    """``/etc/profile.d/gpuhost.sh`` from inventory data ``gpuhost_env`` (e.g. NCCL_* settings)."""
    cuda_home = (
        "/usr/local/cuda" if spec.source == "nvidia-cuda-repo" and spec.cuda_default else None
    )
    env.profile(
        name="/etc/profile.d/gpuhost.sh",
        variables=dict(host.data.get("gpuhost_env") or {}),
        cuda_home=cuda_home,
    )
