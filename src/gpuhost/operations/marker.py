"""The provision marker ``/etc/gpuhost/profile``: which profile a host was provisioned with and
the versions it resolved to (JSON; format in docs/provision.md, read by ``gpuhost audit``)."""

from __future__ import annotations

import json
from collections.abc import Generator
from typing import Any

from pyinfra import host
from pyinfra.api import operation

from gpuhost.operations._files import put_text
from gpuhost.parsers.profile_marker import MARKER_PATH

__all__ = ["MARKER_PATH", "render_marker", "written"]


def render_marker(marker: dict[str, Any]) -> str:
    return json.dumps(marker, indent=2, sort_keys=True) + "\n"


@operation()
def written(marker: dict[str, Any], path: str = MARKER_PATH) -> Generator:
    """Write the marker JSON when its content differs.

    + marker: ``DesiredState.to_marker()``
    """
    commands = list(put_text(path, render_marker(marker)))
    if not commands:
        host.noop(f"{path} up to date")
    yield from commands
