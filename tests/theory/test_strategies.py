"""Tests of theory.strategies: every draw is valid, floors hold, degenerate cases are reachable."""
import itertools
import math

import numpy as np
import pytest
from hypothesis import Phase, find, given, settings, strategies as st

from theory import TheoryError, CausalTree, closed_classes, validate_prob_vector, validate_stochastic
from theory.strategies import (
    causal_trees,
    contexts,
    finite_priors,
    permutation_symmetrized,
    prob_vectors,
    stochastic_matrices,
    symmetric_priors,
)

# find() searches until the condition holds; derandomized so a reachability test is
# deterministic, without the example database so a stored hit cannot mask a regression.
# REACH skips shrinking (only that a hit exists matters); FIND shrinks (the minimal
# example is asserted).
FIND = settings(max_examples=2000, derandomize=True, database=None)
REACH = settings(FIND, phases=[Phase.generate])


def _floor_fraction():
    """min_entry as a fraction of 1/d: the extremes 0 and 1 and values between."""
    return st.one_of(st.sampled_from([0.0, 1.0, 0.5]), st.floats(0.0, 1.0))


# -- validity and floors -----------------------------------------------------------------
@given(st.data())
def test_prob_vectors_valid_with_floor(data):
    d = data.draw(st.integers(1, 8), label="d")
    min_entry = data.draw(_floor_fraction(), label="fraction") / d
    p = data.draw(prob_vectors(d, min_entry=min_entry), label="p")
    assert p.shape == (d,) and p.dtype == np.float64
    validate_prob_vector(p, d=d)
    assert p.min() >= min_entry
    assert abs(p.sum() - 1.0) <= 4 * d * np.finfo(float).eps  # renormalised, not just within 1e-8


@given(prob_vectors(st.integers(1, 6)))
def test_prob_vectors_accepts_strategy_of_sizes(p):
    validate_prob_vector(p)
    assert 1 <= p.size <= 6


@given(st.data())
def test_stochastic_matrices_valid_with_floor(data):
    d = data.draw(st.integers(1, 6), label="d")
    min_entry = data.draw(_floor_fraction(), label="fraction") / d
    pi = data.draw(stochastic_matrices(d, min_entry=min_entry), label="pi")
    assert pi.shape == (d, d)
    validate_stochastic(pi)
    assert pi.min() >= min_entry
    assert np.all(np.abs(pi.sum(axis=1) - 1.0) <= 4 * d * np.finfo(float).eps)


@given(stochastic_matrices(st.integers(1, 4), min_entry=0.0))
def test_stochastic_matrices_size_strategy(pi):
    validate_stochastic(pi)


def test_floor_equal_to_one_over_d_gives_uniform():
    p = find(prob_vectors(5, min_entry=0.2), lambda p: True, settings=REACH)
    np.testing.assert_allclose(p, 0.2, rtol=0, atol=1e-16)


@given(causal_trees(st.integers(1, 12)))
def test_causal_trees_are_random_recursive_trees(tree):
    assert isinstance(tree, CausalTree)
    par = tree.parents
    assert par[0] == -1 and tree.roots == (0,)
    assert all(0 <= par[h] < h for h in range(1, tree.n))


@given(causal_trees(st.integers(1, 12), forest=True))
def test_causal_forests(tree):
    par = tree.parents
    assert par[0] == -1
    assert all(-1 <= par[h] < h for h in range(1, tree.n))


@given(causal_trees(7))
def test_causal_trees_fixed_size(tree):
    assert tree.n == 7


@given(contexts(st.integers(1, 4), st.integers(1, 6), st.integers(1, 5)))
def test_contexts(x):
    assert x.ndim == 2 and x.dtype == np.int64
    assert x.min() >= 0


@given(st.data())
def test_contexts_token_range(data):
    L, H, d = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 6)), data.draw(st.integers(1, 5))
    x = data.draw(contexts(L, H, d))
    assert x.shape == (L, H)
    assert 0 <= x.min() and x.max() <= d - 1


@given(st.data())
def test_finite_priors(data):
    d, k = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    min_entry = data.draw(_floor_fraction()) / d
    pis, weights = data.draw(finite_priors(d, k, min_entry=min_entry))
    assert pis.shape == (k, d, d) and weights.shape == (k,)
    for j in range(k):
        validate_stochastic(pis[j])
    validate_prob_vector(weights, d=k)
    assert pis.min() >= min_entry


# -- degenerate cases are reachable, and shrinking goes to the simple ones ---------------------
def test_prob_vectors_reach_zeros_tiny_and_one_hot():
    p = find(prob_vectors(4), lambda p: np.any(p == 0.0), settings=REACH)
    assert np.any(p == 0.0)
    p = find(prob_vectors(4), lambda p: np.any((p > 0) & (p < 1e-8)), settings=REACH)
    assert 0 < p[p > 0].min() < 1e-8
    p = find(prob_vectors(4), lambda p: p.max() == 1.0, settings=REACH)
    assert sorted(p.tolist()) == [0.0, 0.0, 0.0, 1.0]


def test_near_zero_entries_are_common_not_just_reachable():
    """The docstring's tiny weights in [1e-12, 1e-9] exist so that a property test of ordinary size meets
    near-degenerate vectors: in 100 derandomized draws of prob_vectors(4) at least 10 have an entry in
    [1e-13, 1e-8] (about a third do; floats in [0, 1] alone land there in about 3 of 100 draws)."""
    seen = []

    @settings(max_examples=100, derandomize=True, database=None, phases=[Phase.generate])
    @given(prob_vectors(4))
    def draw(p):
        seen.append(bool(np.any((p >= 1e-13) & (p <= 1e-8))))

    draw()
    assert len(seen) == 100 and sum(seen) >= 10


def test_prob_vectors_floor_is_attained_and_tiny_above_floor():
    p = find(prob_vectors(3, min_entry=0.1), lambda p: np.any(p == 0.1), settings=REACH)
    assert np.any(p == 0.1)
    p = find(prob_vectors(3, min_entry=0.1), lambda p: np.any((p > 0.1) & (p < 0.1 + 1e-8)), settings=REACH)
    assert p.min() >= 0.1


def test_prob_vectors_shrink_to_uniform():
    p = find(prob_vectors(4), lambda p: True, settings=FIND)
    np.testing.assert_array_equal(p, np.full(4, 0.25))


def test_stochastic_matrices_reach_reducible_periodic_and_tiny():
    pi = find(stochastic_matrices(2), lambda pi: len(closed_classes(pi)) > 1, settings=REACH)
    np.testing.assert_array_equal(pi, np.eye(2))  # the only reducible 2-state chain
    swap = np.array([[0.0, 1.0], [1.0, 0.0]])
    pi = find(stochastic_matrices(2), lambda pi: np.array_equal(pi, swap), settings=REACH)
    np.testing.assert_array_equal(pi, swap)
    pi = find(stochastic_matrices(3), lambda pi: np.any((pi > 0) & (pi < 1e-8)), settings=REACH)
    assert np.any((pi > 0) & (pi < 1e-8))


def test_stochastic_matrices_with_floor_are_irreducible():
    # A search for a reducible chain under a floor must come back empty.
    from hypothesis.errors import NoSuchExample

    with pytest.raises(NoSuchExample):
        find(stochastic_matrices(3, min_entry=1e-3), lambda pi: len(closed_classes(pi)) != 1,
             settings=settings(REACH, max_examples=100))


def test_causal_trees_shrink_to_chain_and_reach_star():
    chain = find(causal_trees(6), lambda t: True, settings=FIND)
    assert chain == CausalTree([-1, 0, 1, 2, 3, 4])
    star = find(causal_trees(6), lambda t: np.all(t.parents[1:] == 0), settings=FIND)
    assert star == CausalTree([-1, 0, 0, 0, 0, 0])
    assert find(causal_trees(6, forest=True), lambda t: True, settings=FIND) == chain


def test_causal_forests_reach_all_roots_and_several_components():
    t = find(causal_trees(5, forest=True), lambda t: len(t.roots) == 5, settings=FIND)
    assert t == CausalTree([-1] * 5)
    t = find(causal_trees(6, forest=True), lambda t: len(t.roots) == 3 and t.depths.max() >= 2, settings=FIND)
    assert len(t.roots) == 3


def test_contexts_reach_every_token():
    x = find(contexts(2, 4, 3), lambda x: set(x.ravel().tolist()) == {0, 1, 2}, settings=REACH)
    assert set(x.ravel().tolist()) == {0, 1, 2}
    assert find(contexts(2, 4, 3), lambda x: True, settings=FIND).sum() == 0


# -- permutation symmetry ------------------------------------------------------------------
def _relabel(pis, perm):
    perm = np.asarray(perm)
    return pis[:, perm[:, None], perm[None, :]]


def _as_sorted_multiset(pis, weights):
    """Rows (atom entries..., weight) in lexicographic order: equal priors give equal arrays."""
    rows = np.concatenate([pis.reshape(len(pis), -1), weights[:, None]], axis=1)
    return rows[np.lexsort(rows.T[::-1])]


@given(finite_priors(st.integers(1, 4), st.integers(1, 3)))
def test_permutation_symmetrized_is_invariant(prior):
    pis, weights = prior
    sym, w = permutation_symmetrized(pis, weights)
    k, d = pis.shape[0], pis.shape[1]
    assert sym.shape == (k * math.factorial(d), d, d)
    validate_prob_vector(w, d=len(w))
    np.testing.assert_array_equal(sym[:: math.factorial(d)], pis)  # identity first in each block
    reference = _as_sorted_multiset(sym, w)
    for perm in itertools.permutations(range(d)):
        np.testing.assert_array_equal(_as_sorted_multiset(_relabel(sym, perm), w), reference)


@given(finite_priors(st.integers(2, 4), st.integers(1, 3), min_entry=0.0))
def test_permutation_symmetrized_mean_is_a_identity_plus_b_ones(prior):
    pis, weights = prior
    sym, w = permutation_symmetrized(pis, weights)
    d = pis.shape[1]
    tau = float(np.einsum("k,kii->", weights, pis))
    expected = np.full((d, d), (d - tau) / (d * (d - 1)))
    np.fill_diagonal(expected, tau / d)
    np.testing.assert_allclose(np.einsum("k,kij->ij", w, sym), expected, rtol=0, atol=1e-14)


def _orbit_mean(prior):
    sym, w = permutation_symmetrized(*prior)
    return np.einsum("k,kij->ij", w, sym)


def test_plain_orbit_need_not_have_uniform_mean():
    # Permutation symmetry alone does not give N's uniform mean: the orbit of the identity is itself.
    prior = find(finite_priors(3, 1), lambda pr: np.abs(_orbit_mean(pr) - 1 / 3).max() > 0.3, settings=REACH)
    assert np.abs(_orbit_mean(prior) - 1 / 3).max() > 0.3
    np.testing.assert_allclose(_orbit_mean((np.eye(3)[None], [1.0])), np.eye(3), rtol=0, atol=1e-15)


@given(st.data())
def test_symmetric_priors_meet_assumption_three(data):
    d = data.draw(st.integers(1, 4), label="d")
    min_entry = data.draw(_floor_fraction(), label="fraction") / d
    pis, w = data.draw(symmetric_priors(d, st.integers(1, 3), min_entry=min_entry), label="prior")
    for j in range(len(pis)):
        validate_stochastic(pis[j])
    validate_prob_vector(w, d=len(w))
    assert pis.min() >= min_entry
    np.testing.assert_allclose(np.einsum("k,kij->ij", w, pis), np.full((d, d), 1 / d), rtol=0, atol=1e-12)
    reference = _as_sorted_multiset(pis, w)
    for perm in itertools.permutations(range(d)):
        np.testing.assert_array_equal(_as_sorted_multiset(_relabel(pis, perm), w), reference)


@given(symmetric_priors(3, 2, uniform_mean=False))
def test_symmetric_priors_without_balancing_is_the_orbit(prior):
    pis, w = prior
    assert len(pis) == 2 * 6


def test_permutation_symmetrized_known_value():
    pis = np.array([[[0.9, 0.1], [0.3, 0.7]]])
    sym, w = permutation_symmetrized(pis, [1.0])
    np.testing.assert_array_equal(sym, [[[0.9, 0.1], [0.3, 0.7]], [[0.7, 0.3], [0.1, 0.9]]])
    np.testing.assert_array_equal(w, [0.5, 0.5])


# -- bad options ----------------------------------------------------------------------------
@pytest.mark.parametrize("make, match", [
    (lambda: prob_vectors(3, min_entry=-0.1), "negative"),
    (lambda: prob_vectors(3, min_entry=0.34), r"exceeds 1/d = 0.333333 for d = 3"),
    (lambda: prob_vectors(3, min_entry=float("nan")), "finite number"),
    (lambda: prob_vectors(3, min_entry="0.1"), "finite number"),
    (lambda: prob_vectors(3, min_entry=True), "finite number"),
    (lambda: prob_vectors(3, min_entry=1.5), "exceeds 1"),
    (lambda: prob_vectors(0), r"d = 0 must be >= 1"),
    (lambda: prob_vectors(2.5), "d must be an integer"),
    (lambda: prob_vectors("3"), "d must be an integer"),
    (lambda: stochastic_matrices(4, min_entry=0.3), "exceeds 1/d"),
    (lambda: stochastic_matrices(-1), "must be >= 1"),
    (lambda: causal_trees(0), r"n = 0 must be >= 1"),
    (lambda: causal_trees(3, forest="yes"), "forest must be True or False"),
    (lambda: contexts(0, 3, 2), r"L = 0"),
    (lambda: contexts(2, 3, 0), r"d = 0"),
    (lambda: finite_priors(3, 0), r"k = 0"),
    (lambda: finite_priors(2, 2, min_entry=0.6), "exceeds 1/d"),
    (lambda: symmetric_priors(7, 1), "d <= 6"),
    (lambda: symmetric_priors(3, 1, uniform_mean=1), "uniform_mean must be True or False"),
])
def test_bad_options_raise(make, match):
    with pytest.raises(TheoryError, match=match):
        make()


def test_floor_checked_against_each_drawn_size():
    @given(prob_vectors(st.just(4), min_entry=0.3))
    def draws(p):
        pass

    with pytest.raises(TheoryError, match=r"exceeds 1/d = 0.25 for d = 4"):
        draws()


def test_bad_drawn_size():
    @given(causal_trees(st.just(0)))
    def draws(t):
        pass

    with pytest.raises(TheoryError, match=r"n = 0 must be >= 1"):
        draws()


@pytest.mark.parametrize("pis, weights, match", [
    (np.eye(2), [1.0], r"shape \(k, d, d\)"),
    (np.ones((1, 2, 3)) / 3, [1.0], r"shape \(k, d, d\)"),
    (np.array([np.eye(2), [[0.5, 0.6], [0.5, 0.5]]]), [0.5, 0.5], r"pis\[1\] row 0 sums to"),
    (np.array([np.eye(2)]), [0.5, 0.5], "weights has length 2, expected 1"),
    (np.array([np.eye(2)]), [0.9], "weights sums to"),
    (np.array([np.eye(7)]), [1.0], "5040 permutations"),
    ([["a"]], [1.0], "could not be read"),
])
def test_permutation_symmetrized_bad_inputs(pis, weights, match):
    with pytest.raises(TheoryError, match=match):
        permutation_symmetrized(pis, weights)


def test_size_arguments_are_named_in_their_messages_and_d_six_is_the_symmetrised_limit():
    import re

    from theory.strategies import MAX_SYMMETRIZED_D

    for make in (lambda: finite_priors("x", 2), lambda: symmetric_priors("x", 2)):
        with pytest.raises(TheoryError, match="^" + re.escape("d must be an integer or a hypothesis strategy of "
                                                              "integers, got 'x'") + "$"):
            make()
    assert MAX_SYMMETRIZED_D == 6
    symmetric_priors(6, 1)  # 6! atoms: the largest d allowed
    with pytest.raises(TheoryError, match=re.escape("symmetric_priors supports d <= 6 (d! atoms), got d = 7")):
        symmetric_priors(7, 1)


def test_symmetric_priors_names_k_in_its_messages():
    import re

    with pytest.raises(TheoryError, match="^" + re.escape("k = 0 must be >= 1") + "$"):
        symmetric_priors(2, 0)
    with pytest.raises(TheoryError, match="^" + re.escape("k must be an integer or a hypothesis strategy of "
                                                          "integers, got 1.5") + "$"):
        symmetric_priors(2, 1.5)


def test_contexts_name_each_size_in_their_messages():
    import re

    for args, name in (((0, 2, 2), "L"), ((2, 0, 2), "H"), ((2, 2, 0), "d")):
        with pytest.raises(TheoryError, match="^" + re.escape(f"{name} = 0 must be >= 1") + "$"):
            contexts(*args)


def test_floor_messages_name_the_floor_and_the_sum():
    import re

    with pytest.raises(TheoryError, match="^" + re.escape("min_entry = 1.5 exceeds 1, so no probability vector "
                                                          "meets it") + "$"):
        prob_vectors(st.integers(1, 3), min_entry=1.5)
    with pytest.raises(TheoryError, match="^" + re.escape("min_entry = 0.3 exceeds 1/d = 0.25 for d = 4: d entries "
                                                          "of at least min_entry would sum to 1.2 > 1") + "$"):
        stochastic_matrices(4, min_entry=0.3)
    with pytest.raises(TheoryError, match="^" + re.escape("d = 0 must be >= 1") + "$"):
        stochastic_matrices(0)


def test_floored_vector_normalises_small_weights_and_puts_round_off_on_the_largest_entry():
    from theory.strategies import _floored_vector

    assert _floored_vector(np.array([0.2, 0.0, 0.2]), 0.0).tolist() == [0.5, 0.0, 0.5]  # sum 0.4 < 1: w / sum(w)
    assert _floored_vector(np.zeros(4), 0.1).tolist() == [0.25] * 4
    # these weights normalise to a vector summing to 1 - 1.1e-16; the correction makes it exactly 1
    w = np.array([0.9127555772777217, 0.6066357757671799, 0.7294965609839984, 0.5436249914654229, 0.9350724237877682])
    assert (w / w.sum()).sum() != 1.0 and _floored_vector(w, 0.0).sum() == 1.0


def test_validate_prior_names_pis_and_refuses_no_atoms():
    import re

    with pytest.raises(TheoryError, match="^pis could not be read as an array of numbers: "):
        permutation_symmetrized([["a"]], [1.0])
    with pytest.raises(TheoryError, match="^" + re.escape("pis must have shape (k, d, d) with k >= 1, got (0, 2, 2)")
                       + "$"):
        permutation_symmetrized(np.zeros((0, 2, 2)), [])


def test_permutation_symmetrized_takes_d_six():
    sym, w = permutation_symmetrized(np.eye(6)[None], [1.0])
    assert sym.shape == (720, 6, 6) and np.allclose(sym, np.eye(6)) and w.sum() == pytest.approx(1.0, rel=1e-14)
