"""Machine-wide state shared by all labs, kept in one lock-protected JSON file.

* each lab name gets its own /24 inside 10.123.0.0/16, derived from a hash of the name and
  recorded here so that two names never share a subnet;
* the blackhole route for 10.123.0.0/16 is added by the first lab or test session that needs it
  and removed when the last of them is gone (only when one of them added it): labs count through
  ``labs``, pytest sessions (which hold it whether a lab is up or not) through ``route_holders``;
* ``fs.inotify.max_user_instances`` is raised by the first lab and restored by the last one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .config import LAB_NET, RUN_DIR, LabNames
from .system import LabError, cgroup_exists, file_lock, link_exists, netns_list, pid_alive, run

INOTIFY = Path("/proc/sys/fs/inotify/max_user_instances")
INOTIFY_WANTED = 8192  # every booted host's systemd needs inotify instances; 128 stops near 21
ROUTE_METRIC = "4000"
STALE_AFTER_S = 600


@contextlib.contextmanager
def _locked() -> Iterator[dict[str, Any]]:
    path = RUN_DIR / "registry.json"
    with file_lock(RUN_DIR / "registry.lock", "lab registry", timeout=120):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            data = {}
        data.setdefault("labs", {})
        yield data
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        tmp.rename(path)


def _has_resources(name: str) -> bool:
    names = LabNames(name)
    return bool(
        cgroup_exists(names.cgroup)
        or link_exists(names.bridge)
        or any(ns.startswith(names.netns_prefix) for ns in netns_list())
    )


def blackhole_present() -> bool:
    """True when the main table has a blackhole route for the whole lab range (no root needed)."""
    out = run(["ip", "-j", "route", "show", "exact", LAB_NET, "table", "main"]).stdout
    return any(r.get("type") == "blackhole" for r in json.loads(out or "[]"))


def _add_route(data: dict[str, Any]) -> None:
    if not blackhole_present():
        run(["ip", "route", "add", "blackhole", LAB_NET, "metric", ROUTE_METRIC])
        data["route_added"] = True


def _route_users(data: dict[str, Any]) -> bool:
    """Whether a lab or a live test session still needs the route (dead sessions are dropped)."""
    holders: dict[str, int] = data.setdefault("route_holders", {})
    for holder, pid in list(holders.items()):
        if not pid_alive(int(pid)):
            del holders[holder]
    return bool(data["labs"] or holders)


def _drop_route(data: dict[str, Any]) -> None:
    """Remove the route when nobody needs it any more and one of us added it."""
    if _route_users(data):
        return
    if data.pop("route_added", False) and blackhole_present():
        run(["ip", "route", "del", "blackhole", LAB_NET, "metric", ROUTE_METRIC], check=False)


def hold_route(holder: str, pid: int | None = None) -> None:
    """Make sure the blackhole route exists and count ``holder`` (process ``pid``) as its user."""
    with _locked() as data:
        _add_route(data)
        data.setdefault("route_holders", {})[holder] = os.getpid() if pid is None else pid


def release_route(holder: str) -> None:
    """``holder`` no longer needs the route; it goes when no lab and no other holder needs it."""
    with _locked() as data:
        data.setdefault("route_holders", {}).pop(holder, None)
        _prune(data)
        _drop_route(data)


def _prune(data: dict[str, Any]) -> None:
    """Forget labs that left nothing on this machine (e.g. before a reboot)."""
    now = time.time()
    for name, entry in list(data["labs"].items()):
        if now - entry.get("since", 0) > STALE_AFTER_S and not _has_resources(name):
            del data["labs"][name]


def acquire(name: str, state_dir: Path) -> int:
    """Register lab ``name`` and return its subnet index (10.123.<index>.0/24)."""
    with _locked() as data:
        labs: dict[str, Any] = data["labs"]
        _prune(data)
        entry = labs.get(name)
        if entry and entry["state_dir"] != str(state_dir):
            other = Path(entry["state_dir"])
            if (other / "lab.json").exists() and _has_resources(name):
                raise LabError(
                    f"lab name {name!r} is in use by {other}; choose another name with "
                    "GPUHOST_LAB=<name> or --name"
                )
            entry = None
        if entry is None:
            used = {e["index"] for e in labs.values()}
            start = int(hashlib.sha256(name.encode()).hexdigest(), 16) % 250
            free = [(start + k) % 250 + 1 for k in range(250)]
            index = next((i for i in free if i not in used), None)
            if index is None:
                raise LabError("all 250 lab subnets in 10.123.0.0/16 are taken; run 'lab down'")
            entry = {"index": index}
        entry.update(state_dir=str(state_dir), since=time.time())
        labs[name] = entry
        _add_route(data)
        current = int(INOTIFY.read_text())
        if current < INOTIFY_WANTED:
            data.setdefault("inotify_saved", current)
            INOTIFY.write_text(f"{INOTIFY_WANTED}\n")
        return int(entry["index"])


def owner(name: str) -> Path | None:
    """State dir of the checkout that registered ``name``, if that lab still has its state."""
    with _locked() as data:
        entry = data["labs"].get(name)
    if entry is None:
        return None
    path = Path(entry["state_dir"])
    return path if (path / "lab.json").exists() else None


def lookup(name: str) -> int | None:
    with _locked() as data:
        entry = data["labs"].get(name)
        return None if entry is None else int(entry["index"])


def release(name: str) -> None:
    """Unregister ``name``; with the last lab gone, remove the route and restore the sysctl."""
    with _locked() as data:
        data["labs"].pop(name, None)
        _prune(data)
        _drop_route(data)
        if data["labs"]:
            return
        saved = data.pop("inotify_saved", None)
        if saved is not None:
            INOTIFY.write_text(f"{saved}\n")
