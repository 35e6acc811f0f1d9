"""``--limit`` costs what it selects: the selection's pyinfra inventory holds only the selected
hosts (pyinfra's State.init, which every fleet command runs on it, costs the square of its
hosts), with the data the whole inventory gives them: their own, their groups' (in the file and
in group_data/), ``all``'s. Behaviour only; the speed is bench/limit_select.py's
(docs/benchmarks.md), never asserted by a timed test."""

from __future__ import annotations

from pathlib import Path

from gpuhost.inventory.loader import select


def _inventory(tmp_path: Path) -> str:
    (tmp_path / "group_data").mkdir()
    (tmp_path / "group_data" / "all.py").write_text("site = 'x'\n")
    (tmp_path / "group_data" / "gpu.py").write_text("rack = 'r1'\n")
    path = tmp_path / "inv.py"
    path.write_text(
        "gpu = ([('g1', {'ssh_port': 2201}), 'g2', 'g3'], {'pool': 'train'})\n"
        "login = ['l1', ('g2', {'ssh_user': 'ops'})]\n"
        "spare = [f's{i}' for i in range(50)]\n"
    )
    return str(path)


def test_a_limited_selection_holds_only_its_hosts_with_all_their_data(tmp_path):
    path = _inventory(tmp_path)
    whole = select(path)

    some = select(path, limit="g2,l1")

    assert some.names == ["g2", "l1"] and len(some.inventory) == 2
    assert len(whole.inventory) == 54
    for name in some.names:
        assert some.data(name) == whole.data(name)
        assert some.groups(name) == whole.groups(name)
    assert some.data("g2")["pool"] == "train" and some.data("g2")["rack"] == "r1"
    assert some.data("g2")["ssh_user"] == "ops" and some.data("l1")["site"] == "x"


def test_a_group_and_a_shard_narrow_it_too(tmp_path):
    path = _inventory(tmp_path)

    group = select(path, limit="gpu")
    shard = select(path, limit="spare", shard="2/25")

    assert group.names == ["g1", "g2", "g3"] and len(group.inventory) == 3
    assert group.data("g1")["ssh_port"] == 2201
    assert shard.names == ["s1", "s26"] and len(shard.inventory) == 2
