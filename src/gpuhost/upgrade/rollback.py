"""``gpuhost rollback``: hosts put back as a snapshot recorded them, ``parallel`` at a time.

Per host: restore (``HostSteps.restore``: packages from the on-host cache, files, holds), a
reboot unless ``reboot`` is False, then validation against the snapshot; one line per host as it
finishes, a status line on a terminal. Every snapshot is found and read before any host is
touched (``RollbackPlan``). The first SIGINT/SIGTERM cuts off what runs on the hosts and starts
no other host; ``signals.Stopped`` then ends the command (a rollback run again finishes it: every
part of it compares with the snapshot first).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuhost.errors import ConfigError, GpuhostError
from gpuhost.inventory.loader import InventoryHost
from gpuhost.signals import StopOnSignals
from gpuhost.terminal import FleetProgress
from gpuhost.upgrade.orchestrate import HostContext, StepFailed, UpgradeOptions
from gpuhost.upgrade.snapshot import SnapshotRef, SnapshotStore


@dataclass(frozen=True)
class RollbackPlan:
    """The hosts and, per host, the snapshot it goes back to (ref and document)."""

    hosts: list[InventoryHost]
    store: SnapshotStore
    refs: dict[str, SnapshotRef]
    docs: dict[str, dict[str, Any]]

    def lines(self) -> list[str]:
        return [
            f"{h.name}: back to snapshot {self.refs[h.name].id} ({self.refs[h.name].path})"
            for h in self.hosts
        ]


def plan_rollback(
    hosts: list[InventoryHost], snapshots: Path, snapshot_id: str | None
) -> RollbackPlan:
    """Each host's snapshot (``snapshot_id``, else its latest), found and read; ConfigError
    naming the first host without one."""
    if snapshot_id is not None and not snapshot_id.strip():  # a script's empty variable
        raise ConfigError(
            f"--snapshot {snapshot_id!r}: expected a snapshot id (gpuhost snapshot list); "
            "leave the option out for each host's latest"
        )
    store = SnapshotStore(snapshots)
    refs, docs = {}, {}
    for entry in hosts:
        found = store.find(entry.name, snapshot_id) if snapshot_id else store.latest(entry.name)
        if found is None:
            raise ConfigError(f"{entry.name}: no snapshot under {store.root / entry.name}")
        refs[entry.name], docs[entry.name] = found, store.load(found)
    return RollbackPlan(hosts, store, refs, docs)


def run_rollback(plan: RollbackPlan, reboot: bool, reboot_timeout_s: float, parallel: int) -> int:
    """Roll the plan's hosts back; how many failed. ``signals.Stopped`` when a signal stopped it."""
    from gpuhost.upgrade.hoststeps import HostSteps, StepSettings

    settings = StepSettings("", plan.store.root, reboot_timeout_s=reboot_timeout_s)
    steps = HostSteps({h.name: h for h in plan.hosts}, settings)
    fleet = FleetProgress(len(plan.hosts), "rollback")

    def one(entry: InventoryHost) -> bool:
        ref, doc = plan.refs[entry.name], plan.docs[entry.name]
        ctx = HostContext(entry.name, "-", UpgradeOptions(), {"snapshot_path": str(ref.path)})
        try:
            result = steps.restore(entry.name, doc)
            fleet.line(f"{entry.name}: restored {ref.id}: {result['summary']}")
            if reboot:
                steps.restart(ctx)
                fleet.line(f"{entry.name}: rebooted")
            summary = steps.validate_against(entry.name, doc)["summary"]
            fleet.host_done(f"{entry.name}: {summary}", failing=False)
            return True
        except (GpuhostError, StepFailed) as exc:
            if signals.received is not None:
                line = f"{entry.name}: rollback stopped: run it again to finish it"
            else:
                line = f"{entry.name}: rollback failed: {exc}"
            fleet.host_done(line, failing=True)
            return False
        finally:
            steps.remote(entry.name).close()

    fleet.start()
    try:
        with (
            StopOnSignals(steps.interrupt, "rollback") as signals,
            ThreadPoolExecutor(max_workers=min(parallel, len(plan.hosts))) as pool,
        ):
            failed = sum(1 for ok in pool.map(one, plan.hosts) if not ok)
    finally:
        fleet.close()
    if signals.received is not None:
        raise signals.stopped(
            f"gpuhost: rollback stopped by {signals.signal_name}; run the same command again to "
            "finish it"
        )
    return failed
