"""Every number option of the CLI refuses nan and the infinities (one line, exit 2).

click's FloatRange checks its bounds with comparisons, which nan never fails: ``check --tier
collective --floor nan`` judged every run against a floor no bandwidth is below, ``smoke
--min-ratio nan`` every GPU likewise; ``provision --reboot-timeout`` took any float."""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest

from gpuhost.cli import cli
from tests.robustness.conftest import gpuhost


def _commands(group: click.Group, ctx: click.Context) -> Iterator[tuple[str, click.Command]]:
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            for sub, inner in _commands(command, ctx):
                yield f"{name} {sub}", inner
        elif command is not None:
            yield name, command


def _number_options() -> list[tuple[str, click.Parameter]]:
    """(command, option) for every option whose type turns '0.5' or '1.5' into a float."""
    ctx = click.Context(cli)
    found = []
    for name, command in _commands(cli, ctx):
        for param in command.params:
            if any(isinstance(_converted(param, w), float) for w in ("0.5", "1.5")):
                found.append((name, param))
    return found


def _converted(param: click.Parameter, word: str) -> object:
    try:
        return param.type.convert(word, param, None)
    except click.BadParameter:
        return None


NUMBER_OPTIONS = _number_options()


def test_the_cli_has_number_options() -> None:
    names = {(name, param.name) for name, param in NUMBER_OPTIONS}
    assert {("check", "floor"), ("check", "run_timeout"), ("smoke run", "min_ratio")} <= names
    assert ("provision", "reboot_timeout") in names


@pytest.mark.parametrize("word", ["nan", "NaN", "inf", "-inf", "1e400"])
@pytest.mark.parametrize(
    ("command", "param"), NUMBER_OPTIONS, ids=[f"{c}:{p.name}" for c, p in NUMBER_OPTIONS]
)
def test_no_number_option_takes_a_non_finite_value(command, param, word) -> None:
    with pytest.raises(click.BadParameter):
        param.type.convert(word, param, None)


def test_a_nan_floor_is_one_line_before_anything_runs(tmp_path) -> None:
    inventory = tmp_path / "inv.py"
    inventory.write_text("gpu = ['n1.invalid', 'n2.invalid']\n", encoding="utf-8")
    run = gpuhost("check", str(inventory), "--tier", "collective", "--floor", "nan", cwd=tmp_path)
    assert run.code == 2 and "Traceback" not in run.err
    assert "--floor" in run.err and "'nan' is not a finite number" in run.err
