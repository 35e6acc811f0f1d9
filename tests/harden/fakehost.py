"""Run a gpuhost operation's generator against fixture facts, without pyinfra state or a host.

Facts are looked up by fact name without the ``gpuhost.facts.`` prefix (``sshd.SshdConfigFiles``)
and, for facts with arguments, by ``key=value`` strings (``user=ops``), as in pyinfra's own
fixture tests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyinfra.api import FileUploadCommand, FunctionCommand, StringCommand
from pyinfra.context import ctx_host


class FakeData(dict):
    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key, default)


class FakeHost:
    name = "fakehost"
    connector = None
    current_op_global_arguments: dict[str, Any] = {}

    def __init__(self, facts: dict[str, Any], data: dict[str, Any] | None = None) -> None:
        self.facts = facts
        self.data = FakeData(data or {})
        self.noops: list[str] = []

    def get_fact(self, cls: type, *args: Any, **kwargs: Any) -> Any:
        name = cls.name.removeprefix("gpuhost.facts.")  # type: ignore[attr-defined]
        if name not in self.facts:
            raise KeyError(f"fixture has no fact {name}")
        value = self.facts[name]
        if kwargs:
            key = ",".join(f"{k}={v}" for k, v in sorted(kwargs.items()))
            if key not in value:
                raise KeyError(f"fixture has no fact {name} for {key}")
            value = value[key]
        return value

    def noop(self, description: str) -> None:
        self.noops.append(description)


def command_to_json(command: Any) -> Any:
    if isinstance(command, str):
        return command
    if isinstance(command, StringCommand):
        return str(command)
    if isinstance(command, FileUploadCommand):
        return {"upload": command.dest, "content": command.src.getvalue()}  # type: ignore[union-attr]
    if isinstance(command, FunctionCommand):
        return {"function": command.function.__name__, "args": list(command.args)}
    raise TypeError(f"unexpected command {command!r}")


def run_operation(
    op: Callable[..., Any], facts: dict[str, Any], args: list[Any], kwargs: dict[str, Any]
) -> tuple[list[Any], list[str]]:
    """The commands ``op`` yields for these facts, and its noop descriptions."""
    fake = FakeHost(facts)
    with ctx_host.use(fake):
        commands = [command_to_json(c) for c in op._inner(*args, **kwargs)]  # type: ignore[attr-defined]
    return commands, fake.noops
