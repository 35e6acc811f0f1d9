"""Reading one of the matrix's generated YAML data files (wheels.yaml, advisories.yaml)."""

from __future__ import annotations

from typing import Any

import yaml

from gpuhost.datafiles import load_yaml, read_file_text, yaml_problem
from gpuhost.errors import ConfigError


def read_mapping(path: str, expected: str) -> dict[str, Any]:
    """The top-level mapping of ``path``; ConfigError naming the file (and line) otherwise.

    ``expected`` says what the mapping should hold, for the error message.
    """
    text = read_file_text(path, expected.split(" ")[0] + " data")
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({yaml_problem(exc)})") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping with {expected}")
    return data
