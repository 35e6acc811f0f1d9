"""Command-line entry point.

Subcommands live in modules of this package; each module defines ``command`` (a click command or
group) and is found automatically, so adding a capability never edits this file. This is the one
place where gpuhost errors become messages and exit codes.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import click

from gpuhost import __version__
from gpuhost.errors import EXIT_USAGE, GpuhostError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpuhost")
def cli() -> None:
    """Pinned, validated NVIDIA GPU servers: provision, audit, upgrade and check fleets."""


def _register_subcommands() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        command = getattr(module, "command", None)
        if isinstance(command, click.Command):
            cli.add_command(command)


_register_subcommands()


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return (and exit with) 0 ok, 1 findings/incompatible, 2 bad input."""
    try:
        rv = cli.main(args=argv, prog_name="gpuhost", standalone_mode=False)
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.Abort:
        click.echo("gpuhost: aborted", err=True)
        code = 130
    except click.ClickException as exc:
        exc.show()
        code = EXIT_USAGE if isinstance(exc, click.UsageError) else exc.exit_code
    except GpuhostError as exc:
        click.echo(f"gpuhost: error: {exc}", err=True)
        code = exc.exit_code
    except KeyboardInterrupt:
        click.echo("gpuhost: interrupted", err=True)
        code = 130
    else:
        code = rv if isinstance(rv, int) else 0
    if argv is None:
        sys.exit(code)
    return code
