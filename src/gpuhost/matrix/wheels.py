"""What a framework wheel on PyPI is built with, read from its core metadata (pure functions).

A torch or TensorFlow wheel names the NVIDIA libraries it loads in ``Requires-Dist``:

- ``nvidia-cudnn-cu12==9.1.0.70; platform_system == "Linux" and platform_machine == "x86_64"``
- ``nvidia-cuda-runtime-cu12==12.4.127; ...`` or, from torch 2.11,
  ``cuda-toolkit[cublas,cudart,...]==13.0.2; platform_system == "Linux"``
- TensorFlow puts the same pins behind its ``and-cuda`` extra (``extra == "and-cuda"``).

:func:`build_of` turns those lines into a :class:`WheelBuild` (CUDA minor, runtime, cuDNN, cuBLAS,
NCCL); a wheel without such pins is a CPU build (``cuda`` None).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuhost.versions import numeric_key, series_of

# "name[extras] (op) version ; marker"
_REQ_RE = re.compile(
    r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._\-]*)\s*(?:\[(?P<extras>[^\]]*)\])?"
    r"(?P<spec>[^;]*)(?:;(?P<marker>.*))?$"
)
_PIN_RE = re.compile(r"(==|>=)\s*([0-9][0-9A-Za-z.+\-]*)")
_EXTRA_RE = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")
_MACHINE_RE = re.compile(r"""platform_machine\s*==\s*["']([^"']+)["']""")
_SYSTEM_RE = re.compile(r"""platform_system\s*==\s*["']([^"']+)["']""")
_LIB_RE = re.compile(r"^nvidia-(?P<lib>[a-z\-]+?)-cu(?P<major>\d+)$")
_WHEEL_RE = re.compile(
    r"^(?P<name>[^-]+)-(?P<version>[^-]+)(?:-(?P<build>\d[^-]*))?-(?P<py>[^-]+)-(?P<abi>[^-]+)"
    r"-(?P<plat>[^-]+)\.whl$"
)
_CPYTHON_RE = re.compile(r"^cp(\d)(\d+)$")

PLATFORMS = ("x86_64", "aarch64")
DEFAULT_INDEX = "https://pypi.org"


def project_url(base: str, name: str) -> str:
    """PyPI's JSON API URL of a project (``<base>/pypi/<name>/json``)."""
    return f"{base.rstrip('/')}/pypi/{name}/json"


@dataclass(frozen=True)
class Requirement:
    """One ``Requires-Dist`` line, as far as sync needs it."""

    name: str  # normalised: lower case, "_" and "." as "-"
    extras: tuple[str, ...]
    version: str | None  # the exact pin (==), else the lower bound (>=), else None
    exact: bool  # True for ==
    extra: str | None  # the extra it belongs to (TensorFlow's "and-cuda")
    machine: str | None  # platform_machine it is limited to
    system: str | None  # platform_system it is limited to


@dataclass(frozen=True)
class WheelBuild:
    """The NVIDIA libraries one wheel pins (all versions exact, as PyPI spells them)."""

    cuda: str | None  # CUDA minor, "12.4"; None = CPU build
    exact: bool  # False: the wheel asks for these versions or newer (">="), not exactly them
    runtime: str | None  # nvidia-cuda-runtime pin, "12.4.127", or the cuda-toolkit pin
    cudnn: str | None
    cublas: str | None
    nccl: str | None

    @property
    def tag(self) -> str | None:
        """PyTorch's variant name: "cu124"; None for a CPU build."""
        return "cu" + self.cuda.replace(".", "") if self.cuda else None


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_requirement(line: str) -> Requirement | None:
    """A ``Requires-Dist`` value -> :class:`Requirement`; None for a line that is no requirement."""
    m = _REQ_RE.match(line)
    if not m:
        return None
    marker = m.group("marker") or ""
    extra = _EXTRA_RE.search(marker)
    machine = _MACHINE_RE.search(marker)
    system = _SYSTEM_RE.search(marker)
    extras = tuple(e.strip() for e in (m.group("extras") or "").split(",") if e.strip())
    pins = dict((op, v) for op, v in _PIN_RE.findall(m.group("spec") or ""))
    version = pins.get("==") or pins.get(">=")
    return Requirement(
        name=normalise(m.group("name")),
        extras=extras,
        version=version,
        exact="==" in pins,
        extra=extra.group(1) if extra else None,
        machine=machine.group(1) if machine else None,
        system=system.group(1) if system else None,
    )


def requires_dist(metadata: str) -> list[str]:
    """The ``Requires-Dist`` values of a core-metadata document (RFC 822 style headers)."""
    out = []
    for line in metadata.splitlines():
        if not line.strip():
            break  # the headers end at the first empty line; the description follows
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == "requires-dist":
            out.append(value.strip())
    return out


def header(metadata: str, name: str) -> str | None:
    for line in metadata.splitlines():
        if not line.strip():
            break
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == name.lower():
            return value.strip()
    return None


def build_of(metadata: str, machine: str, extra: str | None = None) -> WheelBuild:
    """The CUDA build a wheel's metadata pins for Linux on ``machine``.

    ``extra``: read the pins of that extra (TensorFlow's "and-cuda") instead of the plain ones.
    """
    libs: dict[str, str] = {}
    majors: set[int] = set()
    exact = True
    for line in requires_dist(metadata):
        req = parse_requirement(line)
        if req is None or req.version is None or req.extra != extra:
            continue
        if req.machine is not None and req.machine != machine:
            continue
        if req.system is not None and req.system != "Linux":
            continue
        lib = _LIB_RE.match(req.name)
        if req.name != "cuda-toolkit" and lib is None:
            continue
        exact = exact and req.exact
        if lib is None:
            libs.setdefault("runtime", req.version)
            continue
        majors.add(int(lib.group("major")))
        libs.setdefault(lib.group("lib"), req.version)
    runtime = libs.get("runtime") or libs.get("cuda-runtime")
    cuda = series_of(runtime, 2) if runtime else None
    return WheelBuild(
        cuda=cuda,
        exact=exact or cuda is None,
        runtime=runtime,
        cudnn=libs.get("cudnn"),
        cublas=libs.get("cublas"),
        nccl=libs.get("nccl"),
    )


@dataclass(frozen=True)
class WheelFile:
    """A wheel file of a release as the JSON API lists it."""

    filename: str
    url: str
    uploaded: str  # ISO date "2024-10-29"
    python: str | None  # "3.12" for a cp312 CPython wheel (not free-threaded); None otherwise
    machine: str | None  # "x86_64" / "aarch64" for a Linux wheel; None otherwise
    yanked: bool


def wheel_file(entry: dict[str, object]) -> WheelFile | None:
    """One ``releases[v][i]`` entry of the JSON API -> :class:`WheelFile` (None: not a wheel)."""
    filename = entry.get("filename")
    url = entry.get("url")
    if not isinstance(filename, str) or not isinstance(url, str):
        return None
    m = _WHEEL_RE.match(filename)
    if m is None:
        return None
    python = None
    cp = _CPYTHON_RE.match(m.group("py"))
    if cp and m.group("abi") == m.group("py"):
        python = f"{cp.group(1)}.{cp.group(2)}"
    machine = None
    plats = m.group("plat").split(".")
    if any(p.startswith("manylinux") or p.startswith("linux") for p in plats):
        for p in PLATFORMS:
            if any(x.endswith("_" + p) for x in plats):
                machine = p
    uploaded = entry.get("upload_time_iso_8601") or entry.get("upload_time") or ""
    return WheelFile(
        filename=filename,
        url=url,
        uploaded=str(uploaded)[:10],
        python=python,
        machine=machine,
        yanked=bool(entry.get("yanked", False)),
    )


def wheels_for(files: list[WheelFile], machine: str) -> list[WheelFile]:
    """The CPython wheels for Linux ``machine``, newest Python first: the order in which sync
    tries their metadata (every CPython wheel of a torch/TF release pins the same libraries,
    and not every wheel's metadata file is published)."""
    found = [f for f in files if f.machine == machine and f.python and not f.yanked]
    return sorted(
        found,
        key=lambda f: (numeric_key(f.python or "0"), f.filename),
        reverse=True,
    )


def python_versions(files: list[WheelFile]) -> list[str]:
    """The CPython versions with a Linux wheel, oldest first."""
    found = {f.python for f in files if f.python and f.machine and not f.yanked}
    return sorted(found, key=numeric_key)
