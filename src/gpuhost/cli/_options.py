"""Options shared by several commands, so that one option has one meaning everywhere."""

from __future__ import annotations

import math

import click

from gpuhost.fleet import DEFAULT_CONNECT_TIMEOUT_S

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
