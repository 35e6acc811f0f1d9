"""The scripted remote is strict: a command no rule answers fails the test."""

from __future__ import annotations

import pytest

from upgrade.fakes import ScriptedRemote, UnscriptedCommand, ok


def test_unscripted_command_fails_and_is_recorded() -> None:
    remote = ScriptedRemote("h7").on("systemctl stop x.service", ok())
    assert remote.run("systemctl stop x.service").ok
    with pytest.raises(UnscriptedCommand, match=r"h7: unscripted command: 'systemctl stpo x'"):
        remote.run("systemctl stpo x")
    assert remote.commands == ["systemctl stop x.service", "systemctl stpo x"]
