"""Reboot-and-wait against a scripted host whose boot token changes (or never does), and the
pure driver-reboot decision used by ``gpuhost provision --reboot``."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gpuhost.errors import HostError
from gpuhost.inventory.loader import InventoryHost
from gpuhost.reboot import (
    BOOT_TOKEN_COMMAND,
    DRIVER_STATE_COMMAND,
    REBOOT_COMMAND,
    driver_reboot_reason,
    parse_driver_state,
    reboot_and_wait,
    reboot_reason,
)
from gpuhost.upgrade import reboot_hosts
from gpuhost.upgrade.remote import Result
from tests.upgrade.fakes import ScriptedRemote, ok


class RebootingHost(ScriptedRemote):
    """Boot token ``boot-N``; the reboot command bumps N unless ``stuck``; SSH is down for
    ``down_polls`` polls after it."""

    def __init__(self, stuck: bool = False, down_polls: int = 2) -> None:
        super().__init__("h1")
        self.boot = 1
        self.stuck = stuck
        self.down = 0
        self.down_polls = down_polls
        self.polls = 0
        self.on(BOOT_TOKEN_COMMAND, lambda _: ok(f"boot-{self.boot}\n100\n"))
        self.on(REBOOT_COMMAND, self._reboot)
        self.on("systemctl is-system-running --wait", ok())

    def _reboot(self, _: str):
        if not self.stuck:
            self.boot += 1
        self.down = self.down_polls
        return ok()

    def close(self) -> None:
        pass

    def wait_for_ssh(self, timeout_s: float, poll_s: float = 2.0) -> None:
        while self.down:
            self.down -= 1
            self.polls += 1
        if timeout_s <= 1.0 and self.stuck:
            raise HostError(self.host, "did not come back over SSH")


def test_reboot_waits_for_a_new_boot_token(monkeypatch) -> None:
    monkeypatch.setattr("gpuhost.reboot.time.sleep", lambda s: None)
    host = RebootingHost()
    before = reboot_and_wait(host, timeout_s=60, settle_s=0)
    assert before == "boot-1\n100"
    assert host.boot == 2 and host.polls == 2
    assert host.commands.count(REBOOT_COMMAND) == 1
    assert "is-system-running --wait" in host.commands[-1]


def test_a_host_that_answers_without_rebooting_is_an_error(monkeypatch) -> None:
    clock = iter(range(0, 10_000, 50))
    monkeypatch.setattr("gpuhost.reboot.time.sleep", lambda s: None)
    monkeypatch.setattr("gpuhost.reboot.time.monotonic", lambda: next(clock))
    host = RebootingHost(stuck=True, down_polls=0)
    with pytest.raises(HostError, match="did not reboot|did not come back"):
        reboot_and_wait(host, timeout_s=120, settle_s=0)


@pytest.mark.parametrize(
    ("stdout", "expected"),
    [
        ("535.309.01\n535.309.01-0+deb12u1\n", ("535.309.01", "535.309.01")),
        ("-\n535.261.03-1\n", (None, "535.261.03")),
        ("535.261.03\n-\n", ("535.261.03", None)),
        ("-\n-\n", (None, None)),
        ("", (None, None)),
        (
            '-\n-\n{"schema": 1, "profile": "p", "driver": {"version": "535.261.03"}}',
            (None, "535.261.03"),
        ),
        ("-\n-\ndebian12-nonfree-535\n", (None, None)),
    ],
)
def test_parse_driver_state(stdout: str, expected: tuple[str | None, str | None]) -> None:
    assert parse_driver_state(stdout) == expected


def test_reboot_reason() -> None:
    assert reboot_reason("535.309.01", "535.309.01") is None
    assert reboot_reason(None, None) is None
    assert reboot_reason("535.309.01", None) is None  # nothing installed: nothing to load
    assert "differs" in (reboot_reason("535.261.03", "535.309.01") or "")
    assert "no nvidia module loaded" in (reboot_reason(None, "535.309.01") or "")


def _driver_host(name: str, state: str) -> ScriptedRemote:
    host = ScriptedRemote(name).on(DRIVER_STATE_COMMAND, ok(state))
    host.close = lambda: None  # type: ignore[method-assign]
    return host


def test_driver_reboot_reason_reads_the_host() -> None:
    assert driver_reboot_reason(_driver_host("h1", "-\n535.309.01-1\n")) == (
        "driver 535.309.01 installed, no nvidia module loaded"
    )
    assert driver_reboot_reason(_driver_host("h1", "535.309.01\n535.309.01-1\n")) is None


def test_provision_without_reboot_names_the_hosts_that_need_one(monkeypatch) -> None:
    """``gpuhost provision`` without --reboot: one line per changed host whose new driver is not
    loaded (a fresh install, or a module older than the packages); nothing for the others, nor
    for a host that cannot be asked (the run's own line said how it went)."""
    states = {
        "fresh": "-\n535.309.01-1\n",
        "old-module": "535.261.03\n535.309.01-1\n",
        "current": "535.309.01\n535.309.01-1\n",
    }

    class Remote:
        def __init__(self, entry: InventoryHost) -> None:
            self.entry = entry
            self.host = entry.name

        def run(self, command: str, timeout: float | None = None) -> Result:
            if self.host == "gone":
                raise HostError(self.host, "unreachable over SSH")
            return _driver_host(self.host, states[self.host]).run(command, timeout)

        def close(self) -> None:
            pass

    names = ["fresh", "old-module", "current", "gone", "not-selected"]
    selection = SimpleNamespace(entries=lambda: [InventoryHost(n, {}, ()) for n in names])
    monkeypatch.setattr(reboot_hosts, "select", lambda path: selection)
    monkeypatch.setattr(reboot_hosts, "PyinfraRemote", Remote)
    lines: list[str] = []
    needed = reboot_hosts.report_reboot_needed(
        "inv.py", ["fresh", "old-module", "current", "gone"], lines.append
    )
    assert needed == 2
    assert sorted(lines) == [
        "fresh: reboot needed (driver 535.309.01 installed, no nvidia module loaded): the new "
        "driver is not in use until the host reboots (gpuhost provision --reboot reboots the "
        "hosts that need it)",
        "old-module: reboot needed (loaded module 535.261.03 differs from the installed driver "
        "535.309.01): the new driver is not in use until the host reboots (gpuhost provision "
        "--reboot reboots the hosts that need it)",
    ]
    assert reboot_hosts.report_reboot_needed("inv.py", [], lines.append) == 0
