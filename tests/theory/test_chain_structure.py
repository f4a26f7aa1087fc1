"""theory.markov.chain_structure_batch: N Knowl 2's conditions (unique stationary law, irreducible,
aperiodic) on a stack of matrices, against the definitions (reachability by matrix powers, the
period as the gcd of return times) and against networkx's graph algorithms."""
import itertools

import networkx as nx
import numpy as np
import pytest

from theory.markov import chain_structure_batch, closed_classes


def _brute(pi):
    """Irreducible / aperiodic / unique by definition: reachability by matrix powers, period as the
    gcd of return times (up to 2d steps) of each closed class."""
    d = pi.shape[0]
    A = (pi > 0).astype(int)
    R = np.linalg.matrix_power(A + np.eye(d, dtype=int), d) > 0
    classes = closed_classes(pi)
    aperiodic = True
    for c in classes:
        sub = A[np.ix_(c, c)]
        returns = [k for k in range(1, 2 * d + 2) if np.linalg.matrix_power(sub, k)[0, 0] > 0]
        g = 0
        for k in returns:
            g = np.gcd(g, k)
        aperiodic &= g == 1
    return {"unique stationary law": len(classes) == 1, "irreducible": bool(R.all()), "aperiodic": bool(aperiodic)}


@pytest.mark.parametrize("pi, expected", [
    ([[0, 1], [1, 0]], (True, True, False)),  # the flip: period 2
    ([[1, 0], [0.5, 0.5]], (True, False, True)),  # a transient state
    ([[1, 0], [0, 1]], (False, False, True)),  # two closed classes
    ([[0, 1, 0], [0, 0, 1], [1, 0, 0]], (True, True, False)),  # a 3-cycle
    ([[0, 0.5, 0.5], [1, 0, 0], [1, 0, 0]], (True, True, False)),  # bipartite: period 2
    ([[0.5, 0.5, 0], [0.5, 0, 0.5], [0, 1, 0]], (True, True, True)),  # a self-loop makes it aperiodic
])
def test_chain_structure_by_hand(pi, expected):
    got = {k: bool(v[0]) for k, v in chain_structure_batch(np.array(pi, dtype=float)[None]).items()}
    assert (got["unique stationary law"], got["irreducible"], got["aperiodic"]) == expected


def test_batch_matches_the_definition_on_every_zero_pattern_of_3_states():
    mats = []
    for bits in itertools.product((0, 1), repeat=9):
        A = np.array(bits, dtype=float).reshape(3, 3)
        if (A.sum(1) > 0).all():
            mats.append(A / A.sum(1, keepdims=True))
    mats = np.stack(mats)  # 343 patterns
    got = chain_structure_batch(mats)
    for k, pi in enumerate(mats):
        want = _brute(pi)
        assert {key: bool(v[k]) for key, v in got.items()} == want, pi


def test_batch_matches_on_sparse_draws():
    rng = np.random.default_rng(0)
    mats = rng.dirichlet(np.full(5, 0.3), size=(300, 5))
    mats[mats < 0.15] = 0.0  # sparse rows: every kind of zero pattern, as the audit's sparse priors give
    mats[mats.sum(-1) == 0] = 1.0
    mats /= mats.sum(-1, keepdims=True)
    got = chain_structure_batch(mats)
    for k, pi in enumerate(mats):
        assert {key: bool(v[k]) for key, v in got.items()} == _brute(pi)


def test_batch_matches_networkx():
    """An independent oracle: strongly connected components and periods from networkx."""
    rng = np.random.default_rng(1)
    for _ in range(200):
        d = int(rng.integers(2, 7))
        A = (rng.random((d, d)) < 0.35).astype(float)
        A[A.sum(1) == 0, rng.integers(0, d)] = 1.0
        pi = A / A.sum(1, keepdims=True)
        g = nx.DiGraph([(i, j) for i in range(d) for j in range(d) if pi[i, j] > 0])
        g.add_nodes_from(range(d))
        cond = nx.condensation(g)
        closed = [cond.nodes[c]["members"] for c in cond if cond.out_degree(c) == 0]
        want = {"unique stationary law": len(closed) == 1, "irreducible": nx.is_strongly_connected(g),
                "aperiodic": all(nx.is_aperiodic(g.subgraph(c)) for c in closed)}
        got = {k: bool(v[0]) for k, v in chain_structure_batch(pi[None]).items()}
        assert got == want, pi
