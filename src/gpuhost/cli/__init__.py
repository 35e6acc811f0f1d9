"""Command-line entry point.

Subcommands live in modules of this package; each module defines ``command`` (a click command or
group) named like the module and is found automatically, so adding a capability never edits this
file; only the invoked command's module is imported. This is the one place where gpuhost errors
become messages and exit codes.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pkgutil
import signal
import sys
from collections.abc import Callable
from typing import Any

import click

from gpuhost import __version__, signals
from gpuhost.errors import EXIT_FINDINGS, EXIT_USAGE, GpuhostError
from gpuhost.escape import StreamError
from gpuhost.terminal import (
    colour_allowed,
    escaping_streams,
    quiet_stream,
    reopen_closed_streams,
    tolerant_streams,
)

EXIT_SIGINT = 130
EXIT_SIGTERM = 143


class _ModuleCommands(click.Group):
    """The subcommands are this package's modules: ``audit.py`` is ``gpuhost audit``
    (``foo_bar.py`` would be ``gpuhost foo-bar``). They are listed from the package without
    importing them, and only the invoked one is imported, so a command pays only for its own
    imports (``gpuhost --help`` imports them all for their short help)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(_command_modules()))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        module = _command_modules().get(cmd_name)
        if command is None and module is not None:
            command = getattr(importlib.import_module(f"{__name__}.{module}"), "command", None)
        return command if isinstance(command, click.Command) else None


def _command_modules() -> dict[str, str]:
    """Command name -> module name, for every public module of this package (none imported)."""
    return {
        info.name.replace("_", "-"): info.name
        for info in pkgutil.iter_modules(__path__)
        if not info.name.startswith("_")
    }


@click.group(cls=_ModuleCommands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpuhost")
def cli() -> None:
    """Pinned, validated NVIDIA GPU servers: provision, audit, upgrade and check fleets.

    \b
    Example:
      gpuhost audit inventories/fleet.py --html fleet.html
      gpuhost COMMAND --help
    """


def _quit_now(signum: int, line: str) -> None:
    """A second SIGINT/SIGTERM (``gpuhost.signals``): the line, then exit at once."""
    # os.write: the handler may interrupt a write to sys.stderr (a reentrant buffered write
    # raises RuntimeError)
    os.write(2, f"{line}\n".encode())
    os._exit(128 + signum)


def _unmasked_stop(command: Callable[[], Any]) -> Any:
    """``command()``; an error it raised while a signal's ``Stopped`` unwound it (a clean-up
    that failed, a library turning the stop into its own error) is that stop."""
    try:
        return command()
    except Exception as exc:
        if (stopped := signals.stopped_in(exc)) is not None:
            raise stopped from None
        raise


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return (and exit with) 0 ok, 1 findings/incompatible, 2 bad input, 130 on
    SIGINT (Ctrl-C) and 143 on SIGTERM, each with one line."""
    reopen_closed_streams()
    with escaping_streams():
        return _main(argv)


def _main(argv: list[str] | None = None) -> int:
    signals.on_quit(_quit_now)
    tolerant_streams()
    # NO_COLOR (https://no-color.org) or TERM=dumb: click.echo strips every style; else click
    # colours only on a terminal.
    color = None if colour_allowed() else False
    try:
        if argv is None:  # the gpuhost process (in-process callers keep their own handlers)
            signals.unwind_on_signals()
            signals.stop_if_signalled()
        rv = _unmasked_stop(
            lambda: cli.main(args=argv, prog_name="gpuhost", standalone_mode=False, color=color)
        )
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.Abort:
        click.echo("gpuhost: aborted", err=True)
        code = EXIT_SIGINT
    except click.ClickException as exc:
        exc.show()
        code = EXIT_USAGE if isinstance(exc, click.UsageError) else exc.exit_code
    except GpuhostError as exc:
        click.echo(f"gpuhost: error: {exc}", err=True)
        code = exc.exit_code
    except KeyboardInterrupt:
        click.echo("gpuhost: interrupted (SIGINT)", err=True)
        code = EXIT_SIGINT
    except StreamError as exc:  # stdout to /dev/full, a closed pipe: one line, no traceback
        quiet_stream(exc.stream)
        with contextlib.suppress(OSError, ValueError):
            click.echo(f"gpuhost: error: cannot write to {exc.name}: {exc.strerror}", err=True)
        code = EXIT_FINDINGS
    except signals.Stopped as exc:
        sigterm = exc.signum == signal.SIGTERM
        name = "terminated (SIGTERM)" if sigterm else "interrupted (SIGINT)"
        click.echo(exc.line or f"gpuhost: {name}", err=True)
        code = EXIT_SIGTERM if sigterm else EXIT_SIGINT
    else:
        code = rv if isinstance(rv, int) else 0
    if argv is None:
        # until the process has exited a signal quits at once (130/143, one line): the default
        # action would kill it without either while the interpreter shuts down
        signals.exiting()
        sys.exit(code)
    return code
