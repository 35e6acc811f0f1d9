"""Where upgrade state lives on the controller, and reading the provider config file.

``--state-dir`` (default: ``$GPUHOST_STATE_DIR`` or the current directory) holds
``snapshots/<host>/<id>.json`` and ``runs/<run-id>.jsonl`` (upgrade journals).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
import yaml

from gpuhost.errors import ConfigError

F = TypeVar("F", bound=Callable[..., Any])


def state_option(func: F) -> F:
    return click.option(
        "--state-dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=lambda: Path(os.environ.get("GPUHOST_STATE_DIR", ".")),
        show_default="$GPUHOST_STATE_DIR or .",
        help="Controller-side folder for snapshots/ and runs/ (upgrade journals).",
    )(func)


def snapshots_dir(state_dir: Path) -> Path:
    return state_dir / "snapshots"


def runs_dir(state_dir: Path) -> Path:
    return state_dir / "runs"


def load_provider_config(path: str | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read provider config: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: provider config is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: provider config must be a mapping with a 'type' key")
    from gpuhost.upgrade.providers import make_provider

    make_provider(data, path)  # validate now: one clear error before any host is touched
    return data
