"""The combined probe: ONE POSIX shell script that reads a host's whole GPU stack.

An audit runs it once per host (one SSH command, no file upload, no remote Python needed except
for the optional framework section). Every section:

- runs in its own subshell with ``LC_ALL=C``, so a missing tool or a failing command never stops
  the script; a missing tool exits 127 (the shell's own "command not found" code);
- is framed by marker lines so :func:`gpuhost.probe.sections.split_sections` can cut the output
  back into (stdout, stderr, exit code) per section, byte for byte;
- is bounded: commands that can hang on a broken GPU (nvidia-smi, Python imports) run under
  ``timeout`` where the host has it.

The script always exits 0; what went wrong is in the sections. ``SECTION_NAMES`` lists what a
complete output contains (python sections are ``python.0``, ``python.1``, ... in the order the
interpreters were given).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from gpuhost.errors import ConfigError
from gpuhost.parsers.cdi import list_specs_command
from gpuhost.parsers.fabric import RDMA_FILES, SYSFS_ROOT
from gpuhost.parsers.firmware import DMI_FILES, DMI_ROOT
from gpuhost.parsers.profile_marker import MARKER_PATH
from gpuhost.parsers.sshd import AUDIT_KEYWORDS
from gpuhost.parsers.systemd import show_command
from gpuhost.pkgmgr import APT, DNF
from gpuhost.pkgmgr.base import small_file_command
from gpuhost.probe.framework_probe import PYTHON_PROBE

PROBE_VERSION = 1
MARK = "##GPUHOST##"
DEFAULT_PYTHONS = ("python3",)
SMI_TIMEOUT_S = 60
PYTHON_TIMEOUT_S = 120
STDERR_LIMIT_BYTES = 4096
# Package names worth reading (dpkg and rpm): driver, CUDA, cuDNN, NCCL, TensorRT, container
# toolkit, fabric manager, DCGM, and Debian's own names (libcuda1, firmware-nvidia-gsp, ...).
PACKAGE_FILTER = "nvidia|cuda|cudnn|nccl|tensorrt|nvinfer|datacenter-gpu-manager|fabricmanager"
# Installed packages whose apt policy is read: everything built from or around the driver (the
# audit decides which of them are coupled to the driver version, from data/package_sets.yaml).
DRIVER_PACKAGE_FILTER = (
    r"^(nvidia-|libnvidia-|libcuda|cuda-drivers|firmware-nvidia|xserver-xorg-video-nvidia|"
    r"libnvcuvid|libnvoptix|libegl-nvidia|libgles-nvidia|libglx-nvidia|libgl1-nvidia)"
)
# Units whose states the audit reads, with one ``systemctl show`` (not two systemctl per unit).
SERVICE_UNITS = (
    "nvidia-persistenced.service",
    "nvidia-fabricmanager.service",
    "docker.service",
    "containerd.service",
)
_PYTHON_NAME_RE = re.compile(r"^[A-Za-z0-9_./+-]+$")

PRELUDE = f"""\
LC_ALL=C; LANG=C; export LC_ALL LANG
PATH="$PATH:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"; export PATH
_gh_e=$(mktemp 2>/dev/null) || _gh_e=/dev/null
_gh_x=$(mktemp 2>/dev/null) || _gh_x=
_gh_t() {{ if command -v timeout >/dev/null 2>&1; then timeout "$@"; else shift; "$@"; fi; }}
_gh_need() {{ command -v "$1" >/dev/null 2>&1 || exit 127; }}
_gh_begin() {{ printf '\\n{MARK} begin %s\\n' "$1"; }}
_gh_end() {{
  printf '\\n{MARK} stderr %s\\n' "$1"
  [ "$_gh_e" = /dev/null ] || {{ head -c {STDERR_LIMIT_BYTES} "$_gh_e"; : >"$_gh_e"; }}
  printf '\\n{MARK} end %s %s\\n' "$1" "$2"
}}
"""

EPILOGUE = """\
[ "$_gh_e" = /dev/null ] || rm -f "$_gh_e"
[ -z "$_gh_x" ] || rm -f "$_gh_x"
exit 0
"""


@dataclass(frozen=True)
class Section:
    """One probe section: a name and the shell code whose stdout/stderr/exit code it keeps."""

    name: str
    code: str


def _pci_code() -> str:
    # One grep over all vendor files instead of one cat per device (hundreds of forks).
    return (
        "for f in $(grep -l 0x10de /sys/bus/pci/devices/*/vendor 2>/dev/null); do "
        'd=${f%/vendor}; echo "${d##*/} $(cat $d/class) $(cat $d/device)"; done'
    )


# Secure Boot state, read by the audit probe and by provision (facts.kernel.SecureBootState);
# parsed by facts.probe_parsers.parse_secure_boot.
SECURE_BOOT_CODE = (
    '[ -d /sys/firmware/efi ] && echo "efi=yes" || echo "efi=no"; '
    'if command -v mokutil >/dev/null 2>&1; then echo "mokutil=$(mokutil --sb-state 2>&1)"; '
    "fi; "
    "f=$(ls /sys/firmware/efi/efivars/SecureBoot-* 2>/dev/null | head -n 1); "
    '[ -n "$f" ] && echo "efivar=$(od -An -t u1 "$f" 2>/dev/null)"; true'
)

# Module signing under Secure Boot, read by the audit probe (no arguments: the certificate DKMS
# signs with, from its framework files, else its default) and by provision
# (facts.signing.ModuleSigning, with the inventory's key and certificate); parsed by
# parsers.signing.parse_signing_output. Output parts: ##GPUHOST framework (DKMS's signing
# settings), key PATH ("readable" or nothing), cert PATH (the file in base64: DER or PEM),
# test-key (mokutil --test-key's answer), modinfo (the running kernel's nvidia module's file
# and signature fields).
_DKMS_CONF = "/etc/dkms/framework.conf /etc/dkms/framework.conf.d/*.conf"
_SIGNING_SETTING = "^[[:space:]]*(export[[:space:]]+)?(mok_signing_key|mok_certificate|sign_file)="


def module_signing_code(key: str | None = None, cert: str | None = None) -> str:
    """The signing facts' command (see above); ``cert`` None: DKMS's configured certificate."""
    if cert is None:
        pick = (
            "c=$(grep -hE '^[[:space:]]*(export[[:space:]]+)?mok_certificate=' "
            f"{_DKMS_CONF} 2>/dev/null | tail -n 1 | cut -d= -f2- | tr -d '\\042\\047' "
            "| sed 's/[[:space:]]*[#;].*//'); "
            # DKMS's own default: Ubuntu's MOK (shim-signed) on Ubuntu, else DKMS's key
            '[ -n "$c" ] || { grep -qs "^ID=ubuntu$" /etc/os-release '
            "&& c=/var/lib/shim-signed/mok/MOK.der || c=/var/lib/dkms/mok.pub; }; "
        )
    else:
        pick = f"c={shlex.quote(cert)}; "
    key_part = (
        f'k={shlex.quote(key)}; echo "##GPUHOST key $k"; [ -r "$k" ] && echo readable; '
        if key
        else ""
    )
    return (
        f"echo '##GPUHOST framework'; grep -hE '{_SIGNING_SETTING}' {_DKMS_CONF} 2>/dev/null; "
        f"{pick}{key_part}"
        'echo "##GPUHOST cert $c"; [ -r "$c" ] && base64 "$c" 2>/dev/null; '
        "echo '##GPUHOST test-key'; command -v mokutil >/dev/null 2>&1 && "
        'LC_ALL=C mokutil --test-key "$c" 2>&1; '
        "echo '##GPUHOST modinfo'; command -v modinfo >/dev/null 2>&1 && LC_ALL=C modinfo nvidia "
        "2>&1 | grep -E '^(filename|version|name|vermagic|signer|sig_key|sig_hashalgo):|ERROR'; "
        "true"
    )


# The running kernel and the machine; with KERNELS_CODE read by the audit probe and by provision
# (facts.kernel.Kernels), parsed by facts.probe_parsers.parse_kernels.
UNAME_CODE = "uname -r; uname -m"
# Installed kernels: next-boot kernel from grubby (RHEL family), else the /vmlinuz or
# /boot/vmlinuz link (Debian), else the newest /boot/vmlinuz-* (decided by the parser); every
# kernel image in /boot, every /lib/modules directory and those with headers (a build link).
KERNELS_CODE = (
    'command -v grubby >/dev/null 2>&1 && echo "grubby=$(grubby --default-kernel '
    '2>/dev/null)"; '
    'for l in /vmlinuz /boot/vmlinuz; do [ -L "$l" ] && echo "link=$(readlink "$l")"; done; '
    'for f in /boot/vmlinuz-*; do [ -e "$f" ] && echo "boot=${f#/boot/vmlinuz-}"; done; '
    'for d in /lib/modules/*; do [ -d "$d" ] && echo "modules=${d#/lib/modules/}"; '
    '[ -e "$d/build" ] && echo "headers=${d#/lib/modules/}"; done; true'
)
# What provision reads beyond KERNELS_CODE: which linux-headers-VERSION apt can install for the
# running kernel and each /boot image (one apt-cache call; not in the audit's probe, where it
# would cost up to a second on a host without apt's package cache file).
HEADERS_AVAILABLE_CODE = (
    'ks="$(uname -r)"; for f in /boot/vmlinuz-*; do [ -e "$f" ] && ks="$ks ${f#/boot/vmlinuz-}"; '
    f"done; {APT.available_command('$(for k in $ks; do echo linux-headers-$k; done)')}; true"
)

# The held packages: the same list as `apt-mark showhold` (dpkg selections set to "hold"; '*'
# includes packages held but not installed), one name a line, without apt-mark's cache loading;
# read by the audit probe, provision (facts.apt_pins.AptHolds) and the checks, parsed by
# parsers.packages.parse_apt_mark_showhold.
APT_HOLDS_CODE = APT.holds_command()

# nvidia-smi's full XML report, or its error message (rc 9 without a driver: kept, rc 0), or
# SMI_NOT_FOUND: read by provision (facts.nvidia_smi.SmiQuery) and the checks; the probe's own
# nvidia-smi section adds a timeout and keeps stderr apart.
SMI_NOT_FOUND = "#gpuhost: nvidia-smi: command not found"
SMI_XML_CODE = (
    "if command -v nvidia-smi >/dev/null 2>&1; then LC_ALL=C nvidia-smi -q -x 2>&1; "
    f'else echo "{SMI_NOT_FOUND}"; fi; true'
)

# /etc/os-release (parsed by facts.probe_parsers.parse_os_release) and the provision marker
# (exit 1 when absent; parsers.profile_marker): the probe's sections and the checks' commands.
OS_RELEASE_CODE = "cat /etc/os-release 2>/dev/null || cat /usr/lib/os-release"
MARKER_CODE = f"[ -f {MARKER_PATH} ] || exit 1; head -c 4096 {MARKER_PATH}"

# `sshd -T`, the configuration sshd really uses (root only): sshd from PATH, else /usr/sbin/sshd
# (where Debian and RHEL put it, outside a non-root PATH). Read by the audit probe (keeping
# parsers.sshd.AUDIT_KEYWORDS), provision/harden (facts.sshd.SshdEffectiveConfig) and the checks.
SSHD_FOUND_CODE = "command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ]"
SSHD_T_CODE = "LC_ALL=C $(command -v sshd || echo /usr/sbin/sshd) -T"

# The RDMA fabric (gpuhost.fabric; parsers.fabric), read only where the host has an RDMA device:
# its ports' sysfs files as FILE:VALUE lines, nvidia_peermem, the IOMMU, the PCIe bridges' ACS
# (lspci as root) and nvidia-smi's GPU/NIC matrix. The checks and the health tier run the same.
RDMA_PORTS_CODE = (
    f"[ -d {SYSFS_ROOT} ] || exit 0; grep -H . "
    + " ".join(f"{SYSFS_ROOT}/*/ports/*/{name}" for name in RDMA_FILES)
    + " 2>/dev/null; true"
)
PEERMEM_CODE = (
    "grep -E '^(nvidia_peermem|nv_peer_mem) ' /proc/modules 2>/dev/null; "
    "for m in nvidia_peermem nv_peer_mem; do [ -d /sys/module/$m ] && echo $m; done; true"
)
IOMMU_CODE = (
    'echo "cmdline=$(cat /proc/cmdline 2>/dev/null)"; '
    "ls /sys/class/iommu 2>/dev/null | sed 's/^/unit=/'; true"
)
LSPCI_CODE = (
    "lspci -D -vvv 2>/dev/null | grep -E '^[0-9a-f]{4}:|Bus: primary|ACSCtl|access denied'; true"
)
TOPO_CODE = f"_gh_t {SMI_TIMEOUT_S} nvidia-smi topo -m"
_IF_RDMA = f"[ -d {SYSFS_ROOT} ] || exit 0; "

# GPU faults beyond nvidia-smi -q (gpuhost.faults.judge): Xid lines of the kernel log since boot
# (journal, else the ring buffer; unreadable: nothing, the checks' Xid test says so), NVLink link
# state and error counters, and each NVIDIA GPU's PCIe AER counters from sysfs.
XID_LOG_CODE = (
    "if command -v journalctl >/dev/null 2>&1; then LC_ALL=C journalctl -k -b -q --no-pager "
    "2>/dev/null; else LC_ALL=C dmesg 2>/dev/null; fi | grep -F 'NVRM: Xid' | tail -n 500; true"
)
NVLINK_STATUS_CODE = f"_gh_t {SMI_TIMEOUT_S} nvidia-smi nvlink -s"
NVLINK_ERRORS_CODE = f"_gh_t {SMI_TIMEOUT_S} nvidia-smi nvlink -e"
GPU_AER_CODE = (
    "for d in /sys/bus/pci/devices/*; do "
    '[ "$(cat "$d/vendor" 2>/dev/null)" = 0x10de ] || continue; '
    'case "$(cat "$d/class" 2>/dev/null)" in 0x03*) ;; *) continue ;; esac; '
    "for k in correctable fatal nonfatal; do f=$d/aer_dev_$k; [ -r \"$f\" ] || continue; "
    'echo "##GPUHOST aer ${d##*/} $k"; cat "$f"; done; done; true'
)

# Firmware (parsers.firmware): the BIOS's version and date (every user may read them) and each RDMA
# adapter's firmware, as FILE:VALUE lines; a missing file (no DMI tables in a VM or container, no
# RDMA adapter) prints nothing. The GPUs' VBIOS and GSP firmware come from nvidia-smi -q -x.
FIRMWARE_CODE = (
    "grep -H . "
    + " ".join(f"{DMI_ROOT}/{name}" for name in DMI_FILES)
    + f" {SYSFS_ROOT}/*/fw_ver 2>/dev/null; true"
)

STATIC_SECTIONS: tuple[Section, ...] = (
    Section("meta", f'echo "probe={PROBE_VERSION}"; echo "uid=$(id -u)"; echo "host=$(hostname)"'),
    Section("os-release", OS_RELEASE_CODE),
    Section("uname", UNAME_CODE),
    Section("kernels", KERNELS_CODE),
    Section("secure-boot", SECURE_BOOT_CODE),
    Section("dkms", "_gh_need dkms; dkms status"),
    Section("module-signing", module_signing_code()),
    Section("cdi", list_specs_command()),
    Section("pci", _pci_code()),
    Section("modules", "grep -E '^nvidia' /proc/modules; true"),
    Section("proc-driver", "cat /proc/driver/nvidia/version"),
    Section(
        "nvidia-smi",
        # The XML is also kept in $_gh_x so the next section can tell whether it is complete.
        f'_gh_need nvidia-smi; if [ -n "$_gh_x" ]; then '
        f'_gh_t {SMI_TIMEOUT_S} nvidia-smi -q -x >"$_gh_x"; r=$?; cat "$_gh_x"; exit $r; '
        f"else _gh_t {SMI_TIMEOUT_S} nvidia-smi -q -x; fi",
    ),
    Section(
        # The -q text report, only where the XML is missing or incomplete (and nvidia-smi exists).
        "nvidia-smi-text",
        '_gh_need nvidia-smi; [ -n "$_gh_x" ] || exit 0; '
        "grep -q '</nvidia_smi_log>' \"$_gh_x\" && exit 0; "
        f"_gh_t {SMI_TIMEOUT_S} nvidia-smi -q",
    ),
    Section(
        "dpkg",
        f"_gh_need dpkg-query; {APT.installed_command()} | grep -iE '{PACKAGE_FILTER}'; true",
    ),
    Section(
        "rpm",
        f"_gh_need rpm; {DNF.rpm_probe(PACKAGE_FILTER)}",
    ),
    Section("apt-holds", f"_gh_need dpkg-query; {APT_HOLDS_CODE}"),
    Section(
        "dnf-versionlock",
        f"{DNF.holds_command()}; "
        f"{small_file_command('/etc/yum/pluginconf.d/versionlock.list')}",
    ),
    Section(
        "apt-policy",
        f"_gh_need apt-cache; _gh_need dpkg-query; {APT.policy_probe(DRIVER_PACKAGE_FILTER)}",
    ),
    Section(
        "cuda",
        "for d in /usr/local/cuda-*; do [ -d \"$d\" ] || continue; v=''; "
        '[ -f "$d/version.json" ] && v=$(awk \'/"cuda" *:/{f=1} f&&/"version"/'
        '{gsub(/[",]/,"",$3); print $3; exit}\' "$d/version.json"); '
        '[ -z "$v" ] && [ -f "$d/version.txt" ] && v=$(sed -n \'s/^CUDA Version //p\' '
        '"$d/version.txt"); echo "toolkit=$d $v"; done; '
        "[ -e /usr/local/cuda ] || [ -L /usr/local/cuda ] && "
        'echo "default=$(readlink -f /usr/local/cuda 2>/dev/null)"; true',
    ),
    Section(
        "nvcc",
        "n=$(command -v nvcc 2>/dev/null || true); "
        '[ -z "$n" ] && [ -x /usr/local/cuda/bin/nvcc ] && n=/usr/local/cuda/bin/nvcc; '
        '[ -n "$n" ] || exit 127; echo "path=$n"; "$n" --version',
    ),
    Section(
        "cudnn",
        "for f in /usr/include/cudnn_version.h /usr/include/*-linux-gnu/cudnn_version*.h "
        "/usr/local/cuda/include/cudnn_version.h /usr/include/cudnn.h "
        "/usr/local/cuda/include/cudnn.h; "
        'do [ -f "$f" ] || continue; echo "header=$f"; '
        "grep -E '^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL)' \"$f\"; done; "
        "for f in /usr/lib/*-linux-gnu/libcudnn.so.* /usr/lib64/libcudnn.so.* "
        '/usr/local/cuda/lib64/libcudnn.so.*; do [ -e "$f" ] && echo "library=$f"; done; true',
    ),
    Section("nvidia-ctk", "_gh_need nvidia-ctk; nvidia-ctk --version"),
    Section(
        "container-runtimes",
        'for b in docker dockerd containerd podman; do command -v "$b" >/dev/null 2>&1 '
        '&& echo "binary=$b"; done; '
        '[ -f /etc/docker/daemon.json ] && { echo "docker-daemon-json=present"; '
        'head -c 65536 /etc/docker/daemon.json; echo; echo "docker-daemon-json=end"; }; '
        "for f in /etc/containerd/config.toml /etc/containerd/conf.d/*.toml; do "
        '[ -f "$f" ] || continue; echo "containerd-config=$f"; '
        'grep -cE \'nvidia-container-runtime|BinaryName *= *"[^"]*nvidia\' "$f"; done; true',
    ),
    Section(
        "fabricmanager",
        "_gh_need nv-fabricmanager; nv-fabricmanager --version",
    ),
    Section("services", "_gh_need systemctl; " + show_command(SERVICE_UNITS)),
    Section(
        "sshd",
        f"{SSHD_FOUND_CODE} || exit 127; {SSHD_T_CODE} 2>&1 | grep -iE "
        f"'^({'|'.join(AUDIT_KEYWORDS)}) '",
    ),
    Section("profile-marker", MARKER_CODE),
    Section("xid-log", XID_LOG_CODE),
    Section("nvlink-status", f"_gh_need nvidia-smi; {NVLINK_STATUS_CODE}"),
    Section("nvlink-errors", f"_gh_need nvidia-smi; {NVLINK_ERRORS_CODE}"),
    Section("gpu-aer", GPU_AER_CODE),
    Section("rdma-ports", RDMA_PORTS_CODE),
    Section("peermem", PEERMEM_CODE),
    Section("iommu", _IF_RDMA + IOMMU_CODE),
    Section("lspci", f"{_IF_RDMA}_gh_need lspci; {LSPCI_CODE}"),
    Section("nvidia-topo", f"{_IF_RDMA}_gh_need nvidia-smi; {TOPO_CODE}"),
    Section("firmware", FIRMWARE_CODE),
)

SECTION_NAMES: tuple[str, ...] = tuple(section.name for section in STATIC_SECTIONS)


def python_section_name(index: int) -> str:
    return f"python.{index}"


def check_pythons(pythons: Sequence[str] | None) -> tuple[str, ...]:
    """Validate the interpreter names from inventory data (``gpuhost_pythons``)."""
    if pythons is None:
        return DEFAULT_PYTHONS
    if isinstance(pythons, str) or not all(isinstance(p, str) for p in pythons):
        raise ConfigError(
            f"gpuhost_pythons: expected a list of interpreter paths, found {pythons!r}"
        )
    for python in pythons:
        if not _PYTHON_NAME_RE.match(python):
            raise ConfigError(
                f"gpuhost_pythons: {python!r} is not a plain interpreter path "
                "(letters, digits and ./_+- only)"
            )
    return tuple(pythons)


def _python_section(index: int, python: str) -> Section:
    quoted = shlex.quote(python)
    code = (
        f"_gh_need {quoted}; "
        f"CUDA_VISIBLE_DEVICES= PYTORCH_NVML_BASED_CUDA_CHECK=1 TF_CPP_MIN_LOG_LEVEL=3 "
        f"_gh_t {PYTHON_TIMEOUT_S} {quoted} -c {shlex.quote(PYTHON_PROBE.strip())}"
    )
    return Section(python_section_name(index), code)


def sections_for(pythons: Sequence[str] | None = None) -> tuple[Section, ...]:
    """Every section the probe runs for these interpreters (default: ``python3``).

    The ``pythons`` section lists the interpreters, one a line, so the output explains itself.
    """
    checked = check_pythons(pythons)
    listing = Section("pythons", "; ".join(f"echo {shlex.quote(p)}" for p in checked) or "true")
    return (
        STATIC_SECTIONS + (listing,) + tuple(_python_section(i, p) for i, p in enumerate(checked))
    )


def _wrap(section: Section) -> str:
    return f'_gh_begin {section.name}\n( {section.code}\n) 2>"$_gh_e"\n_gh_end {section.name} $?\n'


def build_probe(pythons: Sequence[str] | None = None) -> str:
    """The whole probe script (POSIX sh) for these Python interpreters."""
    body = "".join(_wrap(section) for section in sections_for(pythons))
    return PRELUDE + body + EPILOGUE
