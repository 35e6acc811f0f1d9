"""Running a cluster tool on this node for the health tier (``scontrol``, ``kubectl``).

``run_tool`` runs one argv with a time bound (its whole process group killed at it:
:mod:`gpuhost.toolrun`) and returns its stdout; a tool that is not
installed is a ConfigError naming the option that needs it, one that hangs or fails a HostError
of one line (this machine's name, the command, its exit status and first line of output).
"""

from __future__ import annotations

import re
import shutil
import socket

from gpuhost import toolrun
from gpuhost.errors import ConfigError, HostError
from gpuhost.parsers._common import first_line

TOOL_TIMEOUT = 10.0

# one node, never a hostlist ('a,b', 'n[1-4]') or an option ('-x'): the name is a word of the
# scontrol/srun/kubectl command line and of the state gpuhost keeps
SLURM_NODE = (
    re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,254}"),
    "a Slurm node name (letters, digits, '.', '_' and '-', not first '-' or '.')",
)
K8S_NODE = (
    re.compile(r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"),
    "a Kubernetes node name (RFC 1123: lower-case letters, digits, '-' and '.', at most 253)",
)


def checked_node_name(
    given: str | None, default: str, option: str, rule: tuple[re.Pattern[str], str]
) -> str:
    """``given`` (an option's value) or this machine's ``default`` name, when it is one node
    name by ``rule``; otherwise a one-line ConfigError naming the option."""
    pattern, expected = rule
    name = default if given is None else given
    if pattern.fullmatch(name):
        return name
    if given is None:
        raise ConfigError(
            f"{option}: this machine's name {name!r:.80} is not {expected}: give {option} NAME"
        )
    raise ConfigError(f"{option}: found {name!r:.80}, expected {expected}")


def run_tool(argv: list[str], missing: str, timeout: float = TOOL_TIMEOUT) -> str:
    """stdout of ``argv``; ``missing``: the one line when ``argv[0]`` is not on PATH."""
    if shutil.which(argv[0]) is None:
        raise ConfigError(missing)
    here = socket.gethostname().split(".")[0]
    try:
        result = toolrun.run(argv, timeout)
    except OSError as exc:
        raise HostError(
            here, f"{' '.join(argv[:4])}: cannot start ({exc.strerror or exc})"
        ) from None
    if result.timed_out:
        raise HostError(here, f"{' '.join(argv[:4])}: no answer in {timeout:g} s")
    if result.returncode != 0:
        raise HostError(
            here,
            f"{' '.join(argv[:4])} failed (exit {result.returncode}): "
            f"{first_line(result.text(result.stderr) or result.text(), 200)}",
        )
    return result.text()
