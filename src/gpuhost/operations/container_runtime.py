"""The nvidia container runtime in Docker's and containerd's configuration.

Docker's ``daemon.json`` is merged, never replaced: every key the user set stays, the previous file
is kept as a backup named after its content hash, and Docker restarts only when the file changed.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Generator
from typing import Any

from pyinfra import host
from pyinfra.api import OperationError, operation

from gpuhost.facts.files import SmallFile
from gpuhost.facts.nvidia_smi import SmiQuery
from gpuhost.facts.systemd_units import UnitFiles
from gpuhost.operations._facts import fact
from gpuhost.operations._files import put_text
from gpuhost.parsers.nvidia_smi import SmiReport

DAEMON_JSON = "/etc/docker/daemon.json"
CONTAINERD_CONFIG = "/etc/containerd/config.toml"
RUNTIME_BINARY = "nvidia-container-runtime"
DEV_CHAR_RULE_PATH = "/etc/udev/rules.d/71-nvidia-dev-char.rules"
DEV_CHAR_COMMAND = "nvidia-ctk system create-dev-char-symlinks --create-all"
DEV_CHAR_RULE = (
    "# Written by gpuhost: /dev/char symlinks for NVIDIA devices, so that a systemd daemon-reload\n"
    "# does not take GPUs away from running containers (NVIDIA container toolkit, known issue).\n"
    f'ACTION=="add", DEVPATH=="/bus/pci/drivers/nvidia", RUN+="/usr/bin/{DEV_CHAR_COMMAND}"\n'
)


def merge_daemon_json(current: dict[str, Any], default_runtime: bool = False) -> dict[str, Any]:
    """``current`` with the nvidia runtime added; every other key and runtime kept as it was."""
    merged = copy.deepcopy(current)
    runtimes = merged.setdefault("runtimes", {})
    if not isinstance(runtimes, dict):
        raise OperationError(
            f"{DAEMON_JSON}: 'runtimes' is {type(runtimes).__name__}, expected an object"
        )
    nvidia = dict(runtimes.get("nvidia") or {})
    nvidia["path"] = RUNTIME_BINARY
    nvidia.setdefault("args", [])
    runtimes["nvidia"] = nvidia
    if default_runtime:
        merged["default-runtime"] = "nvidia"
    return merged


def parse_daemon_json(lines: list[str] | None) -> dict[str, Any] | None:
    """The current daemon.json (None when absent); a file that is not a JSON object is an error:
    gpuhost never overwrites a config it cannot read."""
    if lines is None:
        return None
    text = "\n".join(lines)
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OperationError(
            f"{DAEMON_JSON} is not valid JSON (line {exc.lineno}: {exc.msg}); fix it, then re-run"
        ) from exc
    except (ValueError, RecursionError) as exc:  # a number too long, nesting too deep
        raise OperationError(
            f"{DAEMON_JSON} is not readable JSON ({exc}); fix it, then re-run"
        ) from exc
    if not isinstance(data, dict):
        raise OperationError(f"{DAEMON_JSON} holds a {type(data).__name__}, expected a JSON object")
    return data


def backup_path(lines: list[str]) -> str:
    digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()[:12]
    return f"{DAEMON_JSON}.gpuhost-{digest}.bak"


@operation()
def docker(default_runtime: bool = False, path: str = DAEMON_JSON) -> Generator:
    """Register the nvidia runtime in Docker's daemon.json by merging; restart Docker on change.

    + default_runtime: also make ``nvidia`` the default runtime
    + path: the daemon.json path

    **Example:**

    .. code:: python

        container_runtime.docker(name="nvidia runtime for Docker")
    """
    lines = host.get_fact(SmallFile, path=path)
    current = parse_daemon_json(lines)
    merged = merge_daemon_json(current or {}, default_runtime)
    if current == merged:
        host.noop("Docker already has the nvidia runtime")
        return
    if lines is not None:
        yield f"cp -p {path} {backup_path(lines)}"
    yield from put_text(path, json.dumps(merged, indent=4) + "\n")
    if "docker.service" in host.get_fact(UnitFiles, units=["docker.service"]):
        yield "systemctl restart docker.service"


@operation()
def containerd() -> Generator:
    """Register the nvidia runtime with containerd when containerd is configured on the host."""
    config = host.get_fact(SmallFile, path=CONTAINERD_CONFIG)
    if config is None:
        host.noop("containerd is not configured on this host")
        return
    if any("nvidia-container-runtime" in line for line in config):
        host.noop("containerd already has the nvidia runtime")
        return
    yield f"cp -p {CONTAINERD_CONFIG} {CONTAINERD_CONFIG}.gpuhost.bak"
    yield "nvidia-ctk runtime configure --runtime=containerd"
    yield "systemctl restart containerd.service"


@operation()
def dev_char_symlinks(report: SmiReport | None = None) -> Generator:
    """udev rule creating /dev/char symlinks for NVIDIA devices; created now if the driver is up.

    + report: the host's ``SmiQuery`` fact
    """
    if report is None:
        report = fact(SmiQuery)
    rule = list(put_text(DEV_CHAR_RULE_PATH, DEV_CHAR_RULE))
    if not rule:
        host.noop("/dev/char symlink rule already in place")
        return
    yield from rule
    if report.ok:
        yield DEV_CHAR_COMMAND
