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
