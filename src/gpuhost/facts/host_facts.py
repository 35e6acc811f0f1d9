"""HostFacts: everything the combined probe read about one host's GPU stack (typed, JSON-ready).

Built by :func:`gpuhost.facts.build.build_host_facts` from the probe's sections; ``to_dict()``
is the ``facts`` object of an audit report (docs/audit-report.md). Unknown values are None; a
tool that is not installed leaves its part empty (never a guess).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from gpuhost import oskey
from gpuhost.fabric.model import FabricFacts
from gpuhost.parsers.aer import AerCounters
from gpuhost.parsers.cdi import CdiSpec
from gpuhost.parsers.driver import KernelModule
from gpuhost.parsers.nvidia_smi import SmiReport
from gpuhost.parsers.packages import AptPolicy, Package
from gpuhost.parsers.profile_marker import ProfileMarker
from gpuhost.parsers.signing import SigningFacts
from gpuhost.parsers.xid import XidEvent


@dataclass(frozen=True)
class OsInfo:
    id: str | None = None
    version_id: str | None = None
    codename: str | None = None
    pretty_name: str | None = None
    id_like: str | None = None

    @property
    def key(self) -> str | None:
        """The OS key of the package data and profiles: ``debian-12``, ``ubuntu-22.04``,
        ``rocky-9`` (``gpuhost.oskey``, the one place keys are made); None without an ID."""
        return oskey.os_key(self.id, self.version_id)

    @property
    def family(self) -> str | None:
        """``apt`` or ``dnf``: the host's package manager, by its OS (``gpuhost.oskey``)."""
        return oskey.family(self.id, self.id_like)


@dataclass(frozen=True)
class KernelInfo:
    """``next_boot_source``: "grubby", "link" (/vmlinuz symlink) or "newest" (/boot/vmlinuz-*)."""

    running: str | None = None
    arch: str | None = None
    next_boot: str | None = None
    next_boot_source: str | None = None
    installed: list[str] = field(default_factory=list)  # /boot/vmlinuz-* and /lib/modules/*
    boot: list[str] = field(default_factory=list)  # kernel images in /boot (vmlinuz-VERSION)
    headers: list[str] = field(default_factory=list)  # kernels with /lib/modules/VERSION/build
    # kernels whose linux-headers-VERSION apt can install (read by provision only; empty in the
    # audit, which does not ask apt)
    headers_available: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SecureBoot:
    """``enabled`` None = unknown (no mokutil, no efivars); ``efi`` False = legacy BIOS boot."""

    enabled: bool | None = None
    efi: bool | None = None
    source: str | None = None


@dataclass(frozen=True)
class DkmsEntry:
    module: str
    version: str
    kernel: str | None = None
    arch: str | None = None
    status: str = ""


@dataclass(frozen=True)
class PciGpu:
    address: str
    pci_class: str
    device_id: str


@dataclass(frozen=True)
class DriverFacts:
    """The driver as the host shows it: nvidia-smi's report, the loaded module, PCI devices."""

    smi: SmiReport = field(default_factory=lambda: SmiReport(state="absent", source="empty"))
    smi_installed: bool = False
    smi_rc: int | None = None
    smi_stderr: str = ""
    loaded_module: KernelModule | None = None
    modules: list[str] = field(default_factory=list)  # nvidia* names in /proc/modules
    pci_gpus: list[PciGpu] = field(default_factory=list)


@dataclass(frozen=True)
class PackageFacts:
    manager: str | None = None  # "dpkg", "rpm" or None
    packages: list[Package] = field(default_factory=list)  # NVIDIA/CUDA-related only
    held: list[str] = field(default_factory=list)
    policy: list[AptPolicy] = field(default_factory=list)
    policy_known: bool = False  # apt policy was read (Debian family only)


@dataclass(frozen=True)
class CudaToolkit:
    path: str
    version: str | None = None


@dataclass(frozen=True)
class CudaFacts:
    toolkits: list[CudaToolkit] = field(default_factory=list)
    default_path: str | None = None  # where /usr/local/cuda points
    nvcc_path: str | None = None
    nvcc_version: str | None = None

    @property
    def default_version(self) -> str | None:
        for toolkit in self.toolkits:
            if toolkit.path == self.default_path:
                return toolkit.version
        return None


@dataclass(frozen=True)
class CudnnFacts:
    version: str | None = None
    source: str | None = None  # "header /usr/include/cudnn_version.h", "library ...", "package ..."
    #: every installed cuDNN package's upstream version, {name: "9.17.0.29"}: packages for
    #: several CUDA majors (libcudnn9-cuda-12, libcudnn9-cuda-13) are installable side by side
    packages: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ServiceState:
    name: str
    active: str | None = None  # systemctl is-active word ("active", "inactive", "failed", ...)
    enabled: str | None = None


@dataclass(frozen=True)
class ContainerFacts:
    toolkit_version: str | None = None
    runtimes: list[str] = field(default_factory=list)  # docker, dockerd, containerd, podman found
    docker_config: bool = False  # /etc/docker/daemon.json exists
    docker_nvidia_runtime: bool | None = None  # None: no daemon.json or unreadable
    docker_default_runtime: str | None = None
    containerd_nvidia_runtime: bool | None = None  # None: no containerd config


@dataclass(frozen=True)
class FabricManagerFacts:
    version: str | None = None
    installed: bool = False
    service: ServiceState | None = None


@dataclass(frozen=True)
class FrameworkFacts:
    """What one Python interpreter has: torch and TensorFlow builds (no CUDA initialised)."""

    python: str
    found: bool = True  # False: interpreter not on the host
    python_version: str | None = None
    torch_version: str | None = None
    torch_cuda: str | None = None
    torch_cudnn: str | None = None
    torch_arch_list: list[str] = field(default_factory=list)
    torch_cuda_initialized: bool | None = None
    torch_error: str | None = None
    tensorflow_version: str | None = None
    tensorflow_cuda: str | None = None
    tensorflow_cudnn: str | None = None
    tensorflow_error: str | None = None
    error: str | None = None  # the probe itself failed (timeout, crash, unreadable output)


@dataclass(frozen=True)
class SshdFacts:
    """``sshd -T`` settings the audit reads (``gpuhost.parsers.sshd.AUDIT_KEYWORDS``, lower-case);
    ``available`` False when sshd -T could not run (not installed, or not root)."""

    available: bool = False
    settings: dict[str, str] = field(default_factory=dict)

    @property
    def config(self) -> dict[str, list[str]]:
        """``settings`` in ``parse_sshd_t``'s shape, for the predicates of gpuhost.parsers.sshd."""
        return {key: [value] for key, value in self.settings.items()}


@dataclass(frozen=True)
class GpuFaultFacts:
    """GPU faults read beside nvidia-smi -q (each None when not read): the kernel log's Xid
    events since boot, ``nvidia-smi nvlink -s`` / ``-e`` per GPU, each GPU's PCIe AER counters
    by device and kind."""

    xid: list[XidEvent] | None = None
    nvlink: list[dict[str, Any]] | None = None
    nvlink_errors: list[dict[str, Any]] | None = None
    aer: dict[str, dict[str, AerCounters]] | None = None


@dataclass(frozen=True)
class GpuFirmware:
    """One GPU's firmware as nvidia-smi shows it (None: N/A or not shown)."""

    bus_id: str | None = None
    name: str | None = None
    vbios: str | None = None
    gsp: str | None = None  # GSP firmware; N/A where the driver does not run the GSP


@dataclass(frozen=True)
class FirmwareFacts:
    """The host's firmware versions (docs/audit-report.md, "Firmware"): ``read`` False where the
    probe's firmware section did not run (an older probe, a failed read): BIOS and HCA unknown,
    not absent. ``bios_version``/``bios_date`` None: no DMI tables (a VM, a container); ``hca``:
    RDMA device -> fw_ver; ``gpus``: from nvidia-smi (empty when it reported no GPU)."""

    read: bool = False
    bios_version: str | None = None
    bios_date: str | None = None
    hca: dict[str, str] = field(default_factory=dict)
    gpus: list[GpuFirmware] = field(default_factory=list)


@dataclass(frozen=True)
class HostFacts:
    hostname: str | None = None
    probe_version: int | None = None
    uid: int | None = None
    os: OsInfo = field(default_factory=OsInfo)
    kernel: KernelInfo = field(default_factory=KernelInfo)
    secure_boot: SecureBoot = field(default_factory=SecureBoot)
    # DKMS's signing certificate, its MOK enrollment, the nvidia module's signature
    module_signing: SigningFacts = field(default_factory=SigningFacts)
    cdi: list[CdiSpec] = field(default_factory=list)  # /etc/cdi, /var/run/cdi spec files
    dkms: list[DkmsEntry] = field(default_factory=list)
    dkms_installed: bool = False
    driver: DriverFacts = field(default_factory=DriverFacts)
    packages: PackageFacts = field(default_factory=PackageFacts)
    cuda: CudaFacts = field(default_factory=CudaFacts)
    cudnn: CudnnFacts = field(default_factory=CudnnFacts)
    container: ContainerFacts = field(default_factory=ContainerFacts)
    fabric_manager: FabricManagerFacts = field(default_factory=FabricManagerFacts)
    fabric: FabricFacts = field(default_factory=FabricFacts)  # RDMA ports, GPUDirect, ACS
    gpu_faults: GpuFaultFacts = field(default_factory=GpuFaultFacts)  # Xid, NVLink, AER
    firmware: FirmwareFacts = field(default_factory=FirmwareFacts)  # BIOS, HCA, VBIOS, GSP
    persistenced: ServiceState | None = None
    frameworks: list[FrameworkFacts] = field(default_factory=list)
    sshd: SshdFacts = field(default_factory=SshdFacts)
    profile_marker: str | None = None  # the profile name /etc/gpuhost/profile records
    provision_marker: ProfileMarker | None = None  # all it records (versions: schema 1 only)
    problems: list[str] = field(default_factory=list)  # sections that could not be read

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = dataclasses.asdict(self)
        data["cuda"]["default_version"] = self.cuda.default_version
        return data
