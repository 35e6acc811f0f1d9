"""Reading one of the matrix's generated YAML data files (wheels.yaml, advisories.yaml)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gpuhost.datafiles import load_yaml
from gpuhost.errors import ConfigError


def read_mapping(path: str, expected: str) -> dict[str, Any]:
    """The top-level mapping of ``path``; ConfigError naming the file (and line) otherwise.

    ``expected`` says what the mapping should hold, for the error message.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read ({exc})") from exc
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}:" if mark is not None else ""
        raise ConfigError(f"{path}:{where} not valid YAML") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping with {expected}")
    return data
