"""Validate a document gpuhost wrote against its shipped JSON Schema (src/gpuhost/schemas).

``assert_valid(doc, "audit-report")`` fails with every violation, each with its JSON path. Tests
that produce a document call it, so a schema and the code that writes the document cannot drift.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from gpuhost.schemas import ID_PREFIX, load_schema, registry_resources


@cache
def _registry() -> Registry:
    return Registry().with_resources(
        (uri, Resource.from_contents(schema)) for uri, schema in registry_resources()
    )


@cache
def validator(name: str) -> Draft202012Validator:
    schema = load_schema(name)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(
        schema, registry=_registry(), format_checker=Draft202012Validator.FORMAT_CHECKER
    )


def problems(doc: Any, name: str) -> list[str]:
    """Every violation as ``path: message`` (empty when valid)."""
    found = sorted(validator(name).iter_errors(doc), key=lambda e: list(e.absolute_path))
    return [f"{e.json_path}: {e.message[:300]}" for e in found]


def assert_valid(doc: Any, name: str) -> None:
    assert ID_PREFIX  # the schemas' $id prefix, imported so a rename fails here first
    bad = problems(doc, name)
    assert not bad, f"document does not match schema {name}:\n" + "\n".join(bad[:20])
