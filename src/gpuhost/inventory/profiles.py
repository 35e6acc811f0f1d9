"""The profiles a host is judged and provisioned against: the one place that decides which
profiles file applies (every command that takes a profile calls :func:`profile_table`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gpuhost.bundle.setting import BUNDLE_KEY, bundle_os_problem
from gpuhost.matrix.profiles import Profile, load_profiles

PROFILES_FILE_KEY = "gpuhost_profiles_file"


def profiles_file(option: str | None, data: Mapping[str, Any] | None = None) -> str | None:
    """The command line's ``--profiles FILE`` when given, else the host's inventory data
    ``gpuhost_profiles_file``, else None (the built-in profiles only)."""
    if option:
        return option
    found = (data or {}).get(PROFILES_FILE_KEY)
    return found if isinstance(found, str) and found else None


_TABLES: dict[str | None, dict[str, Profile]] = {}


def profile_table(option: str | None, data: Mapping[str, Any] | None = None) -> dict[str, Profile]:
    """Built-in profiles with the applicable profiles file merged over them (read once per file
    and process); ConfigError naming the file and field for a bad file."""
    path = profiles_file(option, data)
    if path not in _TABLES:
        _TABLES[path] = load_profiles(path)
    return _TABLES[path]


#: inventory data a profile installing from NVIDIA's CUDA repository needs on every host
CUDA_REPO_KEYS = ("gpuhost_cuda_repo_url", "gpuhost_cuda_repo_key", "gpuhost_cuda_repo_key_sha256")


def install_data_problem(profile: Profile, data: Mapping[str, Any]) -> str | None:
    """Why a host with inventory ``data`` cannot be given ``profile`` (None when it can): a
    profile installing from NVIDIA's CUDA repository needs the repository's URL, key and the key's
    SHA-256 the operator verified. Checked before any host is contacted (provision, upgrade,
    ``gpuhost inventory check``) and again by the deploy on each host (plain pyinfra runs)."""
    bundle = data.get(BUNDLE_KEY)
    if isinstance(bundle, Mapping) and isinstance(bundle.get("path"), str):
        problem = bundle_os_problem(bundle["path"], profile.name, profile.os)
        if problem:
            return f"{BUNDLE_KEY}: {problem}"
    if profile.source != "nvidia-cuda-repo" or bundle:
        return None  # an offline bundle carries the repository's packages (docs/offline.md)
    for key in CUDA_REPO_KEYS:
        if not data.get(key):
            return (
                f"{key}: not set; profile {profile.name} installs from NVIDIA's CUDA repository "
                "and needs its URL, key and key SHA-256 (docs/getting-started.md: the NVIDIA "
                "repository key)"
            )
    return None


def forget() -> None:
    """Read profiles files afresh at the next call (a long-lived process, tests)."""
    _TABLES.clear()


def advisory_warnings(hosts: Iterable[Mapping[str, Any]]) -> list[str]:
    """One warning line per profile the hosts (their data) name whose driver or container
    toolkit NVIDIA's security bulletins name (``gpuhost.matrix.advisories``, as ``gpuhost matrix
    profile verify`` and the audit's security.* rules judge): provision installs it all the
    same (Debian's own driver must stay installable), but says so once, not per host."""
    from gpuhost.matrix.advisories import load_advisories, security_findings

    advisories = load_advisories()
    lines: list[str] = []
    for data in hosts:
        profile = profile_table(None, data).get(str(data.get("gpuhost_profile") or ""))
        if profile is None:
            continue
        findings = security_findings(
            advisories, driver=profile.driver_version, container_toolkit=profile.container_toolkit
        )
        line = (
            f"warning: profile {profile.name}: "
            + "; ".join(f.message for f in findings)
            + " (provision installs it as the profile says)"
        )
        if findings and line not in lines:
            lines.append(line)
    return lines
