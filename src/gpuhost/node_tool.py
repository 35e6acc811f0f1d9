"""Running a cluster tool on this node for the health tier (``scontrol``, ``kubectl``).

``run_tool`` runs one argv with a time bound and returns its stdout; a tool that is not
installed is a ConfigError naming the option that needs it, one that hangs or fails a HostError
of one line (this machine's name, the command, its exit status and first line of output).
"""

from __future__ import annotations

import shutil
import socket
import subprocess

from gpuhost.errors import ConfigError, HostError
from gpuhost.parsers._common import first_line

TOOL_TIMEOUT = 10.0


def run_tool(argv: list[str], missing: str, timeout: float = TOOL_TIMEOUT) -> str:
    """stdout of ``argv``; ``missing``: the one line when ``argv[0]`` is not on PATH."""
    if shutil.which(argv[0]) is None:
        raise ConfigError(missing)
    here = socket.gethostname().split(".")[0]
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, errors="replace", timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise HostError(here, f"{' '.join(argv[:4])}: no answer in {timeout:g} s") from exc
    if proc.returncode != 0:
        raise HostError(
            here,
            f"{' '.join(argv[:4])} failed (exit {proc.returncode}): "
            f"{first_line(proc.stderr or proc.stdout, 200)}",
        )
    return proc.stdout
