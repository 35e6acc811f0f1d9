"""The NVIDIA stack on a RHEL-family host (dnf/rpm), orchestration only: NVIDIA's repository,
kernel-devel, DKMS from EPEL, the module stream (RHEL 8/9), the driver at its exact version with
the kernel module flavour named, the whole coupled set version-locked, the check after it; the
CUDA toolkits, cuDNN and the container toolkit the same way (``component``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pyinfra import host
from pyinfra.api import deploy

from gpuhost.bundle.setting import bundle_setting, proxy_urls
from gpuhost.deploys.spec import PackagePlan, cuda_pin, cudnn_pin
from gpuhost.desired import DesiredState
from gpuhost.errors import DeployError
from gpuhost.facts.dnf import DnfModuleStreams, DnfOfferedAnyStream, RpmVersions
from gpuhost.facts.files import SmallFile
from gpuhost.operations import dnf_pin, kernel
from gpuhost.operations.dnf_proxy import DNF_CONF, MARK, run_settings
from gpuhost.parsers.packages import Offered
from gpuhost.versions import extends_version, upstream_of_package_version

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
        packages=[n for n in wanted if n not in plan.companions],
        pin=spec.driver_version,
        epoch=plan.epoch,
        companions=plan.companions,
        coupled=plan.coupled + [n for n in plan.fabric_manager if n not in plan.coupled],
    )
    dnf_pin.verified(
        name=f"Every coupled package at {spec.driver_version}, kernel module flavour",
        packages=plan.coupled + plan.fabric_manager,
        version=spec.driver_version,
        flavour=flavour,
        other_flavours=plan.kernel_module_other,
    )


def locked_versions(spec: DesiredState, plan: PackagePlan, data: Mapping[str, Any],
                    installed: Mapping[str, str]) -> dict[str, str]:
    """{package: the profile's version of it} of every package a provision installs and
    version-locks on a dnf host (pure): the driver's (its kernel module flavour, the fabric
    manager, the persistence daemon) and every coupled name ``installed`` has (all of them at
    the driver's version; the other kernel module flavour is replaced, not kept), the CUDA
    toolkits unless ``gpuhost_install_cuda`` is false, cuDNN and the container toolkit."""
    driver = plan.driver_install + plan.fabric_manager
    if spec.persistence and plan.persistenced:
        driver.append(plan.persistenced)
    driver += [n for n in plan.coupled if n in installed and n not in plan.kernel_module_other]
    wanted = dict.fromkeys(driver, spec.driver_version)
    if data.get("gpuhost_install_cuda") is not False:
        for version, names in plan.cuda_toolkits.items():
            wanted.update(dict.fromkeys(names, version))
    if spec.cudnn:
        wanted.update(dict.fromkeys(plan.cudnn, spec.cudnn))
    if spec.container_toolkit:
        wanted.update(dict.fromkeys(plan.container_toolkit, spec.container_toolkit))
    return wanted


def _at(version: str | None, wanted: str) -> bool:
    """A package version (``3:580.95.05-1.el9``) is the profile's ``wanted`` (or extends it)."""
    return bool(version) and extends_version(upstream_of_package_version(version or ""), wanted)


def lacking(wanted: Mapping[str, str], installed: Mapping[str, str]) -> list[str]:
    """The names of ``wanted`` not installed at their version: what the run must get from the
    repositories (pure)."""
    return sorted(n for n, v in wanted.items() if not _at(installed.get(n), v))


def offered_problem(wanted: Mapping[str, str], installed: Mapping[str, str],
                    offered: Offered) -> str | None:
    """Why the run must not start (pure): a package it would install and lock that no
    configured repository offers at the profile's version (every module stream counted: the
    stream is judged on its own), or repositories dnf cannot read while something must come
    from them. None when every such package is offered."""
    need = lacking(wanted, installed)
    if not need:
        return None
    if offered.error:
        return (
            f"cannot read what the repositories offer ({offered.error}) while "
            f"{', '.join(need)} must come from them; nothing was changed: check "
            "gpuhost_cuda_repo_url and the host's repositories"
        )
    absent = [
        f"{n} {wanted[n]} (offered: {', '.join(offered.versions.get(n, [])) or 'none'})"
        for n in need
        if not any(_at(v, wanted[n]) for v in offered.versions.get(n, []))
    ]
    if not absent:
        return None
    return (
        f"not offered by the configured repositories at the profile's version, so it could be "
        f"neither installed nor version-locked: {'; '.join(absent)}; nothing was changed (pick a "
        "profile whose versions the repository has, or check gpuhost_cuda_repo_url)"
    )


#: reads one fact: ``host.get_fact`` in a deploy, the fact's command run over the upgrade's
#: session and its parser on the output in the upgrade's preflight
FactReader = Callable[..., Any]


def offered_check(spec: DesiredState, plan: PackagePlan, data: Mapping[str, Any],
                  read: FactReader) -> str | None:
    """Every package the run installs and locks installed at the profile's version or offered
    at it by the repositories, NVIDIA's (``gpuhost_cuda_repo_url``) read for this query even
    before the host has its repository file (``DnfOfferedAnyStream``); the repositories are
    asked only when something must come from them. None, or the one-line problem."""
    probe = sorted(set(locked_versions(spec, plan, data, {}))
                   | set(plan.coupled) | set(plan.kernel_module_other))
    installed = read(RpmVersions, packages=probe)
    wanted = locked_versions(spec, plan, data, installed)
    need = lacking(wanted, installed)
    if not need:
        return None
    url = str(data.get("gpuhost_cuda_repo_url") or "")
    # dnf's proxy as the run leaves it (operations/dnf_proxy, later in the run), for these
    # queries alone
    conf = list(read(SmallFile, path=DNF_CONF) or [])
    ours = proxy_urls(data) or any(line.strip() == MARK for line in conf)
    extra = {"setopts": run_settings(conf, proxy_urls(data))} if ours else {}
    if plan.module is not None and plan.module[1]:
        # the stream first: a branch the repository lacks is its stream's line
        module, stream = plan.module
        streams = read(DnfModuleStreams, module=module, repo_url=url, **extra)
        if streams and stream not in streams:
            return dnf_pin.stream_problem({}, stream, streams, True, module)
    return offered_problem(wanted, installed,
                           read(DnfOfferedAnyStream, packages=need, repo_url=url, **extra))


def check_offered(spec: DesiredState, plan: PackagePlan) -> None:
    """Provision's guard on a dnf host, while the deploy is prepared (before any change):
    ``offered_check``, DeployError with its line."""
    problem = offered_check(spec, plan, _data(), lambda cls, **kw: host.get_fact(cls, **kw))
    if problem:
        raise DeployError(host.name, problem)


def component(packages: list[str], version: str | None, label: str, kind: str = "") -> None:
    """A component (CUDA toolkit, cuDNN, container toolkit) at its version and locked:
    ``kind`` "cuda" and "cudnn" lock every build of the version (``13.0.*``, ``9.17.0.*``)."""
    if not packages or version is None:
        return
    pin = {"cuda": cuda_pin, "cudnn": cudnn_pin}.get(kind, lambda v: v)(version)
    dnf_pin.installed(name=label, packages=packages, version=version, pin=pin)
    dnf_pin.locked(name=f"Lock: {label}", packages=packages, pin=pin)
