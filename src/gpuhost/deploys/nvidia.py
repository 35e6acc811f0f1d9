"""Packaged deploys installing the pinned NVIDIA stack. Orchestration only: every decision about
what to change is made by an operation comparing facts with the spec."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.operations import apt

from gpuhost.bundle.setting import bundle_setting, proxy_urls
from gpuhost.deploys import nvidia_dnf
from gpuhost.deploys.nvidia_dnf import install_driver_dnf
from gpuhost.deploys.spec import PackagePlan
from gpuhost.desired import DesiredState
from gpuhost.operations import (
    apt_pin,
    cdi,
    container_runtime,
    debian_sources,
    env,
    kernel,
    nvidia_repo,
    precompiled,
    unattended,
)

APT_CACHE_S = 3600


@deploy("Install NVIDIA driver")
def install_driver(spec: DesiredState, plan: PackagePlan, move_kernel: bool = False) -> None:
    """Kernel prerequisites, package source, pins, the driver at the exact version, holds; with
    precompiled modules (Ubuntu's archive) the kernel paired with them (``move_kernel``: moved
    to the newest kernel the driver pairs, what ``gpuhost upgrade`` asks). A RHEL-family host
    (``plan.family`` dnf): ``nvidia_dnf.install_driver_dnf``, where what ``gpuhost upgrade``
    asks (``move_kernel``) lets the module stream switch."""
    if plan.family == "dnf":
        install_driver_dnf(spec=spec, plan=plan, switch=move_kernel)
        return
    if plan.precompiled is None:  # DKMS builds against them; precompiled modules need none
        kernel.headers(name="Kernel headers for the running and next-boot kernels")
    kernel.nouveau_blacklisted(name="Blacklist nouveau (initramfs rebuilt on change)")
    # from an offline bundle, the bundle is the run's only source: no repository, no archive
    # components, its lists read by offline.only_source (deploys/offline.py)
    data = host.data.dict() if hasattr(host.data, "dict") else dict(host.data)
    online = bundle_setting(data) is None
    if online and spec.source == "nvidia-cuda-repo":
        nvidia_repo.repository(
            name="NVIDIA CUDA repository with a verified key (apt update on change)",
            url=host.data.get("gpuhost_cuda_repo_url"),
            key_src=host.data.get("gpuhost_cuda_repo_key"),
            key_sha256=host.data.get("gpuhost_cuda_repo_key_sha256"),
            proxies=proxy_urls(data),
        )
    if online and plan.apt_components:
        debian_sources.components(
            name=f"Debian sources carry {' '.join(plan.apt_components)} (apt update on change)",
            components=plan.apt_components,
        )
    apt_pin.preferences(
        name="Pin the coupled package set",
        pins=plan.pins,
        blocked=plan.blocked,
        blocked_patterns=plan.blocked_patterns,
        label=spec.profile,
        exact=plan.exact,
    )
    if online:
        apt.update(name="apt update (at most hourly)", cache_time=APT_CACHE_S)
    # the companions the driver pulls in, at the profile's exact versions, in the same command
    # (the persistence daemon's only where the profile wants it)
    companions = {
        name: version
        for name, version in plan.exact.items()
        if spec.persistence or name != plan.persistenced
    }
    apt_pin.installed(
        name=f"NVIDIA driver {spec.driver_version}",
        packages=plan.driver_install + plan.fabric_manager,
        version=spec.driver_version,
        no_recommends=host.data.get("gpuhost_install_recommends") is not True,
        exact=companions,
        newest_only=plan.newest_only,
    )
    _precompiled_modules(spec, plan, move_kernel)
    if spec.persistence and plan.persistenced:
        apt_pin.installed(name="NVIDIA persistence daemon", packages=[plan.persistenced])
    holds = plan.coupled + plan.companions + [n for n in plan.exact if n not in plan.companions]
    apt_pin.held(name="Hold the driver packages", packages=holds)
    unattended.excluded(
        name="NVIDIA packages excluded from unattended-upgrades", packages=plan.never_upgraded
    )
    apt_pin.verified(
        name=f"Every coupled package at {spec.driver_version}",
        packages=plan.coupled + plan.fabric_manager,
        version=spec.driver_version,
        exact=plan.exact,
    )


def _precompiled_modules(spec: DesiredState, plan: PackagePlan, move_kernel: bool) -> None:
    """Ubuntu's archive: the kernel paired with its modules, and what a driver change leaves
    under another version's name removed; any source: another branch's leftovers removed
    (``superseded_patterns``; operations/precompiled.py)."""
    if plan.precompiled is not None:
        precompiled.modules_paired(
            name="NVIDIA modules for the next boot's kernel, kernel held with them",
            plan=plan.precompiled,
            driver_version=spec.driver_version,
            move_kernel=move_kernel,
        )
        precompiled.kernel_excluded(
            name="Kernel metapackages excluded from unattended-upgrades", plan=plan.precompiled
        )
    if plan.versioned:
        precompiled.stale_versions_removed(
            name="Packages named after another driver version removed", versioned=plan.versioned
        )
    if plan.superseded:
        precompiled.superseded_removed(
            name="Packages of another driver branch removed", patterns=plan.superseded,
            keep=plan.never_upgraded + plan.driver_install,
        )


def _component(
    packages: list[str], version: str | None, label: str, plan: PackagePlan, kind: str = ""
) -> None:
    if plan.family == "dnf":
        nvidia_dnf.component(packages, version, label, kind)
        return
    if not packages:
        return
    apt_pin.installed(name=label, packages=packages, version=version)
    apt_pin.held(name=f"Hold: {label}", packages=packages)


@deploy("Install CUDA toolkit")
def install_cuda(spec: DesiredState, plan: PackagePlan) -> None:
    """Every toolkit the profile lists, side by side, each pinned to its version and held; never
    the ``cuda`` metapackage. Inventory data ``gpuhost_install_cuda = False`` leaves the toolkits
    out (driver-only nodes, CI lab hosts)."""
    if host.data.get("gpuhost_install_cuda") is False:
        return
    for version, packages in plan.cuda_toolkits.items():
        _component(packages, version, f"CUDA toolkit {version}", plan, "cuda")
    if spec.source == "nvidia-cuda-repo" and spec.cuda_default:
        env.cuda_default(
            name=f"/usr/local/cuda -> CUDA {spec.cuda_default}",
            target=f"/usr/local/cuda-{spec.cuda_default}",
        )


@deploy("Install cuDNN")
def install_cudnn(spec: DesiredState, plan: PackagePlan) -> None:
    _component(plan.cudnn, spec.cudnn, f"cuDNN {spec.cudnn}", plan, "cudnn")


@deploy("Install NVIDIA container toolkit")
def install_container_toolkit(spec: DesiredState, plan: PackagePlan) -> None:
    """The toolkit pinned; Docker/containerd configured by merging; /dev/char symlinks."""
    if not plan.container_toolkit:
        return
    _component(
        plan.container_toolkit,
        spec.container_toolkit,
        f"NVIDIA container toolkit {spec.container_toolkit}",
        plan,
    )
    container_runtime.docker(name="nvidia runtime in Docker's daemon.json (merged)")
    container_runtime.containerd(name="nvidia runtime in containerd (when present)")
    container_runtime.dev_char_symlinks(name="/dev/char symlinks for NVIDIA devices")


@deploy("CDI specs at the driver's version")
def refresh_cdi(spec: DesiredState) -> None:
    """After the driver and the toolkit: every NVIDIA CDI spec naming another driver is
    regenerated by the toolkit (``/etc/cdi/nvidia.yaml`` created where the profile sets
    ``cdi``)."""
    cdi.spec_current(
        name=f"CDI specs for driver {spec.driver_version}",
        driver_version=spec.driver_version,
        wanted=spec.cdi,
    )
