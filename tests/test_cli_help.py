"""Every command's --help shows an example and every option says what it does (walks them all)."""

from __future__ import annotations

import click
import pytest

from gpuhost.cli import cli, main


def _commands(group: click.Group, path: tuple[str, ...] = ()):
    yield path, group
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, f"gpuhost {' '.join(path + (name,))} cannot be loaded"
        if isinstance(command, click.Group):
            yield from _commands(command, path + (name,))
        else:
            yield path + (name,), command


COMMANDS = list(_commands(cli))


def test_the_walk_finds_every_command():
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"audit", "report html", "report merge", "schema", "matrix check", "upgrade"} <= names


@pytest.mark.parametrize(
    "path,command", COMMANDS, ids=[" ".join(p) or "gpuhost" for p, _ in COMMANDS]
)
def test_help_shows_an_example_and_every_option_has_help(path, command, capsys):
    assert main([*path, "--help"]) == 0
    text = capsys.readouterr().out
    assert "Example" in text and "\n    gpuhost " in text, f"gpuhost {' '.join(path)} --help"
    silent = [
        option.opts[0]
        for option in command.params
        if isinstance(option, click.Option) and not option.hidden and not option.help
    ]
    assert silent == []
