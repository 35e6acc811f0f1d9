"""``provision``: the whole pinned stack on one host, guards first, SSH hardened too.

Every guard runs before any operation is added for the host: profile, OS, Secure Boot, CUDA
repository data, then (unless inventory data ``gpuhost_harden`` is false) the SSH lockout checks of
``gpuhost.deploys.harden``. A host that fails one is refused unchanged.
"""

from __future__ import annotations

import os
from typing import Any

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.facts.server import LinuxDistribution

from gpuhost.deploys import guards
from gpuhost.deploys.gpu import configure_environment, configure_gpu_clocks, configure_persistence
from gpuhost.deploys.harden import harden
from gpuhost.deploys.nvidia import (
    install_container_toolkit,
    install_cuda,
    install_cudnn,
    install_driver,
)
from gpuhost.deploys.spec import PackagePlan, StackSpec, package_plan
from gpuhost.errors import ConfigError, DeployError, GpuhostError
from gpuhost.facts.kernel import SecureBoot
from gpuhost.operations import marker

GUARD_REPORT_ENV = "GPUHOST_GUARD_REPORT"


def _host_data() -> dict[str, Any]:
    return host.data.dict() if hasattr(host.data, "dict") else dict(host.data)


def resolve_host(profiles: dict[str, Any] | None = None) -> tuple[StackSpec, PackagePlan]:
    """Run every guard for the current host; DeployError before any change when one fails."""
    name = host.name
    data = _host_data()
    if profiles is None:
        profiles = guards.load_profile_table(data.get("gpuhost_profiles_file"))
    spec = guards.check_profile(name, data, profiles)
    distro: Any = host.get_fact(LinuxDistribution)
    found = guards.os_key(distro)
    guards.check_os(name, spec, found)
    secure_boot: Any = host.get_fact(SecureBoot)
    guards.check_secure_boot(name, secure_boot, data.get("gpuhost_module_signing_key"))
    if spec.source == "nvidia-cuda-repo":
        for key in (
            "gpuhost_cuda_repo_url",
            "gpuhost_cuda_repo_key",
            "gpuhost_cuda_repo_key_sha256",
        ):
            if not data.get(key):
                raise DeployError(
                    name,
                    f"{key}: not set; profile {spec.profile} installs from "
                    "NVIDIA's CUDA repository and needs its URL, key and key SHA-256",
                )
    try:
        plan = package_plan(spec, found)
    except ConfigError as exc:
        raise DeployError(name, str(exc)) from exc
    return spec, plan


@deploy("gpuhost provision")
def provision(profiles: dict[str, Any] | None = None) -> None:
    """SSH hardening and firewall, driver, CUDA, cuDNN, container toolkit, persistence, clocks,
    environment, marker (written last: it exists only after a complete run).

    ``harden()`` comes first: its lockout checks run before any operation of this host is added,
    so a host whose deploy user has no authorized key stops before the driver is touched.
    """
    spec, plan = resolve_host(profiles)
    if guards.check_harden(host.name, _host_data()):
        harden()
    install_driver(spec=spec, plan=plan)
    install_cuda(spec=spec, plan=plan)
    install_cudnn(spec=spec, plan=plan)
    install_container_toolkit(spec=spec, plan=plan)
    configure_persistence(spec=spec)
    configure_gpu_clocks(spec=spec)
    configure_environment(spec=spec)
    marker.written(name="Provision marker /etc/gpuhost/profile", marker=spec.marker())


def provision_or_stop() -> None:
    """For on-disk deploys (pyinfra CLI): a guard failure stops this host only, with one line,
    and is recorded for ``gpuhost provision`` (exit code 2); other hosts carry on."""
    try:
        provision()
    except GpuhostError as exc:  # a guard (DeployError) or bad hardening data (ConfigError)
        print(f"gpuhost: error: {exc}", flush=True)
        report = os.environ.get(GUARD_REPORT_ENV)
        if report:
            with open(report, "a", encoding="utf-8") as handle:
                handle.write(f"{exc}\n")
        host.state.fail_hosts({host._get_module() if hasattr(host, "_get_module") else host})
