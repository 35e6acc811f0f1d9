"""A scripted stand-in for a host connection (``gpuhost.upgrade.remote.Remote``)."""

from __future__ import annotations

from collections.abc import Callable

from gpuhost.upgrade.remote import Result

Answer = Result | Callable[[str], Result]


class UnscriptedCommand(AssertionError):
    """The code under test ran a command no rule answers (a typo, or a command the test did not
    expect): the test fails instead of the command silently "succeeding"."""


class ScriptedRemote:
    """Answers commands by the first matching substring rule; records every command. A command
    no rule matches fails the test (``UnscriptedCommand``); script every command the code runs,
    a blanket ``.on("", ok())`` only where a test really accepts anything."""

    def __init__(self, host: str = "h1", rules: list[tuple[str, Answer]] | None = None):
        self.host = host
        self.rules = list(rules or [])
        self.commands: list[str] = []

    def on(self, needle: str, answer: Answer) -> ScriptedRemote:
        self.rules.insert(0, (needle, answer))
        return self

    def run(self, command: str, timeout: float | None = None) -> Result:
        self.commands.append(command)
        for needle, answer in self.rules:
            if needle in command:
                return answer(command) if callable(answer) else answer
        raise UnscriptedCommand(f"{self.host}: unscripted command: {command!r}")


def ok(stdout: str = "") -> Result:
    return Result(0, stdout, "")


def fail(stderr: str, rc: int = 1) -> Result:
    return Result(rc, "", stderr)
