"""Options shared by several commands, so that one option has one meaning everywhere."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

import click

from gpuhost.findings import FAIL_ON
from gpuhost.fleet import DEFAULT_CONNECT_TIMEOUT_S

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
