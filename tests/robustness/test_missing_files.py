"""A missing or wrong file named on the command line is the same one line, exit 2, for every
command that takes it (the loaders' words, not click's 'Invalid value' usage block)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.robustness.conftest import gpuhost

COMMANDS = [
    ["audit"],
    ["check"],
    ["provision", "--dry"],
    ["harden", "--dry"],
    ["snapshot"],
    ["upgrade", "--to", "debian12-nonfree-535-security", "--dry"],
    ["inventory", "check"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_missing_inventory_is_one_line(tmp_path: Path, command: list[str]) -> None:
    run = gpuhost(*command, str(tmp_path / "nosuch.py"), cwd=tmp_path)
    assert run.code == 2, run
    assert run.err.strip().splitlines() == [
        f"gpuhost: error: {tmp_path / 'nosuch.py'}: inventory file not found "
        "(expected a pyinfra inventory .py)"
    ]


@pytest.mark.parametrize("command", ["audit", "provision"])
def test_missing_profiles_file_is_one_line(tmp_path: Path, command: str) -> None:
    inv = tmp_path / "inv.py"
    inv.write_text("hosts = [('h1', {'ssh_hostname': '10.123.255.9'})]\n", encoding="utf-8")
    run = gpuhost(command, str(inv), "--profiles", "nosuch.yaml", cwd=tmp_path)
    assert run.code == 2, run
    assert run.err.strip().splitlines() == [
        "gpuhost: error: nosuch.yaml: cannot read the profiles file ([Errno 2] No such file or "
        "directory: 'nosuch.yaml')"
    ]
