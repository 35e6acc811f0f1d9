"""The RDMA error counters kept between runs: one small JSON file per host under the state
folder (``<state>/fabric/<host>.json``), written atomically, read only when it is a regular file
this user (or root) owns and no one else may write. A damaged or foreign file counts as no
baseline (the run records a new one), never as an error of the run.
"""

from __future__ import annotations

import json
from pathlib import Path

from gpuhost.errors import ConfigError
from gpuhost.locks import lock_file_name
from gpuhost.safeio import read_regular, write_atomic
from gpuhost.statedir import checked_folder

FOLDER = "fabric"
MAX_BYTES = 256 * 1024

Counters = dict[str, dict[str, int]]


class CounterStore:
    """``load(host)`` the previous counters (None: no usable baseline); ``save(host, counters)``."""

    def __init__(self, state_dir: Path) -> None:
        self.folder = state_dir / FOLDER

    def path(self, host: str) -> Path:
        return self.folder / (lock_file_name(host).removesuffix(".lock") + ".json")

    def load(self, host: str) -> Counters | None:
        path = self.path(host)
        if not path.exists():
            return None
        try:
            data = json.loads(read_regular(
                path, "fabric counters", follow=False, owned=True, limit=MAX_BYTES
            ))
        except (ConfigError, ValueError, RecursionError):
            return None
        return _valid(data)

    def save(self, host: str, counters: Counters) -> None:
        """Record the counters; a state folder that cannot be written is a ConfigError."""
        text = json.dumps({"counters": counters}, sort_keys=True).encode()
        if len(text) > MAX_BYTES:
            return
        checked_folder(self.folder, create=True)
        try:
            write_atomic(self.path(host), text, mode=0o600)
        except OSError as exc:
            raise ConfigError(
                f"{self.path(host)}: cannot record the fabric counters ({exc.strerror or exc})"
            ) from None


def _valid(data: object) -> Counters | None:
    counters = data.get("counters") if isinstance(data, dict) else None
    if not isinstance(counters, dict):
        return None
    out: Counters = {}
    for port, values in counters.items():
        if not isinstance(port, str) or not isinstance(values, dict):
            return None
        if not all(isinstance(k, str) and type(v) is int for k, v in values.items()):
            return None
        out[port] = dict(values)
    return out
