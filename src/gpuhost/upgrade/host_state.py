"""What a snapshot records from a host: one shell command, one pure parser.

The command prints sections separated by ``##GPUHOST <section> [args]`` marker lines; file
contents are base64 so any byte survives the trip. Missing files and tools print nothing.
What the audit's probe also reads comes from the probe's own commands (``APT_HOLDS_CODE``,
``UNAME_CODE``, the CUDA link fact's ``cuda_link_code``); the rest is a snapshot's alone:
packages with their architecture (the on-host .deb cache names files by it), the kernel command
line, nvidia-smi's XML capped at 1 MB with ``nvidia-smi -L``'s exit code, and the files a
rollback restores.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from gpuhost.audit.coupled import is_managed
from gpuhost.errors import ParseError
from gpuhost.facts.cuda_link import cuda_link_code
from gpuhost.operations.precompiled import image_metapackages
from gpuhost.parsers.cuda import CudaLink, parse_cuda_link
from gpuhost.parsers.marked import MARK, split_marked
from gpuhost.parsers.packages import parse_versionlock_entry, refuse_unread
from gpuhost.pkgmgr import APT, PackageManager
from gpuhost.probe.script import UNAME_CODE

# The GPU stack packages a snapshot records (and rollback restores): every package of the data
# (gpuhost.audit.coupled.is_managed, from data/package_sets.yaml), plus what moves with a stack
# though its version is its own: CUDA, cuDNN, NCCL, NSCQ, DCGM, container toolkit, CUDA libraries.
# tests/upgrade/test_host_state.py checks every package name of the data is recorded.
STACK_PACKAGE_RE = re.compile(
    r"nvidia|cuda|cudnn|nccl|nscq|fabricmanager|datacenter-gpu-manager|^libcublas|^libcufft"
    r"|^libcurand|^libcusolver|^libcusparse|^libnpp|^libnvrtc|^libnvvm|^libnvjpeg|^libnvjitlink"
    r"|^libnvtoolsext|^libcupti|^libaccinj|^libthrust|^dcgm"
)


def is_stack_package(name: str) -> bool:
    """Whether a snapshot records package ``name`` (see STACK_PACKAGE_RE)."""
    return is_managed(name) or bool(STACK_PACKAGE_RE.search(name))


#: what a snapshot records and rollback hands to the package manager: a package name as dpkg
#: or rpm lists it, a version as either prints it, a hold line (an apt name, a dnf lock entry)
PACKAGE_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_+.-]*")
VERSION_RE = re.compile(r"[A-Za-z0-9_+.~:^-]+")
HOLD_RE = re.compile(r"[!-~]+")
# a kernel release's image, headers and modules; and its source's shared headers, which
# linux-headers-<release> depends on (linux-hwe-6.8-headers-6.8.0-101 on 22.04's HWE kernel,
# linux-gcp-6.8-headers-6.8.0-1026; generic's linux-headers-6.8.0-101 matches the first)
KERNEL_PACKAGE_RE = re.compile(
    r"^linux-(image|headers|modules)-|^linux-[a-z][a-z0-9.-]*-headers-\d+\.\d+\.\d+-\d+$")
# Ubuntu's kernel metapackages (linux-generic, linux-virtual-hwe-24.04, ...; linux-image-generic
# and linux-headers-generic match KERNEL_PACKAGE_RE); any other track's linux-<track> (linux-aws,
# linux-nvidia-hwe-22.04) is one where its linux-image-<track> is installed (installed_track_metas)
KERNEL_META_RE = re.compile(r"^linux-(generic|virtual|lowlatency)(-hwe-\d+\.\d+(-edge)?)?$")
# Canonical's precompiled NVIDIA modules, one package per kernel (Ubuntu's archive): where a host
# has them, gpuhost moves its kernel with the driver (operations/precompiled.py), so a snapshot
# records the kernel packages as part of the stack, and a rollback puts them back
PRECOMPILED_RE = re.compile(r"^linux-modules-nvidia-\d+")


def is_kernel_package(name: str) -> bool:
    """A kernel image/headers/modules package or a kernel metapackage."""
    return bool(KERNEL_PACKAGE_RE.match(name) or KERNEL_META_RE.match(name))


def installed_track_metas(names: Iterable[str]) -> set[str]:
    """``linux-<track>`` for each kernel image metapackage ``linux-image-<track>`` among
    ``names`` (``linux-aws`` for ``linux-image-aws``; ``precompiled.image_metapackages`` tells
    them): what ``gpuhost upgrade`` moves with the image and headers metapackages of a track
    whatever its name (cloud, DGX, OEM kernels)."""
    return {"linux-" + name.removeprefix("linux-image-") for name in image_metapackages(names)}


def pairs_kernel(names: Iterable[str]) -> bool:
    """Whether a host with these stack packages has its kernel moved with the driver."""
    return any(PRECOMPILED_RE.match(name) for name in names)

# Files a snapshot keeps (globs, expanded on the host). Category is derived from the path.
SNAPSHOT_FILES = (
    "/etc/apt/preferences",
    "/etc/apt/preferences.d/*",
    "/etc/apt/sources.list",
    "/etc/apt/sources.list.d/*.list",
    "/etc/apt/sources.list.d/*.sources",
    "/etc/modprobe.d/*",
    "/etc/modules-load.d/*",
    "/etc/default/grub",
    "/etc/default/grub.d/*",
    "/etc/docker/daemon.json",
    "/etc/containerd/config.toml",
    "/etc/nvidia-container-runtime/config.toml",
    "/etc/nvidia-container-toolkit/*",
    "/etc/cdi/*",
    "/usr/share/nvidia/nvswitch/fabricmanager.cfg",
    "/etc/fabricmanager.cfg",
    "/etc/gpuhost/*",
    "/etc/systemd/system/gpuhost*",
    "/etc/systemd/system/*.service.d/*gpuhost*",
    "/etc/systemd/system/nvidia-*.service.d/*",
    # dnf hosts: NVIDIA's repository, the module stream and the version locks
    "/etc/yum.repos.d/gpuhost-*.repo",
    "/etc/dnf/modules.d/nvidia-driver.module",
    "/etc/dnf/plugins/versionlock.list",
)
MAX_FILE_BYTES = 256 * 1024

FILE_CATEGORIES = (
    ("/etc/apt/preferences", "apt_preferences"),
    ("/etc/apt/sources.list", "apt_sources"),
    ("/etc/modprobe.d/", "modprobe"),
    ("/etc/modules-load.d/", "modprobe"),
    ("/etc/default/grub", "kernel_cmdline"),
    ("/etc/docker/", "container_runtime"),
    ("/etc/containerd/", "container_runtime"),
    ("/etc/nvidia-container-", "container_runtime"),
    ("/etc/cdi/", "container_runtime"),
    ("/usr/share/nvidia/nvswitch/", "fabric_manager"),
    ("/etc/fabricmanager", "fabric_manager"),
    ("/etc/gpuhost/", "gpuhost"),
    ("/etc/systemd/system/", "units"),
    ("/etc/yum.repos.d/", "dnf_repos"),
    ("/etc/dnf/modules.d/", "dnf_modules"),
    ("/etc/dnf/plugins/versionlock.list", "dnf_locks"),
)


def file_category(path: str) -> str:
    for prefix, category in FILE_CATEGORIES:
        if path.startswith(prefix):
            return category
    return "other"


# Mode bits a snapshot never records and rollback never applies: setuid, setgid, sticky and
# world-writable (a file recorded with them is recorded without them).
UNSAFE_MODE_BITS = 0o7002


def file_path_problem(path: object) -> str | None:
    """Why ``path`` cannot be a file a snapshot records (and rollback writes as root), or
    None: it must be one of ``SNAPSHOT_FILES``, written plainly (absolute, no ``..``, ``//``
    or control characters). A document cannot name /root/.ssh/authorized_keys."""
    if not isinstance(path, str) or not path.startswith("/"):
        return "expected an absolute path"
    if posixpath.normpath(path) != path or any(ord(c) < 32 or ord(c) == 127 for c in path):
        return "expected a plain absolute path (no '..', '//', trailing '/' or control characters)"
    if not any(PurePosixPath(path).match(pattern) for pattern in SNAPSHOT_FILES):
        return "not a file snapshots record (see upgrade/host_state.SNAPSHOT_FILES)"
    return None


def mode_problem(mode: object) -> str | None:
    """Why a recorded file mode cannot be applied by rollback, or None: octal permission bits
    only, never setuid, setgid, sticky or world-writable."""
    if mode is None:
        return None
    if not isinstance(mode, str) or not re.fullmatch(r"[0-7]{3,4}", mode):
        return "expected octal permission bits such as '644'"
    if int(mode, 8) & UNSAFE_MODE_BITS:
        return "expected no setuid, setgid, sticky or world-writable bit"
    return None


def state_command(manager: PackageManager = APT) -> str:
    """The one shell command that prints everything a snapshot records (the packages and
    holds/locks of the host's package manager)."""
    globs = " ".join(SNAPSHOT_FILES)
    return "; ".join(
        [
            "export LC_ALL=C",
            f"echo '{MARK} packages'",
            manager.snapshot_packages_command(),
            f"echo '{MARK} holds'",
            f"{{ {manager.holds_command()}; }} 2>/dev/null",
            f"echo '{MARK} uname'",
            UNAME_CODE,
            f"echo '{MARK} cuda_link'",
            cuda_link_code(),
            f"echo '{MARK} cmdline'",
            "cat /proc/cmdline 2>/dev/null",
            f"echo '{MARK} smi'",
            "if command -v nvidia-smi >/dev/null; then nvidia-smi -q -x 2>&1 | head -c 1000000;"
            f" echo; echo '{MARK} smi_rc'; nvidia-smi -L >/dev/null 2>&1; echo $?;"
            f" else echo; echo '{MARK} smi_rc'; echo 127; fi",
            f"for f in {globs}; do"
            f' if [ -f "$f" ] && [ "$(stat -c %s "$f")" -le {MAX_FILE_BYTES} ]; then'
            f' echo "{MARK} file $(stat -c %a "$f") $f"; base64 -w0 < "$f"; echo;'
            " fi; done",
            f"echo '{MARK} end'",
        ]
    )


@dataclass
class HostState:
    packages: dict[str, dict[str, str]] = field(default_factory=dict)  # coupled packages
    kernel_packages: dict[str, dict[str, str]] = field(default_factory=dict)
    holds: list[str] = field(default_factory=list)  # apt: held names; dnf: the lock lines

    @property
    def held_names(self) -> list[str]:
        """The names of ``holds``: an apt hold is a name, a dnf lock line (``name-[E:]V-R.*``,
        ``name-[E:]V-*``) the name it locks."""
        return sorted({held_name(line) for line in self.holds})
    kernel_release: str = ""
    cmdline: str = ""
    smi_output: str = ""
    smi_rc: int | None = None
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    cuda_link: CudaLink | None = None  # /usr/local/cuda (None: output without the section)


def parse_host_state(output: str) -> HostState:
    """Parse ``state_command()`` output. Raises ParseError when it is cut short or foreign."""
    sections = split_marked(output.split("\n"), MARK + " ", maxsplit=2)
    names = [s.name for s in sections]
    if "packages" not in names or not names or names[-1] != "end":
        raise ParseError(
            "host state output is incomplete (no package section or no end marker); "
            f"got: {output[:120]!r}"
        )
    state = HostState()
    for name, args, lines in sections:
        if name == "packages":
            _packages(state, lines)
        elif name == "holds":
            # a lock file not read (a FIFO, a device, too large): its locks are unknown, never
            # none (the marker line would pass for a comment below)
            refuse_unread("\n".join(lines), "host state: holds")
            state.holds = sorted(
                x.strip() for x in lines if x.strip() and not x.strip().startswith("#")
            )
            odd = [h for h in state.holds if not HOLD_RE.fullmatch(h)]
            if odd:
                raise ParseError(f"host state: hold {odd[0]!r:.60}: expected a package name "
                                 "or a dnf lock entry (no spaces or control characters)")
        elif name == "uname":
            state.kernel_release = next((x.strip() for x in lines if x.strip()), "")
        elif name == "cuda_link":
            state.cuda_link = parse_cuda_link("\n".join(lines))
        elif name == "cmdline":
            state.cmdline = "\n".join(lines).strip()
        elif name == "smi":
            state.smi_output = "\n".join(lines).strip()
        elif name == "smi_rc":
            text = "".join(lines).strip()
            state.smi_rc = int(text) if text.isdigit() else None
        elif name == "file":
            if len(args) != 2:
                raise ParseError(f"host state: bad file marker {' '.join(args)!r}")
            mode, path = args
            problem = file_path_problem(path) or _host_mode_problem(mode)
            if problem:
                raise ParseError(f"host state: file {path!r:.120} (mode {mode!r:.10}): {problem}")
            state.files[path] = file_record(path, mode, "".join(lines).strip())
    return state


def _host_mode_problem(mode: str) -> str | None:
    return None if re.fullmatch(r"[0-7]{1,4}", mode) else "expected octal permission bits"


def held_name(line: str) -> str:
    """The package name of one holds line (pure): a dnf lock line's name, an apt name as it is
    (apt names never hold ``*`` or ``:``; ``nvidia-kernel-common-580-server`` is a name)."""
    if line.endswith("*") or ":" in line:
        return parse_versionlock_entry(line)[0]
    return line


def _packages(state: HostState, lines: list[str]) -> None:
    records = {}
    for line in lines:
        parts = line.split("\t")
        if len(parts) != 4:
            continue
        name, version, arch, status = parts
        if not status.startswith(("ii", "hi", "iU", "iF", "hU", "hF")) or not version:
            continue  # removed, config-files only, not installed
        records[name] = {"version": version, "arch": arch, "status": status.strip()}
    tracks = installed_track_metas(records)
    for name, record in records.items():
        recorded = is_stack_package(name) or is_kernel_package(name) or name in tracks
        version = record["version"]
        if recorded and not (PACKAGE_RE.fullmatch(name) and VERSION_RE.fullmatch(version)):
            raise ParseError(f"host state: package {name!r:.60} version {version!r:.60}: "
                             "expected a package name and version as dpkg or rpm lists them")
        if is_stack_package(name):
            state.packages[name] = record
        elif is_kernel_package(name) or name in tracks:
            state.kernel_packages[name] = record
    if pairs_kernel(state.packages):
        state.packages.update(state.kernel_packages)


def file_record(path: str, mode: str, b64: str) -> dict[str, Any]:
    try:
        raw = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raise ParseError(f"host state: content of {path} is not valid base64") from None
    record: dict[str, Any] = {
        "category": file_category(path),
        "mode": f"{int(mode, 8) & 0o7777 & ~UNSAFE_MODE_BITS:03o}",
        "sha256": hashlib.sha256(raw).hexdigest(),
    }
    try:
        record["content"] = raw.decode("utf-8")
    except UnicodeDecodeError:
        record["content_b64"] = b64
    return record


def file_bytes(record: dict[str, Any]) -> bytes:
    """The exact bytes of a file recorded by ``file_record``."""
    if "content" in record:
        return str(record["content"]).encode("utf-8")
    return base64.b64decode(str(record["content_b64"]))
