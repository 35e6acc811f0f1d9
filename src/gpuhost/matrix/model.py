"""Frozen dataclasses for the compatibility matrix (built by :mod:`gpuhost.matrix.load`).

Versions are kept as the strings the data file spells (``"12.4"``, ``"550.54.15"``); every
comparison goes through :func:`gpuhost.versions.parse_version`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from gpuhost.matrix.wheels import WheelBuild
from gpuhost.versions import Version, major_of, parse_version

ClockPolicy = Literal["application", "locked"]


@dataclass(frozen=True)
class Source:
    """Where rows come from: ``key`` is what rows name, ``url`` what users read."""

    key: str
    url: str
    title: str


@dataclass(frozen=True)
class CudaRelease:
    """One CUDA toolkit release (GA ``12.4.0`` or an update such as ``12.4.1``)."""

    version: str  # "12.4.0", "12.4.1"
    label: str  # "12.4 GA", "12.4 Update 1"
    min_driver: str  # minimum Linux x86_64 driver for the full feature set
    source: str
    confidence: str

    @property
    def v(self) -> Version:
        return parse_version(self.version, field="cuda")


@dataclass(frozen=True)
class CudaMinor:
    """A CUDA minor series ("12.4") with its GA and update releases, oldest first."""

    version: str  # "12.4"
    releases: tuple[CudaRelease, ...]
    source: str
    confidence: str
    note: str = ""

    @property
    def major(self) -> int:
        return major_of(self.version)

    @property
    def ga(self) -> CudaRelease:
        return self.releases[0]

    @property
    def newest(self) -> CudaRelease:
        return self.releases[-1]

    def release_for(self, v: Version) -> CudaRelease:
        """The listed release a concrete version falls on: the newest one not newer than ``v``."""
        chosen = self.releases[0]
        for rel in self.releases:
            if rel.v <= v:
                chosen = rel
        return chosen


@dataclass(frozen=True)
class MinorCompat:
    """Minor-version-compatibility floor of a CUDA major: the oldest driver that runs it at all."""

    major: int
    min_driver: str
    source: str
    confidence: str


@dataclass(frozen=True)
class Architecture:
    """A GPU architecture row, for the compute capabilities it lists."""

    name: str
    compute_capabilities: tuple[str, ...]
    first_cuda: str | None  # None = not known
    first_cuda_by_cc: dict[str, str]
    last_cuda: str | None  # "12.x" (whole major), "10.2", None = still supported
    last_driver_branch: int | None  # None = still supported
    clock_policy: ClockPolicy
    locked_memory_clocks: bool
    kernel_modules: tuple[str, ...]
    source: str
    confidence: str
    note: str = ""
    #: where the GPU's driver comes from when not from NVIDIA's driver branches: "l4t" (Jetson:
    #: Jetson Linux, the board support package), with the source that says so
    driver_from: str | None = None
    driver_from_source: str | None = None

    def first_cuda_for(self, cc: str) -> str | None:
        return self.first_cuda_by_cc.get(cc, self.first_cuda)


@dataclass(frozen=True)
class Gpu:
    """A GPU model (or family) with the normalised names that select it."""

    model: str
    names: tuple[str, ...]
    compute_capability: str
    source: str
    confidence: str
    note: str = ""
    #: kernel module flavours of this model when narrower than its architecture's (GH200: open)
    kernel_modules: tuple[str, ...] = ()


@dataclass(frozen=True)
class GpuInfo:
    """What gpuhost knows about one GPU name (answer of :func:`gpuhost.matrix.gpu_info`).

    ``fabric_manager`` is False for PCIe cards (never run Fabric Manager) and None when the name
    does not tell (an SXM part may or may not sit on an NVSwitch baseboard).
    """

    name: str  # as asked
    model: str
    compute_capability: str
    architecture: str
    clock_policy: ClockPolicy
    locked_memory_clocks: bool
    kernel_modules: tuple[str, ...]  # "open", "proprietary"
    fabric_manager: bool | None
    last_driver_branch: int | None
    source: str  # URL
    confidence: str
    pci_id: str | None = None  # "10de:2330" when the GPU was named by it or the catalog knows one


@dataclass(frozen=True)
class CudnnPackage:
    cuda: tuple[str, ...]  # CUDA minors ("12.4")
    min_driver: str | None
    compute_capabilities: tuple[str, ...] | None
    min_compute_capability: str | None
    note: str = ""


@dataclass(frozen=True)
class CudnnRelease:
    version: str
    packages: tuple[CudnnPackage, ...]
    source: str
    confidence: str
    note: str = ""


@dataclass(frozen=True)
class TorchVariant:
    cuda: str  # "12.4"
    channel: str  # stable | experimental
    cudnn: str | None
    archs: tuple[str, ...] | None  # None = not known
    archs_source: str | None
    archs_confidence: str | None
    note: str = ""

    @property
    def tag(self) -> str:
        return "cu" + self.cuda.replace(".", "")


@dataclass(frozen=True)
class TorchRelease:
    version: str  # "2.5"
    variants: tuple[TorchVariant, ...]
    source: str
    confidence: str


@dataclass(frozen=True)
class TensorflowRelease:
    version: str  # "2.18.0"
    cuda: str
    cudnn: str
    source: str
    confidence: str
    # True for an and-cuda extra that asks for these versions or newer (>=), not exactly them
    at_least: bool = False


@dataclass(frozen=True)
class TensorflowArchs:
    """The compute capabilities the official Linux x86_64 wheels of one TensorFlow series are built
    for (``tensorflow_archs``), as the wheel's own ``tensorflow/python/platform/build_info.py``
    states them: ``sm_XY`` becomes ``X.Y`` (binary code), ``compute_XY`` ``X.Y+PTX``."""

    series: str  # "2.17"
    archs: tuple[str, ...]
    source: str
    confidence: str


@dataclass(frozen=True)
class WheelRelease:
    """One framework release on PyPI and what its wheels pin per Linux machine
    (``data/wheels.yaml``, written by ``gpuhost matrix sync``)."""

    framework: str  # "torch" | "tensorflow"
    version: str  # "2.5.1"
    released: str  # "2024-10-29"
    python: tuple[str, ...]
    builds: dict[str, WheelBuild]  # machine -> build (machines whose metadata was read)
    no_metadata: tuple[str, ...] = ()  # machines with wheels but no published core metadata

    @property
    def default(self) -> WheelBuild | None:
        """The x86_64 build: what a plain ``pip install`` on a usual GPU server gets."""
        return self.builds.get("x86_64")


@dataclass(frozen=True)
class DriverBranch:
    branch: int
    type: str  # LTSB | PB | NFB | other
    eol: str | None  # "YYYY-MM" | "ended" | "n/a" | None (unknown)
    source: str
    confidence: str
    note: str = ""


@dataclass(frozen=True)
class Policy:
    rule: str
    source: str
    confidence: str
    values: dict[str, str | int] = field(default_factory=dict)


@dataclass(frozen=True)
class Matrix:
    """The whole compatibility matrix; tables are sorted oldest first."""

    path: str
    sources: dict[str, Source]
    minor_compat: dict[int, MinorCompat]
    cuda: tuple[CudaMinor, ...]
    architectures: tuple[Architecture, ...]
    gpus: tuple[Gpu, ...]
    cudnn: tuple[CudnnRelease, ...]
    pytorch: tuple[TorchRelease, ...]
    tensorflow: tuple[TensorflowRelease, ...]
    driver_branches: tuple[DriverBranch, ...]
    policies: dict[str, Policy]
    # The date the data was last checked against its sources (``updated:``, YYYY-MM-DD); reports
    # carry it as ``matrix_date``.
    updated: str | None = None
    # What the framework wheels on PyPI pin (data/wheels.yaml next to the matrix file).
    wheels: tuple[WheelRelease, ...] = ()
    # The compute capabilities each TensorFlow series' official wheels are built for.
    tensorflow_archs: tuple[TensorflowArchs, ...] = ()

    def url(self, source_key: str) -> str:
        """The URL (or document) behind a row's source key."""
        src = self.sources.get(source_key)
        return src.url if src else source_key

    def cuda_minor(self, version: str) -> CudaMinor | None:
        for minor in self.cuda:
            if minor.version == version:
                return minor
        return None

    def architecture_of(self, cc: str) -> Architecture | None:
        for arch in self.architectures:
            if cc in arch.compute_capabilities:
                return arch
        return None

    def branch(self, number: int) -> DriverBranch | None:
        for b in self.driver_branches:
            if b.branch == number:
                return b
        return None
