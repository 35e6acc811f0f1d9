"""Checks that stop a host before any change: unknown profile, impossible version set,
unsupported OS, a bad ``gpuhost_harden`` (Secure Boot: ``deploys.secure_boot``). Each raises one
DeployError naming the host, the field, what was found and the accepted values."""

from __future__ import annotations

from typing import Any

from gpuhost.deploys.spec import supported_os
from gpuhost.desired import DesiredState
from gpuhost.errors import DeployError, GpuhostError
from gpuhost.matrix.profiles import Profile, load_profiles, verify_profile
from gpuhost.parsers.profile_marker import ProfileMarker

PROFILE_KEY = "gpuhost_profile"
HARDEN_KEY = "gpuhost_harden"


def spec_from_profile(
    profile: Profile, gpus: list[str], fabric_manager: bool = False
) -> DesiredState:
    """A matrix ``Profile`` → the versions provision installs (kernel module "auto" resolved
    for ``gpus``; fabric manager "auto" follows inventory data ``gpuhost_fabric_manager``)."""
    return DesiredState.from_profile(profile, gpus, {"gpuhost_fabric_manager": fabric_manager})


def load_profile_table(extra_file: str | None = None) -> dict[str, Profile]:
    return load_profiles(extra_file)


def check_profile(host: str, data: dict[str, Any], profiles: dict[str, Profile]) -> DesiredState:
    """The host's profile resolved, or DeployError (static checks: no connection needed)."""
    accepted = ", ".join(sorted(profiles)) or "(no profiles defined)"
    name = data.get(PROFILE_KEY)
    if not name:
        raise DeployError(host, f"{PROFILE_KEY}: not set; accepted: {accepted}")
    if not isinstance(name, str) or name not in profiles:
        raise DeployError(
            host, f"{PROFILE_KEY}: {name!r} is not a known profile; accepted: {accepted}"
        )
    profile = profiles[name]
    gpus = [str(g) for g in data.get("gpuhost_gpus") or []]
    errors = _profile_errors(profile, gpus)
    if errors:
        raise DeployError(
            host,
            f"{PROFILE_KEY}: {name!r} is an impossible version set"
            f"{' for GPUs ' + ', '.join(gpus) if gpus else ''}: {'; '.join(errors)}",
        )
    return spec_from_profile(profile, gpus, bool(data.get("gpuhost_fabric_manager")))


def _profile_errors(profile: Profile, gpus: list[str]) -> list[str]:
    from gpuhost.matrix import load_matrix

    try:
        findings = verify_profile(load_matrix(), profile, gpus=gpus)
    except GpuhostError as exc:
        return [str(exc)]
    return [f.message for f in findings if f.severity == "error"]


def check_os(host: str, spec: DesiredState, found: str) -> None:
    accepted = [o for o in supported_os(spec.source) if not spec.os or o in spec.os]
    if found not in accepted:
        raise DeployError(
            host,
            f"OS: {found} is not supported by profile {spec.profile} (source {spec.source}); "
            f"accepted: {', '.join(accepted) or 'none'}",
        )


def check_harden(host: str, data: dict[str, Any]) -> bool:
    """Does provision harden SSH and the firewall here? Inventory data ``gpuhost_harden``
    (default true; false opts out)."""
    value = data.get(HARDEN_KEY)
    if value is None:
        return True
    if not isinstance(value, bool):
        raise DeployError(host, f"{HARDEN_KEY}: {value!r} is not a boolean; accepted: true, false")
    return value


UPGRADE_HINT = (
    "`gpuhost upgrade INVENTORY --to {profile}` moves it safely (snapshot, drain, install, "
    "reboot, validate, roll back on failure)"
)


def check_driver_unchanged(
    host: str,
    spec: DesiredState,
    marker: ProfileMarker | None,
    installed: dict[str, str],
) -> None:
    """Refuse (DeployError, before any change) a run that would change the NVIDIA driver of a
    host that has one: the marker records another driver version or kernel module flavour, or
    the driver the packages show (the version most coupled packages have, ``installed``:
    {package: upstream version}) is another one. Replacing the driver under running workloads
    leaves the loaded module and the new libraries mismatched until a reboot; ``gpuhost
    upgrade`` does that move.

    A host whose driver is the profile's but with some coupled packages at another version
    (``driver.packages-mixed``: a hand install, a half-finished run) is not refused: that is
    drift provision repairs, by installing those packages at the pinned version."""
    found: list[str] = []
    if marker is not None and marker.driver_version not in (None, spec.driver_version):
        found.append(f"{marker.driver_version} (provisioned with profile {marker.profile})")
    elif marker is not None and marker.kernel_module not in (None, spec.kernel_module):
        found.append(
            f"{marker.driver_version} with the {marker.kernel_module} kernel module "
            f"(provisioned with profile {marker.profile})"
        )
    by_version: dict[str, list[str]] = {}
    for name, version in sorted(installed.items()):
        by_version.setdefault(version, []).append(name)
    if by_version and (found or host_driver(installed) != spec.driver_version):
        found += [
            f"{v} installed ({', '.join(names)})"
            for v, names in sorted(by_version.items())
            if v != spec.driver_version
        ]
    if not found:
        return
    raise DeployError(
        host,
        f"profile {spec.profile} asks for NVIDIA driver {spec.driver_version} "
        f"({spec.kernel_module} kernel module) but this host has {'; '.join(found)}: provision "
        "never replaces the driver of a host (running jobs and the loaded kernel module would "
        "no longer match it until a reboot), nothing was changed; "
        + UPGRADE_HINT.format(profile=spec.profile),
    )


def host_driver(installed: dict[str, str]) -> str | None:
    """The driver version the coupled packages show: the one most of them have (ties: the
    higher version string), None when none is installed (pure)."""
    versions = list(installed.values())
    if not versions:
        return None
    return max(set(versions), key=lambda v: (versions.count(v), v))
