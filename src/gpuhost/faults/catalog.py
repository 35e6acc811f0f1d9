"""The GPU fault catalog (``data/faults.yaml``): per fault id its severity, action, drain policy
and source; the Xid codes; the recovery actions newer drivers report.

.. code:: python

    catalog = load_catalog()
    catalog.row("gpu.remap-pending").action        # "reset-gpu"
    catalog.xid_row(79).drain                        # "immediate"
    drain_policy(finding)                            # "immediate" | "persistent" | "never"
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import yaml

from gpuhost.datadir import data_path
from gpuhost.datafiles import load_yaml, read_file_text, yaml_problem
from gpuhost.errors import ConfigError
from gpuhost.findings import ACTIONS, SEVERITIES, Finding

CATALOG_FILE = "faults.yaml"
DRAIN_POLICIES = ("immediate", "persistent", "never")
ID_RE = re.compile(r"^gpu\.[a-z0-9][a-z0-9.-]*$")
URL_RE = re.compile(r"https?://\S+")
RECOVERY_ROWS = ("gpu.xid.154", "gpu.recovery-action")  # action/drain from the recovery action


@dataclass(frozen=True)
class FaultRow:
    """One fault: ``id`` (the finding id), what it is, its severity, action, drain policy and
    source (a key of the catalog's ``sources``); Xid rows also their code and NVIDIA's own
    resolution bucket."""

    id: str
    title: str
    severity: str
    action: str
    drain: str
    source: str
    xid: int | None = None
    nvidia_action: str | None = None
    note: str | None = None
    fix: str | None = None


@dataclass(frozen=True)
class RecoveryAction:
    """A recovery action the driver reports (NVML code and the words drivers print for it)."""

    code: int
    words: tuple[str, ...]
    action: str
    drain: str


@dataclass(frozen=True)
class Catalog:
    rows: dict[str, FaultRow]
    sources: dict[str, str]
    nvidia_actions: dict[str, str]
    recovery_actions: tuple[RecoveryAction, ...]
    unknown_xid: FaultRow

    def row(self, fault_id: str) -> FaultRow | None:
        return self.rows.get(fault_id)

    def xid_row(self, code: int) -> FaultRow:
        """The row of Xid ``code``; for a code the catalog does not list, ``unknown_xid`` under
        the id ``gpu.xid.<code>``."""
        return self.rows.get(f"gpu.xid.{code}") or replace(
            self.unknown_xid, id=f"gpu.xid.{code}", xid=code
        )

    def recovery(self, code: int | None, text: str | None) -> RecoveryAction | None:
        """The recovery action of NVML ``code`` or, without a known code, of ``text``
        ("Node Reboot Required", "Reset", ...); None when neither is known."""
        for entry in self.recovery_actions:
            if code is not None and entry.code == code:
                return entry
        words = " ".join((text or "").lower().split())
        if not words:
            return None
        for entry in sorted(self.recovery_actions, key=lambda e: -max(map(len, e.words))):
            if any(word == words for word in entry.words):
                return entry
        for entry in self.recovery_actions:  # a longer wording containing a known one
            if any(word in words for word in sorted(entry.words, key=len, reverse=True)):
                return entry
        return None

    def source_text(self, row: FaultRow) -> str:
        return self.sources[row.source]

    def source_url(self, row: FaultRow) -> str:
        """The row's source as a finding names it: the source's URL (its description when it
        has none)."""
        text = self.sources[row.source]
        found = URL_RE.search(text)
        return found.group(0).rstrip(".,;)") if found else text

    def xid_rows(self) -> list[FaultRow]:
        return sorted((r for r in self.rows.values() if r.xid is not None), key=_xid_key)


def _xid_key(row: FaultRow) -> int:
    return row.xid if row.xid is not None else -1


def _bad(where: str, message: str) -> ConfigError:
    return ConfigError(f"{CATALOG_FILE}: {where}: {message}")


def _text(raw: Mapping[str, Any], key: str, where: str, required: bool = True) -> str | None:
    value = raw.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _bad(where, f"{key}: expected text, found {value!r}")
    return value


def _choice(raw: Mapping[str, Any], key: str, choices: tuple[str, ...], where: str) -> str:
    value = raw.get(key)
    if value not in choices:
        raise _bad(where, f"{key}: found {value!r}, expected one of {', '.join(choices)}")
    return str(value)


def _row(raw: Any, where: str, sources: Mapping[str, str], fault_id: str | None = None) -> FaultRow:
    if not isinstance(raw, dict):
        raise _bad(where, f"expected a mapping, found {type(raw).__name__}")
    known = {"id", "xid", "title", "severity", "action", "drain", "source", "nvidia_action"}
    unknown = sorted(set(raw) - known - {"note", "fix"})
    if unknown:
        raise _bad(where, f"unknown field {unknown[0]!r}, expected {', '.join(sorted(known))}")
    row_id = fault_id or str(_text(raw, "id", where))
    if not ID_RE.match(row_id):
        raise _bad(where, f"id {row_id!r}: expected a dotted gpu.* id (gpu.xid.79)")
    xid = raw.get("xid")
    if xid is not None and (not isinstance(xid, int) or isinstance(xid, bool) or xid < 1):
        raise _bad(where, f"xid: expected a positive Xid number, found {xid!r}")
    if xid is not None and row_id != f"gpu.xid.{xid}":
        raise _bad(where, f"id {row_id!r}: expected gpu.xid.{xid} for Xid {xid}")
    source = str(_text(raw, "source", where))
    if source not in sources:
        raise _bad(where, f"source {source!r}: expected one of sources: {', '.join(sources)}")
    return FaultRow(
        id=row_id,
        title=str(_text(raw, "title", where)),
        severity=_choice(raw, "severity", SEVERITIES, where),
        action=_choice(raw, "action", ACTIONS, where),
        drain=_choice(raw, "drain", DRAIN_POLICIES, where),
        source=source,
        xid=xid,
        nvidia_action=_text(raw, "nvidia_action", where, required=False),
        note=_text(raw, "note", where, required=False),
        fix=_text(raw, "fix", where, required=False),
    )


def _recovery(raw: Any) -> tuple[RecoveryAction, ...]:
    if not isinstance(raw, list) or not raw:
        raise _bad("recovery_actions", "expected a list of {code, words, action, drain}")
    entries = []
    for i, item in enumerate(raw):
        where = f"recovery_actions[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("code"), int):
            raise _bad(where, "expected {code: N, words: [...], action, drain}")
        words = item.get("words")
        if not isinstance(words, list) or not all(isinstance(w, str) and w for w in words):
            raise _bad(where, "words: expected a list of texts")
        entries.append(
            RecoveryAction(
                int(item["code"]),
                tuple(w.lower() for w in words),
                _choice(item, "action", ACTIONS, where),
                _choice(item, "drain", DRAIN_POLICIES, where),
            )
        )
    return tuple(entries)


def parse_catalog(data: Any) -> Catalog:
    """The catalog from its YAML data; ConfigError naming the field on a bad entry."""
    if not isinstance(data, dict) or data.get("schema") != 1:
        raise _bad("schema", "expected 'schema: 1' at the top of a mapping")
    sources = data.get("sources")
    if not isinstance(sources, dict) or not all(isinstance(v, str) for v in sources.values()):
        raise _bad("sources", "expected a mapping of name -> description with its URL")
    mapping = data.get("nvidia_actions")
    if not isinstance(mapping, dict) or any(v not in ACTIONS for v in mapping.values()):
        raise _bad("nvidia_actions", f"expected bucket -> one of {', '.join(ACTIONS)}")
    raw_rows = data.get("faults")
    if not isinstance(raw_rows, list) or not raw_rows:
        raise _bad("faults", "expected a list of fault rows")
    rows: dict[str, FaultRow] = {}
    for i, raw in enumerate(raw_rows):
        row = _row(raw, f"faults[{i}]", sources)
        if row.id in rows:
            raise _bad(f"faults[{i}]", f"id {row.id!r} listed twice")
        rows[row.id] = row
    unknown = _row(data.get("unknown_xid"), "unknown_xid", sources, fault_id="gpu.xid.0")
    return Catalog(
        rows,
        {str(k): str(v) for k, v in sources.items()},
        {str(k): str(v) for k, v in mapping.items()},
        _recovery(data.get("recovery_actions")),
        unknown,
    )


@functools.lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    """The catalog in use (``datadir.data_path``), checked; ConfigError on a damaged file."""
    path = data_path(CATALOG_FILE)
    try:
        data = load_yaml(read_file_text(path, "the fault catalog"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: {yaml_problem(exc)}") from exc
    return parse_catalog(data)


def action_of(fault_id: str) -> str | None:
    """The catalog's action for finding id ``fault_id`` (Xid ids included); None without a row."""
    row = _row_of(load_catalog(), fault_id)
    return row.action if row else None


def with_action(finding: Finding) -> Finding:
    """``finding`` with the catalog's action when it has none yet (the audit's and the checks'
    findings get theirs here)."""
    if finding.action is not None:
        return finding
    action = action_of(finding.rule)
    return replace(finding, action=action) if action else finding


def _row_of(catalog: Catalog, fault_id: str) -> FaultRow | None:
    if fault_id.startswith("gpu.xid."):
        code = fault_id.removeprefix("gpu.xid.")
        return catalog.xid_row(int(code)) if code.isdigit() else None
    return catalog.row(fault_id)


def drain_policy(finding: Finding) -> str:
    """When the health tier drains a node for ``finding``: "immediate" (at the first run that
    sees it), "persistent" (seen on consecutive runs) or "never". The catalog's row decides; a
    recovery-action finding (Xid 154, nvidia-smi's GPU Recovery Action), or one whose action the
    driver's recovery action replaced, follows that action (``recovery_actions``); a finding the
    catalog does not know drains persistently when it is an error, never otherwise."""
    catalog = load_catalog()
    row = _row_of(catalog, finding.rule)
    if row is not None and row.id not in RECOVERY_ROWS and finding.action in (None, row.action):
        return row.drain
    for entry in catalog.recovery_actions:
        if finding.action is not None and entry.action == finding.action:
            return entry.drain
    if row is not None:
        return row.drain
    return "persistent" if finding.severity == "error" else "never"
