"""The sockets services listen on right now (``ss -Hltnup``), for the firewall's lockout guard."""

from __future__ import annotations

from pyinfra.api import FactBase
from typing_extensions import override

from gpuhost.parsers.listening import Listener, parse_ss_listening

NO_SS = "##GPUHOST no-ss"


class ListeningSockets(FactBase["list[Listener] | None"]):
    """Listening TCP and bound UDP sockets with their processes (run as root to see them all);
    None when ``ss`` (iproute2) is missing:

    .. code:: python

        [Listener(proto="tcp", address="0.0.0.0", port=6818, processes=("slurmd",))]
    """

    @override
    def command(self) -> str:
        return f"if command -v ss >/dev/null 2>&1; then ss -Hltnup; else echo '{NO_SS}'; fi"

    @override
    def process(self, output: list[str]) -> list[Listener] | None:
        if output and output[0].strip() == NO_SS:
            return None
        return parse_ss_listening("\n".join(output))
