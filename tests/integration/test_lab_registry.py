"""The lab registry's count of the blackhole route's users (labs and test sessions), on a fake
route table: the route is added by the first user, stays while any lab or live session needs it,
and is removed with the last one only when one of them added it.

The lab range's addresses are not written here (only registry.LAB_NET), so these tests run
without root; tests/integration/test_lab_range_guard.py looks at the real route."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from lab import registry


class FakeRoutes:
    """The main table's blackhole route for the lab range, as ``ip route`` would change it."""

    def __init__(self, present: bool = False) -> None:
        self.present = present
        self.calls: list[list[str]] = []

    def run(self, cmd: Sequence[str], check: bool = True, **_: object):
        cmd = list(cmd)
        self.calls.append(cmd)
        if cmd[:3] == ["ip", "route", "add"]:
            assert not self.present, "route added twice"
            self.present = True
        elif cmd[:3] == ["ip", "route", "del"]:
            self.present = False
        return subprocess.CompletedProcess(cmd, 0, "", "")


@pytest.fixture
def routes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeRoutes:
    fake = FakeRoutes()
    monkeypatch.setattr(registry, "RUN_DIR", tmp_path / "run")
    monkeypatch.setattr(registry, "run", fake.run)
    monkeypatch.setattr(registry, "blackhole_present", lambda: fake.present)
    monkeypatch.setattr(registry, "_has_resources", lambda name: False)
    inotify = tmp_path / "max_user_instances"
    inotify.write_text("128\n")
    monkeypatch.setattr(registry, "INOTIFY", inotify)
    return fake


def test_a_session_keeps_the_route_a_lab_would_remove(routes: FakeRoutes, tmp_path: Path) -> None:
    registry.hold_route("pytest-a")
    assert routes.present
    registry.acquire("one", tmp_path / "one")
    registry.release("one")
    assert routes.present, "the lab removed the route the session still holds"
    registry.release_route("pytest-a")
    assert not routes.present


def test_a_lab_keeps_the_route_a_session_would_remove(routes: FakeRoutes, tmp_path: Path) -> None:
    registry.acquire("one", tmp_path / "one")
    registry.hold_route("pytest-a")
    registry.hold_route("pytest-b")
    registry.release_route("pytest-a")
    assert routes.present
    registry.release("one")
    assert routes.present, "removed while session pytest-b holds it"
    registry.release_route("pytest-b")
    assert not routes.present
    assert [c[2] for c in routes.calls if c[:2] == ["ip", "route"]] == ["add", "del"]


def test_a_route_nobody_here_added_is_never_removed(routes: FakeRoutes, tmp_path: Path) -> None:
    routes.present = True
    registry.hold_route("pytest-a")
    registry.acquire("one", tmp_path / "one")
    registry.release("one")
    registry.release_route("pytest-a")
    assert routes.present
    assert not [c for c in routes.calls if c[:2] == ["ip", "route"]]


def test_a_dead_session_does_not_keep_the_route(routes: FakeRoutes, tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    registry.hold_route("pytest-crashed", pid=gone.pid)
    registry.acquire("one", tmp_path / "one")
    registry.release("one")
    assert not routes.present
