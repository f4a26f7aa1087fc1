"""The graph families against their laws, the conversions, and validation that names the problem."""
import networkx as nx
import numpy as np
import pytest
from scipy import stats

from theory import CausalTree, TheoryError
from theory import graphs as G


# -- deterministic families: exact equality with their definitions ---------------------------
@pytest.mark.parametrize("T", [2, 3, 8, 21])
def test_n_deterministic_families_are_their_definitions(T):
    assert G.n_parents("chain", T).tolist() == [-1] + list(range(T - 2)) + [-1]
    assert G.n_parents("icl", T).tolist() == [-1 if i % 2 == 0 else i - 1 for i in range(T - 1)] + [-1]
    assert G.n_parents("star", T).tolist() == [-1] + [0] * (T - 2) + [-1]
    assert G.n_parents("roots", T).tolist() == [-1] * T
    assert G.to_parents(G.chain(T)).tolist() == G.n_parents("chain", T).tolist()
    assert G.chain(T).graph["query"] == T - 1


def test_markov_chain_and_k_parent_dags():
    assert G.to_parents(G.markov_chain(5)).tolist() == [-1, 0, 1, 2, 3]
    assert G.k_parent_sets("ngram", 4, 2) == [(), (), (0, 1), (1, 2), (2, 3)]
    assert G.k_parent_sets("notebook", 4, 2) == [(), (), (0, 1), (1, 2), (1, 3)]
    g = G.k_parent_dag("ngram", 6, 3)
    assert G.to_parent_sets(g, 3) == G.k_parent_sets("ngram", 6, 3) and g.graph["query"] == 6
    with pytest.raises(TheoryError, match="node 2 has 2 parents"):
        G.to_tree(G.k_parent_dag("ngram", 4, 2))
    rng = np.random.default_rng(0)
    for ps in G.k_parent_sets("random", 12, 3, rng)[3:]:
        assert len(ps) == 3 and list(ps) == sorted(set(ps))


# -- random families: chi-square of the parent law per position -------------------------------
def _chi2_z(counts: np.ndarray, probs: np.ndarray) -> float:
    """The chi-square statistic's upper-tail probability, as a normal z."""
    n = counts.sum()
    stat = float((((counts - n * probs) ** 2) / (n * probs)).sum())
    return float(stats.norm.isf(stats.chi2.sf(stat, df=len(probs) - 1)))


def _random_law_z(draw, T: int, expected) -> list[float]:
    pars = np.stack([draw() for _ in range(10_000)])
    zs = []
    for i in range(1, T - 1):
        probs = expected(i)
        support = np.arange(-1, i)
        counts = np.array([(pars[:, i] == v).sum() for v in support], dtype=float)
        assert counts[probs == 0].sum() == 0, f"position {i} drew a parent outside the law's support"
        zs.append(_chi2_z(counts[probs > 0], probs[probs > 0]))
    return zs


def _n_random_law(i):  # Unif{-1, 0, .., i-1}
    return np.full(i + 1, 1.0 / (i + 1))


def _many_law(i):  # a root w.p. 1/2, else Unif{0..i-1}
    return np.concatenate([[0.5], np.full(i, 0.5 / i)])


@pytest.mark.parametrize("name, law", [("random", _n_random_law), ("many", _many_law)])
def test_ns_random_graph_laws_per_position_at_z4(name, law):
    rng = np.random.default_rng(2026)
    zs = _random_law_z(lambda: G.n_parents(name, 20, rng), 20, law)
    assert max(zs) < 4, zs


def test_the_chi_square_check_catches_a_wrong_law():
    rng = np.random.default_rng(7)
    zs = _random_law_z(lambda: G.n_parents("many", 20, rng), 20, _n_random_law)  # many-graphs read as N's random law
    assert max(zs) > 4


def test_w_random_recursive_trees_per_position_at_z4():
    rng = np.random.default_rng(11)
    pars = G.random_recursive_parents(rng, 12, size=10_000)
    assert (pars[:, 0] == -1).all()
    assert (pars[:, 1] == 0).all()
    for h in range(2, 12):
        counts = np.bincount(pars[:, h], minlength=h).astype(float)
        assert len(counts) == h and _chi2_z(counts, np.full(h, 1.0 / h)) < 4


def test_random_families_need_a_seeded_generator():
    with pytest.raises(TheoryError, match="seeded generator"):
        G.family("random", 10)
    a = G.family("random", 10, np.random.default_rng(3))
    b = G.family("random", 10, np.random.default_rng(3))
    assert nx.utils.graphs_equal(a, b)


# -- conversions and validation ---------------------------------------------------------------
def test_round_trip_through_causal_tree():
    tree = CausalTree([-1, 0, 0, 1, -1])
    g = G.from_parents(tree)
    assert G.to_tree(g) == tree and g.nodes[4]["root"] and not g.nodes[3]["root"]


def test_validation_names_the_cycle_the_edge_and_the_node():
    cyc = nx.DiGraph([(0, 1), (1, 2), (2, 0)])
    with pytest.raises(TheoryError, match="cycle: 0 -> 1 -> 2 -> 0"):
        G.validate(cyc)
    with pytest.raises(TheoryError, match="edge 3 -> 1 points forwards"):
        G.validate(nx.DiGraph([(0, 1), (3, 1), (2, 3)]))
    with pytest.raises(TheoryError, match="position 1 is missing"):
        G.validate(nx.DiGraph([(0, 2)]))
    with pytest.raises(TheoryError, match="node 'a' is not an integer"):
        G.validate(nx.DiGraph([("a", 0)]))
    with pytest.raises(TheoryError, match="node 2 has 2 parents"):
        G.validate(nx.DiGraph([(0, 2), (1, 2)]), max_parents=1)


def test_unknown_family_lists_the_known_ones():
    with pytest.raises(TheoryError, match="expected one of chain, icf"):
        G.family("lattice", 5)


def test_ws_trees_drawn_in_torch_follow_the_same_law():
    import torch

    from sim.graphs import random_recursive_parents_torch

    pars = random_recursive_parents_torch(torch.Generator().manual_seed(5), 10_000, 12).numpy()
    assert (pars[:, 0] == -1).all() and (pars[:, 1] == 0).all()
    for h in range(2, 12):
        counts = np.bincount(pars[:, h], minlength=h).astype(float)
        assert len(counts) == h and _chi2_z(counts, np.full(h, 1.0 / h)) < 4


# -- a user's graph (GivenGraph) and the exact messages: pinned path by path -------------------
def _msg(text):
    import re

    return "^" + re.escape(text) + "$"


def test_a_given_graph_keeps_its_label_and_sorted_parents_through_copies_and_pickles():
    import copy
    import pickle

    g = G.GivenGraph("mine", [[], [0], [1, 0], []])
    assert str(g) == "mine" and g.parent_sets == ((), (0,), (0, 1), ())
    for other in (copy.deepcopy(g), pickle.loads(pickle.dumps(g))):
        assert str(other) == "mine" and other.parent_sets == g.parent_sets
    built = G.GivenGraph.from_graph("from nx", nx.DiGraph([(0, 2), (1, 2), (0, 1)]))
    assert str(built) == "from nx" and built.parent_sets == ((), (0,), (0, 1))


def test_a_given_graph_as_a_parent_array_roots_are_minus_one():
    g = G.GivenGraph("tree", [[], [0], [0], [], [3]])
    par = G.n_parents(g, 5)
    assert par.dtype == np.int64 and par.tolist() == [-1, 0, 0, -1, 3]
    assert G.n_parents(G.GivenGraph("two", [[], []]), 2).tolist() == [-1, -1]  # T = 2: context and query
    with pytest.raises(TheoryError, match=_msg("graph tree has 5 positions, not the 6 asked for")):
        G.n_parents(g, 6)
    with pytest.raises(TheoryError, match=_msg("graph dag: node 2 has 2 parents [0, 1]; at most one here")):
        G.n_parents(G.GivenGraph("dag", [[], [0], [0, 1]]), 3)


def test_a_given_graph_as_k_parent_sets():
    g = G.GivenGraph("dag", [[], [0], [0, 1], [1, 2]])
    assert G.k_parent_sets(g, 3, k=2) == [(), (0,), (0, 1), (1, 2)]
    with pytest.raises(TheoryError, match=_msg("graph dag has 4 nodes (T prompt positions and the target), "
                                               "not the 5 asked for")):
        G.k_parent_sets(g, 4, k=2)
    with pytest.raises(TheoryError, match=_msg("graph dag: node 2 has 2 parents [0, 1]; at most k = 1 here")):
        G.k_parent_sets(g, 3, k=1)


def test_n_parents_needs_a_context_and_a_query():
    assert G.n_parents("chain", 2).tolist() == [-1, -1]
    with pytest.raises(TheoryError, match=_msg("T must be >= 2 (context and query), got 1")):
        G.n_parents("chain", 1)
    with pytest.raises(TheoryError, match=_msg("the many graph law needs a seeded generator (rng)")):
        G.n_parents("many", 5)
    with pytest.raises(TheoryError, match=_msg("unknown graph 'lattice'; expected chain, icl, star, roots, random "
                                               "or many")):
        G.n_parents("lattice", 5)
    for alias, name in (("icf", "icl"), ("function", "icl"), ("empty", "roots")):
        assert G.n_parents(alias, 7).tolist() == G.n_parents(name, 7).tolist()


def test_n_many_graphs_keeps_position_zero_and_the_query_roots():
    rng = np.random.default_rng(1)
    pars = np.stack([G.n_parents("many", 6, rng) for _ in range(200)])
    assert (pars[:, 0] == -1).all() and (pars[:, -1] == -1).all()
    assert ((pars[:, 1] == -1) | (pars[:, 1] == 0)).all() and (pars[:, 1] == 0).any()


def test_k_parent_sets_limits_and_messages():
    assert G.k_parent_sets("ngram", 3, 3) == [(), (), (), (0, 1, 2)]  # k = T: only the target has parents
    assert G.k_parent_sets("ngram", 3, 1) == [(), (0,), (1,), (2,)]
    for k, T in ((0, 3), (4, 3)):
        with pytest.raises(TheoryError, match=_msg(f"a k-parent DAG needs 1 <= k <= T, got k={k}, T={T}")):
            G.k_parent_sets("ngram", T, k)
    with pytest.raises(TheoryError, match=_msg("N's notebook graph has k = 2 parents")):
        G.k_parent_sets("notebook", 4, 3)
    with pytest.raises(TheoryError, match=_msg("the random k-parent law needs a seeded generator (rng)")):
        G.k_parent_sets("random", 4, 2)
    with pytest.raises(TheoryError, match=_msg("unknown k-parent graph 'star'; expected ngram, notebook or random")):
        G.k_parent_sets("star", 4, 2)
    for name in ("ngram", "notebook", "random"):
        sets = G.k_parent_sets(name, 6, 2, np.random.default_rng(0))
        assert len(sets) == 7 and sets[:2] == [(), ()] and all(len(s) == 2 and max(s) < i
                                                              for i, s in enumerate(sets) if i >= 2)


def test_random_k_parent_sets_are_uniform_subsets():
    """Each of the C(i, k) subsets of 0..i-1 equally likely (chi-square at z = 4)."""
    from itertools import combinations

    rng = np.random.default_rng(5)
    draws = [G.k_parent_sets("random", 5, 2, rng)[5] for _ in range(6000)]
    support = list(combinations(range(5), 2))
    counts = np.array([draws.count(s) for s in support], dtype=float)
    assert counts.sum() == len(draws) and _chi2_z(counts, np.full(len(support), 1 / len(support))) < 4


def test_graphs_carry_roots_names_and_queries():
    rng = np.random.default_rng(0)
    cases = [
        (G.chain(5), "chain (T=5)", 4), (G.in_context_function(5), "in-context function (T=5)", 4),
        (G.star(5), "star (T=5)", 4), (G.roots(5), "roots (T=5)", 4),
        (G.n_random(5, rng), "N random graph (T=5)", 4), (G.n_many_graphs(5, rng), "N many-graphs draw (T=5)", 4),
        (G.random_recursive_tree(5, rng), "W random recursive tree (H=5)", None),
        (G.markov_chain(5), "Markov chain (T=5)", 4), (G.k_parent_dag("ngram", 4, 2), "ngram 2-parent DAG (T=4)", 4),
    ]
    for g, name, query in cases:
        assert g.graph == {"name": name, "query": query}
        assert g.number_of_nodes() == 5
        assert all(g.nodes[v]["root"] == (g.in_degree(v) == 0) for v in g.nodes)
    assert G.to_parents(G.in_context_function(5)).tolist() == [-1, 0, -1, 2, -1]
    assert G.to_parents(G.star(5)).tolist() == [-1, 0, 0, 0, -1]
    assert G.to_parents(G.roots(4)).tolist() == [-1] * 4
    assert G.to_parents(G.random_recursive_tree(4, np.random.default_rng(0)))[:2].tolist() == [-1, 0]
    assert G.to_parents(G.markov_chain(1)).tolist() == [-1]
    with pytest.raises(TheoryError, match=_msg("T must be >= 1, got 0")):
        G.markov_chain(0)
    assert G.to_parent_sets(G.k_parent_dag("notebook", 4)) == [(), (), (0, 1), (1, 2), (1, 3)]


def test_from_parent_sets_marks_roots_and_validates():
    g = G.from_parent_sets([(), (0,), (0, 1)], name="mine", query=2)
    assert g.graph == {"name": "mine", "query": 2} and [g.nodes[v]["root"] for v in g] == [True, False, False]
    assert G.from_parent_sets([(), ()]).graph == {"name": "", "query": None}
    with pytest.raises(TheoryError, match="edge 2 -> 1 points forwards"):
        G.from_parent_sets([(), (2,), ()])


def test_every_family_by_name_and_alias():
    rng = np.random.default_rng(4)
    for name, T in (("chain", 6), ("ICL", 6), (" function ", 6), ("empty", 6), ("star", 6), ("markov", 6),
                    ("ngram", 6)):
        assert G.family(name, T).number_of_nodes() == T
    assert G.to_parents(G.family("icl", 6)).tolist() == G.to_parents(G.in_context_function(6)).tolist()
    assert G.to_parents(G.family("empty", 4)).tolist() == [-1] * 4
    assert G.to_parent_sets(G.family("ngram", 5)) == G.k_parent_sets("ngram", 4, 2)
    for name in ("random", "many", "tree"):
        with pytest.raises(TheoryError, match=_msg(f"the {name} graph law is random and needs a seeded generator "
                                                   "(rng)")):
            G.family(name, 6)
        assert G.family(name, 6, rng).number_of_nodes() == 6
    assert G.family("tree", 6, rng).graph["name"] == "W random recursive tree (H=6)"
    assert G.family("many", 6, rng).graph["name"] == "N many-graphs draw (T=6)"
    with pytest.raises(TheoryError, match=_msg("unknown graph family 'lattice'; expected one of chain, icf, star, "
                                               "roots, random, many, tree, markov, ngram")):
        G.family("lattice", 5)


def test_validation_messages_word_for_word():
    with pytest.raises(TheoryError, match=_msg("a causal graph is a networkx.DiGraph, got Graph")):
        G.validate(nx.Graph([(0, 1)]))
    with pytest.raises(TheoryError, match=_msg("a causal graph is a networkx.DiGraph, got MultiDiGraph")):
        G.validate(nx.MultiDiGraph([(0, 1)]))
    with pytest.raises(TheoryError, match=_msg("the graph has no nodes")):
        G.validate(nx.DiGraph())
    with pytest.raises(TheoryError, match=_msg("node True is not an integer position; nodes must be 0..n-1")):
        G.validate(nx.DiGraph([(0, True)]))
    with pytest.raises(TheoryError, match=_msg("nodes must be the positions 0..1: position 1 is missing and node 5 "
                                               "is out of range")):
        G.validate(nx.DiGraph([(0, 5)]))
    with pytest.raises(TheoryError, match=_msg("nodes must be the positions 0..1: position 0 is missing and node -1 "
                                               "is out of range")):
        G.validate(_nodes(1, -1))
    # the same cycle listed from another node reads the same
    with pytest.raises(TheoryError, match=_msg("the graph has a cycle: 0 -> 1 -> 2 -> 0")):
        G.validate(nx.DiGraph([(1, 2), (2, 0), (0, 1)]))
    with pytest.raises(TheoryError, match=_msg("edge 2 -> 1 points forwards: a parent must come before its child "
                                               "(p < i)")):
        G.validate(nx.DiGraph([(0, 2), (2, 1)]))
    with pytest.raises(TheoryError, match=_msg("node 2 has 2 parents [0, 1]; at most 1 allowed here")):
        G.validate(nx.DiGraph([(0, 2), (1, 2)]), max_parents=1)
    G.validate(nx.DiGraph([(0, 2), (1, 2)]), max_parents=2)  # exactly the limit is allowed
    assert G.to_parent_sets(nx.DiGraph([(0, 2), (1, 2)]), 2) == [(), (), (0, 1)]
    with pytest.raises(TheoryError, match="at most 1 allowed here"):
        G.to_parent_sets(nx.DiGraph([(0, 2), (1, 2)]), 1)


def _nodes(*nodes):
    g = nx.DiGraph()
    g.add_nodes_from(nodes)
    return g


def test_random_recursive_parents_sizes_and_message():
    import re

    rng = np.random.default_rng(0)
    assert G.random_recursive_parents(rng, 1).tolist() == [-1]
    par = G.random_recursive_parents(rng, 6, size=5)
    assert par.shape == (5, 6) and par.dtype == np.int64 and (par[:, 0] == -1).all()
    assert all(0 <= par[b, h] < h for b in range(5) for h in range(1, 6))
    with pytest.raises(TheoryError, match="^" + re.escape("H must be >= 1, got 0") + "$"):
        G.random_recursive_parents(rng, 0)


def test_parent_arrays_are_int64_and_random_families_draw_parents_per_position():
    rng = np.random.default_rng(1)
    for name in ("chain", "icl", "star", "roots", "random", "many"):
        assert G.n_parents(name, 12, rng).dtype == np.int64, name
    # one uniform draw per position, not one shared by all: p(i) = floor(u_i (i + 1)) - 1 for "random"
    # and floor(u_i i) for a child in "many", so u_i ~ (p(i) + 1) / (i + 1) (resp. p(i) / i) spreads over
    # [0, 1) across positions (a shared u would keep them within 1/(i + 1) of each other)
    i = np.arange(10, 79)
    for name, shift, scale in (("random", 1, i + 1), ("many", 0, i)):
        par = G.n_parents(name, 80, np.random.default_rng(2))[10:79]
        u = ((par + shift) / scale)[par >= 0]
        assert u.size > 20 and u.max() - u.min() > 0.5, name
    g = nx.DiGraph([(0, 1), (1, 2)])
    assert G.to_parents(g).dtype == np.int64
    assert G.GivenGraph("g", [[], [0], [1]]).parents(3).dtype == np.int64


def test_validate_names_the_missing_position_and_the_one_out_of_range():
    import re

    g = nx.DiGraph()
    g.add_nodes_from([0, 1, 3])
    with pytest.raises(TheoryError, match="^" + re.escape("nodes must be the positions 0..2: position 2 is missing and "
                                                          "node 3 is out of range") + "$"):
        G.validate(g)


def test_k_parent_dag_is_reproducible_from_its_generator():
    a = G.k_parent_dag("random", 12, 2, np.random.default_rng(5))
    b = G.k_parent_dag("random", 12, 2, np.random.default_rng(5))
    assert sorted(a.edges) == sorted(b.edges)


def test_default_arguments_k_two_parents_and_an_empty_name():
    assert G.k_parent_sets("ngram", 5) == G.k_parent_sets("ngram", 5, 2)
    assert G.from_parents([-1, 0, 1]).graph["name"] == ""
