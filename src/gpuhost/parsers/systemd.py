"""systemd unit states from ONE ``systemctl show`` for several units (pure; no I/O).

.. code:: python

    show_command(["docker.service", "containerd.service"])
    # 'systemctl show --no-pager -p Id,LoadState,ActiveState,SubState,UnitFileState
    #  docker.service containerd.service'
    parse_systemctl_show(output)["docker.service"].active   # "active", "inactive", "failed", ...

``systemctl show`` prints one block of ``Key=Value`` lines per unit, in the order the units were
named, blocks separated by an empty line; properties come in systemd's own order, not ``-p``'s.
A unit that does not exist still gets a block (``LoadState=not-found``, ``ActiveState=inactive``,
empty ``UnitFileState``). Without systemd as PID 1 it prints nothing (and fails): no units.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from dataclasses import dataclass

from gpuhost.errors import ParseError

UNIT_STATE_PROPERTIES = ("Id", "LoadState", "ActiveState", "SubState", "UnitFileState")


@dataclass(frozen=True)
class UnitState:
    """One unit's state; each field is None when systemd left it empty."""

    id: str
    load: str | None = None  # loaded, not-found, masked, bad-setting, error
    active: str | None = None  # what ``systemctl is-active`` prints: active, inactive, failed, ...
    sub: str | None = None  # running, exited, dead, failed, ...
    unit_file: str | None = None  # what ``systemctl is-enabled`` prints: enabled, disabled, ...


def show_command(units: Iterable[str]) -> str:
    """The one command whose output :func:`parse_systemctl_show` reads."""
    names = " ".join(shlex.quote(unit) for unit in units)
    return f"systemctl show --no-pager -p {','.join(UNIT_STATE_PROPERTIES)} {names}"


def parse_systemctl_show(text: str) -> dict[str, UnitState]:
    """``systemctl show -p Id,...`` output for several units -> {unit id: UnitState}."""
    states: dict[str, UnitState] = {}
    for block in _blocks(text):
        unit_id = block.get("Id")
        if not unit_id:
            raise ParseError(f"systemctl show: a unit's properties without its Id: {block}")
        states[unit_id] = UnitState(
            id=unit_id,
            load=block.get("LoadState") or None,
            active=block.get("ActiveState") or None,
            sub=block.get("SubState") or None,
            unit_file=block.get("UnitFileState") or None,
        )
    return states


def _blocks(text: str) -> list[dict[str, str]]:
    blocks: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            if current:
                blocks.append(current)
            current = {}
            continue
        key, sep, value = line.partition("=")
        if not sep or not key or " " in key:
            raise ParseError(f"systemctl show: line {number}: expected Key=Value, got {line!r}")
        current[key] = value.strip()
    if current:
        blocks.append(current)
    return blocks
