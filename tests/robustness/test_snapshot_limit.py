"""``gpuhost snapshot take INVENTORY --limit ...`` selects hosts with the one ``--limit`` meaning
(``gpuhost.inventory.loader``: groups or globs, comma lists, repeatable, an item matching nothing
is exit 2). The hosts are ``.invalid`` names, so a host the command tries reports itself
unreachable: the output shows exactly which hosts were tried."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.robustness.conftest import assert_one_line, gpuhost

INVENTORY = """\
gpu_a = ['a1.invalid', 'a2.invalid']
gpu_b = ['b1.invalid']
"""


def _tried(out: str) -> list[str]:
    """The hosts reported unreachable, each line naming its host once ('h: unreachable over
    SSH: ...'; it was 'h: failed: h: unreachable ...')."""
    tried = []
    for line in out.splitlines():
        host, _, rest = line.partition(": ")
        if rest.startswith("unreachable over SSH"):
            assert host not in rest.split(":", 1)[0] and "failed" not in line, line
            tried.append(host)
    return sorted(tried)


@pytest.fixture()
def inv(tmp_path: Path) -> str:
    path = tmp_path / "inv.py"
    path.write_text(INVENTORY, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    ("limit", "hosts"),
    [
        (["--limit", "gpu_b"], ["b1.invalid"]),
        (["--limit", "a2*"], ["a2.invalid"]),
        (["--limit", "gpu_b,a1.invalid"], ["a1.invalid", "b1.invalid"]),
        (["--limit", "gpu_b", "--limit", "a1.invalid"], ["a1.invalid", "b1.invalid"]),
        ([], ["a1.invalid", "a2.invalid", "b1.invalid"]),
    ],
)
def test_snapshot_take_limit_selects_hosts(
    inv: str, tmp_path: Path, limit: list[str], hosts: list[str]
) -> None:
    run = gpuhost("snapshot", "take", inv, *limit, "--state-dir", str(tmp_path / "state"))
    assert run.code == 1 and "Traceback" not in run.err, run.err  # unreachable hosts fail
    assert _tried(run.out) == hosts, run.out


def test_the_short_form_takes_limit_too(inv: str, tmp_path: Path) -> None:
    run = gpuhost("snapshot", inv, "--limit", "gpu_b", "--state-dir", str(tmp_path / "s"))
    assert _tried(run.out) == ["b1.invalid"], run.out + run.err


def test_a_limit_matching_nothing_is_one_line_exit_2(inv: str, tmp_path: Path) -> None:
    run = gpuhost("snapshot", "take", inv, "--limit", "gpu_c", "--state-dir", str(tmp_path / "s"))
    assert_one_line(run, 2, "--limit gpu_c", "matches no host or group", "gpu_a, gpu_b")
    assert not (tmp_path / "s" / "snapshots").exists() or not any(
        (tmp_path / "s" / "snapshots").iterdir()
    )
