"""The CUDA default link: ``/usr/local/cuda``, and where NVIDIA's toolkit packages made it
through the alternatives system, ``/etc/alternatives/cuda`` and the group's mode (a command plus
``parsers.cuda.parse_cuda_link``). What a snapshot records (``upgrade.host_state``) and what a
rollback compares with it (``upgrade.restore.cuda_link_restored``)."""

from __future__ import annotations

import shlex

from pyinfra.api import FactBase
from typing_extensions import override

from gpuhost.parsers.cuda import ALTERNATIVE_PATH, CudaLink, parse_cuda_link

CUDA_LINK = "/usr/local/cuda"
#: the alternatives group's admin file: Debian's update-alternatives, RHEL's alternatives
ADMIN_FILES = ("/var/lib/dpkg/alternatives/cuda", "/var/lib/alternatives/cuda")


def cuda_link_code(directory: str = "") -> str:
    """``kind=``/``link=``, ``alternative=``, ``mode=`` lines; with ``directory``, also
    ``exists=yes|no`` for it. Missing links and files print nothing."""
    admin = " ".join(ADMIN_FILES)
    code = (
        f"if [ -L {CUDA_LINK} ]; then echo \"link=$(readlink {CUDA_LINK})\"; "
        f"elif [ -e {CUDA_LINK} ]; then echo kind=other; else echo kind=absent; fi; "
        f"[ -L {ALTERNATIVE_PATH} ] && echo \"alternative=$(readlink {ALTERNATIVE_PATH})\"; "
        f"for f in {admin}; do [ -f \"$f\" ] && {{ echo \"mode=$(head -n 1 \"$f\")\"; break; }}; "
        "done; "
    )
    if directory:
        q = shlex.quote(directory)
        code += f"if [ -d {q} ]; then echo exists=yes; else echo exists=no; fi; "
    return code + "true"


class CudaDefaultLink(FactBase[CudaLink]):
    """``CudaLink``: ``/usr/local/cuda`` (link, absent, other), its alternative and mode, and
    with ``directory`` whether that directory exists."""

    @staticmethod
    @override
    def default() -> CudaLink:
        return CudaLink()

    @override
    def command(self, directory: str = "") -> str:
        return cuda_link_code(directory)

    @override
    def process(self, output: list[str]) -> CudaLink:
        return parse_cuda_link("\n".join(output))
