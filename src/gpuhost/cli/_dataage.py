"""The one-line warning a judging command (``matrix check``, ``audit``) prints on stderr when the
data it judges with is older than ``$GPUHOST_DATA_MAX_AGE_DAYS`` (gpuhost.datadir.staleness)."""

from __future__ import annotations

import click

from gpuhost.datadir import staleness


def warn_if_stale() -> None:
    line = staleness()
    if line is not None:
        click.echo(line, err=True)
