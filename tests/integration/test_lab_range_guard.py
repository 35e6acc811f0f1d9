"""The suite's safety net (tests/lab/netguard.py): while tests run, the lab range 10.123.0.0/16
is blackholed, whether a lab is up or not, so nothing a test sends there leaves the machine.

10.123.255.7 lies outside every lab's /24 (labs use 10.123.1-250.0/24). This module names lab
addresses, so without the route (not root) the guard skips it with the reason; the last test
shows that skip on an inner session."""

from __future__ import annotations

import socket
import subprocess
import time

import pytest
from lab import netguard

OUTSIDE_ANY_LAB = "10.123.255.7"


def test_the_lab_range_is_blackholed_during_the_session() -> None:
    proc = subprocess.run(["ip", "route", "get", OUTSIDE_ANY_LAB],
                          capture_output=True, text=True, check=False)
    # a blackhole route: `ip route get` answers EINVAL ("RTNETLINK answers: Invalid argument")
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0 or said.startswith(("blackhole", "unreachable", "prohibit")), said
    assert "via" not in said and "dev" not in said, said


def test_a_connection_into_the_range_fails_at_once() -> None:
    started = time.monotonic()
    with socket.socket() as sock, pytest.raises(OSError):
        sock.settimeout(10)
        sock.connect((OUTSIDE_ANY_LAB, 22))
    assert time.monotonic() - started < 1


def test_without_the_route_tests_that_name_the_range_are_skipped(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_root(config: pytest.Config) -> None:
        config.stash[netguard._PROBLEM_KEY] = "not root, so the suite cannot add it"

    monkeypatch.setattr(netguard, "route_present", lambda: False)
    monkeypatch.setattr(netguard, "_hold", no_root)
    pytester.makepyfile(
        test_lab_address="def test_ssh():\n    assert '10.123.4.11'\n",
        test_local="def test_local():\n    assert '127.0.0.1'\n",
    )
    result = pytester.runpytest_inprocess("-p", "lab.netguard", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        ["SKIPPED*test_lab_address.py*could address the lab range 10.123.0.0/16 and there is no "
         "blackhole route for it (not root, so the suite cannot add it)*"]
    )
