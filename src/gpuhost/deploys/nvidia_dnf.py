"""The NVIDIA stack on a RHEL-family host (dnf/rpm), orchestration only: NVIDIA's repository,
kernel-devel, DKMS from EPEL, the module stream (RHEL 8/9), the driver at its exact version with
the kernel module flavour named, the whole coupled set version-locked, the check after it; the
CUDA toolkits, cuDNN and the container toolkit the same way (``component``)."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import deploy

from gpuhost.bundle.setting import bundle_setting, proxy_urls
from gpuhost.deploys.spec import PackagePlan, cuda_pin, cudnn_pin
from gpuhost.desired import DesiredState
from gpuhost.errors import DeployError
from gpuhost.operations import dnf_pin, kernel

FLAVOURS = ("open", "proprietary")


def _data() -> dict:
    return host.data.dict() if hasattr(host.data, "dict") else dict(host.data)


@deploy("Install NVIDIA driver (dnf)")
def install_driver_dnf(spec: DesiredState, plan: PackagePlan, switch: bool = False) -> None:
    """``switch``: another module stream (kernel module flavour, branch) may be replaced (what
    ``gpuhost upgrade`` runs); provision refuses it with one line."""
    if spec.kernel_module not in FLAVOURS:
        raise DeployError(
            host.name,
            f"profile {spec.profile}: kernel_module {spec.kernel_module}: a RHEL-family host "
            "needs the flavour named (open or proprietary): NVIDIA's two kernel module packages "
            "provide the same nvidia-kmod and dnf would pick either",
        )
    data = _data()
    if bundle_setting(data) is None:  # else the bundle is the NVIDIA source (deploys/offline)
        dnf_pin.repository(
            name="NVIDIA CUDA repository with a verified, imported key (metadata read on change)",
            url=str(data.get("gpuhost_cuda_repo_url") or ""),
            key_src=str(data.get("gpuhost_cuda_repo_key") or ""),
            key_sha256=str(data.get("gpuhost_cuda_repo_key_sha256") or ""),
            proxies=proxy_urls(data),
        )
    if plan.module is not None:
        dnf_pin.module_stream(
            name=f"Module stream {plan.module[0]}:{plan.module[1]}",
            module=plan.module[0],
            stream=plan.module[1],
            switch=switch,
        )
    # after the stream is known to be offered: a stream the repository lacks changes no package
    # (EPEL's release package included)
    dnf_pin.dkms_offered(
        name="DKMS offered (EPEL)",
        package=plan.dkms_package,
        crb=plan.crb,
        epel_release=plan.epel_release,
    )
    dnf_pin.kernel_devel(name="kernel-devel for the running kernel")
    kernel.nouveau_blacklisted(name="Blacklist nouveau (initramfs rebuilt on change)")
    flavour = [n for n in plan.driver_install if n.startswith("kmod-")]
    wanted = plan.driver_install + plan.fabric_manager
    if spec.persistence and plan.persistenced:
        wanted.append(plan.persistenced)
    dnf_pin.installed(
        name=f"NVIDIA driver {spec.driver_version} ({', '.join(flavour)})",
        packages=wanted,
        version=spec.driver_version,
        epoch=plan.epoch,
        replace=plan.kernel_module_other if switch else None,
    )
    dnf_pin.locked(
        name="Version-lock the whole coupled set",
        packages=plan.coupled + [n for n in plan.fabric_manager if n not in plan.coupled],
        pin=spec.driver_version,
        epoch=plan.epoch,
        companions=plan.companions,
    )
    dnf_pin.verified(
        name=f"Every coupled package at {spec.driver_version}, kernel module flavour",
        packages=plan.coupled + plan.fabric_manager,
        version=spec.driver_version,
        flavour=flavour,
        other_flavours=plan.kernel_module_other,
    )


def component(packages: list[str], version: str | None, label: str, kind: str = "") -> None:
    """A component (CUDA toolkit, cuDNN, container toolkit) at its version and locked:
    ``kind`` "cuda" and "cudnn" lock every build of the version (``13.0.*``, ``9.17.0.*``)."""
    if not packages or version is None:
        return
    pin = {"cuda": cuda_pin, "cudnn": cudnn_pin}.get(kind, lambda v: v)(version)
    dnf_pin.installed(name=label, packages=packages, version=version, pin=pin)
    dnf_pin.locked(name=f"Lock: {label}", packages=packages, pin=pin)
