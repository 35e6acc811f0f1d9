"""A host's ``gpuhost_profile`` must name a profile of the table that host is judged against
(``--profiles`` wins over ``gpuhost_profiles_file``, both merged over the built-ins), checked by
the one inventory loader before any host is contacted, in every command that uses profiles.
The hosts are ``.invalid`` names: a command that tried to connect would report them unreachable
(exit 1), so exit 2 with the profile line proves the refusal came first."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.robustness.conftest import ROOT, Run, assert_one_line, gpuhost

MY_PROFILES = ROOT / "inventories" / "profiles" / "my-h100.yaml"

COMMANDS = [
    ["inventory", "check"],
    ["audit"],
    ["provision"],
    ["check", "--tier", "static"],
    ["upgrade", "--to", "debian12-nonfree-535-security", "--dry"],
]


def _inventory(tmp_path: Path, data: dict[str, str]) -> str:
    inv = tmp_path / "inv.py"
    inv.write_text(f"gpu = [('n1.invalid', {{}}), ('n2.invalid', {data!r})]\n", encoding="utf-8")
    return str(inv)


def _run(command: list[str], inv: str, *extra: str) -> Run:
    """``gpuhost COMMAND INV OPTIONS...`` (the inventory right after the command's words)."""
    head = command[:2] if command[0] == "inventory" else command[:1]
    return gpuhost(*head, inv, *command[len(head) :], *extra)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_an_unknown_profile_name_is_refused_before_connecting(
    tmp_path: Path, command: list[str]
) -> None:
    inv = _inventory(tmp_path, {"gpuhost_profile": "debian12-nonfree-535-securty"})
    run = _run(command, inv)
    assert_one_line(
        run,
        2,
        "host n2.invalid",
        "gpuhost_profile",
        "'debian12-nonfree-535-securty'",
        "profiles: built-in)",
        "debian12-nonfree-535-security, ",  # the known names are listed
        "did you mean debian12-nonfree-535-security?",
    )
    assert "unreachable" not in run.out + run.err  # no host was contacted


@pytest.mark.parametrize("how", ["--profiles", "gpuhost_profiles_file"])
def test_a_profile_from_the_hosts_profiles_file_is_known(tmp_path: Path, how: str) -> None:
    url = "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/"
    data = {  # my-h100 installs from NVIDIA's repository: its URL, key and key checksum
        "gpuhost_profile": "my-h100",
        "gpuhost_cuda_repo_url": url,
        "gpuhost_cuda_repo_key": url + "3bf863cc.pub",
        "gpuhost_cuda_repo_key_sha256": "a" * 64,
    }
    extra: list[str] = []
    if how == "--profiles":
        extra = ["--profiles", str(MY_PROFILES)]
    else:
        data["gpuhost_profiles_file"] = str(MY_PROFILES)
    run = gpuhost("inventory", "check", _inventory(tmp_path, data), *extra)
    assert run.code == 0 and "2 hosts, inventory data ok" in run.out, run.err
    # without the file the same name is refused, naming the file-less table
    bare = gpuhost("inventory", "check", _inventory(tmp_path, {"gpuhost_profile": "my-h100"}))
    assert_one_line(bare, 2, "host n2.invalid", "'my-h100'", "(profiles: built-in)")


def test_the_profiles_option_wins_over_the_hosts_file(tmp_path: Path) -> None:
    other = tmp_path / "other.yaml"
    other.write_text("profiles: {}\n", encoding="utf-8")
    data = {"gpuhost_profile": "my-h100", "gpuhost_profiles_file": str(MY_PROFILES)}
    inv = _inventory(tmp_path, data)
    for command in (["audit"], ["upgrade", "--to", "debian12-nonfree-535-security", "--dry"]):
        run = _run(command, inv, "--profiles", str(other))
        assert_one_line(run, 2, "host n2.invalid", "'my-h100'", f"built-in + {other})")


def test_limit_leaves_an_unselected_hosts_profile_alone(tmp_path: Path) -> None:
    inv = _inventory(tmp_path, {"gpuhost_profile": "nope"})
    run = gpuhost("inventory", "check", inv, "--limit", "n1.invalid")
    assert run.code == 0 and "1 host, inventory data ok" in run.out, run.err


def test_commands_that_use_no_profile_are_not_stopped_by_one(tmp_path: Path) -> None:
    """Taking a snapshot (before a rollback, say) never depends on the profile names: the
    command goes on to the hosts (here: names that do not resolve, exit 1)."""
    inv = _inventory(tmp_path, {"gpuhost_profile": "nope"})
    run = gpuhost("snapshot", "take", inv, "--state-dir", str(tmp_path / "state"))
    assert run.code == 1, run.err
    assert "gpuhost_profile" not in run.err + run.out
    assert "unreachable" in run.out + run.err
