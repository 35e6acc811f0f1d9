"""What ``gpuhost bundle`` resolves and asks a reference host, whatever its package manager:
the profile resolved for the reference host's data as provision would on a target
(``resolve_profile``), the extra packages provision installs, NVIDIA's repository and its checked
key (``cuda_source``), and the checks of the reference host's answers. Used by
``gpuhost.bundle_make`` (apt) and ``gpuhost.bundle_rpm`` (dnf)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyinfra.api import OperationError

from gpuhost.bundle.manifest import Manifest, pinned_problems
from gpuhost.bundle.setting import proxy_urls
from gpuhost.deploys import guards, secure_boot
from gpuhost.deploys.offline import required_packages
from gpuhost.deploys.spec import PackagePlan, package_plan
from gpuhost.desired import DesiredState
from gpuhost.errors import ConfigError, HostError
from gpuhost.inventory.loader import InventoryHost
from gpuhost.operations.nvidia_repo import fetch_verified
from gpuhost.upgrade.connect import PyinfraRemote

RESOLVE_TIMEOUT_S = 900


def extra_packages(data: Mapping[str, Any]) -> list[str]:
    """What provision installs besides the profile's packages, by the host's data: hardening's
    nftables (unless ``gpuhost_harden`` is false), mokutil where Secure Boot signing is set up
    (a module signing key or a MOK password in the data: ``deploys/secure_boot``)."""
    extra = [] if data.get("gpuhost_harden") is False else ["nftables"]
    if data.get(secure_boot.KEY) or data.get(secure_boot.PASSWORD):
        extra.append("mokutil")
    return extra


@dataclass(frozen=True)
class Resolved:
    """The profile resolved for the reference host's data, as provision would on a target."""

    data: dict[str, Any]
    spec: DesiredState
    plan: PackagePlan
    required: dict[str, str | None]  # what provision installs by name: {name: version pattern}


def resolve_profile(entry: InventoryHost, profile: str, os_found: str,
                    profiles_file: str | None) -> Resolved:
    data = {**entry.data, "gpuhost_profile": profile}
    table = guards.load_profile_table(profiles_file or data.get("gpuhost_profiles_file"))
    spec = guards.check_profile(entry.name, data, table)
    guards.check_os(entry.name, spec, os_found)
    plan = package_plan(spec, os_found)
    guards.check_harden(entry.name, data)
    return Resolved(data, spec, plan, required_packages(spec, plan, data))


def cuda_source(host: str, resolved: Resolved) -> tuple[str, bytes] | None:
    """(NVIDIA's repository URL, its key's bytes, SHA-256 checked here) for an NVIDIA-repository
    profile, from the reference host's inventory data; None for another source."""
    if resolved.spec.source != "nvidia-cuda-repo":
        return None
    data = resolved.data
    missing = [k for k in ("gpuhost_cuda_repo_url", "gpuhost_cuda_repo_key",
                           "gpuhost_cuda_repo_key_sha256") if not data.get(k)]
    if missing:
        raise ConfigError(
            f"host {host}: {missing[0]}: not set; the reference host resolves "
            f"{resolved.spec.profile} from NVIDIA's CUDA repository and needs its URL, key and "
            "SHA-256"
        )
    try:
        key = fetch_verified(str(data["gpuhost_cuda_repo_key"]),
                             str(data["gpuhost_cuda_repo_key_sha256"]), proxy_urls(data))
    except OperationError as exc:  # pyinfra's error: the CLI shows only gpuhost's as one line
        raise ConfigError(f"host {host}: gpuhost_cuda_repo_key: {exc}") from None
    return str(data["gpuhost_cuda_repo_url"]), key


def run_checked(remote: PyinfraRemote, command: str, what: str) -> str:
    result = remote.run(command, timeout=RESOLVE_TIMEOUT_S)
    if not result.ok:
        detail = (result.stderr or result.stdout).strip().splitlines()
        shown = "; ".join(detail[-3:]) if detail else f"exit {result.rc}"
        raise HostError(remote.host, f"{what} failed: {shown}")
    return result.stdout


def check_covered(host: str, found: Manifest, required: Mapping[str, str | None],
                  tool: str) -> None:
    """HostError naming what the reference host's package manager (``tool``) would not
    download of ``required``: the bundle would lack it."""
    problems = pinned_problems(found, required)
    if problems:
        raise HostError(
            host,
            f"{tool} on the reference host would not download "
            f"{', '.join(problems)}: it has them installed already or its sources lack them; "
            "use a host in the state of the targets (none of the profile's packages installed)",
        )
