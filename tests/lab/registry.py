"""Machine-wide state shared by all labs, kept in one lock-protected JSON file.

* each lab name gets its own /24 inside 10.123.0.0/16, derived from a hash of the name and
  recorded here so that two names never share a subnet;
* the blackhole route for 10.123.0.0/16 is added by the first lab and removed with the last one
  (only when a lab added it);
* ``fs.inotify.max_user_instances`` is raised by the first lab and restored by the last one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .config import LAB_NET, RUN_DIR, LabNames
from .system import LabError, cgroup_exists, file_lock, link_exists, netns_list, run

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


def _blackhole_present() -> bool:
    out = run(["ip", "-j", "route", "show", "exact", LAB_NET, "table", "main"]).stdout
    return any(r.get("type") == "blackhole" for r in json.loads(out or "[]"))


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
        if not _blackhole_present():
            run(["ip", "route", "add", "blackhole", LAB_NET, "metric", ROUTE_METRIC])
            data["route_added"] = True
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
        if data["labs"]:
            return
        if data.pop("route_added", False) and _blackhole_present():
            run(["ip", "route", "del", "blackhole", LAB_NET, "metric", ROUTE_METRIC], check=False)
        saved = data.pop("inotify_saved", None)
        if saved is not None:
            INOTIFY.write_text(f"{saved}\n")
