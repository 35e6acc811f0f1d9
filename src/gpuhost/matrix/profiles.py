"""Profiles: named, pinned version sets (built-in ``data/profiles.yaml`` plus a user file).

:func:`load_profiles` merges a user file over the built-ins (same schema; a user profile with a
built-in's name replaces it) and reports every bad field as ``FILE: profiles.NAME.FIELD: ...``.
:func:`verify_profile` judges a profile against the matrix for the given GPUs.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml

from gpuhost.datafiles import load_yaml, supported_os, yaml_problem
from gpuhost.errors import ConfigError, UnknownNameError, VersionError
from gpuhost.findings import Finding
from gpuhost.matrix.check import check_stack
from gpuhost.matrix.gpus import gpu_info
from gpuhost.matrix.lookup import parse_framework
from gpuhost.matrix.model import Matrix
from gpuhost.versions import driver_branch, parse_version

SOURCES = ("debian-nonfree", "nvidia-cuda-repo", "ubuntu-archive")
KERNEL_MODULES = ("open", "proprietary", "auto")
CLOCK_POLICIES = ("max", "none", "explicit")
_FIELDS = {
    "description",
    "os",
    "source",
    "driver",
    "cuda",
    "cudnn",
    "container_toolkit",
    "fabric_manager",
    "frameworks",
    "clocks",
    "persistence",
    "packages",
    "companions",
}
# a Debian package version as apt prints it ("535.161.07-1~deb12u1", "20220217+3~deb12u1", "1.2.2")
_DEB_VERSION_RE = re.compile(r"^([0-9]+:)?[0-9][A-Za-z0-9.+~:-]*$")


@dataclass(frozen=True)
class Clocks:
    policy: Literal["max", "none", "explicit"]
    graphics_mhz: int | None = None
    memory_mhz: int | None = None


@dataclass(frozen=True)
class Profile:
    """A pinned version set. Versions are upstream versions as strings."""

    name: str
    description: str
    os: tuple[str, ...]
    source: str  # debian-nonfree | nvidia-cuda-repo | ubuntu-archive
    driver_version: str
    driver_branch: int
    kernel_module: str  # open | proprietary | auto
    cuda_versions: tuple[str, ...]
    cuda_default: str
    cudnn: str | None
    container_toolkit: str | None
    fabric_manager: bool | Literal["auto"]
    frameworks: tuple[str, ...]
    clocks: Clocks
    persistence: bool
    packages: dict[str, str] = field(default_factory=dict)
    # package -> exact Debian version of the NVIDIA packages the driver pulls in that carry their
    # own version (nvidia-modprobe, nvidia-persistenced, ...): pinned exactly, so a host
    # provisioned later gets the same ones (issue 20)
    companions: dict[str, str] = field(default_factory=dict)
    origin: str = ""  # file the profile came from


def builtin_profiles_path() -> str:
    return str(resources.files("gpuhost") / "data" / "profiles.yaml")


def load_profiles(extra_file: str | None = None) -> dict[str, Profile]:
    """Built-in profiles, with the profiles of ``extra_file`` merged over them.

    Raises ConfigError naming the file and the field path of every problem (exit code 2).
    """
    profiles = dict(_builtin())
    if extra_file is not None:
        profiles.update(_load_file(extra_file))
    return profiles


@functools.lru_cache(maxsize=1)
def _builtin() -> dict[str, Profile]:
    return _load_file(builtin_profiles_path())


def _load_file(path: str) -> dict[str, Profile]:
    try:
        data = load_yaml(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the profiles file ({exc})") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({yaml_problem(exc)})") from exc
    problems: list[str] = []
    out = parse_profiles(data, path, problems)
    if problems:
        shown = "; ".join(problems[:10])
        more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
        raise ConfigError(f"{path}: invalid profiles: {shown}{more}")
    return out


def parse_profiles(data: Any, origin: str, problems: list[str]) -> dict[str, Profile]:
    """Build profiles from parsed YAML, appending ``field.path: problem`` lines to ``problems``."""
    if not isinstance(data, dict) or not isinstance(data.get("profiles"), dict):
        problems.append("profiles: expected a mapping 'profiles:' of NAME -> profile")
        return {}
    if data.get("schema", 1) != 1:
        problems.append(f"schema: {data.get('schema')!r} is not a supported schema (expected 1)")
    out = {}
    for name, raw in data["profiles"].items():
        if not isinstance(name, str) or not name.strip():  # YAML's 5 or ~ became '5', 'None'
            problems.append(
                f"profiles.{name!r}: a profile name must be text (quote it in YAML: \"{name}\")"
            )
            continue
        path = f"profiles.{name}"
        before = len(problems)
        prof = _profile(str(name), raw, path, origin, problems)
        if prof is not None and len(problems) == before:
            out[str(name)] = prof
    return out


class _Reader:
    """Reads one profile's fields, appending ``profiles.NAME.FIELD: problem`` lines."""

    def __init__(self, path: str, problems: list[str]) -> None:
        self.path = path
        self.problems = problems

    def bad(self, sub: str, msg: str) -> None:
        self.problems.append(f"{self.path}.{sub}: {msg}" if sub else f"{self.path}: {msg}")

    def text(self, key: str, value: Any, required: bool = True) -> str | None:
        if value is None:
            if required:
                self.bad(key, "missing")
            return None
        if not isinstance(value, str) or not value.strip():
            self.bad(key, f"expected a string, found {value!r}")
            return None
        return value

    def version(self, key: str, value: Any, required: bool = True) -> str | None:
        if value is None and not required:
            return None
        try:
            parse_version(value, field=f"{self.path}.{key}")
        except VersionError as exc:
            self.problems.append(str(exc))
            return None
        return str(value)

    def choice(self, key: str, value: Any, allowed: tuple[str, ...]) -> str:
        if value not in allowed:
            self.bad(key, f"{value!r} is not one of {', '.join(allowed)}")
            return allowed[0]
        return str(value)


def _profile(name: str, raw: Any, path: str, origin: str, problems: list[str]) -> Profile | None:
    r = _Reader(path, problems)
    if not isinstance(raw, dict):
        r.bad("", "expected a mapping")
        return None
    for key in raw:
        if key not in _FIELDS:
            r.bad(str(key), f"unknown field (expected one of {', '.join(sorted(_FIELDS))})")
    description = r.text("description", raw.get("description")) or ""
    os_ids, source = _os_and_source(r, raw)
    dver, branch, kmod = _driver(r, raw)
    cuda_versions, default = _cuda(r, raw)
    cudnn = r.version("cudnn", raw.get("cudnn"), required=False)
    ctk = r.version("container_toolkit", raw.get("container_toolkit"), required=False)
    fm = raw.get("fabric_manager", "auto")
    if not (isinstance(fm, bool) or fm == "auto"):  # 1 == True let 1 through
        r.bad("fabric_manager", f"{fm!r} is not true, false or auto")
        fm = "auto"
    frameworks = _frameworks(r, raw)
    clocks = _clocks(r, raw)
    persistence = raw.get("persistence", True)
    if not isinstance(persistence, bool):
        r.bad("persistence", f"{persistence!r} is not true or false")
        persistence = True
    packages, companions = _packages(r, raw)
    return Profile(
        name=name,
        description=description,
        os=tuple(os_ids),
        source=source,
        driver_version=dver,
        driver_branch=branch,
        kernel_module=kmod,
        cuda_versions=cuda_versions,
        cuda_default=default,
        cudnn=cudnn,
        container_toolkit=ctk,
        fabric_manager=fm,
        frameworks=tuple(frameworks),
        clocks=clocks,
        persistence=persistence,
        packages=packages,
        companions=dict(sorted(companions.items())),
        origin=origin,
    )


def _os_and_source(r: _Reader, raw: dict[str, Any]) -> tuple[list[str], str]:
    os_ids = raw.get("os")
    if not isinstance(os_ids, list) or not os_ids or not all(isinstance(o, str) for o in os_ids):
        r.bad("os", "expected a non-empty list of OS ids such as debian-12")
        os_ids = []
    source = r.choice("source", raw.get("source"), SOURCES)
    if raw.get("source") in SOURCES:  # an OS the source has no package names for cannot install
        known = supported_os(source)
        for i, os_id in enumerate(os_ids):
            if os_id not in known:
                r.bad(
                    f"os[{i}]",
                    f"{os_id!r}: source {source} has no package set for this OS "
                    f"(data/package_sets.yaml; expected one of: {', '.join(known) or 'none'})",
                )
    return os_ids, source


def _driver(r: _Reader, raw: dict[str, Any]) -> tuple[str, int, str]:
    """driver.version ("0" when bad), driver.branch (0 when bad), driver.kernel_module."""
    drv: dict[str, Any] = raw["driver"] if isinstance(raw.get("driver"), dict) else {}
    if not drv:
        r.bad("driver", "expected a mapping {version, branch, kernel_module}")
    dver = r.version("driver.version", drv.get("version")) or "0"
    branch = drv.get("branch")
    if not isinstance(branch, int) or isinstance(branch, bool):
        r.bad("driver.branch", f"{branch!r} is not a driver branch number such as 535")
        branch = 0
    elif dver != "0" and driver_branch(dver) != branch:
        r.bad(
            "driver.branch",
            f"{branch} does not match driver.version {dver} (branch {driver_branch(dver)})",
        )
    kmod = r.choice("driver.kernel_module", drv.get("kernel_module", "auto"), KERNEL_MODULES)
    return dver, branch, kmod


def _cuda(r: _Reader, raw: dict[str, Any]) -> tuple[tuple[str, ...], str]:
    cuda: dict[str, Any] = raw["cuda"] if isinstance(raw.get("cuda"), dict) else {}
    versions = cuda.get("versions")
    if not isinstance(versions, list) or not versions:
        r.bad("cuda.versions", "expected a non-empty list of CUDA versions")
        versions = []
    cuda_versions = tuple(
        v for i, v in enumerate(versions) if r.version(f"cuda.versions[{i}]", v) is not None
    )
    default = r.version("cuda.default", cuda.get("default")) or ""
    if default and default not in cuda_versions:
        r.bad("cuda.default", f"{default} is not one of cuda.versions")
    return cuda_versions, default


def _frameworks(r: _Reader, raw: dict[str, Any]) -> list[str]:
    frameworks = raw.get("frameworks", [])
    if not isinstance(frameworks, list) or not all(isinstance(f, str) for f in frameworks):
        r.bad("frameworks", "expected a list of pins such as torch==2.5.1+cu124")
        return []
    for i, pin in enumerate(frameworks):  # what matrix check judges: a known NAME==VERSION
        try:
            spec = parse_framework(pin)
        except VersionError as exc:
            r.bad(f"frameworks[{i}]", str(exc).removeprefix("--framework: "))
            continue
        if not spec.known or spec.version is None:
            r.bad(
                f"frameworks[{i}]",
                f"{pin!r}: expected an exact pin of torch or tensorflow, e.g. torch==2.5.1+cu124",
            )
    return frameworks


def _clocks(r: _Reader, raw: dict[str, Any]) -> Clocks:
    clocks_raw = raw.get("clocks", {"policy": "none"})
    if not isinstance(clocks_raw, dict):
        r.bad("clocks", "expected a mapping {policy: max|none|explicit}")
        clocks_raw = {"policy": "none"}
    policy = r.choice("clocks.policy", clocks_raw.get("policy"), CLOCK_POLICIES)
    gfx, mem = clocks_raw.get("graphics_mhz"), clocks_raw.get("memory_mhz")
    for key, mhz in (("graphics_mhz", gfx), ("memory_mhz", mem)):
        if mhz is not None and (isinstance(mhz, bool) or not isinstance(mhz, int) or mhz <= 0):
            r.bad(f"clocks.{key}", f"{mhz!r} is not a clock in MHz (a positive integer)")
    if policy == "explicit" and not (isinstance(gfx, int) and isinstance(mem, int)):
        r.bad("clocks", "policy explicit needs integer graphics_mhz and memory_mhz")
    return Clocks(
        policy,  # type: ignore[arg-type]
        gfx if isinstance(gfx, int) else None,
        mem if isinstance(mem, int) else None,
    )


def _packages(r: _Reader, raw: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """packages (component -> package name) and companions (package -> exact Debian version)."""
    packages = raw.get("packages", {})
    if not isinstance(packages, dict) or not all(isinstance(v, str) for v in packages.values()):
        r.bad("packages", "expected a mapping of component -> package name")
        packages = {}
    companions = raw.get("companions", {})
    if not isinstance(companions, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and _DEB_VERSION_RE.match(v)
        for k, v in companions.items()
    ):
        r.bad(
            "companions",
            "expected a mapping of package -> exact Debian version (quoted), "
            f'e.g. nvidia-modprobe: "535.161.07-1~deb12u1"; found {companions!r}',
        )
        companions = {}
    return {str(k): v for k, v in packages.items()}, companions


def verify_profile(
    matrix: Matrix,
    profile: Profile,
    gpus: list[str] | tuple[str, ...] = (),
    *,
    as_of: dt.date | None = None,
) -> list[Finding]:
    """Judge ``profile`` against the matrix for ``gpus``: every CUDA version of the profile with
    its driver, cuDNN, frameworks and container toolkit, plus the kernel module flavour.

    Compatibility only: the security exposure of its driver and container toolkit is a separate
    answer (``gpuhost.matrix.advisories.exposure``; ``gpuhost matrix profile verify`` gives both;
    provision's guard asks only this one, so a distribution's own driver still installs while
    the audit reports its exposure)."""
    findings: list[Finding] = []
    seen: set[Finding] = set()
    for i, cuda in enumerate(profile.cuda_versions):
        for f in check_stack(
            matrix,
            gpus=gpus,
            driver=profile.driver_version,
            cuda=cuda,
            cudnn=profile.cudnn if cuda == profile.cuda_default else None,
            frameworks=profile.frameworks if i == 0 else (),
            container_toolkit=profile.container_toolkit if i == 0 else None,
            as_of=as_of,
        ):
            if f not in seen:
                seen.add(f)
                findings.append(f)
    policy = matrix.policies["kernel_modules"]
    since = int(policy.values.get("flavours_since_branch", 0))
    if profile.kernel_module == "open" and profile.driver_branch < since:
        findings.append(
            Finding(
                "kernel-module.flavour",
                "error",
                f"profile {profile.name}: open kernel modules exist from R{since}; driver "
                f"{profile.driver_version} is R{profile.driver_branch}; fix: use proprietary",
                matrix.url(policy.source),
            )
        )
    for name in gpus:
        info = gpu_info(matrix, name)
        if (
            info
            and profile.kernel_module != "auto"
            and profile.kernel_module not in info.kernel_modules
        ):
            findings.append(
                Finding(
                    "kernel-module.arch",
                    "error",
                    f"profile {profile.name} installs the {profile.kernel_module} kernel module, "
                    "which "
                    f"does not support {info.name} ({info.architecture}); it needs "
                    f"{' or '.join(info.kernel_modules)}; fix: set driver.kernel_module to "
                    f"{info.kernel_modules[-1]} or auto",
                    matrix.url(policy.source),
                )
            )
    return findings


def kernel_module_for(matrix: Matrix, profile: Profile, gpus: list[str]) -> str:
    """The flavour to install: the profile's, or for ``auto`` open when every GPU supports it
    and the branch defaults to it (R560+), else proprietary."""
    if profile.kernel_module != "auto":
        return profile.kernel_module
    policy = matrix.policies["kernel_modules"]
    default_open = profile.driver_branch >= int(
        policy.values.get("open_default_since_branch", 10**6)
    )
    infos = [gpu_info(matrix, g) for g in gpus]
    all_open = all(i is not None and "open" in i.kernel_modules for i in infos)
    return "open" if default_open and all_open and infos else "proprietary"


def get_profile(profiles: dict[str, Profile], name: str) -> Profile:
    """The profile called ``name``; ConfigError listing the known names otherwise."""
    if name not in profiles:
        raise UnknownNameError(
            f'profile "{name}" is not defined (known: {", ".join(sorted(profiles))})'
        )
    return profiles[name]
