"""Stopping GPU users: known units, other /dev/nvidia* holders only when told."""

from __future__ import annotations

import pytest

from gpuhost.errors import HostError
from gpuhost.upgrade.stop_users import (
    ACTIVE_UNITS_COMMAND,
    HOLDERS_COMMAND,
    Holder,
    parse_holders,
    parse_units,
    stop_gpu_users,
)
from upgrade.fakes import ScriptedRemote, ok


def test_parsers():
    assert parse_holders("1234 python3\n99 nv-hostengine\n\njunk\n") == [
        Holder(1234, "python3"),
        Holder(99, "nv-hostengine"),
    ]
    assert parse_units("nvidia-persistenced.service\nsshd.service\n") == [
        "nvidia-persistenced.service"
    ]


def test_known_units_are_stopped_and_recorded():
    remote = (
        ScriptedRemote()
        .on(ACTIVE_UNITS_COMMAND, ok("nvidia-persistenced.service\n"))
        .on("systemctl stop nvidia-persistenced.service", ok())
        .on(HOLDERS_COMMAND, ok(""))
    )
    data = stop_gpu_users(remote, stop_processes=False)
    assert data["stopped_units"] == ["nvidia-persistenced.service"]
    assert "systemctl stop nvidia-persistenced.service" in remote.commands


def test_other_holders_fail_the_step_and_restart_what_was_stopped():
    remote = (
        ScriptedRemote()
        .on(ACTIVE_UNITS_COMMAND, ok("nvidia-dcgm.service\n"))
        .on("systemctl stop nvidia-dcgm.service", ok())
        .on(HOLDERS_COMMAND, ok("4242 python3\n"))
        .on("systemctl start nvidia-dcgm.service", ok())
    )
    with pytest.raises(HostError, match=r"python3\[4242\].*--stop-gpu-processes"):
        stop_gpu_users(remote, stop_processes=False)
    assert remote.commands[-1] == "systemctl start nvidia-dcgm.service"
    assert not any(c.startswith("kill") for c in remote.commands)


def test_holders_are_killed_when_told():
    answers = iter(["4242 python3\n", ""])
    remote = (
        ScriptedRemote()
        .on(ACTIVE_UNITS_COMMAND, ok(""))
        .on(HOLDERS_COMMAND, lambda c: ok(next(answers)))
        .on("kill -TERM 4242 ", ok())
    )
    data = stop_gpu_users(remote, stop_processes=True)
    assert data["stopped_processes"] == ["python3[4242]"]
    assert any(c.startswith("kill -TERM 4242") for c in remote.commands)
