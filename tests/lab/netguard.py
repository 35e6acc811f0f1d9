"""pytest plugin: no test traffic for the lab range 10.123.0.0/16 leaves this machine.

Before the first test runs, the session (the pytest-xdist controller, or the one process without
xdist) makes sure a blackhole route for the whole lab range exists: as root on Linux it adds one
when absent, whether a lab is up or not, and counts itself as a user of the route in the lab
registry (registry.hold_route); labs count there too, so neither removes the route while the
other needs it, and it is removed at the end only when this session or a lab added it.

A test "could address the range" when it is a ``lab`` test or its module's source names a
10.123.x address. Where no blackhole route exists (no root, not Linux, no ``ip``, or adding it
failed), those tests are skipped with the reason; every other test runs.
"""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path

import pytest

from . import registry
from .config import LAB_NET
from .system import LabError

#: a 10.123.x.y address or network in a test module's source
RANGE_RE = re.compile(r"\b10\.123\.\d{1,3}\b")
_HOLDER_KEY = pytest.StashKey[str]()
_PROBLEM_KEY = pytest.StashKey[str]()


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def route_present() -> bool:
    try:
        return registry.blackhole_present()
    except (LabError, ValueError):
        return False


def _hold(config: pytest.Config) -> None:
    if platform.system() != "Linux":
        config.stash[_PROBLEM_KEY] = f"this is {platform.system()}, not Linux"
        return
    if os.geteuid() != 0:
        config.stash[_PROBLEM_KEY] = "not root, so the suite cannot add it"
        return
    holder = f"pytest-{os.getpid()}"
    try:
        registry.hold_route(holder)
    except (LabError, OSError) as exc:
        config.stash[_PROBLEM_KEY] = f"adding it failed: {exc}"
        return
    config.stash[_HOLDER_KEY] = holder


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    # tryfirst: before pytest-xdist's controller starts its workers
    if not _is_worker(session.config):
        _hold(session.config)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    holder = session.config.stash.get(_HOLDER_KEY, None)
    if holder is not None:
        del session.config.stash[_HOLDER_KEY]
        try:
            registry.release_route(holder)
        except (LabError, OSError) as exc:  # the route stays: the safe side
            print(f"\nlab range guard: could not release the blackhole route: {exc}")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: object) -> None:
    """pytest-xdist: tell each worker why the controller has no route (for the skip reason)."""
    problem = node.config.stash.get(_PROBLEM_KEY, None)  # type: ignore[attr-defined]
    if problem is not None:
        node.workerinput["lab_range_problem"] = problem  # type: ignore[attr-defined]


def _addresses_range(item: pytest.Item, cache: dict[Path, bool]) -> bool:
    if "lab" in item.keywords:
        return True
    path = Path(str(item.path))
    if path not in cache:
        try:
            cache[path] = bool(RANGE_RE.search(path.read_text(encoding="utf-8")))
        except OSError:
            cache[path] = True
    return cache[path]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if route_present():
        return
    workerinput = getattr(config, "workerinput", {})
    why = config.stash.get(_PROBLEM_KEY, None) or workerinput.get(
        "lab_range_problem", "the session that started the workers did not add it"
    )
    skip = pytest.mark.skip(
        reason=f"could address the lab range {LAB_NET} and there is no blackhole route for it "
        f"({why}): not run, so no test traffic leaves this machine; run as root on Linux"
    )
    cache: dict[Path, bool] = {}
    for item in items:
        if _addresses_range(item, cache):
            item.add_marker(skip)
