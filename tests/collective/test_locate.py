"""The slow-node search's plan (pure): which sets run, in which order, and what is named."""

from __future__ import annotations

import pytest

from gpuhost.collective.locate import halves, locate, pairs


def _slow_when(condition):
    """A fake run: a subset meets the floor unless ``condition(set of its nodes)``."""
    asked = []

    def meets(subset):
        asked.append(subset)
        return not condition(set(subset))

    return meets, asked


def test_pairs_and_halves():
    assert pairs(["a", "b", "c", "d"]) == [("a", "b"), ("c", "d")]
    assert pairs(["a", "b", "c"]) == [("a", "b"), ("c", "a")]
    assert pairs(["a"]) == []
    assert halves(["a", "b", "c", "d", "e"]) == (("a", "b", "c"), ("d", "e"))


def test_one_slow_node_is_named_with_four_more_runs():
    meets, asked = _slow_when(lambda s: "h3" in s)

    found = locate(["h2", "h3", "h4", "h5"], meets)

    assert found.nodes == ("h3",) and found.links == () and found.named == "node h3"
    assert asked == [("h2", "h3"), ("h4", "h5"), ("h2", "h4"), ("h3", "h4")]
    assert [ok for _, ok in found.runs] == [False, True, True, False]


def test_a_slow_link_between_two_good_nodes():
    meets, _ = _slow_when(lambda s: {"h2", "h3"} <= s)

    found = locate(["h2", "h3", "h4", "h5"], meets)

    assert found.nodes == () and found.links == (("h2", "h3"),)
    assert found.named == "link h2 <-> h3"


def test_two_slow_nodes_in_different_pairs():
    meets, _ = _slow_when(lambda s: bool(s & {"n1", "n4"}))

    found = locate(["n1", "n2", "n3", "n4", "n5", "n6"], meets)

    assert found.nodes == ("n1", "n4")


def test_every_pair_slow_names_every_node_and_says_why():
    meets, asked = _slow_when(lambda s: True)

    found = locate(["a", "b", "c", "d"], meets)

    assert found.nodes == ("a", "b", "c", "d")
    assert "every pair is below the floor" in found.note
    assert asked == [("a", "b"), ("c", "d")]  # nothing else to learn


def test_only_a_large_set_is_slow_halves_find_the_smallest():
    # every pair meets the floor; any set of 3+ nodes holding both a and b is slow
    meets, asked = _slow_when(lambda s: len(s) >= 3 and {"a", "b"} <= s)

    found = locate(["a", "b", "c", "d", "e", "f", "g", "h"], meets)

    assert found.nodes == () and found.links == ()
    assert found.group == ("a", "b", "c", "d")
    assert "every pair meets the floor" in found.note
    # the halves of a,b,c,d are pairs already run: asked once each, never again
    assert asked[4:] == [("a", "b", "c", "d"), ("e", "f", "g", "h")]


def test_an_odd_node_is_checked_against_the_first():
    meets, _ = _slow_when(lambda s: "c" in s)

    found = locate(["a", "b", "c"], meets)

    assert found.nodes == ("c",)


@pytest.mark.parametrize("nodes", [[], ["only"]])
def test_nothing_to_split(nodes):
    meets, asked = _slow_when(lambda s: True)

    assert locate(nodes, meets).named == "nothing" and asked == []
