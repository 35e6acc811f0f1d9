"""apt-cache show: the package records apt knows (every version of every source), and their
Depends relations.

``apt-cache show NAME...`` prints one RFC 822 record per version, blank-line separated, each
package's versions newest first (apt's cache keeps a package's version list sorted so); a name
apt does not know prints nothing on stdout ("E: No packages found" on stderr).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuhost.errors import ParseError
from gpuhost.parsers._common import require_text

FIELD_RE = re.compile(r"^([A-Za-z][A-Za-z0-9-]*):\s?(.*)$")
RELATION_RE = re.compile(
    r"^(?P<name>[a-z0-9][a-z0-9+.\-]*)(?::[a-z0-9]+)?\s*"
    r"(?:\(\s*(?P<op><<|<=|=|>=|>>)\s*(?P<version>[^\s)]+)\s*\))?\s*(?:\[[^\]]*\])?$"
)
EXPECTED = "apt-cache show records (Package:, Version:, Depends: ...)"


@dataclass(frozen=True)
class Relation:
    """One package of a Depends alternative: ``name (op version)``; op/version "" when none."""

    name: str
    op: str = ""
    version: str = ""


@dataclass(frozen=True)
class AptRecord:
    name: str
    version: str
    #: Depends as a list of alternatives (``a | b`` is one entry with two relations)
    depends: list[list[Relation]] = field(default_factory=list)
    provides: list[str] = field(default_factory=list)


def parse_relations(text: str) -> list[list[Relation]]:
    """A Depends/Pre-Depends value; ParseError naming the part that is not a relation."""
    out: list[list[Relation]] = []
    for group in (g.strip() for g in text.split(",")):
        if not group:
            continue
        alternatives = []
        for part in (p.strip() for p in group.split("|")):
            match = RELATION_RE.match(part)
            if match is None:
                raise ParseError(f"not a package relation: {part[:80]!r} (in {text[:120]!r})")
            alternatives.append(
                Relation(match["name"], match["op"] or "", match["version"] or "")
            )
        out.append(alternatives)
    return out


def _records(text: str) -> list[dict[str, str]]:
    records: list[dict[str, str]] = []
    current: dict[str, str] = {}
    last = ""
    for line in text.splitlines():
        if not line.strip():
            if current:
                records.append(current)
            current, last = {}, ""
            continue
        if line[0] in " \t":
            if last:
                current[last] += "\n" + line.strip()
            continue
        match = FIELD_RE.match(line)
        if match is None:
            raise ParseError(f"expected {EXPECTED}; found {line[:80]!r}")
        if match[1] == "Package" and current:  # a record starts (blank lines may be dropped)
            records.append(current)
            current = {}
        last = match[1]
        current[last] = match[2].strip()
    if current:
        records.append(current)
    return records


def parse_apt_show(text: str) -> dict[str, list[AptRecord]]:
    """``apt-cache show`` output → {package: [records, newest first]}; empty output → {}."""
    text = require_text(text, EXPECTED)
    out: dict[str, list[AptRecord]] = {}
    for fields in _records(text):
        name, version = fields.get("Package"), fields.get("Version")
        if not name or not version:
            raise ParseError(f"expected {EXPECTED}; a record lacks Package or Version: {fields}")
        provides = [r[0].name for r in parse_relations(fields.get("Provides", ""))]
        depends = parse_relations(fields.get("Pre-Depends", "")) + parse_relations(
            fields.get("Depends", "")
        )
        records = out.setdefault(name, [])
        if all(r.version != version for r in records):  # one version from several pockets
            records.append(AptRecord(name, version, depends, provides))
    return out
