"""sim.claims.inputs: N Knowl 2 on batches of draws, and the root law that stands in when the
stationary law is not unique."""
import itertools

import numpy as np
import pytest

from sim.claims.inputs import (UNIFORM_FALLBACK, batch_chain_structure, chain_structure, default_root_name,
                               root_laws)
from sim.priors import parse_prior
from theory.markov import closed_classes


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
    got = chain_structure(np.array(pi, dtype=float))
    assert (got["unique stationary law"], got["irreducible"], got["aperiodic"]) == expected


def test_batch_matches_the_definition_on_every_zero_pattern_of_3_states():
    mats = []
    for bits in itertools.product((0, 1), repeat=9):
        A = np.array(bits, dtype=float).reshape(3, 3)
        if (A.sum(1) > 0).all():
            mats.append(A / A.sum(1, keepdims=True))
    mats = np.stack(mats)  # 343 patterns
    got = batch_chain_structure(mats)
    for k, pi in enumerate(mats):
        want = _brute(pi)
        assert {key: bool(v[k]) for key, v in got.items()} == want, pi


def test_batch_matches_on_sparse_draws():
    mats = parse_prior("sparse(dirichlet(alpha=0.3), threshold=0.15)").bind(5).sample(np.random.default_rng(0), 300)
    got = batch_chain_structure(mats)
    for k, pi in enumerate(mats):
        assert {key: bool(v[k]) for key, v in got.items()} == _brute(pi)


def test_uniform_root_stands_in_when_the_stationary_law_is_not_unique():
    ident = np.eye(2)
    (name, root), = root_laws(ident, ("stationary",))
    assert name == UNIFORM_FALLBACK == default_root_name(ident) and np.allclose(root, 0.5)
    assert [n for n, _ in root_laws(ident, ("stationary", "uniform"))] == ["uniform"]  # not twice
    assert root_laws(np.array([[0.5, 0.5], [0.2, 0.8]]), ("stationary",))[0] == ("stationary", None)
