"""Printing shared by the commands: lines on stdout or stderr, and the one-line warning a judging
command (``matrix check``, ``audit``) prints on stderr when the data it judges with is older than
``$GPUHOST_DATA_MAX_AGE_DAYS`` (gpuhost.datadir.staleness)."""

from __future__ import annotations

from collections.abc import Iterable

import click

from gpuhost.datadir import overlay_problem, staleness


def echo_lines(lines: Iterable[str], err: bool = False) -> None:
    for line in lines:
        click.echo(line, err=err)


def warn_line(line: str) -> None:
    click.echo(line, err=True)


def warn_lines(lines: Iterable[str]) -> None:
    echo_lines(lines, err=True)


def warn_if_stale() -> None:
    warn_lines(filter(None, [overlay_problem(), staleness()]))
