"""The health tier's memory between runs: ``<state folder>/health/streaks.json``.

The file decides whether a node is drained, so it is state as the rest of the state folder
(``gpuhost.statedir``, ``gpuhost.safeio``): its folder is checked (owned by this user or root,
writable by no one else, made 0700), it is read without following a symbolic link and only
when it is a regular file this user or root owns and no one else may write, and it is replaced
atomically (mode 0600). It is small (``MAX_BYTES``; at most ``MAX_FAULTS`` fault ids). A file
that is damaged (not JSON, wrong shape, too large, unsafe) is one line on stderr and is treated
as empty: the counts start afresh and gpuhost's own drain is lifted only on a run without any
fault (``health_decide``). Never a traceback.

.. code:: json

    {"schema": 1, "streaks": {"gpu.ecc-uncorrectable": 2}, "drained_for": ["gpu.lost"],
     "acknowledged": ["gpu.xid.46"]}
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from gpuhost.checks_support.health_decide import MAX_FAULTS, Memory
from gpuhost.errors import ConfigError
from gpuhost.safeio import read_regular, write_atomic
from gpuhost.statedir import checked_folder

FOLDER = "health"
NAME = "streaks.json"
SCHEMA = 1
MAX_BYTES = 64 * 1024
MAX_ID = 200  # characters of one fault id


def memory_path(state_dir: Path) -> Path:
    return state_dir / FOLDER / NAME


def parse_memory(text: str) -> Memory:
    """The file's text → Memory; ValueError (one line) when it is damaged."""
    try:
        data: Any = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ValueError(f"expected an object with schema {SCHEMA}")
    streaks = data.get("streaks")
    if (
        not isinstance(streaks, dict)
        or len(streaks) > MAX_FAULTS
        or not all(
            isinstance(k, str)
            and 0 < len(k) <= MAX_ID
            and isinstance(v, int)
            and not isinstance(v, bool)
            and v >= 1
            for k, v in streaks.items()
        )
    ):
        raise ValueError(f"streaks: expected at most {MAX_FAULTS} fault ids with counts >= 1")
    drained = data.get("drained_for")
    if drained is not None and not _ids(drained):
        raise ValueError("drained_for: expected a list of fault ids or null")
    ack = data.get("acknowledged", [])
    if not _ids(ack):
        raise ValueError("acknowledged: expected a list of fault ids")
    return Memory(dict(streaks), None if drained is None else tuple(drained), tuple(ack))


def _ids(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) <= MAX_FAULTS
        and all(isinstance(i, str) and 0 < len(i) <= MAX_ID for i in value)
    )


def memory_json(memory: Memory) -> str:
    drained = None if memory.drained_for is None else list(memory.drained_for)
    data = {
        "schema": SCHEMA,
        "streaks": memory.streaks,
        "drained_for": drained,
        "acknowledged": list(memory.acknowledged),
    }
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def load_memory(state_dir: Path) -> tuple[Memory, str | None]:
    """The memory of the last run (empty when there is none) and, when the file was damaged or
    unsafe, the one line saying so (the memory is then empty, with the drain record unknown).
    The folder's own safety is checked (ConfigError: an unsafe state folder is refused)."""
    path = memory_path(state_dir)
    checked_folder(path.parent, create=True)
    if not os.path.lexists(path):  # a drain from before the file existed: its faults are unknown
        return Memory(drained_for=None), None
    try:
        raw = read_regular(path, "the health state", follow=False, owned=True, limit=MAX_BYTES)
        return parse_memory(raw.decode("utf-8")), None
    except ConfigError as exc:
        return _damaged(path, str(exc).removeprefix(f"{path}: "))
    except (UnicodeDecodeError, ValueError) as exc:
        return _damaged(path, str(exc))


def _damaged(path: Path, why: str) -> tuple[Memory, str]:
    line = f"{path}: health state unusable ({why}); counting consecutive runs afresh"
    return Memory(drained_for=None), " ".join(line.split())


def save_memory(state_dir: Path, memory: Memory) -> None:
    """Replace the file atomically (mode 0600). ConfigError (one line) when it cannot be."""
    path = memory_path(state_dir)
    try:
        write_atomic(path, memory_json(memory).encode("utf-8"), mode=0o600)
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot write the health state ({exc.strerror or exc}); "
            "give --state-dir a folder you can write"
        ) from None
