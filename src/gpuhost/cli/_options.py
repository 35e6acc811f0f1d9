"""Options shared by several commands, so that one option has one meaning everywhere."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from gpuhost.findings import FAIL_ON
from gpuhost.fleet import DEFAULT_CONNECT_TIMEOUT_S
from gpuhost.locks import acquire, host_locks
from gpuhost.redaction import redact_url, remember_url_secrets
from gpuhost.statedir import check_state_dir, default_state_dir

if TYPE_CHECKING:
    from gpuhost.inventory.loader import InventoryHost

F = TypeVar("F", bound=Callable[..., Any])

connect_timeout_option = click.option(
    "--connect-timeout",
    type=click.IntRange(1, 600),
    default=DEFAULT_CONNECT_TIMEOUT_S,
    show_default=True,
    help="Seconds to wait for a host's SSH connection before calling it unreachable.",
)
"""``--connect-timeout N`` of audit, provision and harden (pyinfra's ``CONNECT_TIMEOUT``)."""


class _Seconds(click.ParamType):
    """A positive, finite number of seconds (click's FloatRange lets nan through)."""

    name = "seconds"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        try:
            number = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(number) or number <= 0:
            self.fail(f"{value!r}: expected a number of seconds above 0", param, ctx)
        return number


SECONDS = _Seconds()
"""Type of the ``--*-timeout`` options given in seconds (upgrade, rollback)."""


class FiniteRange(click.FloatRange):
    """click's FloatRange without nan and infinities: FloatRange's bound checks are comparisons,
    which nan never fails, so ``--floor nan`` passed every run and ``--min-ratio nan`` every
    GPU. Every float option of the CLI uses this type (tests/robustness/test_cli_numbers.py)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class _HttpUrl(click.ParamType):
    """An http(s) URL with a host, one word (a source gpuhost reads from: ``--index``,
    ``--csaf``, ``--cuda-redist``, ``--cudnn-redist``): a mistake is one line, exit 2, before
    anything is fetched."""

    name = "url"
    _RE = re.compile(r"https?://[^\s/?#\x00-\x1f\x7f]+(?:[/?#]\S*)?")

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value)
        remember_url_secrets(text)  # its password is never printed, not even in this refusal
        if not self._RE.fullmatch(text) or not text.isprintable():
            self.fail(f"{redact_url(text)!r:.120} is not an http(s) URL", param, ctx)
        return text


HTTP_URL = _HttpUrl()


def fail_on_option(what: str) -> Callable[[F], F]:
    """``--fail-on compatibility|security`` of ``matrix check``, ``matrix profile verify`` and
    ``audit``: the exit status follows the compatibility verdict (``what``) unless the user asks
    for the security exposure too."""
    return click.option(
        "--fail-on",
        "fail_on",
        type=click.Choice(FAIL_ON),
        default="compatibility",
        show_default=True,
        help=f"Exit 1 on {what} (compatibility), or also when a known NVIDIA security bulletin "
        "rated an error (CVSS >= advisories.yaml's error_at_cvss) affects the driver or "
        "container toolkit (security).",
    )


parallel_option = click.option(
    "--parallel",
    type=click.IntRange(min=1),
    help="Hosts connected, prepared and changed at the same time "
    "[default: 20 per CPU core, at most the number of hosts, as pyinfra].",
)
"""``--parallel N`` for the commands that run a deploy (passed on as ``run_deploy(parallel=)``)."""


def _state_dir_option(checked: bool) -> Callable[[F], F]:
    return click.option(
        "--state-dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=lambda: default_state_dir(os.environ, Path.home()),
        show_default="$GPUHOST_STATE_DIR, else $XDG_STATE_HOME/gpuhost, else "
        "~/.local/state/gpuhost",
        callback=_checked_state_dir if checked else None,
        help="Folder for snapshots/, runs/ (upgrade journals), locks/, logs/ and health/ (the "
        "health tier's counts) (owned by you or root, writable by no one else).",
    )


def state_option(func: F) -> F:
    """``--state-dir`` (``gpuhost.upgrade.settings``: snapshots, journals, locks, logs)."""
    return _state_dir_option(checked=True)(func)


def unchecked_state_option(func: F) -> F:
    """``--state-dir`` for a command that uses it only for some of its runs (``check``: the
    health tier's counts); the command checks it (``statedir``) before it reads it."""
    return _state_dir_option(checked=False)(func)


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


def locked_hosts(inventory: str, limit: tuple[str, ...], state_dir: Path) -> list[InventoryHost]:
    """The hosts ``--limit`` selects, each locked for this command (one writer per host,
    ``gpuhost.locks``) until it ends."""
    from gpuhost.inventory.loader import select

    hosts = select(inventory, limit).entries()
    ctx = click.get_current_context()
    what = ctx.command_path.removeprefix("gpuhost ")
    ctx.call_on_close(acquire(state_dir, host_locks(h.name for h in hosts), what).release)
    return hosts
