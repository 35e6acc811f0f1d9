"""Provision and upgrade from an offline bundle (inventory data ``gpuhost_bundle``).

:func:`required_packages` is what the deploy installs from the profile's package plan, each with
the version pattern its pin or exact version demands; :func:`check_bundle` refuses a host whose
bundle lacks one of them (or whose files differ from its manifest) before any operation is
added; :func:`use_bundle` / :func:`stop_using_bundle` orchestrate the operations that make the
bundle the only source for the run and put the host's sources back after it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import requests
from pyinfra.api import OperationError

from gpuhost.bundle import rpmrepo
from gpuhost.bundle.aptrepo import KEY_FILE, file_hashes
from gpuhost.bundle.manifest import (
    MANIFEST,
    Manifest,
    file_problems,
    parse_manifest_text,
    pinned_problems,
    read_manifest,
)
from gpuhost.bundle.setting import BundleSetting, host_of
from gpuhost.datafiles import MAX_FILE_BYTES
from gpuhost.deploys.spec import PackagePlan
from gpuhost.desired import DesiredState
from gpuhost.errors import ConfigError, DeployError
from gpuhost.operations import dnf_pin, offline
from gpuhost.operations.apt_pin import version_glob
from gpuhost.operations.nvidia_repo import download, fetch_verified


def required_packages(
    spec: DesiredState, plan: PackagePlan, data: Mapping[str, Any]
) -> dict[str, str | None]:
    """{package: apt version pattern or None} of every package provision installs by name for
    ``spec`` (driver, fabric manager, persistence daemon, CUDA toolkits unless
    ``gpuhost_install_cuda`` is false, cuDNN, container toolkit, the exact companions; on a
    RHEL-family host DKMS, which an offline host can get from nowhere else)."""
    pattern = {name: version_glob(key) for key, names in plan.pins.items() for name in names}
    names = plan.driver_install + plan.fabric_manager
    if spec.persistence and plan.persistenced:
        names.append(plan.persistenced)
    if data.get("gpuhost_install_cuda") is not False:
        names += plan.cuda_toolkit
    names += plan.cudnn + plan.container_toolkit
    required: dict[str, str | None] = {name: pattern.get(name) for name in names}
    for name, version in plan.exact.items():
        if spec.persistence or name != plan.persistenced:
            required[name] = version
    if plan.dkms_package:  # RHEL family: NVIDIA's kernel module packages need EPEL's dkms
        required.setdefault(plan.dkms_package, None)
    return required


@cache
def _manifest_at_url(url: str, key_sha256: str) -> Manifest:
    """The manifest of the bundle served at ``url``, downloaded once per process (a fleet shares
    one bundle). An RPM bundle's manifest is its trust anchor: its SHA-256 must be
    ``key_sha256``, and it must list the keys it carries."""
    address = f"{url.rstrip('/')}/{MANIFEST}"
    try:
        content = download(address, MAX_FILE_BYTES)
    except requests.RequestException as exc:
        raise ConfigError(f"cannot download {address}: {exc}") from exc
    except OperationError as exc:  # more than a manifest's bytes
        raise ConfigError(str(exc)) from None
    manifest = parse_manifest_text(content.decode("utf-8", "replace"), address)
    if manifest.format != "rpm":
        return manifest
    digest = hashlib.sha256(content).hexdigest()
    if digest != key_sha256.lower():
        raise ConfigError(
            f"{address}: SHA-256 is {digest}, key_sha256 says {key_sha256.lower()} (an RPM "
            f"bundle's key_sha256 is the SHA-256 of its {MANIFEST}: sha256sum bundle/{MANIFEST} "
            "where it was made); nothing was installed"
        )
    if not manifest.keys:
        raise ConfigError(
            f"{address}: lists no keys (made before served RPM bundles could be checked); make "
            "the bundle again with gpuhost bundle"
        )
    return manifest


@cache
def served_keys(url: str, keys: tuple[tuple[str, str], ...]) -> dict[str, bytes]:
    """{file name: bytes} of a served RPM bundle's vendor keys (``URL/keys/NAME``), each the
    SHA-256 its checked manifest lists (``keys``); downloaded once per process. ConfigError
    naming the first key that cannot be downloaded or differs: no key is trusted on first use."""
    found = {}
    for name, sha256 in keys:
        try:
            found[name] = fetch_verified(f"{url.rstrip('/')}/{rpmrepo.KEYS}/{name}", sha256)
        except OperationError as exc:
            raise ConfigError(f"{exc}; nothing was installed") from None
    return found


@cache
def _checked_directory(path: str) -> tuple[Manifest, tuple[str, ...]]:
    """A bundle directory's manifest and its file problems, read once per process (a fleet
    shares one bundle: its files are hashed once, not per host)."""
    root = Path(path)
    manifest = read_manifest(root)
    return manifest, tuple(file_problems(manifest, root))


def load_bundle(setting: BundleSetting) -> Manifest:
    """The bundle's manifest; ConfigError when it cannot be read or (a directory) its files
    differ from it."""
    if setting.url:
        manifest = _manifest_at_url(setting.url, str(setting.key_sha256))
        if manifest.format == "rpm":
            served_keys(setting.url, manifest.keys)  # checked before any change, as the files
        return manifest
    manifest, problems = _checked_directory(str(setting.path))
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise ConfigError(
            f"bundle {setting.path}: files differ from {MANIFEST}: {'; '.join(problems[:3])}"
            f"{more}; make the bundle again or copy it whole"
        )
    return manifest


def check_bundle(
    host_name: str, setting: BundleSetting, spec: DesiredState, plan: PackagePlan,
    data: Mapping[str, Any], os_key: str,
) -> Manifest:
    """The bundle's manifest when it carries everything ``spec`` installs on this OS;
    DeployError naming what it lacks otherwise (before any change to the host)."""
    try:
        manifest = load_bundle(setting)
    except ConfigError as exc:
        raise DeployError(host_name, f"gpuhost_bundle: {exc}") from exc
    if manifest.os != os_key:
        raise DeployError(
            host_name,
            f"gpuhost_bundle {setting.where}: made for {manifest.os}, this host runs {os_key}; "
            "nothing was installed",
        )
    stream = f"{plan.module[0]}:{plan.module[1]}" if plan.module else None
    if stream and stream not in manifest.modules:
        raise DeployError(
            host_name,
            f"gpuhost_bundle {setting.where}: carries module stream(s) "
            f"{', '.join(manifest.modules) or 'none'}, profile {spec.profile} needs {stream}; "
            f"nothing was installed (make it with gpuhost bundle {spec.profile})",
        )
    problems = pinned_problems(manifest, required_packages(spec, plan, data))
    if problems:
        raise DeployError(
            host_name,
            f"gpuhost_bundle {setting.where}: lacks packages profile {spec.profile} installs: "
            f"{', '.join(problems)}; nothing was installed (make it with gpuhost bundle "
            f"{spec.profile})",
        )
    return manifest


def use_bundle(setting: BundleSetting, family: str = "apt", label: str = "") -> None:
    """Operations: the bundle on the host (copied, or its server's key) as the only source;
    on a dnf host (``family``) the RPM bundle as the only NVIDIA repository, kept after the run
    (``label``: the profile and OS its repository file names)."""
    if family == "dnf" and setting.url:
        manifest = _manifest_at_url(setting.url, str(setting.key_sha256))
        dnf_pin.served_bundle_repository(
            name=f"Offline bundle at {setting.url}: the NVIDIA repository",
            url=setting.url, keys=served_keys(setting.url, manifest.keys), label=label,
        )
        return
    if family == "dnf":
        dnf_pin.bundle_repository(
            name=f"Offline bundle in {offline.REPO_DIR}: the NVIDIA repository",
            src=str(setting.path), files=bundle_files(str(setting.path)), label=label,
        )
        return
    if setting.path:
        offline.only_source(
            name=f"Offline bundle in {offline.REPO_DIR}: the only apt source for this run",
            uri=f"file:{offline.REPO_DIR}",
            keyring=f"{offline.REPO_DIR}/{KEY_FILE}",
            src=setting.path,
            files=bundle_files(setting.path),
        )
        return
    url = str(setting.url)
    key = fetch_verified(f"{url.rstrip('/')}/{KEY_FILE}", str(setting.key_sha256))
    offline.only_source(
        name=f"Offline bundle at {url}: the only apt source for this run",
        uri=url, keyring=offline.URL_KEYRING, key=key, direct_host=host_of(url),
    )


def stop_using_bundle() -> None:
    offline.restored(name="The host's own apt sources back")


def bundle_files(path: str) -> dict[str, str]:
    """{relative path: sha256} of every file of the bundle directory: the packages' from the
    manifest (``load_bundle`` compared them with the files), the few others hashed here."""
    root = Path(path)
    manifest, _ = _checked_directory(path)
    files = {entry.filename: entry.sha256 for entry in manifest.packages}
    for item in sorted(root.rglob("*")):
        name = str(item.relative_to(root))
        if item.is_file() and name not in files:
            files[name] = file_hashes(item)[1]
    return files
