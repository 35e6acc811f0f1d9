"""Root conftest: registers the lab's pytest plugins and skips `lab` tests where a lab cannot run.

lab.netguard makes sure the lab range 10.123.0.0/16 is blackholed before any test runs (or skips
the tests that could address it, with the reason).

Lab tests need root on Linux with systemd-nspawn (package systemd-container); elsewhere they are
skipped with that reason and the offline suite runs alone (also: pytest -m "not lab").
"""

from __future__ import annotations

import atexit
import os
import platform
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

pytest_plugins = ["lab.plugin", "lab.netguard", "pytester"]



def _run_folder(prefix: str) -> str:
    """A folder of this pytest process alone, removed when the process exits.

    Every pytest process (the xdist controller and each worker, a pytest a test starts) imports
    this file and makes its own; without the removal each run left two folders in /tmp. Only the
    process that made it removes it: a child forked from this one (its atexit handlers copied)
    leaves it alone."""
    folder = tempfile.mkdtemp(prefix=prefix)
    owner = os.getpid()

    def remove() -> None:
        if os.getpid() == owner:
            shutil.rmtree(folder, ignore_errors=True)

    atexit.register(remove)
    return folder


# The tests judge with the shipped data, never with an overlay `gpuhost data update` left in this
# machine's data directory (/var/lib/gpuhost/data for root): an empty folder of this run's own,
# inherited by every gpuhost the tests start. Tests of the overlay set their own.
os.environ["GPUHOST_DATA_DIR"] = _run_folder("gpuhost-test-data-")
# Likewise the state folder a command uses without --state-dir (locks, journals, snapshots): this
# run's own, never the user's ~/.local/state/gpuhost.
os.environ["GPUHOST_STATE_DIR"] = _run_folder("gpuhost-test-state-")


def _lab_unavailable() -> str | None:
    if platform.system() != "Linux":
        return f"lab tests need Linux; this is {platform.system()}"
    if os.geteuid() != 0:
        return "lab tests need root (systemd-nspawn, network namespaces, mounts)"
    if shutil.which("systemd-nspawn") is None:
        return "lab tests need systemd-nspawn (package systemd-container; scripts/test installs it)"
    return None


def _keep_gevent_hub_alive() -> None:
    """In a pytest-xdist worker, keep gevent's hub of the main thread busy with a timer.

    gpuhost imports pyinfra_cli, which monkey-patches the stdlib for gevent (as in production),
    after execnet has started the worker's receiver thread. From then on the main thread's waits
    for that thread (the next tests to run, shutdown) block on gevent locks that a foreign thread
    releases; with no other greenlet gevent's hub raises LoopExit ("This operation would block
    forever") and the worker dies. A greenlet that only sleeps keeps the hub running, so the
    cross-thread wake-up arrives. It never runs while a test holds the main greenlet.
    """
    import gevent

    def tick() -> None:
        while True:
            gevent.sleep(0.05)

    gevent.spawn(tick)


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        _keep_gevent_hub_alive()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    lab_items = [item for item in items if "lab" in item.keywords]
    if os.environ.get("GPUHOST_TEST_REVERSE") == "1":
        # On demand (docs/testing.md, "Every test passes alone"): the selection in reverse
        # order, modules and the tests within them, so that a test relying on what an earlier
        # test (or module) left behind fails instead of passing by luck.
        items.reverse()
    if hasattr(config, "workerinput"):
        # pytest-xdist worker (scripts/test: --dist loadfile --no-loadscope-reorder, a module
        # whole on one worker with that worker's lab): lab modules first, so both workers' labs
        # run from the start and the short offline modules fill in at the end. Every worker
        # sorts alike (a stable sort), so their collections stay identical.
        items.sort(key=lambda item: "lab" not in item.keywords)
    reason = _lab_unavailable()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in lab_items:
        item.add_marker(skip)


@pytest.fixture(autouse=True)
def _pyinfra_context_restored() -> Iterator[None]:
    """pyinfra's ``ctx_*.use()`` does not restore the previous value when its body raises (no
    ``finally``), so a test whose operation raised left pyinfra's current host set for every later
    test of that process; which test came next depended on xdist's scheduling
    (test_current_host_and_the_prepare_stage failed in one CI order). Each test ends with the
    contexts it started with."""
    from pyinfra.context import ctx_config, ctx_host, ctx_inventory, ctx_state

    contexts = (ctx_state, ctx_inventory, ctx_config, ctx_host)
    before = [each.get() for each in contexts]
    yield
    for each, value in zip(contexts, before, strict=True):
        each.set(value)


@pytest.fixture(autouse=True)
def _secrets_forgotten() -> Iterator[None]:
    """The secret values a test's inventory registered (gpuhost.redaction) are hidden in that
    test's output only, not in a later test's of the same process."""
    from gpuhost.redaction import forget_secrets

    yield
    forget_secrets()
