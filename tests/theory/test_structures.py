"""Tests of theory.structures: CausalTree accessors, lca, networkx round trip, bad inputs."""
import re

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, strategies as st

from theory import CausalTree, TheoryError
from theory.strategies import causal_trees

# -- known values ----------------------------------------------------------------------------
#        0            5
#       / \           |
#      1   2          6
#      |
#      3
#      |
#      4
FOREST = CausalTree([-1, 0, 0, 1, 3, -1, 5])


def test_accessors_on_a_known_forest():
    t = FOREST
    np.testing.assert_array_equal(t.parents, [-1, 0, 0, 1, 3, -1, 5])
    assert t.parents.dtype == np.int64
    assert t.n == len(t) == 7
    assert t.roots == (0, 5)
    np.testing.assert_array_equal(t.depths, [0, 1, 1, 2, 3, 0, 1])
    assert [t.depth(h) for h in range(7)] == [0, 1, 1, 2, 3, 0, 1]
    np.testing.assert_array_equal(t.root_of, [0, 0, 0, 0, 0, 5, 5])
    assert t.parent(0) is None and t.parent(4) == 3 and t.parent(6) == 5
    assert t.ancestors(4) == [4, 3, 1, 0]
    assert t.ancestors(5) == [5]
    assert t.children(0) == [1, 2] and t.children(4) == []
    assert t.leaves == (2, 4, 6)


def test_lca_known_values():
    t = FOREST
    assert t.lca(4, 2) == 0
    assert t.lca(2, 4) == 0
    assert t.lca(4, 3) == 3  # an ancestor is its own lca with a descendant
    assert t.lca(4, 4) == 4
    assert t.lca(1, 4) == 1
    assert t.lca(6, 5) == 5
    assert t.lca(4, 6) is None  # different components of the forest
    assert t.lca(0, 5) is None


def test_single_node_and_chain():
    t = CausalTree([-1])
    assert t.n == 1 and t.roots == (0,) and t.leaves == (0,) and t.lca(0, 0) == 0
    chain = CausalTree(range(-1, 5))
    np.testing.assert_array_equal(chain.depths, np.arange(6))
    assert chain.lca(2, 5) == 2


def test_parents_are_read_only_and_a_copy():
    src = np.array([-1, 0, 1])
    t = CausalTree(src)
    with pytest.raises(ValueError):
        t.parents[1] = 0
    src[2] = 0
    assert t.parents[2] == 1  # later edits of the input do not leak in


def test_integral_floats_are_accepted():
    assert CausalTree([-1.0, 0.0, 1.0]) == CausalTree([-1, 0, 1])
    assert CausalTree(np.array([-1, 0], dtype=np.int32)) == CausalTree([-1, 0])


def test_equality_hash_repr():
    a, b = CausalTree([-1, 0, 0]), CausalTree(np.array([-1, 0, 0]))
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != CausalTree([-1, 0, 1]) and a != [-1, 0, 0]
    assert repr(a) == "CausalTree([-1, 0, 0])"


# -- lca against brute force ---------------------------------------------------------------------
def _lca_brute_force(parents, i, j):
    """Deepest node in anc(i) ∩ anc(j), from explicit ancestor sets."""
    def anc(h):
        out = {h}
        while parents[h] >= 0:
            h = parents[h]
            out.add(h)
        return out

    common = anc(i) & anc(j)
    if not common:
        return None
    depth = {h: len(anc(h)) for h in common}
    return max(common, key=depth.get)


@given(st.one_of(causal_trees(st.integers(1, 14)), causal_trees(st.integers(1, 14), forest=True)))
def test_lca_matches_ancestor_set_intersection(tree):
    par = tree.parents.tolist()
    for i in range(tree.n):
        for j in range(tree.n):
            assert tree.lca(i, j) == _lca_brute_force(par, i, j), (i, j)


@given(causal_trees(st.integers(1, 14), forest=True))
def test_depths_roots_and_ancestors_agree(tree):
    for h in range(tree.n):
        path = tree.ancestors(h)
        assert path[0] == h and path[-1] == tree.root_of[h] and path[-1] in tree.roots
        assert len(path) == tree.depth(h) + 1
        assert all(tree.parent(path[k]) == path[k + 1] for k in range(len(path) - 1))
    assert set(tree.leaves) == {h for h in range(tree.n) if not tree.children(h)}


# -- networkx --------------------------------------------------------------------------------------
@given(causal_trees(st.integers(1, 14), forest=True))
def test_networkx_round_trip(tree):
    g = tree.to_networkx()
    assert isinstance(g, nx.DiGraph)
    assert sorted(g.nodes) == list(range(tree.n))
    assert sorted(g.edges) == sorted((int(p), h) for h, p in enumerate(tree.parents) if p >= 0)
    assert nx.is_forest(g)
    assert CausalTree.from_networkx(g) == tree


def test_from_networkx_known_graph():
    g = nx.DiGraph([(0, 2), (1, 3), (2, 4)])
    assert CausalTree.from_networkx(g) == CausalTree([-1, -1, 0, 1, 2])


def test_from_networkx_in_degree_two_names_node():
    g = nx.DiGraph([(0, 2), (1, 2)])
    with pytest.raises(TheoryError, match=r"node 2 has 2 parents \[0, 1\]"):
        CausalTree.from_networkx(g)


def test_from_networkx_cycle_names_a_node():
    g = nx.DiGraph([(0, 1), (1, 2), (2, 0)])  # every in-degree is 1: only the cycle is wrong
    with pytest.raises(TheoryError, match=r"cycle through node [012]"):
        CausalTree.from_networkx(g)
    g = nx.DiGraph([(1, 1)])  # a self-loop
    g.add_node(0)
    with pytest.raises(TheoryError, match=r"cycle through node 1"):
        CausalTree.from_networkx(g)


def test_from_networkx_forward_edge_names_node():
    g = nx.DiGraph([(2, 1)])
    g.add_node(0)
    with pytest.raises(TheoryError, match=r"node 1: parent 2 comes after it"):
        CausalTree.from_networkx(g)


@pytest.mark.parametrize("nodes", [[1, 2, 3], ["a", "b"], [0, 2], [0, 1.5]])
def test_from_networkx_rejects_other_labels(nodes):
    g = nx.DiGraph()
    g.add_nodes_from(nodes)
    with pytest.raises(TheoryError, match=r"graph nodes must be the integers 0..n-1"):
        CausalTree.from_networkx(g)


def test_from_networkx_rejects_undirected():
    with pytest.raises(TheoryError, match=r"expects a networkx.DiGraph, got Graph"):
        CausalTree.from_networkx(nx.Graph([(0, 1)]))


# -- bad inputs ------------------------------------------------------------------------------------
@pytest.mark.parametrize("parents, match", [
    ([-1, 0, 3, 1], r"node 2: parent 3 comes after it"),
    ([-1, 2, 0], r"node 1: parent 2 comes after it"),
    ([-1, 1], r"node 1: parent 1 is itself \(a self-loop is a cycle\)"),
    ([0], r"node 0: parent 0 is itself"),
    ([-1, -2], r"node 1: parent -2 is invalid"),
    # (the value may print as a numpy scalar repr, e.g. np.float64(0.5); the position is what matters)
    ([-1, 0.5], r"parents\[1\] = \S*0\.5\S* is not an integer"),
    ([-1, float("nan")], r"parents\[1\] = \S*nan\S* is not an integer"),
    (["a"], r"parents\[0\] = \S*'a'\S* is not an integer"),
    ([True, False], r"parents\[0\] = \S*True\S* is not an integer"),
    ([[-1, 0], [0, 1]], r"1-d array, got shape \(2, 2\)"),
    (np.zeros((1, 1, 1)), r"1-d array, got shape \(1, 1, 1\)"),
    ([], r"parents is empty"),
])
def test_bad_parents_named(parents, match):
    with pytest.raises(TheoryError, match=match):
        CausalTree(parents)


@pytest.mark.parametrize("parents, message", [
    ([], "parents is empty: a causal tree needs at least one node"),
    ([-1, 2, 0], "node 1: parent 2 comes after it; parents must satisfy parents[h] < h (this also rules out cycles)"),
])
def test_bad_parents_whole_message(parents, message):
    """The whole sentence, not a fragment: it is what a user reads."""
    with pytest.raises(TheoryError, match="^" + re.escape(message) + "$"):
        CausalTree(parents)


@pytest.mark.parametrize("parents, entry", [
    (np.array([-1.0, 0.5]), r"parents\[1\] = 0\.5"),
    (np.array([-1.0, np.nan]), r"parents\[1\] = nan"),
    (np.array([-1.0, np.inf]), r"parents\[1\] = inf"),
    (np.array([-1.0, 0.0, -np.inf]), r"parents\[2\] = -inf"),
    (np.array([True, False]), r"parents\[0\] = True"),
    (np.array(["-1", "0"]), r"parents\[0\] = '-1'"),
])
def test_an_array_of_non_integers_is_refused_naming_the_entry(parents, entry):
    """An ndarray skips the per-entry check of a list, so its dtype path must name the first bad entry itself:
    a float array is accepted only if every entry is a finite integer (0.5 is not truncated, inf not cast)."""
    with pytest.raises(TheoryError, match="^" + entry + " is not an integer$"):
        CausalTree(parents)


def test_a_float_array_of_whole_numbers_is_the_same_tree():
    """``np.array([-1., 0., 0.])`` is what a numpy user often holds; it is the integer tree, not an error."""
    t = CausalTree(np.array([-1.0, 0.0, 0.0, 1.0]))
    assert t == CausalTree([-1, 0, 0, 1])
    assert t.parents.dtype == np.int64
    assert CausalTree(np.array([-1, 0, 0, 1], dtype=np.float32)) == t  # any float width, not only float64


@pytest.mark.parametrize("call, match", [
    (lambda t: t.lca(0, 7), r"j 7 is out of range for a tree with 7 nodes \(0..6\)"),
    (lambda t: t.lca(-1, 0), r"i -1 is out of range"),
    (lambda t: t.depth(1.5), r"node 1.5 is not an integer position"),
    (lambda t: t.parent(True), r"node True is not an integer position"),
    (lambda t: t.ancestors("0"), r"node '0' is not an integer position"),
    (lambda t: t.children(9), r"node 9 is out of range"),
])
def test_bad_node_arguments_named(call, match):
    with pytest.raises(TheoryError, match=match):
        call(FOREST)


def test_from_networkx_names_the_first_ten_bad_labels_of_mixed_types():
    g = nx.DiGraph()
    g.add_nodes_from(["b", "a", 10, 3, "c", "d", "e", "f", "g", "h", "i", "j"])
    with pytest.raises(TheoryError, match=r"^graph nodes must be the integers 0..n-1, got \[10, 3, 'a', 'b', 'c', 'd', "
                                          r"'e', 'f', 'g', 'h'\]$"):
        CausalTree.from_networkx(g)


def test_distinct_trees_hash_apart():
    """Equal trees hash equal (test above); distinct ones spread over the hash values, so that sets and dicts
    of trees stay fast."""
    trees = {CausalTree(p) for p in ([-1], [-1, 0], [-1, -1], [-1, 0, 0], [-1, 0, 1], [-1, -1, 1], [-1, 0, -1])}
    assert len({hash(t) for t in trees}) == 7
