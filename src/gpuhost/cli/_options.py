"""Options shared by several commands, so that one option has one meaning everywhere."""

from __future__ import annotations

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
