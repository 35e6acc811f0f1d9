"""Reboot the hosts of an inventory where the loaded nvidia module is not the installed driver
(``gpuhost provision --reboot``): ``gpuhost.reboot.reboot_for_driver`` on one connection per host.

It lives in ``upgrade/`` because it opens the upgrade's connections (``upgrade.connect``);
``gpuhost.reboot`` itself only needs a ``Rebootable`` and imports nothing of ``upgrade/``.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from gpuhost.deploy_runner import HostOutcome
from gpuhost.errors import GpuhostError
from gpuhost.inventory.loader import InventoryHost, select
from gpuhost.reboot import driver_reboot_reason, reboot_for_driver
from gpuhost.upgrade.connect import PyinfraRemote


def report_reboot_needed(inventory: str, names: list[str], echo: Callable[[str], None]) -> int:
    """After a provision run without ``--reboot``: one line through ``echo`` for each of the
    hosts ``names`` whose loaded nvidia module is not the installed driver (nothing for the
    others, nor for a host that cannot be asked now: the run's own lines said how it went).
    Returns how many hosts need a reboot."""
    entries = [e for e in select(inventory).entries() if e.name in set(names)]

    def one(entry: InventoryHost) -> bool:
        remote = PyinfraRemote(entry)
        try:
            reason = driver_reboot_reason(remote)
        except GpuhostError:
            reason = None
        finally:
            remote.close()
        if reason is not None:
            echo(
                f"{entry.name}: reboot needed ({reason}): the new driver is not in use until "
                "the host reboots (gpuhost provision --reboot reboots the hosts that need it)"
            )
        return reason is not None

    if not entries:
        return 0
    with ThreadPoolExecutor(max_workers=min(32, len(entries))) as pool:
        return sum(1 for needed in pool.map(one, entries) if needed)


def reboot_fleet(
    inventory: str, names: list[str], timeout_s: float, echo: Callable[[str], None]
) -> int:
    """``reboot_for_driver`` on the hosts ``names`` of a pyinfra inventory, in parallel; one line
    per host through ``echo``. Returns how many hosts are not right after it (unreachable, did
    not come back, or the module still differs)."""
    entries = [e for e in select(inventory).entries() if e.name in set(names)]

    def one(entry: InventoryHost) -> bool:
        remote = PyinfraRemote(entry)
        try:
            ok, what = reboot_for_driver(remote, timeout_s)
        except GpuhostError as exc:
            ok, what = False, str(exc)
        finally:
            remote.close()
        echo(f"{entry.name}: {what}")
        return ok

    if not entries:
        return 0
    with ThreadPoolExecutor(max_workers=min(32, len(entries))) as pool:
        return sum(1 for ok in pool.map(one, entries) if not ok)


def after_provision(
    inventory: str,
    outcomes: list[HostOutcome],
    reboot: bool,
    timeout_s: float,
    echo: Callable[[str], None],
    note: Callable[[str], None],
) -> int:
    """After a provision run: with ``reboot``, reboot the hosts that came out ok and need it
    (lines through ``echo``); else a note through ``note`` for each host this run changed that
    needs a reboot (only those: a converged re-run stays one fact-gathering pass). Returns how
    many hosts are not right after a reboot (0 without one)."""
    if reboot:
        done = [o.name for o in outcomes if o.status == "ok"]
        return reboot_fleet(inventory, done, timeout_s, echo)
    changed = [o.name for o in outcomes if o.status == "ok" and o.changed]
    report_reboot_needed(inventory, changed, note)
    return 0
