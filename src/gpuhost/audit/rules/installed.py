"""What the host has installed, as the rules compare it: the driver's versions."""

from __future__ import annotations

from gpuhost.audit.coupled import is_coupled
from gpuhost.errors import VersionError
from gpuhost.facts.host_facts import HostFacts
from gpuhost.versions import upstream_of_package_version


def upstream_version(version: str | None) -> str | None:
    if not version:
        return None
    try:
        return upstream_of_package_version(version)
    except VersionError:
        return None


def coupled_packages(facts: HostFacts) -> dict[str, str]:
    """Installed packages coupled to the driver version → their upstream versions."""
    found = {}
    for package in facts.packages.packages:
        if is_coupled(package.name):
            upstream = upstream_version(package.version)
            if upstream:
                found[package.name] = upstream
    return found


def userspace_driver_version(facts: HostFacts) -> str | None:
    """The installed userspace driver: the coupled packages' version (the most common one), else
    the NVML library version nvidia-smi reports."""
    versions = list(coupled_packages(facts).values())
    if versions:
        return max(set(versions), key=lambda v: (versions.count(v), v))
    nvml = facts.driver.smi.nvml_version
    if nvml:
        parts = nvml.split(".")
        # XML reports e.g. "12.535.104.05": the CUDA major, then the driver version.
        return ".".join(parts[1:]) if len(parts) == 4 and len(parts[0]) <= 2 else nvml
    return None


def loaded_driver_version(facts: HostFacts) -> str | None:
    module = facts.driver.loaded_module
    if module is not None:
        return module.version
    return facts.driver.smi.driver_version if facts.driver.smi.ok else None


def installed_cuda_versions(facts: HostFacts) -> list[str]:
    """Every CUDA toolkit version on the host: the default one first, then each installed
    toolkit's, else what nvcc reports (none: an empty list)."""
    versions: list[str] = []
    default = facts.cuda.default_version
    if default:
        versions.append(default)
    for toolkit in facts.cuda.toolkits:
        if toolkit.version and toolkit.version not in versions:
            versions.append(toolkit.version)
    if not versions and facts.cuda.nvcc_version:
        versions.append(facts.cuda.nvcc_version)
    return versions
