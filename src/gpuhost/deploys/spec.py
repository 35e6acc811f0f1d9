"""What a host must end up with: a profile resolved to versions (``DesiredState``) and to package
names (``PackagePlan``, from ``data/package_sets.yaml``). Pure data, no host access."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuhost.datafiles import PACKAGE_SETS, package_sets, supported_os
from gpuhost.desired import DesiredState, PrecompiledModules
from gpuhost.errors import ConfigError


@dataclass(frozen=True)
class PackagePlan:
    """Package names for one spec on one OS, versions filled in."""

    source_note: str
    driver_install: list[str]
    coupled: list[str]
    companions: list[str]
    blocked: list[str]
    blocked_patterns: list[str]
    persistenced: str
    cuda_toolkit: list[str]  # every toolkit's packages (all of cuda_toolkits' names)
    cudnn: list[str]
    container_toolkit: list[str]
    fabric_manager: list[str]
    pins: dict[str, list[str]] = field(default_factory=dict)  # upstream version -> packages
    #: CUDA version -> its toolkit packages, the profile's default first; installed side by side
    cuda_toolkits: dict[str, list[str]] = field(default_factory=dict)
    apt_components: list[str] = field(default_factory=list)  # Debian archive components needed
    #: companion package -> the exact Debian version the profile pins it to (its companions field)
    exact: dict[str, str] = field(default_factory=dict)
    #: precompiled kernel modules (Ubuntu's archive), None for DKMS sources; their names still
    #: hold ``{kernel}``/``{kernel_flavour}``/``{kernel_track}``, filled per host by
    #: operations/precompiled.py
    precompiled: PrecompiledModules | None = None
    #: the source keeps one version of a package per pocket (a superseded one is gone)
    newest_only: bool = False
    #: {coupled name: the prefix every version of it shares} for names carrying the driver
    #: version (nvidia-firmware-580-server-580.178.04 -> nvidia-firmware-580-server-): another
    #: version's package is another name, left behind by a driver change unless removed
    versioned: dict[str, str] = field(default_factory=dict)
    #: apt name patterns (``/^nvidia-kernel-source-[0-9]+-open$/``) of packages another driver
    #: branch installs that this one neither replaces nor needs: removed after the install, so
    #: a branch change (580 -> 595 on Ubuntu: per-branch names -> unsuffixed) leaves none behind
    superseded: list[str] = field(default_factory=list)
    #: dnf (RHEL family) only: the driver packages' epoch, the module stream ("nvidia-driver",
    #: "580-open"; None on RHEL 10, no modules), the package DKMS comes from, NVIDIA's repository
    #: folder (rhel9) and the repository EPEL's packages need (crb, powertools)
    family: str = "apt"  # the OS's package manager (gpuhost.oskey): apt or dnf
    epoch: str | None = None
    module: tuple[str, str] | None = None
    kernel_module_other: list[str] = field(default_factory=list)  # the other flavour's packages
    dkms_package: str = ""
    repo_folder: str = ""
    crb: str = ""
    epel_release: str = ""  # the OS's package enabling EPEL (Rocky, Alma); "" on RHEL

    @property
    def locked(self) -> list[str]:
        """Every name a dnf host version-locks: the whole coupled set (a partial lock makes
        every ``dnf upgrade`` fail under RHEL's best=True), companions and components."""
        return self.never_upgraded

    @property
    def never_upgraded(self) -> list[str]:
        """Every package the plan pins or holds (kept away from unattended-upgrades)."""
        names = self.coupled + self.companions + self.fabric_manager + self.cuda_toolkit
        names += self.cudnn + self.container_toolkit + list(self.exact)
        return list(dict.fromkeys(names))


#: placeholders filled per host, from its kernels (operations/precompiled.py)
HOST_PLACEHOLDERS = ("kernel", "kernel_flavour", "kernel_track")


def _fill(templates: list[str], values: dict[str, str]) -> list[str]:
    out = []
    keep = {name: "{" + name + "}" for name in HOST_PLACEHOLDERS}
    for template in templates:
        try:
            out.append(template.format(**{**keep, **values}))
        except KeyError as exc:
            raise ConfigError(
                f"{PACKAGE_SETS}: {template!r} needs {exc.args[0]}, which this profile lacks"
            ) from exc
    return out


def cudnn_pin(version: str) -> str:
    """The pins key for a cuDNN version: its packages have four fields (``9.5.1.17-1``) while
    profiles and ``cudnn_version.h`` give three (``9.5.1``), so a three-field version pins every
    build of it (``9.5.1.*`` -> ``Pin: version 9.5.1.*``); a four-field one pins itself."""
    return f"{version}.*" if version.count(".") < 3 else version


def cuda_pin(version: str) -> str:
    """The pins key for a CUDA toolkit version: a profile's ``12.4`` pins every 12.4 release of the
    toolkit's packages (``12.4.*`` -> ``12.4.0-1``, ``12.4.1-1``, never ``12.40``); a three-field
    ``12.4.1`` pins that release (``12.4.1-*``)."""
    return f"{version}.*" if version.count(".") < 2 else version


def cuda_order(spec: DesiredState) -> list[str]:
    """The profile's CUDA versions, its default first."""
    versions = list(dict.fromkeys(spec.cuda_versions))
    if spec.cuda_default:
        versions = [spec.cuda_default] + [v for v in versions if v != spec.cuda_default]
    return versions


def _cuda_values(version: str) -> dict[str, str]:
    parts = version.split(".")
    return {"cuda_major": parts[0], "cuda_dash": "-".join(parts[:2])}


def for_branch(entry: dict[str, Any], branch: str) -> dict[str, Any]:
    """An OS entry of the package data as it applies to driver ``branch``: its ``from_branch``
    variant with the highest branch not above ``branch`` replaces the keys it names (NVIDIA's
    Ubuntu packages lose the branch suffix from 590), else the entry as it is."""
    variants = entry.get("from_branch") or {}
    try:
        eligible = [int(b) for b in variants if int(b) <= int(branch)]
    except ValueError as exc:
        raise ConfigError(
            f"{PACKAGE_SETS}: from_branch keys and the driver branch are numbers, found "
            f"{sorted(map(str, variants))} and {branch!r}"
        ) from exc
    if not eligible:
        return entry
    chosen = max(eligible)
    variant = next(v for b, v in variants.items() if int(b) == chosen)
    return {**entry, **variant}


def package_plan(spec: DesiredState, os_key: str) -> PackagePlan:
    """The package names for ``spec`` on ``os_key``; ConfigError when the data has none."""
    sources = package_sets()["sources"]
    entry = sources.get(spec.source, {}).get(os_key)
    if entry is None:
        raise ConfigError(
            f"{PACKAGE_SETS}: no package names for source {spec.source} on {os_key}; "
            f"accepted: {', '.join(supported_os(spec.source)) or 'none'}"
        )
    entry = for_branch(entry, spec.driver_branch)
    values = {
        "branch": spec.driver_branch,
        "version": spec.driver_version,
        "os_version": os_key.rpartition("-")[2],
    }
    cudas = cuda_order(spec)
    if cudas:
        values.update(_cuda_values(cudas[0]))
    if spec.cudnn:
        values["cudnn_major"] = spec.cudnn.split(".")[0]

    def names(key: str) -> list[str]:
        return _fill(list(entry.get(key) or []), values)

    module = names("install") + _fill(
        list(entry["kernel_module"].get(spec.kernel_module, [])), values
    )
    coupled = names("coupled")
    pins: dict[str, list[str]] = {spec.driver_version: coupled}
    toolkits: dict[str, list[str]] = {}
    for version in cudas:
        toolkit = _fill(list(entry.get("cuda_toolkit") or []), {**values, **_cuda_values(version)})
        clash = [v for v, other in toolkits.items() if set(other) & set(toolkit)]
        if clash:
            raise ConfigError(
                f"{PACKAGE_SETS}: source {spec.source} on {os_key} installs one CUDA toolkit "
                f"({', '.join(toolkit)}), but profile {spec.profile} lists CUDA "
                f"{clash[0]} and {version}; list one CUDA version for this source"
            )
        if toolkit:
            toolkits[version] = toolkit
    cuda_toolkit = [name for names_ in toolkits.values() for name in names_]
    cudnn = names("cudnn") if spec.cudnn else []
    container = names("container_toolkit") if spec.container_toolkit else []
    fabric = _fabric_manager(entry, spec, values)
    if spec.fabric_manager:
        pins[spec.driver_version] = coupled + fabric
    for version, toolkit in toolkits.items():
        pins.setdefault(cuda_pin(version), []).extend(toolkit)
    if cudnn and spec.cudnn:
        pins.setdefault(cudnn_pin(spec.cudnn), []).extend(cudnn)
    if container and spec.container_toolkit:
        pins.setdefault(spec.container_toolkit, []).extend(container)
    exact = dict(spec.companions)
    pinned = sorted(set(exact) & {name for names_ in pins.values() for name in names_})
    if pinned:
        raise ConfigError(
            f"profile {spec.profile}: companions {', '.join(pinned)} already follow the profile's "
            f"driver/CUDA/cuDNN/toolkit version ({PACKAGE_SETS}); remove them from companions"
        )
    return PackagePlan(
        source_note=str(entry.get("source", "")),
        driver_install=module,
        coupled=coupled,
        companions=names("companions"),
        blocked=names("blocked"),
        blocked_patterns=list(entry.get("blocked_patterns") or []),
        superseded=[str(p) for p in entry.get("superseded_patterns") or []],
        persistenced=_fill([entry.get("persistenced") or ""], values)[0],
        cuda_toolkit=cuda_toolkit,
        cuda_toolkits=toolkits,
        cudnn=cudnn,
        container_toolkit=container,
        fabric_manager=fabric,
        pins=pins,
        apt_components=[str(c) for c in entry.get("apt_components") or []],
        exact=exact,
        **_archive_fields(entry, spec, values),
        **_dnf_fields(entry, spec, values),
    )


def _fabric_manager(entry: dict[str, Any], spec: DesiredState, values: dict[str, str]) -> list[str]:
    """Fabric manager's package names for the profile's branch: ``fabric_manager``, or the
    names ``fabric_manager_below`` gives for a branch below one (NVIDIA's RPMs: 580)."""
    if not spec.fabric_manager:
        return []
    for below, older in sorted((entry.get("fabric_manager_below") or {}).items()):
        if int(spec.driver_branch) < int(below):
            return _fill([str(n) for n in older], values)
    return _fill(list(entry.get("fabric_manager") or []), values)


def _archive_fields(
    entry: dict[str, Any], spec: DesiredState, values: dict[str, str]
) -> dict[str, Any]:
    """What Ubuntu's archive adds: precompiled modules, one version per pocket, versioned names."""
    return {
        "precompiled": _precompiled(entry, spec.kernel_module, values),
        "newest_only": entry.get("newest_only") is True,
        "versioned": _versioned(entry, values),
    }


def _versioned(entry: dict[str, Any], values: dict[str, str]) -> dict[str, str]:
    out = {}
    for template in entry.get("coupled") or []:
        head, found, _ = str(template).partition("{version}")
        if found:
            out[_fill([str(template)], values)[0]] = _fill([head], values)[0]
    return out


def _precompiled(
    entry: dict[str, Any], module: str, values: dict[str, str]
) -> PrecompiledModules | None:
    """The entry's precompiled modules of ``module``'s flavour (open | proprietary), if any."""
    table = entry.get("precompiled_modules")
    if not isinstance(table, dict):
        return None
    flavour = table.get(module) or {}
    return PrecompiledModules(
        flavour=_fill([str(flavour.get("flavour") or "")], values)[0],
        kernel=_fill([str(n) for n in flavour.get("kernel") or []], values),
        kernel_metapackages=_fill([str(n) for n in entry.get("kernel_metapackages") or []], values),
    )


def _dnf_fields(entry: dict, spec: DesiredState, values: dict[str, str]) -> dict:
    """The plan's dnf-only fields from a RHEL-family entry (empty for apt entries)."""
    if "epoch" not in entry:
        return {}
    module = entry.get("module")
    stream = None
    if module:
        # an undecided flavour ("auto" without GPUs) leaves the stream empty: the deploy refuses
        flavour = str(module.get(spec.kernel_module) or "")
        stream = (str(module["name"]), _fill([flavour], values)[0] if flavour else "")
    repository = entry.get("repository") or {}
    flavours = entry.get("kernel_module") or {}
    other = [n for f, names in flavours.items() if f != spec.kernel_module for n in names or []]
    return {
        "family": "dnf",
        "kernel_module_other": _fill([str(n) for n in other], values),
        "epoch": str(entry["epoch"]),
        "module": stream,
        "dkms_package": str(entry.get("dkms_package") or ""),
        "repo_folder": str(repository.get("folder") or ""),
        "crb": str(repository.get("crb") or ""),
        "epel_release": str(repository.get("epel_release") or ""),
    }
