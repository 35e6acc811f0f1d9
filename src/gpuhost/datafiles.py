"""Read gpuhost's YAML data files (matrix, profiles, package sets, SSH policy, Xid codes).

.. code:: python

    data = load_yaml(Path("matrix.yaml").read_text())   # like yaml.safe_load, faster

One loader for all of them: libyaml's C safe loader when PyYAML was built with it (about 5x
faster on matrix.yaml, measured in docs/benchmarks.md), else PyYAML's pure-Python safe loader.
Both build only plain data (dicts, lists, strings, numbers, booleans, dates, None) and raise
``yaml.YAMLError`` (with ``problem_mark``) on bad input, so callers handle errors as before.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import IO, Any

import yaml

from gpuhost.errors import ConfigError
from gpuhost.safeio import read_regular

PACKAGE_SETS = "package_sets.yaml"

_BASE_LOADER: type[yaml.SafeLoader] | type[yaml.CSafeLoader] = (
    yaml.CSafeLoader if getattr(yaml, "__with_libyaml__", False) else yaml.SafeLoader
)
_MERGE = "tag:yaml.org,2002:merge"


def _unique_mapping(loader: Any, node: yaml.MappingNode, deep: bool = False) -> Any:
    """A mapping whose keys are written once: YAML keeps the last of two equal keys, so a
    profile copied and not renamed silently replaced the one above it. Keys merged in with
    ``<<`` may be overridden, as YAML means."""
    seen: dict[tuple[str, str], Any] = {}
    for key, _ in node.value:
        if isinstance(key, yaml.ScalarNode) and key.tag != _MERGE:
            if (key.tag, key.value) in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"found key {key.value!r} twice (first on line "
                    f"{seen[(key.tag, key.value)].line + 1})", key.start_mark,
                )
            seen[(key.tag, key.value)] = key.start_mark
    return _BASE_LOADER.construct_mapping(loader, node, deep=deep)


#: the safe loader (libyaml's when there) refusing a key written twice in one mapping
SAFE_LOADER = type("UniqueKeySafeLoader", (_BASE_LOADER,), {"construct_mapping": _unique_mapping})


def load_yaml(source: str | bytes | IO[str] | IO[bytes]) -> Any:
    """``yaml.safe_load(source)`` with the fastest safe loader available. A value the loader
    cannot build (an impossible date such as 2024-13-45, an integer of thousands of digits, a
    bad tag's value, nesting too deep) is a ``yaml.YAMLError`` too: PyYAML raises ValueError,
    OverflowError or RecursionError for those, which callers handling bad YAML did not expect."""
    try:
        data = yaml.load(source, Loader=SAFE_LOADER)
    except (ValueError, OverflowError, RecursionError) as exc:
        raise yaml.YAMLError(f"a value YAML cannot build ({type(exc).__name__}: {exc})") from exc
    size = expanded_size(data)
    if size > MAX_EXPANDED_VALUES:
        raise yaml.YAMLError(
            f"aliases expand the document to more than {MAX_EXPANDED_VALUES:,} values "
            "(an alias bomb such as 'billion laughs'?); expected plain data"
        )
    return data


#: the most bytes a data or configuration file gpuhost reads may have (matrix.yaml is ~200 KB)
MAX_FILE_BYTES = 32 * 1024 * 1024


def read_file_text(path: str | Path, what: str) -> str:
    """The text of a data or configuration file (matrix, advisories, profiles, provider
    config, fault catalog...) read through ``safeio.read_regular``: a FIFO never blocks, a device
    (a link to /dev/zero) or a folder is refused, a file over ``MAX_FILE_BYTES`` is not read;
    each is one ConfigError line naming the file, as is text that is not UTF-8."""
    data = read_regular(Path(path), what, limit=MAX_FILE_BYTES)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: {what} is not text (byte {exc.start} is not UTF-8; expected YAML)"
        ) from None


# What a document may expand to through its aliases (every value counted as often as it is
# reached): the largest shipped data file is a few thousand values.
MAX_EXPANDED_VALUES = 1_000_000


def expanded_size(data: Any) -> int:
    """How many values ``data`` holds when every shared part (a YAML alias) is counted each
    time it is reached; in time linear in the distinct values. A structure that contains
    itself counts as too large."""
    sizes: dict[int, int] = {}
    too_large = MAX_EXPANDED_VALUES + 1

    def size(value: Any, depth: int) -> int:
        if not isinstance(value, (dict, list)):
            return 1
        known = sizes.get(id(value))
        if known is not None:
            return known
        if depth > 1000:
            return too_large
        sizes[id(value)] = too_large  # while counting: reaching it again is a cycle
        items = [*value.keys(), *value.values()] if isinstance(value, dict) else value
        total = 1
        for item in items:
            total += size(item, depth + 1)
            if total > MAX_EXPANDED_VALUES:
                break
        sizes[id(value)] = min(total, too_large)
        return sizes[id(value)]

    return size(data, 0)


def yaml_problem(exc: yaml.YAMLError) -> str:
    """One line for a YAML error: 'line N: what' where PyYAML marks the place, else its first
    line (a reader error about a NUL byte spans several)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or (str(exc).strip().splitlines() or ["?"])[0]
    return f"line {mark.line + 1}: {problem}" if mark is not None else str(problem)


@lru_cache(maxsize=1)
def package_sets() -> dict[str, Any]:
    """``data/package_sets.yaml`` (package names per source and OS), read once per process: the
    one reader, for provision (``deploys.spec``) and the audit and upgrade (``audit.coupled``)."""
    try:
        text = resources.files("gpuhost.data").joinpath(PACKAGE_SETS).read_text(encoding="utf-8")
        data = load_yaml(text)
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"gpuhost/data/{PACKAGE_SETS}: cannot read package sets: {exc}") from exc
    if not isinstance(data, dict) or data.get("schema") != 1 or "sources" not in data:
        raise ConfigError(f"{PACKAGE_SETS}: expected 'schema: 1' and 'sources'")
    return data


def installable_os() -> list[str]:
    """Every OS key some package source in ``data/package_sets.yaml`` has package names for:
    the OSes gpuhost can provision."""
    return sorted({os for source in package_sets()["sources"] for os in supported_os(source)})


def supported_os(source: str) -> list[str]:
    """OS keys (``debian-12``) ``data/package_sets.yaml`` has package names for, for ``source``
    (a package source such as ``debian-nonfree``); empty for a source it does not know."""
    entries = package_sets()["sources"].get(source, {})
    return sorted(k for k in entries if not k.startswith("_"))
