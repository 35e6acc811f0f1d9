"""Which installed packages are coupled to the driver version (must move together, be held).

The names come from ``data/package_sets.yaml`` (the ``coupled`` lists of every package source,
with ``{branch}`` standing for any driver branch), so the audit and provisioning agree.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from gpuhost.datafiles import PACKAGE_SETS, package_sets
from gpuhost.errors import ConfigError

#: what a placeholder of the data stands for in an installed package's name; any other
#: placeholder ({branch}, {cuda_major}, {cuda_dash}, ...) is digits, with one dash at most
PLACEHOLDER_RES = {"{version}": r"\d+(?:\.\d+)+"}


def _template_regex(template: str) -> str:
    parts = re.split(r"(\{[a-z_]+\})", template)
    return "".join(
        PLACEHOLDER_RES.get(p, r"\d+(?:-\d+)?") if p.startswith("{") else re.escape(p)
        for p in parts
    )


# the package_sets.yaml keys that hold package names (templates), besides "coupled"
MANAGED_KEYS = frozenset(
    {
        "install",
        "coupled",
        "companions",
        "proprietary",
        "open",
        "cuda_toolkit",
        "cudnn",
        "container_toolkit",
        "fabric_manager",
        "persistenced",
    }
)


def _collect(node: Any, found: set[str], keys: frozenset[str] = frozenset({"coupled"})) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in keys and isinstance(value, list):
                found.update(str(item) for item in value)
            elif key in keys and isinstance(value, str) and value:
                found.add(value)
            else:
                _collect(value, found, keys)


def _pattern(keys: frozenset[str], what: str) -> re.Pattern[str]:
    names: set[str] = set()
    _collect(package_sets(), names, keys)
    if not names:
        raise ConfigError(f"gpuhost/data/{PACKAGE_SETS}: no {what} package lists found")
    return re.compile("^(?:" + "|".join(sorted(_template_regex(n) for n in names)) + ")$")


@lru_cache(maxsize=1)
def coupled_pattern() -> re.Pattern[str]:
    """One regex matching every coupled package name of every source in the data."""
    return _pattern(frozenset({"coupled"}), "'coupled'")


@lru_cache(maxsize=1)
def managed_pattern() -> re.Pattern[str]:
    """One regex matching every package name the data lets gpuhost install, pin or hold."""
    return _pattern(MANAGED_KEYS, "package")


def is_coupled(name: str) -> bool:
    """Whether ``name`` carries the driver's version (must move with it and be held)."""
    return bool(coupled_pattern().match(name))


def is_managed(name: str) -> bool:
    """Whether ``name`` is a package of gpuhost's stack in any source (coupled or not)."""
    return bool(managed_pattern().match(name))
