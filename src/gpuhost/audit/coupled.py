"""Which installed packages are coupled to the driver version (must move together, be held).

The names come from ``data/package_sets.yaml`` (the ``coupled`` lists of every package source,
with ``{branch}`` standing for any driver branch), so the audit and provisioning agree.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from gpuhost.datafiles import load_yaml
from gpuhost.errors import ConfigError

PACKAGE_SETS = "package_sets.yaml"


def _template_regex(template: str) -> str:
    parts = re.split(r"(\{[a-z_]+\})", template)
    return "".join(r"\d+(?:-\d+)?" if p.startswith("{") else re.escape(p) for p in parts)


def _collect(node: Any, found: set[str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "coupled" and isinstance(value, list):
                found.update(str(item) for item in value)
            else:
                _collect(value, found)


@lru_cache(maxsize=1)
def coupled_pattern() -> re.Pattern[str]:
    """One regex matching every coupled package name of every source in the data."""
    try:
        text = resources.files("gpuhost.data").joinpath(PACKAGE_SETS).read_text(encoding="utf-8")
        data = load_yaml(text)
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"gpuhost/data/{PACKAGE_SETS}: cannot read package sets: {exc}") from exc
    names: set[str] = set()
    _collect(data, names)
    if not names:
        raise ConfigError(f"gpuhost/data/{PACKAGE_SETS}: no 'coupled' package lists found")
    return re.compile("^(?:" + "|".join(sorted(_template_regex(n) for n in names)) + ")$")


def is_coupled(name: str) -> bool:
    return bool(coupled_pattern().match(name))
