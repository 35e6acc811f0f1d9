"""Turn the probe's sections into :class:`HostFacts` (pure: text in, typed data out).

Every section is read by its parser (``gpuhost.parsers`` for the tools it covers, this package's
``probe_parsers`` for the rest). A section that cannot be read never stops the others: its part
stays empty and ``HostFacts.problems`` names the section and what was wrong.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TypeVar

from gpuhost import pkgmgr
from gpuhost.errors import ParseError, VersionError
from gpuhost.fabric.model import FabricFacts, FabricTexts, read_fabric
from gpuhost.facts import probe_parsers as pp
from gpuhost.facts.host_facts import (
    ContainerFacts,
    CudaFacts,
    CudnnFacts,
    DriverFacts,
    FabricManagerFacts,
    FirmwareFacts,
    FrameworkFacts,
    GpuFaultFacts,
    GpuFirmware,
    HostFacts,
    OsInfo,
    PackageFacts,
    ServiceState,
    SshdFacts,
)
from gpuhost.parsers import container, cuda, driver, frameworks, packages
from gpuhost.parsers.aer import parse_gpu_aer
from gpuhost.parsers.cdi import parse_cdi_specs
from gpuhost.parsers.firmware import SysfsFirmware, parse_firmware_files
from gpuhost.parsers.nvidia_smi import SmiReport, parse_output
from gpuhost.parsers.packages import AptPolicy, Package
from gpuhost.parsers.profile_marker import parse_profile_marker
from gpuhost.parsers.signing import SigningFacts, parse_signing_output
from gpuhost.parsers.smi_identity import parse_identity
from gpuhost.parsers.smi_misc import parse_nvlink_errors, parse_nvlink_status
from gpuhost.parsers.sshd import audit_settings, parse_sshd_t
from gpuhost.parsers.xid import xid_events
from gpuhost.probe.script import python_section_name
from gpuhost.probe.sections import ProbeOutput, SectionOutput, split_sections
from gpuhost.versions import upstream_of_package_version

T = TypeVar("T")


class _Reader:
    """Runs parsers over sections and collects the problems instead of raising."""

    def __init__(self, probe: ProbeOutput) -> None:
        self.probe = probe
        self.problems: list[str] = [f"{name}: output cut off" for name in probe.truncated]

    def section(self, name: str) -> SectionOutput | None:
        return self.probe.get(name)

    def text(self, name: str) -> str:
        return self.probe.stdout(name)

    def parse(
        self, name: str, parser: Callable[[str], T], default: T, text: str | None = None
    ) -> T:
        try:
            return parser(self.text(name) if text is None else text)
        except ParseError as exc:
            self.problems.append(f"{name}: {exc}")
            return default


def _meta(reader: _Reader) -> tuple[str | None, int | None, int | None]:
    values = dict(pp.key_values(reader.text("meta")))
    uid = values.get("uid", "")
    probe = values.get("probe", "")
    return (
        values.get("host") or None,
        int(probe) if probe.isdigit() else None,
        int(uid) if uid.isdigit() else None,
    )


def _smi(reader: _Reader) -> tuple[SmiReport, bool, int | None, str]:
    xml = reader.section("nvidia-smi")
    if xml is None or xml.missing_tool:
        return SmiReport(state="absent", source="empty"), False, None, ""
    stderr = xml.stderr.strip()
    if xml.timed_out:
        reader.problems.append("nvidia-smi: timed out (a GPU or the driver hangs)")
        report = SmiReport(state="unknown-error", source="error", message="nvidia-smi timed out")
        return report, True, xml.rc, stderr
    text_section = reader.section("nvidia-smi-text")
    combined = xml.stdout if xml.stdout.strip() else stderr
    try:
        report = parse_output(combined)
    except ParseError as exc:
        if text_section is not None and text_section.stdout.strip():
            report = reader.parse("nvidia-smi-text", parse_output, SmiReport(state="unknown-error"))
        else:
            reader.problems.append(f"nvidia-smi: {exc}")
            report = SmiReport(state="unknown-error", source="error", message=str(exc)[:200])
    if report.state == "absent" and xml.rc != 0:
        # nvidia-smi printed nothing and failed: keep what it said on stderr.
        message = stderr.splitlines()[0][:200] if stderr else f"nvidia-smi exited {xml.rc}"
        report = SmiReport(state="unknown-error", source="error", message=message)
    return report, True, xml.rc, stderr


def _driver(reader: _Reader) -> DriverFacts:
    report, installed, rc, stderr = _smi(reader)
    loaded = reader.parse("proc-driver", driver.parse_proc_version, None)
    return DriverFacts(
        smi=report,
        smi_installed=installed,
        smi_rc=rc,
        smi_stderr=stderr[:1000],
        loaded_module=loaded,
        modules=pp.parse_proc_modules(reader.text("modules")),
        pci_gpus=pp.parse_pci(reader.text("pci")),
    )


def _packages(reader: _Reader, os_info: OsInfo) -> PackageFacts:
    """The installed packages and holds/locks of the host's package manager, chosen by its OS
    (``OsInfo.family``), never by which tool exists: a RHEL host may have dpkg-query, a Debian
    host rpm. An OS of no known family: no package facts (unknown, not empty)."""
    manager = pkgmgr.for_family(os_info.family)
    no_packages: list[Package] = []
    section = reader.section(manager.database) if manager else None
    if manager is None or section is None or section.missing_tool:
        return PackageFacts()
    if manager.database == "dpkg":
        listed = reader.parse("dpkg", packages.parse_dpkg_query, no_packages)
        installed = [p for p in listed if p.installed]
        no_holds: set[str] = set()
        held = sorted(reader.parse("apt-holds", packages.parse_apt_mark_showhold, no_holds))
        policy = reader.section("apt-policy")
        known = policy is not None and policy.ok
        no_policy: list[AptPolicy] = []
        policies = reader.parse("apt-policy", packages.parse_apt_policy, no_policy) if known else []
        return PackageFacts("dpkg", installed, held, policies, known)
    listed = reader.parse("rpm", packages.parse_rpm_qa, no_packages)
    no_locks: list[str] = []  # a lock file not read (a FIFO, too large): a probe problem
    rpm_held = reader.parse("dnf-versionlock", packages.parse_versionlock, no_locks)
    return PackageFacts("rpm", listed, rpm_held, [], False)


def _cuda(reader: _Reader) -> CudaFacts:
    toolkits, default = pp.parse_cuda_dirs(reader.text("cuda"))
    nvcc_path, nvcc_text = pp.split_nvcc(reader.text("nvcc"))
    version = reader.parse("nvcc", cuda.parse_nvcc_version, None, text=nvcc_text)
    return CudaFacts(toolkits, default, nvcc_path, version)


def _cudnn(
    reader: _Reader, installed: PackageFacts, toolkits: CudaFacts | None = None
) -> CudnnFacts:
    packages: dict[str, str] = {}
    for package in installed.packages:
        if package.name.startswith(("libcudnn", "cudnn")) and package.version:
            # the package's upstream version ("9.1.0.70-1" -> "9.1.0.70"): the Debian revision is
            # not part of cuDNN's version and made every profile comparison a mismatch
            try:
                packages[package.name] = upstream_of_package_version(package.version)
            except VersionError:
                continue
    header, defines, libraries = pp.split_cudnn(reader.text("cudnn"))
    if header:
        version = reader.parse("cudnn", cuda.parse_cudnn_header, None, text=defines)
        if version:
            return CudnnFacts(version, f"header {header}", packages)
    library = pp.cudnn_from_library(libraries)
    if library:
        return CudnnFacts(library, "library", packages)
    # several cuDNN packages (libcudnn9-cuda-12 and -13 side by side): the default CUDA's first;
    # rpm lists packages in its database's order, dpkg by name
    major = _cuda_major(toolkits)
    ordered = sorted(installed.packages,
                     key=lambda p: not (major and p.name.endswith(f"-cuda-{major}")))
    for package in ordered:
        if package.name in packages:
            version = packages[package.name]
            return CudnnFacts(version, f"package {package.name} {package.version}", packages)
    return CudnnFacts()


def _cuda_major(cuda: CudaFacts | None) -> str:
    """The default CUDA's major version ("13" for /usr/local/cuda -> cuda-13.0), "" unknown."""
    version = cuda.default_version if cuda is not None else None
    return version.split(".", 1)[0] if version else ""


def _container(reader: _Reader) -> ContainerFacts:
    ctk = reader.section("nvidia-ctk")
    version = None
    if ctk is not None and ctk.ok:
        version = reader.parse("nvidia-ctk", container.parse_nvidia_ctk_version, None)
    runtimes = pp.parse_container_runtimes(reader.text("container-runtimes"))
    return ContainerFacts(toolkit_version=version, **runtimes)


def _fabric(reader: _Reader) -> FabricFacts:
    def ran(name: str) -> str | None:
        section = reader.section(name)
        return section.stdout if section is not None and section.ok else None

    texts = FabricTexts(
        ports=reader.text("rdma-ports"),
        peermem=reader.text("peermem"),
        iommu=ran("iommu"),
        lspci=ran("lspci"),
        topo=ran("nvidia-topo"),
    )
    facts, problems = read_fabric(texts)
    reader.problems.extend(problems)
    return facts


def _gpu_faults(reader: _Reader) -> GpuFaultFacts:
    """Xid lines, NVLink state/counters and GPU AER counters; a section that did not run (no
    nvidia-smi, an error) is None: not read, nothing judged from it."""

    def read(name: str, parser: Callable[[str], T]) -> T | None:
        section = reader.section(name)
        if section is None or not section.ok:
            return None
        return reader.parse(name, parser, None)

    return GpuFaultFacts(
        xid=read("xid-log", xid_events),
        nvlink=read("nvlink-status", parse_nvlink_status),
        nvlink_errors=read("nvlink-errors", parse_nvlink_errors),
        aer=read("gpu-aer", parse_gpu_aer),
    )


def _gsp_by_bus(reader: _Reader) -> dict[str, str]:
    """Each GPU's GSP firmware from nvidia-smi -q -x (accept's identity parser), by bus id; {}
    where the XML is missing or unreadable (its problem is nvidia-smi's, reported there)."""
    try:
        gpus = parse_identity(reader.text("nvidia-smi"))
    except ParseError:
        return {}
    return {g.bus_id.upper(): g.gsp_firmware for g in gpus if g.bus_id and g.gsp_firmware}


def _firmware(reader: _Reader, smi: SmiReport) -> FirmwareFacts:
    """BIOS and HCA firmware from the ``firmware`` section (``read`` False where it did not run),
    VBIOS from nvidia-smi's report, GSP firmware from its XML."""
    section = reader.section("firmware")
    ran = section is not None and section.ok
    files = reader.parse("firmware", parse_firmware_files, SysfsFirmware()) if ran else None
    gsp = _gsp_by_bus(reader) if smi.ok and smi.gpus else {}
    gpus = [
        GpuFirmware(g.pci_bus_id, g.name, g.vbios, gsp.get((g.pci_bus_id or "").upper()))
        for g in (smi.gpus if smi.ok else [])
    ]
    if files is None:
        return FirmwareFacts(read=False, gpus=gpus)
    return FirmwareFacts(True, files.bios_version, files.bios_date, dict(files.hca), gpus)


def framework_from_probe(python: str, section: SectionOutput | None) -> FrameworkFacts:
    """One ``python.N`` section → FrameworkFacts (torch via parse_torch_probe, TF from the line)."""
    if section is None:
        return FrameworkFacts(python=python, found=False, error="section missing from the probe")
    if section.missing_tool:
        return FrameworkFacts(python=python, found=False)
    if section.timed_out:
        return FrameworkFacts(python=python, error="timed out importing frameworks")
    lines = [line for line in section.stdout.splitlines() if line.startswith("{")]
    if section.rc != 0 or not lines:
        detail = section.stderr.strip().splitlines()[-1:] or [f"exit {section.rc}"]
        return FrameworkFacts(python=python, error=f"probe failed: {detail[0][:200]}")
    try:
        torch = frameworks.parse_torch_probe(lines[-1])
        data = json.loads(lines[-1])
    except (ParseError, ValueError, RecursionError) as exc:
        return FrameworkFacts(python=python, error=f"unreadable probe line: {exc}")
    tf = data.get("tensorflow") if isinstance(data.get("tensorflow"), dict) else None
    build = tf.get("build_info") if tf and isinstance(tf.get("build_info"), dict) else {}
    initialised = data.get("cuda_initialized")
    return FrameworkFacts(
        python=str(data.get("python") or python),
        python_version=data.get("python_version"),
        torch_version=torch.version if torch else None,
        torch_cuda=torch.cuda if torch else None,
        torch_cudnn=torch.cudnn if torch else None,
        torch_arch_list=list(torch.arch_list) if torch else [],
        torch_cuda_initialized=initialised if isinstance(initialised, bool) else None,
        torch_error=torch.error if torch else None,
        tensorflow_version=str(tf["version"]) if tf and tf.get("version") else None,
        tensorflow_cuda=build.get("cuda_version"),
        tensorflow_cudnn=build.get("cudnn_version"),
        tensorflow_error=data.get("tensorflow_error"),
    )


def build_host_facts(probe: ProbeOutput) -> HostFacts:
    """All facts from one probe output."""
    reader = _Reader(probe)
    hostname, probe_version, uid = _meta(reader)
    dkms_section = reader.section("dkms")
    dkms_installed = dkms_section is not None and not dkms_section.missing_tool
    os_info = pp.parse_os_release(reader.text("os-release"))
    cuda_facts = _cuda(reader)
    installed = _packages(reader, os_info)
    services = reader.parse("services", pp.parse_services, dict[str, ServiceState]())
    fabric = reader.section("fabricmanager")
    sshd = reader.section("sshd")
    sshd_settings = (
        audit_settings(parse_sshd_t(reader.text("sshd").splitlines())) if sshd is not None else {}
    )
    marker = reader.section("profile-marker")
    provision_marker = (
        reader.parse("profile-marker", parse_profile_marker, None)
        if marker is not None and marker.ok
        else None
    )
    names = [line.strip() for line in reader.text("pythons").splitlines() if line.strip()]
    driver_facts = _driver(reader)
    return HostFacts(
        hostname=hostname,
        probe_version=probe_version,
        uid=uid,
        os=os_info,
        kernel=pp.parse_kernels(reader.text("uname"), reader.text("kernels")),
        secure_boot=pp.parse_secure_boot(reader.text("secure-boot")),
        module_signing=reader.parse("module-signing", parse_signing_output, SigningFacts()),
        cdi=reader.parse("cdi", parse_cdi_specs, []),
        dkms=reader.parse("dkms", pp.parse_dkms_status, []) if dkms_installed else [],
        dkms_installed=dkms_installed,
        driver=driver_facts,
        packages=installed,
        cuda=cuda_facts,
        cudnn=_cudnn(reader, installed, cuda_facts),
        container=_container(reader),
        fabric_manager=FabricManagerFacts(
            version=pp.parse_fabricmanager_version(reader.text("fabricmanager")),
            installed=fabric is not None and not fabric.missing_tool,
            service=services.get("nvidia-fabricmanager"),
        ),
        fabric=_fabric(reader),
        gpu_faults=_gpu_faults(reader),
        firmware=_firmware(reader, driver_facts.smi),
        persistenced=services.get("nvidia-persistenced"),
        frameworks=[
            framework_from_probe(python, probe.get(python_section_name(i)))
            for i, python in enumerate(names)
        ],
        sshd=SshdFacts(available=bool(sshd_settings), settings=sshd_settings),
        profile_marker=provision_marker.profile if provision_marker else None,
        provision_marker=provision_marker,
        problems=reader.problems,
    )


def host_facts_from_text(text: str) -> HostFacts:
    """The probe's whole stdout → HostFacts (ParseError only when it is not probe output)."""
    return build_host_facts(split_sections(text))
