"""Environment defaults for every login shell, and the CUDA library path."""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Generator

from pyinfra import host
from pyinfra.api import OperationValueError, operation
from pyinfra.facts.files import Link

from gpuhost.operations._files import put_text
from gpuhost.parsers.cuda import ALTERNATIVE_PATH, CudaLink

PROFILE_SCRIPT = "/etc/profile.d/gpuhost.sh"
LD_CONF = "/etc/ld.so.conf.d/gpuhost-cuda.conf"
CUDA_LINK = "/usr/local/cuda"
ALTERNATIVE_LINK = ALTERNATIVE_PATH
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


def cuda_link_commands(link_target: str | None, alternative: str | None, target: str) -> list[str]:
    """The commands pointing ``/usr/local/cuda`` at ``target``.

    NVIDIA's toolkit packages register ``/usr/local/cuda`` with update-alternatives (link group
    ``cuda``, auto mode picks the newest toolkit): when the link goes through
    ``/etc/alternatives/cuda``, the group is set to ``target`` (manual mode, so installing a newer
    toolkit later does not move the default); otherwise the link itself is managed.

    + link_target: where ``/usr/local/cuda`` points now (None: no link)
    + alternative: where ``/etc/alternatives/cuda`` points now (None: no such link)
    """
    if link_target == ALTERNATIVE_LINK:
        if alternative == target:
            return []
        return [f"update-alternatives --set cuda {shlex.quote(target)}"]
    if link_target == target:
        return []
    return [f"ln -sfn {shlex.quote(target)} {CUDA_LINK}"]


def cuda_link_restore(recorded: CudaLink, now: CudaLink) -> tuple[list[str], str | None]:
    """The commands that put ``/usr/local/cuda`` back as a snapshot ``recorded`` it (pure), and
    a line when that cannot be done: ``now`` is the link as it is, with ``exists`` for the
    recorded default's directory. The recorded default gone (its toolkit not on the host any
    more) leaves the link as it is: never a link to nothing. A directory or file there, now or
    then, is never touched. Through the alternatives group the recorded mode comes back too
    (``--auto``, or ``--set`` for manual)."""
    if "other" in (recorded.kind, now.kind):
        same = recorded.kind == now.kind
        return [], None if same else f"{CUDA_LINK} is not a symbolic link: left as it is"
    if recorded.kind == "absent":
        return ([f"rm -f {CUDA_LINK}"] if now.kind == "link" else []), None
    wanted = recorded.default or ""
    if recorded == dataclasses.replace(now, exists=None):
        return [], None
    if now.exists is False or not wanted:
        return [], (
            f"{CUDA_LINK}: the snapshot's default {wanted or '(unreadable)'} is not on the host "
            f"any more; left pointing at {now.default or 'nothing'} (install that toolkit again, "
            "or gpuhost provision sets the profile's default)"
        )
    if recorded.link != ALTERNATIVE_LINK:
        return ([] if now.link == wanted else
                [f"ln -sfn {shlex.quote(wanted)} {CUDA_LINK}"]), None
    commands = [] if now.link == ALTERNATIVE_LINK else [f"ln -sfn {ALTERNATIVE_LINK} {CUDA_LINK}"]
    if recorded.mode == "auto":
        if now.mode != "auto" or now.alternative != wanted:
            commands.append("update-alternatives --auto cuda")
    elif now.alternative != wanted or now.mode != recorded.mode:
        commands.append(f"update-alternatives --set cuda {shlex.quote(wanted)}")
    return commands, None


@operation()
def cuda_default(target: str) -> Generator:
    """``/usr/local/cuda`` → ``target`` (e.g. ``/usr/local/cuda-12.4``), through NVIDIA's
    update-alternatives group when the packages made one, and its libraries in ``ld.so.conf.d``;
    ``ldconfig`` only when that changed.

    + target: the default toolkit's directory
    """
    link = host.get_fact(Link, path=CUDA_LINK)
    link_target = link.get("link_target") if link else None
    alternative = None
    if link_target == ALTERNATIVE_LINK:
        alt = host.get_fact(Link, path=ALTERNATIVE_LINK)
        alternative = alt.get("link_target") if alt else None
    changes: list = cuda_link_commands(link_target, alternative, target)
    conf = list(put_text(LD_CONF, f"{CUDA_LINK}/lib64\n"))
    changes += conf
    if conf:
        changes.append("ldconfig")
    if not changes:
        host.noop(f"{CUDA_LINK} already points at {target}")
    yield from changes
