"""An empty (or missing) sshd_config on a checked host is one line, no traceback (issue 29):
test_ssh_dropins_are_read_first asserted on it bare, so pytest printed the assertion's
introspection ('assert False ... where False = include_precedes_settings([])')."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from gpuhost.checks.test_ssh import test_ssh_dropins_are_read_first as dropins_are_read_first
from gpuhost.facts.sshd import include_problem


@dataclass
class _File:
    exists: bool
    content_string: str


class _Root:
    uid = 0


class _Host:
    def __init__(self, content: str | None) -> None:
        self._file = _File(content is not None, content or "")

    def user(self) -> _Root:
        return _Root()

    def file(self, path: str) -> _File:
        assert path == "/etc/ssh/sshd_config"
        return self._file


@pytest.mark.parametrize(
    ("content", "line"),
    [
        ("", "/etc/ssh/sshd_config has no directive (empty or only comments): expected "),
        ("# c\n\n", "/etc/ssh/sshd_config has no directive (empty or only comments): expected "),
        (None, "/etc/ssh/sshd_config is missing (expected "),
        ("Port 22\n", "/etc/ssh/sshd_config: expected 'Include /etc/ssh/sshd_config.d/*.conf' "
         "as its first directive, found 'Port 22'"),
    ],
)
def test_a_config_without_the_include_first_fails_with_one_line(content: Any, line: str) -> None:
    with pytest.raises(pytest.fail.Exception) as failed:
        dropins_are_read_first(_Host(content))
    assert str(failed.value).startswith(line) and "\n" not in str(failed.value)
    assert failed.value.pytrace is False


def test_a_config_reading_the_dropins_first_passes() -> None:
    dropins_are_read_first(_Host("# Debian\nInclude /etc/ssh/sshd_config.d/*.conf\nPort 22\n"))
    assert include_problem(["Include /etc/ssh/sshd_config.d/*.conf"]) is None
