"""Where upgrade state lives on the controller, and reading the provider config file.

``--state-dir`` holds ``snapshots/<host>/<id>.json``, ``runs/<run-id>.jsonl`` (upgrade journals)
and ``logs/``. Default: ``$GPUHOST_STATE_DIR``, else ``$XDG_STATE_HOME/gpuhost``, else
``~/.local/state/gpuhost`` (a per-user folder, never the current directory: state must not
depend on where a command was started, nor land in a repository checkout).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import click
import yaml

from gpuhost.datafiles import load_yaml, yaml_problem
from gpuhost.errors import ConfigError
from gpuhost.statedir import check_state_dir

F = TypeVar("F", bound=Callable[..., Any])


def default_state_dir(env: Mapping[str, str], home: Path) -> Path:
    """``$GPUHOST_STATE_DIR``, else ``$XDG_STATE_HOME/gpuhost``, else
    ``<home>/.local/state/gpuhost`` (the XDG base directory default) (pure)."""
    if env.get("GPUHOST_STATE_DIR"):
        return Path(env["GPUHOST_STATE_DIR"])
    xdg = env.get("XDG_STATE_HOME", "")
    if xdg and Path(xdg).is_absolute():  # the spec: a relative value is to be ignored
        return Path(xdg) / "gpuhost"
    return home / ".local" / "state" / "gpuhost"


def state_option(func: F) -> F:
    return click.option(
        "--state-dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=lambda: default_state_dir(os.environ, Path.home()),
        show_default="$GPUHOST_STATE_DIR, else $XDG_STATE_HOME/gpuhost, else "
        "~/.local/state/gpuhost",
        callback=_checked_state_dir,
        help="Controller-side folder for snapshots/, runs/ (upgrade journals), locks/ and logs/ "
        "(owned by you or root, writable by no one else).",
    )(func)


def _checked_state_dir(ctx: click.Context, param: click.Parameter, value: Path) -> Path:
    """The state folder is checked before any command reads or writes it (gpuhost.statedir)."""
    check_state_dir(value)
    return value


def limit_option(func: F) -> F:
    """``--limit`` as every gpuhost command reads it (``gpuhost.inventory.loader.limit_names``)."""
    return click.option(
        "--limit",
        multiple=True,
        metavar="HOSTS",
        help="Only these hosts or groups (comma list, globs; repeatable), as for other commands.",
    )(func)


def snapshots_dir(state_dir: Path) -> Path:
    return state_dir / "snapshots"


def runs_dir(state_dir: Path) -> Path:
    return state_dir / "runs"


def load_provider_config(path: str | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        data = load_yaml(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read provider config: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: provider config is not text (byte {exc.start} is not UTF-8; expected YAML)"
        ) from None
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
        click.echo(f"warning: {warning}", err=True)
    return data
