"""``gpuhost snapshot take`` and ``prune`` host by host, one line per host (one failing host never
stops the others).

``take_snapshots``: a snapshot of each host (packages, files, holds, the on-host package cache).
``prune_hosts``: remove the on-host package caches of older snapshots. A cache whose snapshot the
state folder does not know is kept, and so is the one of a snapshot an unfinished upgrade run still
needs for its rollback (``snapshots_in_use``); which caches go is ``package_cache.prune_plan``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from gpuhost.errors import GpuhostError
from gpuhost.inventory.loader import InventoryHost
from gpuhost.upgrade import package_cache
from gpuhost.upgrade.package_cache import human_size
from gpuhost.upgrade.snapshot import SnapshotStore, load_snapshot


def failure_line(host: str, exc: Exception) -> str:
    """One line for a host the command could not serve: 'h1: unreachable over SSH: ...' or
    'h1: failed: ...', the host named once (the errors already start with it)."""
    message = str(exc).removeprefix(f"{host}: ")
    if message.startswith("unreachable"):
        return f"{host}: {message}"
    return f"{host}: failed: {message}"


def snapshots_in_use(runs: Path) -> dict[str, set[str]]:
    """{host: snapshot ids} recorded by upgrade runs that have not ended (a rollback may need
    their caches)."""
    from gpuhost.upgrade.journal import read_records, replay

    used: dict[str, set[str]] = {}
    for path in sorted(runs.glob("upgrade-*.jsonl")) if runs.is_dir() else []:
        records = read_records(path)
        if any(r.get("kind") == "end" for r in records):
            continue
        hosts = [str(h) for h in records[0].get("hosts", [])]
        for host, progress in replay(records, hosts).items():
            sid = progress.data.get("snapshot_id")
            if sid and progress.outcome is None:
                used.setdefault(host, set()).add(str(sid))
    return used


def prune_hosts(
    hosts: list[InventoryHost], store: SnapshotStore, runs: Path, keep: int, dry: bool
) -> Iterator[tuple[str, bool]]:
    """One (line, ok) per host, in order: what was (``dry``: would be) removed and kept, or why
    the host could not be served (one failing host never stops the others)."""
    from gpuhost.upgrade.connect import PyinfraRemote

    in_use = snapshots_in_use(runs)
    for entry in hosts:
        remote = PyinfraRemote(entry)
        try:
            listing = remote.run(package_cache.LIST_COMMAND, timeout=120)
            if not listing.ok:
                raise GpuhostError(
                    f"{entry.name}: cannot list the package caches: {listing.tail()}"
                )
            sizes = package_cache.parse_cache_dirs(listing.stdout)
            known = [ref.id for ref in store.list(entry.name)]
            plan = package_cache.prune_plan(list(sizes), known, keep, in_use.get(entry.name, ()))
            if plan.remove and not dry:
                removed = remote.run(package_cache.remove_command(plan.remove), timeout=300)
                if not removed.ok:
                    raise GpuhostError(f"{entry.name}: removing failed: {removed.tail()}")
        except GpuhostError as exc:
            yield failure_line(entry.name, exc), False
            continue
        finally:
            remote.close()
        verb = "would remove" if dry else "removed"
        yield (
            f"{entry.name}: {verb} {len(plan.remove)} cache(s)"
            + (f" ({', '.join(plan.remove)})" if plan.remove else "")
            + f", {human_size(plan.freed(sizes))}; kept {len(plan.keep)}"
            + (
                f"; not snapshots of this state dir, kept: {', '.join(plan.unknown)}"
                if plan.unknown
                else ""
            )
        ), True


def take_snapshots(
    hosts: list[InventoryHost], snapshots: Path, provider: Mapping[str, Any] | None
) -> Iterator[tuple[str, bool]]:
    """One (line, ok) per host: the snapshot taken (id, profile, counts, cache size, packages the
    cache misses: not ok) or why it could not be taken."""
    from gpuhost.upgrade.hoststeps import HostSteps, StepSettings

    settings = StepSettings(target="", snapshots=snapshots, provider=provider)
    steps = HostSteps({h.name: h for h in hosts}, settings)
    for entry in hosts:
        try:
            data: dict[str, Any] = steps.take_snapshot(entry.name, require_complete_cache=False)
        except GpuhostError as exc:
            yield failure_line(entry.name, exc), False
            continue
        finally:
            steps.remote(entry.name).close()
        doc = load_snapshot(Path(data["snapshot_path"]))
        cache = doc.get("package_cache") or {}
        missing = cache.get("missing") or {}
        yield (
            f"{entry.name}: {doc['id']} profile={doc.get('profile') or '-'} "
            f"packages={len(doc['packages'])} held={len(doc['holds'])} "
            f"cache={human_size(int(cache.get('size_bytes') or 0))}"
            + (f" MISSING {', '.join(sorted(missing))}" if missing else "")
            + f" -> {data['snapshot_path']}"
        ), not missing


def none_text(host: str | None, hosts: list[str], where: Path) -> str:
    """What ``snapshot list`` says when it lists nothing: which hosts do have snapshots, and
    that HOST is a host name when an inventory file was given instead."""
    if host is None:
        return f"no snapshots under {where}"
    text = f"no snapshots of host {host!r} under {where}; hosts with snapshots: "
    text += ", ".join(hosts) or "none"
    if host.endswith(".py") or Path(host).is_file():
        text += " (snapshot list takes a HOST name as the inventory names it, not an inventory)"
    return text


def list_lines(store: SnapshotStore, host: str | None) -> list[str]:
    """``snapshot list``: one line per snapshot (of ``host``, or of every host), or why none."""
    refs = store.list(host)
    if not refs:
        return [none_text(host, sorted({ref.host for ref in store.list()}), store.root)]
    lines = []
    for ref in refs:
        doc = store.load(ref)
        lines.append(
            f"{ref.host}/{ref.id}  profile={doc.get('profile') or '-'}  "
            f"packages={len(doc['packages'])}  held={len(doc['holds'])}"
        )
    return lines
