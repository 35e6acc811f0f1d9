"""Where upgrade state lives on the controller, and reading the provider config file.

``--state-dir`` holds ``snapshots/<host>/<id>.json``, ``runs/<run-id>.jsonl`` (upgrade journals)
and ``logs/``. Default (``gpuhost.statedir.default_state_dir``): ``$GPUHOST_STATE_DIR``, else
``$XDG_STATE_HOME/gpuhost``, else ``~/.local/state/gpuhost`` (a per-user folder, never the
current directory: state must not depend on where a command was started, nor land in a
repository checkout).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from gpuhost.datafiles import load_yaml, read_file_text, yaml_problem
from gpuhost.errors import ConfigError


def snapshots_dir(state_dir: Path) -> Path:
    return state_dir / "snapshots"


def runs_dir(state_dir: Path) -> Path:
    return state_dir / "runs"


def load_provider_config(path: str | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        data = load_yaml(read_file_text(path, "provider config"))
    except yaml.YAMLError as exc:
        raise ConfigError(
            f"{path}: provider config is not valid YAML: {yaml_problem(exc)}"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: provider config must be a mapping with a 'type' key")
    from gpuhost.upgrade.providers import make_provider, plain_http_warning

    make_provider(data, path)  # validate now: one clear error before any host is touched
    warning = plain_http_warning(data, path)
    if warning:
        print(f"warning: {warning}", file=sys.stderr, flush=True)
    return data
