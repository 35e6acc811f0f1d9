"""The controller-side journal of one upgrade run.

One JSON object per line, appended and fsync'd before the step it describes is considered
recorded, so a run killed at any moment (Ctrl-C, controller crash, power loss) can be continued
with ``--resume``: finished hosts are not touched again, a host that was half-way is continued from
the step that was interrupted (with the data earlier steps recorded, e.g. its snapshot id).

Line kinds:

- ``{"kind": "run", ...}``   first line: run id, inventory, target profile, options, host order
- ``{"kind": "step", "host", "step", "status", "ts", "detail", "data"}``, status is
  started, done (its result verified on the host), failed, or interrupted (the operator stopped
  the run while the step was in flight: ``--resume`` redoes it, it is not a failure)
- ``{"kind": "outcome", "host", "outcome", "ts", "detail"}``  a host's final state in this run
- ``{"kind": "end", "ts", "summary"}``  the run finished (nothing left to resume)

A torn last line (the controller died while writing it) is ignored; any other unreadable line is
an error naming the file and line.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpuhost.errors import ConfigError
from gpuhost.safeio import NOFOLLOW, read_regular
from gpuhost.statedir import checked_folder

JOURNAL_SCHEMA = 1
STEP_STATUSES = ("started", "done", "failed", "interrupted")

# Final per-host outcomes. Every one of them means "do not touch this host again in this run".
UPGRADED = "upgraded"  # on the target, validated, undrained
CURRENT = "current"  # already on the target before the run; nothing changed
REFUSED = "refused"  # preflight refused the host; nothing changed
ABORTED = "aborted"  # failed before any package changed; stopped services restarted, undrained
ROLLED_BACK = "rolled_back"  # failed after packages changed; back on the snapshot, left drained
ROLLBACK_FAILED = "rollback_failed"  # the rollback itself failed; left drained, needs a human
OUTCOMES = (UPGRADED, CURRENT, REFUSED, ABORTED, ROLLED_BACK, ROLLBACK_FAILED)
SUCCESSFUL_OUTCOMES = (UPGRADED, CURRENT)


def utc_now() -> str:
    """UTC time as an ISO 8601 string with a Z, to the second."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class HostProgress:
    """What the journal says about one host."""

    host: str
    done: list[str] = field(default_factory=list)  # steps completed, in order
    current: str | None = None  # a step started and not finished (interrupted)
    failed: str | None = None  # the step that failed (forward phase), if any
    failure: str = ""  # its message
    outcome: str | None = None
    data: dict[str, Any] = field(default_factory=dict)  # merged data recorded by steps

    @property
    def finished(self) -> bool:
        return self.outcome is not None

    @property
    def started(self) -> bool:
        return bool(self.done) or self.current is not None or self.failed is not None


@dataclass
class RunHeader:
    run_id: str
    inventory: str
    target: str
    hosts: list[str]
    options: dict[str, Any]
    created: str


class Journal:
    """Append-only, fsync'd record of one run. Safe to call from several threads."""

    def __init__(self, path: Path, header: RunHeader) -> None:
        self.path = path
        self.header = header
        self._lock = threading.Lock()

    # -- creating and opening ------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        runs_dir: Path,
        inventory: str,
        target: str,
        hosts: list[str],
        options: Mapping[str, Any],
    ) -> Journal:
        checked_folder(runs_dir, create=True)
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        run_id = f"upgrade-{stamp}"
        header = RunHeader(run_id, inventory, target, list(hosts), dict(options), utc_now())
        path = runs_dir / f"{run_id}.jsonl"
        journal = cls(path, header)
        journal._append(
            {
                "kind": "run",
                "schema": JOURNAL_SCHEMA,
                "run_id": run_id,
                "inventory": inventory,
                "target": target,
                "hosts": list(hosts),
                "options": dict(options),
                "created": header.created,
            },
            create=True,
        )
        _fsync_dir(runs_dir)
        return journal

    @classmethod
    def open(cls, path: Path) -> Journal:
        records = read_records(path)
        first = records[0]
        header = RunHeader(
            run_id=str(first["run_id"]),
            inventory=str(first["inventory"]),
            target=str(first["target"]),
            hosts=[str(h) for h in first["hosts"]],
            options=dict(first.get("options", {})),
            created=str(first.get("created", "")),
        )
        return cls(path, header)

    # -- writing -------------------------------------------------------------------------------

    def step(
        self,
        host: str,
        step: str,
        status: str,
        detail: str = "",
        data: Mapping[str, Any] | None = None,
    ) -> None:
        if status not in STEP_STATUSES:
            raise ValueError(f"journal: unknown step status {status!r}")
        self._append(
            {
                "kind": "step",
                "host": host,
                "step": step,
                "status": status,
                "ts": utc_now(),
                "detail": detail,
                "data": dict(data or {}),
            }
        )

    def outcome(self, host: str, outcome: str, detail: str = "") -> None:
        if outcome not in OUTCOMES:
            raise ValueError(f"journal: unknown outcome {outcome!r}")
        self._append(
            {"kind": "outcome", "host": host, "outcome": outcome, "ts": utc_now(), "detail": detail}
        )

    def end(self, summary: Mapping[str, Any]) -> None:
        self._append({"kind": "end", "ts": utc_now(), "summary": dict(summary)})

    def _append(self, record: Mapping[str, Any], create: bool = False) -> None:
        line = json.dumps(record, sort_keys=True) + "\n"
        with self._lock:
            flags = os.O_WRONLY | os.O_APPEND | NOFOLLOW | (os.O_CREAT | os.O_EXCL if create else 0)
            try:
                fd = os.open(self.path, flags, 0o600)
            except OSError as exc:
                raise ConfigError(
                    f"{self.path}: cannot write upgrade journal ({exc.strerror or exc})"
                ) from None
            try:
                os.write(fd, line.encode())
                os.fsync(fd)
            except OSError as exc:
                raise ConfigError(
                    f"{self.path}: cannot write upgrade journal ({exc.strerror or exc})"
                ) from None
            finally:
                os.close(fd)

    # -- reading -------------------------------------------------------------------------------

    def records(self) -> list[dict[str, Any]]:
        return read_records(self.path)

    def progress(self) -> dict[str, HostProgress]:
        return replay(self.records(), self.header.hosts)

    def ended(self) -> bool:
        return any(r.get("kind") == "end" for r in self.records())


def read_records(path: Path) -> list[dict[str, Any]]:
    """Parse a journal file; drop a torn final line, reject anything else unreadable."""
    try:
        text = read_regular(path, "upgrade journal", follow=False, owned=True).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not an upgrade journal (byte {exc.start} is not UTF-8 text; expected one "
            "JSON object per line)"
        ) from None
    lines = text.split("\n")
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except RecursionError:
            raise ConfigError(
                f"{path}:{number}: unreadable upgrade journal line (JSON nested too deeply)"
            ) from None
        except ValueError:  # JSONDecodeError, or a number too long for Python's int
            is_last = all(not rest.strip() for rest in lines[number:])
            if is_last and not text.endswith("\n"):
                break  # torn write at the moment the controller died
            raise ConfigError(
                f"{path}:{number}: unreadable upgrade journal line (expected one JSON object)"
            ) from None
        if not isinstance(record, dict) or "kind" not in record:
            raise ConfigError(f"{path}:{number}: journal line has no 'kind' (found {line[:60]!r})")
        if not records and record.get("kind") != "run":
            raise ConfigError(f"{path}: not an upgrade journal (first line must be the run header)")
        problem = _shape_problem(record)
        if problem:
            raise ConfigError(f"{path}:{number}: {problem}")
        records.append(record)
    if not records or records[0].get("kind") != "run":
        raise ConfigError(f"{path}: not an upgrade journal (first line must be the run header)")
    if records[0].get("schema") != JOURNAL_SCHEMA:
        raise ConfigError(
            f"{path}: journal schema {records[0].get('schema')!r}, expected {JOURNAL_SCHEMA}"
        )
    return records


_FIELDS: dict[str, tuple[tuple[str, type], ...]] = {
    "run": (("run_id", str), ("inventory", str), ("target", str), ("hosts", list)),
    "step": (("host", str), ("step", str), ("status", str)),
    "outcome": (("host", str), ("outcome", str)),
    "end": (),
}


def _shape_problem(record: Mapping[str, Any]) -> str | None:
    """What is wrong with one journal record's fields (field path, found, expected), or None."""
    kind = record["kind"]
    if kind not in _FIELDS:
        return f"kind: {kind!r} is not one of {', '.join(_FIELDS)}"
    for key, wanted in _FIELDS[kind]:
        value = record.get(key)
        if not isinstance(value, wanted):
            expected = "list" if wanted is list else "string"
            return f"{kind}.{key}: found {value!r}, expected a {expected}"
    if kind == "run" and not all(isinstance(h, str) for h in record["hosts"]):
        return f"run.hosts: found {record['hosts']!r}, expected a list of host names"
    if kind == "run" and (not record["hosts"] or len(set(record["hosts"])) != len(record["hosts"])):
        return f"run.hosts: found {record['hosts']!r:.80}, expected each upgraded host once"
    if kind == "run" and not isinstance(record.get("options", {}), dict):
        return f"run.options: found {record.get('options')!r}, expected an object"
    if kind == "step" and record["status"] not in STEP_STATUSES:
        return (
            f"step.status: found {record['status']!r}, expected one of {', '.join(STEP_STATUSES)}"
        )
    if kind == "step" and not isinstance(record.get("data", {}), dict):
        return f"step.data: found {record.get('data')!r}, expected an object"
    if kind == "outcome" and record["outcome"] not in OUTCOMES:
        return (
            f"outcome.outcome: found {record['outcome']!r}, expected one of {', '.join(OUTCOMES)}"
        )
    return None


def replay(records: Iterable[Mapping[str, Any]], hosts: Iterable[str]) -> dict[str, HostProgress]:
    """Fold journal records into each host's progress (pure)."""
    progress = {h: HostProgress(h) for h in hosts}
    for record in records:
        kind = record.get("kind")
        if kind not in ("step", "outcome"):
            continue
        host = str(record["host"])
        p = progress.setdefault(host, HostProgress(host))
        if kind == "outcome":
            p.outcome = str(record["outcome"])
            p.current = None
            continue
        step, status = str(record["step"]), str(record["status"])
        p.data.update(record.get("data") or {})
        if status in ("started", "interrupted"):
            p.current = step
        elif status == "done":
            if step not in p.done:
                p.done.append(step)
            p.current = None
        else:
            p.current = None
            if p.failed is None:
                p.failed = step
                p.failure = str(record.get("detail", ""))
    return progress


def header_inventory(path: Path) -> str | None:
    """The inventory the journal's first line (its run header) names; None when that line
    cannot be read as one (the journal is then read whole, and refused with its problem)."""
    try:
        text = read_regular(path, "upgrade journal", follow=False, owned=True)
    except ConfigError:
        return None
    first = text.split(b"\n", 1)[0]
    try:
        header = json.loads(first.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    inventory = header.get("inventory") if isinstance(header, dict) else None
    return inventory if isinstance(inventory, str) and header.get("kind") == "run" else None


def find_resumable(runs_dir: Path, inventory: str) -> Path | None:
    """The newest run journal for this inventory that has not ended, if any."""
    if not runs_dir.is_dir():
        return None
    checked_folder(runs_dir)
    for path in sorted(runs_dir.glob("upgrade-*.jsonl"), reverse=True):
        if path.is_symlink() or not path.is_file():
            continue  # a FIFO or link named like a journal is none
        if header_inventory(path) not in (None, inventory):
            continue  # another inventory's run, damaged or not, is no concern of this one
        records = read_records(path)
        if records[0].get("inventory") != inventory:
            continue
        if any(r.get("kind") == "end" for r in records):
            return None  # the newest run of this inventory finished: nothing to resume
        return path
    return None


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
