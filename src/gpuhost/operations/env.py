"""Environment defaults for every login shell, and the CUDA library path."""

from __future__ import annotations

import re
import shlex
from collections.abc import Generator

from pyinfra import host
from pyinfra.api import OperationValueError, operation
from pyinfra.facts.files import Link

from gpuhost.operations._files import put_text

PROFILE_SCRIPT = "/etc/profile.d/gpuhost.sh"
LD_CONF = "/etc/ld.so.conf.d/gpuhost-cuda.conf"
CUDA_LINK = "/usr/local/cuda"
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def render_profile(variables: dict[str, object], cuda_home: str | None) -> str:
    """``/etc/profile.d/gpuhost.sh``: one ``export`` per variable, sorted, values shell-quoted."""
    lines = ["# Written by gpuhost from inventory data (gpuhost_env); edits are overwritten."]
    for name in sorted(variables):
        if not _NAME_RE.match(name):
            raise OperationValueError(
                f"gpuhost_env: {name!r} is not a shell variable name (letters, digits, _)"
            )
        lines.append(f"export {name}={shlex.quote(str(variables[name]))}")
    if cuda_home:
        lines.append(f"export CUDA_HOME={shlex.quote(cuda_home)}")
        lines.append(
            f'case ":$PATH:" in *":{cuda_home}/bin:"*) ;; *) PATH="{cuda_home}/bin:$PATH" ;; esac'
        )
        lines.append("export PATH")
    return "\n".join(lines) + "\n"


@operation()
def profile(variables: dict[str, object], cuda_home: str | None = None) -> Generator:
    """Write ``/etc/profile.d/gpuhost.sh`` with the given variables (and CUDA on PATH).

    + variables: e.g. ``{"NCCL_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": 8}``
    + cuda_home: ``/usr/local/cuda`` to export CUDA_HOME and put its bin on PATH
    """
    commands = list(put_text(PROFILE_SCRIPT, render_profile(variables, cuda_home)))
    if not commands:
        host.noop(f"{PROFILE_SCRIPT} up to date")
    yield from commands


@operation()
def cuda_default(target: str) -> Generator:
    """``/usr/local/cuda`` → ``target`` (e.g. ``/usr/local/cuda-12.4``) and its libraries in
    ``ld.so.conf.d``; ``ldconfig`` only when that changed.

    + target: the default toolkit's directory
    """
    link = host.get_fact(Link, path=CUDA_LINK)
    changes: list = []
    if not link or link.get("link_target") != target:
        changes.append(f"ln -sfn {shlex.quote(target)} {CUDA_LINK}")
    conf = list(put_text(LD_CONF, f"{CUDA_LINK}/lib64\n"))
    changes += conf
    if conf:
        changes.append("ldconfig")
    if not changes:
        host.noop(f"{CUDA_LINK} already points at {target}")
    yield from changes
