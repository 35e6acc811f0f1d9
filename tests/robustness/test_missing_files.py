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


@pytest.mark.parametrize(
    "command",
    [
        ["audit"],
        ["provision"],
        ["check"],  # said 'host h1: gpuhost_profiles_file: ...', blaming the inventory
        ["upgrade", "--to", "debian12-nonfree-535-security", "--dry"],
        ["inventory", "check"],
    ],
    ids=lambda c: c[0],
)
def test_missing_profiles_file_is_one_line(tmp_path: Path, command: list[str]) -> None:
    inv = tmp_path / "inv.py"
    inv.write_text("hosts = [('h1', {'ssh_hostname': '10.123.255.9'})]\n", encoding="utf-8")
    head = command[:2] if command[0] == "inventory" else command[:1]
    run = gpuhost(*head, str(inv), *command[len(head) :], "--profiles", "nosuch.yaml", cwd=tmp_path)
    assert run.code == 2, run
    assert run.err.strip().splitlines() == [
        "gpuhost: error: nosuch.yaml: cannot read the profiles file: No such file or directory"
    ]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_an_inventory_that_is_not_python_is_refused_by_its_suffix(
    tmp_path: Path, command: list[str]
) -> None:
    """A YAML inventory was executed as Python: 'hosts: [gpu1]' is a valid annotation, so the
    error said the inventory had no hosts."""
    (tmp_path / "fleet.yaml").write_text("hosts: [gpu1]\n", encoding="utf-8")
    run = gpuhost(*command, "fleet.yaml", cwd=tmp_path)
    assert run.code == 2, run
    assert run.err.strip().splitlines() == [
        "gpuhost: error: fleet.yaml: not a pyinfra inventory (expected a Python file ending in "
        ".py that defines host lists, e.g. gpu_nodes = ['n1', 'n2']; found a .yaml file)"
    ]


def test_host_names_in_place_of_an_inventory_get_the_inventory_to_write(tmp_path: Path) -> None:
    # pyinfra's CLI takes 'gpu1,gpu2' as hosts; gpuhost says how to put them in an inventory
    run = gpuhost("audit", "gpu1,gpu2", cwd=tmp_path)
    assert run.code == 2, run
    assert run.err.strip().splitlines() == [
        "gpuhost: error: gpu1,gpu2: inventory file not found (expected a pyinfra inventory .py; "
        "to name hosts directly, write them in one: hosts = ['gpu1', 'gpu2'])"
    ]
