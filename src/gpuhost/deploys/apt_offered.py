"""Provision's guard on an apt host (Debian, Ubuntu; issue 33): every package the run installs
at a pinned version (the driver's, the CUDA toolkits, cuDNN, the container toolkit, the
companions' exact versions, the installed coupled names) is installed at it or offered at it by
the sources the run will have, judged while the deploy is prepared, before anything changes.

apt sees only sources it has lists for, and the run writes NVIDIA's source (and, on Debian, the
archive's components) later: so apt is asked through a private configuration on the host
(``facts.apt_pins.AptOffered``, ``Apt.offered_command``): the host's own sources as the run
leaves them plus NVIDIA's with its verified key, read into a temporary folder, the host's apt
state untouched. The counterpart of ``nvidia_dnf.check_offered``."""

from __future__ import annotations

import base64
import posixpath
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from typing import Any

from pyinfra import host
from pyinfra.api import OperationError
from pyinfra.facts.deb import DebPackages
from pyinfra.facts.server import LinuxDistribution

from gpuhost.bundle.setting import proxy_urls
from gpuhost.deploys.offline import required_packages
from gpuhost.deploys.spec import PackagePlan
from gpuhost.desired import DesiredState
from gpuhost.errors import DeployError
from gpuhost.facts.apt_pins import AptOffered
from gpuhost.facts.files import SmallFile
from gpuhost.operations.apt_pin import version_glob
from gpuhost.operations.apt_proxy import PROXY_PATH, query_settings
from gpuhost.operations.debian_sources import SOURCES_LIST, fix_sources, source_files
from gpuhost.operations.nvidia_repo import (
    SOURCES_PATH,
    fetch_verified,
    keyring_path,
    render_source,
)
from gpuhost.parsers.packages import PRIVATE_DIR, Offered

#: (relative path in the private folder, text): a source file as ``Apt.offered_command`` takes it
SourceFile = tuple[str, str]


def pinned_versions(spec: DesiredState, plan: PackagePlan, data: Mapping[str, Any],
                    installed: Iterable[str]) -> dict[str, str]:
    """{package: the apt version pattern it must match} (pure): what ``offline.required_packages``
    names with a version (the bundle check's set: driver, fabric manager, persistence daemon,
    CUDA toolkits unless ``gpuhost_install_cuda`` is false, cuDNN, container toolkit, exact
    companions) and the coupled names ``installed`` has, which the pins move to the driver's
    version. Names without a pinned version are left out: apt takes whatever is offered."""
    wanted = {n: p for n, p in required_packages(spec, plan, data).items() if p}
    pattern = {name: key for key, names in plan.pins.items() for name in names}
    for name in plan.coupled:
        if name in installed and name in pattern and name not in wanted:
            wanted[name] = version_glob(pattern[name])
    return wanted


def _matches(versions: Iterable[str], pattern: str) -> bool:
    return any(fnmatchcase(v, pattern) for v in versions)


def lacking(wanted: Mapping[str, str], installed: Mapping[str, Iterable[str]]) -> list[str]:
    """The names of ``wanted`` not installed at a matching version: what must come from the
    sources (pure)."""
    return sorted(n for n, p in wanted.items() if not _matches(installed.get(n) or (), p))


def _shown(pattern: str) -> str:
    """The pinned version as the profile names it (``580.178.04-*`` -> ``580.178.04``)."""
    return pattern.removesuffix("-*")


def _listed(versions: list[str]) -> str:
    return ", ".join(versions) or "none"


def offered_problem(wanted: Mapping[str, str], installed: Mapping[str, Iterable[str]],
                    offered: Offered) -> str | None:
    """Why the run must not start (pure): a package it installs at a pinned version that the
    sources do not offer at it (a name none has: offered none), with apt's own line when it
    could not read a source; None when every such package is installed or offered."""
    need = lacking(wanted, installed)
    absent = [n for n in need if not _matches(offered.versions.get(n, []), wanted[n])]
    if not absent:
        return None
    if offered.error:
        return (
            f"cannot read what the apt sources offer ({offered.error}) while "
            f"{', '.join(f'{n} {_shown(wanted[n])}' for n in absent)} must come from them; "
            "nothing was changed: check gpuhost_cuda_repo_url, gpuhost_proxy and the host's "
            "apt sources"
        )
    lines = [f"{n} {_shown(wanted[n])} (offered: {_listed(offered.versions.get(n, []))})"
             for n in absent]
    return (
        "not offered by the apt sources at the profile's version, so it could be neither "
        f"installed nor held: {'; '.join(lines)}; nothing was changed (pick a profile whose "
        "versions the sources have, or check gpuhost_cuda_repo_url and the host's sources)"
    )


def private_sources(host_files: Mapping[str, str], components: list[str], codename: str,
                    nvidia: tuple[str, bytes] | None) -> tuple[list[SourceFile], list[SourceFile]]:
    """(sources, keys) for ``Apt.offered_command`` (pure): the host's source files as the run
    leaves them (the Debian archive's entries with ``components`` added, as
    ``debian_sources.components`` writes them) and, with ``nvidia`` (URL, key bytes), NVIDIA's
    source as ``nvidia_repo.repository`` writes it, its keyring in the private folder."""
    files = dict(host_files)
    if components and codename:
        files.update(fix_sources(files, codename, components)[0])
    keys = []
    if nvidia is not None:
        url, key = nvidia
        name = posixpath.basename(keyring_path(key))
        files[SOURCES_PATH] = render_source(url, f"{PRIVATE_DIR}/{name}")
        keys.append((name, base64.b64encode(key).decode()))
    sources = [("sources.list" if path == SOURCES_LIST else f"parts/{posixpath.basename(path)}",
                text) for path, text in sorted(files.items())]
    return sources, keys


def _nvidia_source(spec: DesiredState, data: Mapping[str, Any]) -> tuple[str, bytes] | None:
    """NVIDIA's repository URL and its verified key, where the run writes that source."""
    if spec.source != "nvidia-cuda-repo":
        return None
    try:
        key = fetch_verified(str(data.get("gpuhost_cuda_repo_key") or ""),
                             str(data.get("gpuhost_cuda_repo_key_sha256") or ""),
                             proxy_urls(data))
    except OperationError as exc:
        raise DeployError(host.name, f"gpuhost_cuda_repo_key: {exc}; nothing was changed") from exc
    return str(data.get("gpuhost_cuda_repo_url") or ""), key


def check_offered(spec: DesiredState, plan: PackagePlan, data: Mapping[str, Any]) -> None:
    """Provision's guard on an apt host without a bundle, while the deploy is prepared: the
    sources are asked only when something must come from them (a converged re-run needs none);
    DeployError with ``offered_problem``'s line."""
    installed = host.get_fact(DebPackages) or {}
    wanted = pinned_versions(spec, plan, data, installed)
    need = lacking(wanted, installed)
    if not need:
        return
    distro: Any = host.get_fact(LinuxDistribution)
    codename = str((distro.get("release_meta") or {}).get("VERSION_CODENAME") or "")
    sources, keys = private_sources(source_files(), plan.apt_components, codename,
                                    _nvidia_source(spec, data))
    ours = host.get_fact(SmallFile, path=PROXY_PATH) is not None
    offered = host.get_fact(AptOffered, packages=need, files=tuple(sources), keys=tuple(keys),
                            settings=tuple(query_settings(proxy_urls(data), ours)))
    problem = offered_problem(wanted, installed, offered)
    if problem:
        raise DeployError(host.name, problem)
