"""Pure parsers for the probe sections that :mod:`gpuhost.parsers` does not cover.

os-release, the kernel list, Secure Boot, ``dkms status``, NVIDIA PCI devices, dnf's versionlock
list, the CUDA directory listing, the cuDNN section, container runtime configs,
``nv-fabricmanager --version`` and the services' states. Each takes the section's text and returns
plain data; unreadable input raises ParseError naming the section. ``apt-cache policy``, ``sshd -T``
and ``systemctl show`` are read by :mod:`gpuhost.parsers.packages`, :mod:`gpuhost.parsers.sshd`
and :mod:`gpuhost.parsers.systemd`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from gpuhost.errors import ParseError
from gpuhost.facts.host_facts import (
    CudaToolkit,
    DkmsEntry,
    KernelInfo,
    OsInfo,
    PciGpu,
    SecureBoot,
    ServiceState,
)
from gpuhost.parsers.systemd import parse_systemctl_show

DKMS_RE = re.compile(
    r"^(?P<module>[^,/\s:]+)[/,]\s*(?P<version>[^,:\s]+)"
    r"(?:,\s*(?P<kernel>[^,:\s]+))?(?:,\s*(?P<arch>[^,:\s]+))?:\s*(?P<status>.+?)\s*$"
)
FABRIC_VERSION_RE = re.compile(r"version\s*(?:is)?\s*:?\s*(\d+(?:\.\d+)+)", re.I)
KERNEL_NAME_RE = re.compile(r"^[0-9][\w.+~-]*$")


def key_values(text: str) -> list[tuple[str, str]]:
    """``key=value`` lines in order (a key may repeat)."""
    pairs = []
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            pairs.append((key.strip(), value.strip()))
    return pairs


def parse_os_release(text: str) -> OsInfo:
    values: dict[str, str] = {}
    for key, value in key_values(text):
        values[key] = value.strip().strip('"').strip("'")
    return OsInfo(
        id=values.get("ID"),
        version_id=values.get("VERSION_ID"),
        codename=values.get("VERSION_CODENAME"),
        pretty_name=values.get("PRETTY_NAME"),
        id_like=values.get("ID_LIKE"),
    )


def _kernel_sort_key(name: str) -> list[tuple[int, int | str]]:
    return [(0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"[.\-+~_]", name)]


def parse_kernels(uname: str, text: str) -> KernelInfo:
    """``uname`` section (release, machine) and the ``kernels`` section → KernelInfo.

    Next boot: grubby's default, else the target of the /vmlinuz (or /boot/vmlinuz) link, else
    the newest /boot/vmlinuz-*; None when none of them exists (a container, a board booting a
    kernel from elsewhere). ``headers=V`` lines: /lib/modules/V/build exists; ``available=V``
    (provision's addition): apt can install linux-headers-V.
    """
    lines = [line.strip() for line in uname.splitlines() if line.strip()]
    running = lines[0] if lines else None
    arch = lines[1] if len(lines) > 1 else None
    found: dict[str, list[str]] = {"boot": [], "modules": [], "headers": [], "available": []}
    grubby = link = None
    for key, value in key_values(text):
        if key == "grubby" and value:
            grubby = value.rsplit("/vmlinuz-", 1)[-1] if "vmlinuz-" in value else None
        elif key == "link" and value and link is None:
            link = value.rsplit("vmlinuz-", 1)[-1] if "vmlinuz-" in value else None
        elif key in found and KERNEL_NAME_RE.match(value) and value not in found[key]:
            found[key].append(value)
    for names in found.values():
        names.sort(key=_kernel_sort_key)
    boot = found["boot"]
    installed = sorted(set(boot) | set(found["modules"]), key=_kernel_sort_key)
    images = [v for k, v in key_values(text) if k == "boot"]  # any name, for the newest
    if grubby:
        next_boot, source = grubby, "grubby"
    elif link:
        next_boot, source = link, "link"
    elif images:
        next_boot, source = max(images, key=_kernel_sort_key), "newest"
    else:
        next_boot, source = None, None
    return KernelInfo(
        running, arch, next_boot, source, installed, boot, found["headers"], found["available"]
    )


def parse_secure_boot(text: str) -> SecureBoot:
    """``efi=yes|no``, ``mokutil=<mokutil --sb-state>``, ``efivar=<od bytes>`` → SecureBoot.

    The SecureBoot efivar holds 4 attribute bytes then the value byte (1 = on).
    """
    efi: bool | None = None
    for key, value in key_values(text):
        if key == "efi":
            efi = value == "yes"
        elif key == "mokutil":
            lowered = value.lower()
            if "secureboot enabled" in lowered:
                return SecureBoot(True, efi if efi is not None else True, "mokutil")
            if "secureboot disabled" in lowered:
                return SecureBoot(False, efi, "mokutil")
        elif key == "efivar":
            numbers = value.split()
            if len(numbers) >= 5 and numbers[4].isdigit():
                return SecureBoot(numbers[4] == "1", True, "efivars")
    if efi is False:
        return SecureBoot(False, False, "no EFI (legacy boot)")
    return SecureBoot(None, efi, None)


def parse_dkms_status(text: str) -> list[DkmsEntry]:
    entries = []
    for line in text.splitlines():
        if not line.strip() or line.lower().startswith(("warning", "error", "deprecated")):
            continue
        match = DKMS_RE.match(line.strip())
        if match is None:
            raise ParseError(f"dkms status: cannot read line {line.strip()[:100]!r}")
        entries.append(
            DkmsEntry(
                module=match.group("module"),
                version=match.group("version"),
                kernel=match.group("kernel"),
                arch=match.group("arch"),
                status=match.group("status"),
            )
        )
    return entries


def parse_pci(text: str) -> list[PciGpu]:
    """``<address> <class> <device>`` lines of NVIDIA PCI functions → display/3D controllers only
    (class 0x03xxxx; NVSwitches and audio functions are left out)."""
    gpus = []
    for line in text.splitlines():
        cells = line.split()
        if len(cells) == 3 and cells[1].lower().startswith("0x03"):
            gpus.append(PciGpu(cells[0], cells[1].lower(), cells[2].lower()))
    return gpus


def parse_proc_modules(text: str) -> list[str]:
    return [line.split()[0] for line in text.splitlines() if line.strip()]



def parse_cuda_dirs(text: str) -> tuple[list[CudaToolkit], str | None]:
    toolkits: list[CudaToolkit] = []
    default = None
    for key, value in key_values(text):
        if key == "toolkit":
            path, _, version = value.partition(" ")
            toolkits.append(CudaToolkit(path, version.strip() or _version_from_path(path)))
        elif key == "default" and value:
            default = value
    return toolkits, default


def _version_from_path(path: str) -> str | None:
    match = re.search(r"cuda-(\d+\.\d+)$", path)
    return match.group(1) if match else None


def split_nvcc(text: str) -> tuple[str | None, str]:
    """The ``nvcc`` section: ``path=...`` then nvcc's own output."""
    path = None
    rest = []
    for line in text.splitlines():
        if path is None and line.startswith("path="):
            path = line[5:].strip()
        else:
            rest.append(line)
    return path, "\n".join(rest)


def split_cudnn(text: str) -> tuple[str | None, str, list[str]]:
    """The ``cudnn`` section → (header path, its #define lines, library paths).

    The header is the first one that defines CUDNN_MAJOR (cuDNN 8+ keeps them in
    cudnn_version.h; its cudnn.h only includes that file).
    """
    defines: dict[str, list[str]] = {}
    order: list[str] = []
    libraries: list[str] = []
    current = None
    for line in text.splitlines():
        if line.startswith("header="):
            current = line[7:].strip()
            order.append(current)
            defines.setdefault(current, [])
        elif line.startswith("library="):
            libraries.append(line[8:].strip())
        elif current is not None and line.startswith("#define"):
            defines[current].append(line)
    for header in order:
        if any("CUDNN_MAJOR" in line for line in defines[header]):
            return header, "\n".join(defines[header]), libraries
    return None, "", libraries


def cudnn_from_library(paths: list[str]) -> str | None:
    """``.../libcudnn.so.8.9.7`` → "8.9.7" (the longest version among the files)."""
    versions = [m.group(1) for p in paths if (m := re.search(r"libcudnn\.so\.(\d+(?:\.\d+)*)$", p))]
    return max(versions, key=lambda v: v.count("."), default=None)


def parse_container_runtimes(text: str) -> dict[str, Any]:
    """The ``container-runtimes`` section → binaries, daemon.json runtime, containerd runtime."""
    result: dict[str, Any] = {
        "runtimes": [],
        "docker_config": False,
        "docker_nvidia_runtime": None,
        "docker_default_runtime": None,
        "containerd_nvidia_runtime": None,
    }
    lines = text.splitlines()
    json_lines: list[str] | None = None
    for line in lines:
        if json_lines is not None:
            if line == "docker-daemon-json=end":
                _read_daemon_json("\n".join(json_lines), result)
                json_lines = None
            else:
                json_lines.append(line)
            continue
        key, _, value = line.partition("=")
        if key == "binary":
            result["runtimes"].append(value.strip())
        elif key == "docker-daemon-json" and value == "present":
            result["docker_config"] = True
            json_lines = []
        elif key == "containerd-config":
            result["containerd_nvidia_runtime"] = bool(result["containerd_nvidia_runtime"])
        elif line.strip().isdigit() and result["containerd_nvidia_runtime"] is not None:
            result["containerd_nvidia_runtime"] = (
                result["containerd_nvidia_runtime"] or int(line.strip()) > 0
            )
    return result


def _read_daemon_json(text: str, result: dict[str, Any]) -> None:
    try:
        config = json.loads(text) if text.strip() else {}
    except (ValueError, RecursionError):
        return  # unreadable daemon.json: runtime unknown (None)
    if not isinstance(config, dict):
        return
    runtimes = config.get("runtimes")
    result["docker_nvidia_runtime"] = isinstance(runtimes, dict) and "nvidia" in runtimes
    default = config.get("default-runtime")
    result["docker_default_runtime"] = default if isinstance(default, str) else None


def parse_fabricmanager_version(text: str) -> str | None:
    match = FABRIC_VERSION_RE.search(text)
    return match.group(1) if match else None


def parse_services(text: str) -> dict[str, ServiceState]:
    """The probe's ``systemctl show`` of its units -> {name without .service: ServiceState}."""
    return {
        unit.id.removesuffix(".service"): ServiceState(
            name=unit.id.removesuffix(".service"), active=unit.active, enabled=unit.unit_file
        )
        for unit in parse_systemctl_show(text).values()
    }
