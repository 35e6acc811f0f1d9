"""JSON Schemas (draft 2020-12) of every document gpuhost writes, shipped in the package.

========================  ==========================================================
name                      document
========================  ==========================================================
``audit-report``          ``gpuhost audit --json FILE``
``merged-report``         ``gpuhost report merge ... -o FILE`` (an audit report + inputs)
``snapshot``              ``gpuhost snapshot`` / the snapshot before an upgrade
``smoke-result``          the smoke script's output (``gpuhost smoke run --json``)
``provision-marker``      ``/etc/gpuhost/profile`` written by ``gpuhost provision``
``upgrade-journal``       one line of an upgrade journal (``runs/upgrade-*.jsonl``)
``bundle-manifest``       ``manifest.json`` of an offline bundle (``gpuhost bundle``)
``collective-result``     ``gpuhost check INVENTORY --tier collective --json FILE``
``acceptance``            ``gpuhost accept INVENTORY --json FILE`` (one record per host)
========================  ==========================================================

``gpuhost schema NAME`` prints one (``standalone_text``: a schema that refers to another by its id
carries it under ``$defs``, so any validator resolves it from that one document). Each schema's
``$id`` is ``urn:gpuhost:schema:NAME``; the merged report refers to the audit report by that id
(``registry_resources`` lists them all for a validator's registry).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from gpuhost.errors import ConfigError

NAMES = (
    "audit-report",
    "merged-report",
    "snapshot",
    "smoke-result",
    "provision-marker",
    "upgrade-journal",
    "bundle-manifest",
    "collective-result",
    "acceptance",
)
ID_PREFIX = "urn:gpuhost:schema:"


def schema_text(name: str) -> str:
    """The schema file's text; ConfigError naming the known schemas for an unknown name."""
    if name not in NAMES:
        raise ConfigError(f"no schema named {name!r}; known schemas: {', '.join(NAMES)}")
    return resources.files(__name__).joinpath(f"{name}.schema.json").read_text(encoding="utf-8")


def load_schema(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(schema_text(name))
    return data


def registry_resources() -> list[tuple[str, dict[str, Any]]]:
    """``($id, schema)`` of every schema, for a ``referencing.Registry``."""
    return [(ID_PREFIX + name, load_schema(name)) for name in NAMES]


def _referenced(node: Any) -> set[str]:
    """Names of the gpuhost schemas ``node`` refers to (``$ref: urn:gpuhost:schema:NAME``)."""
    if isinstance(node, dict):
        ref = str(node.get("$ref", ""))
        found = {ref.removeprefix(ID_PREFIX)} if ref.startswith(ID_PREFIX) else set()
        return found.union(*(_referenced(value) for value in node.values()))
    if isinstance(node, list):
        return set().union(*(_referenced(value) for value in node))
    return set()


def standalone_text(name: str) -> str:
    """The schema as one self-contained document: the file itself, or, when it refers to other
    gpuhost schemas by id, with those (and theirs) embedded under ``$defs`` keeping their ``$id``
    (a JSON Schema 2020-12 compound document), so a validator needs no registry or network."""
    schema = load_schema(name)
    todo = sorted(_referenced(schema) - {name})
    if not todo:
        return schema_text(name)
    embedded: dict[str, Any] = {}
    while todo:
        other = todo.pop()
        if other not in embedded:
            embedded[other] = load_schema(other)
            todo.extend(sorted(_referenced(embedded[other]) - {name, *embedded}))
    schema["$defs"] = {**schema.get("$defs", {}), **dict(sorted(embedded.items()))}
    return json.dumps(schema, indent=2) + "\n"
