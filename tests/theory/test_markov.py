"""Tests of theory.markov: validation, closed classes, stationary laws (incl. tiny entries), powers."""
import re

import numpy as np
import pytest
import scipy.linalg
import sympy as sp
from hypothesis import given, strategies as st

from theory import TheoryError, closed_classes, stationary, validate_prob_vector, validate_stochastic
from theory.markov import ROW_SUM_ATOL, matrix_powers, stationary_batch, stationary_positive
from theory.strategies import stochastic_matrices


# -- validate_stochastic ---------------------------------------------------------------------------
def test_validate_stochastic_returns_float64_copy():
    src = [[1, 0], [0.25, 0.75]]
    out = validate_stochastic(src)
    assert out.dtype == np.float64 and out.shape == (2, 2)
    arr = np.array([[0.5, 0.5], [0.5, 0.5]])
    out = validate_stochastic(arr)
    out[0, 0] = 9.0
    assert arr[0, 0] == 0.5


def test_validate_stochastic_zero_entries_and_tolerance():
    validate_stochastic(np.eye(3))  # reducible but valid
    validate_stochastic([[0.5, 0.5 + 0.5 * ROW_SUM_ATOL], [1.0, 0.0]])
    with pytest.raises(TheoryError, match=r"row 0 sums to"):
        validate_stochastic([[0.5, 0.5 + 2 * ROW_SUM_ATOL], [1.0, 0.0]])
    validate_stochastic([[0.5, 0.51], [1.0, 0.0]], atol=0.02)


def test_the_row_sum_tolerance_is_inclusive():
    """A sum off by exactly ``atol`` is within tolerance (``|sum - 1| <= atol``, as ``numpy.isclose``).

    The values are dyadic, so ``1.25 - 1`` is exactly ``0.25`` in float64 and the boundary is hit
    exactly; just past it the input is refused."""
    validate_stochastic([[0.5, 0.75], [1.0, 0.0]], atol=0.25)
    validate_prob_vector([0.5, 0.75], atol=0.25)
    with pytest.raises(TheoryError, match=r"row 0 sums to 1.2500001"):
        validate_stochastic([[0.5, 0.7500001], [1.0, 0.0]], atol=0.25)
    with pytest.raises(TheoryError, match=r"p sums to 1.2500001"):
        validate_prob_vector([0.5, 0.7500001], atol=0.25)


@pytest.mark.parametrize("pi, match", [
    ([[0.5, 0.5], [np.nan, 1.0]], r"pi\[1, 0\] = nan is not finite \(row 1\)"),
    ([[0.5, np.inf], [0.0, 1.0]], r"pi\[0, 1\] = inf is not finite \(row 0\)"),
    ([[0.5, 0.5], [1.0, -np.inf]], r"pi\[1, 1\] = -inf is not finite"),
    ([[1.0, 0.0, 0.0], [0.2, 0.9, -0.1], [0.0, 0.0, 1.0]], r"pi\[1, 2\] = -0.1 is negative \(row 1\)"),
    ([[1.0, 0.0], [0.3, 0.6]], r"pi row 1 sums to 0.9 \(off by -0.1\)"),
    ([[0.5, 0.6], [0.3, 0.7]], r"pi row 0 sums to 1.1 \(off by \+0.1\)"),
    ([0.5, 0.5], r"non-empty square \(d, d\) matrix, got shape \(2,\)"),
    ([[0.5, 0.5]], r"square \(d, d\) matrix, got shape \(1, 2\)"),
    (np.ones((2, 2, 2)) / 2, r"got shape \(2, 2, 2\)"),
    (np.zeros((0, 0)), r"got shape \(0, 0\)"),
    ([["a", "b"], ["c", "d"]], r"could not be read as an array of numbers"),
    ([[0.5, 0.5], [1.0]], r"could not be read as an array of numbers"),
])
def test_validate_stochastic_bad_inputs(pi, match):
    with pytest.raises(TheoryError, match=match):
        validate_stochastic(pi)


def test_validate_stochastic_rectangular_and_name():
    K = [[0.2, 0.3, 0.5], [1.0, 0.0, 0.0]]
    assert validate_stochastic(K, square=False).shape == (2, 3)
    with pytest.raises(TheoryError, match=r"K must be a non-empty square"):
        validate_stochastic(K, name="K")
    with pytest.raises(TheoryError, match=r"2-d \(d_in, d_out\) matrix, got shape \(3,\)"):
        validate_stochastic([0.2, 0.3, 0.5], square=False)
    with pytest.raises(TheoryError, match=r"K row 1 sums to 0.5"):
        validate_stochastic([[0.2, 0.8], [0.25, 0.25]], name="K", square=False)


@pytest.mark.parametrize("shape", [(0, 3), (3, 0)])
def test_a_channel_with_no_rows_or_no_columns_is_refused(shape):
    """A rectangular channel needs at least one input and one output state: an empty side would pass
    every entry and row-sum check vacuously."""
    message = f"K must be a non-empty 2-d (d_in, d_out) matrix, got shape {shape}"
    with pytest.raises(TheoryError, match=re.escape(message)):
        validate_stochastic(np.zeros(shape), name="K", square=False)


# -- validate_prob_vector --------------------------------------------------------------------------
def test_validate_prob_vector_accepts():
    out = validate_prob_vector([0, 1, 0], d=3)
    assert out.dtype == np.float64
    validate_prob_vector([1.0])


@pytest.mark.parametrize("p, kwargs, match", [
    ([0.5, 0.5], {"d": 3}, r"p has length 2, expected 3"),
    ([[0.5, 0.5]], {}, r"1-d probability vector, got shape \(1, 2\)"),
    ([], {}, r"got shape \(0,\)"),
    ([0.5, np.nan], {}, r"p\[1\] = nan is not finite"),
    ([1.5, -0.5], {}, r"p\[1\] = -0.5 is negative"),
    ([0.5, 0.4], {}, r"p sums to 0.9 \(off by -0.1\)"),
    ([0.5, 0.4], {"name": "root"}, r"root sums to 0.9"),
    (["x"], {}, r"could not be read"),
    (["x"], {"name": "root"}, r"root could not be read"),
])
def test_validate_prob_vector_bad_inputs(p, kwargs, match):
    with pytest.raises(TheoryError, match=match):
        validate_prob_vector(p, **kwargs)


# -- closed classes ----------------------------------------------------------------------------------
def _closed_classes_brute_force(pi):
    """Closed communicating classes from the boolean transitive closure (Warshall)."""
    d = pi.shape[0]
    reach = (pi > 0) | np.eye(d, dtype=bool)
    for k in range(d):
        reach |= reach[:, [k]] & reach[[k], :]
    classes = {tuple(np.flatnonzero(reach[i] & reach[:, i]).tolist()) for i in range(d)}
    closed = [list(c) for c in classes if set(np.flatnonzero(reach[c[0]]).tolist()) <= set(c)]
    return sorted(closed)


def test_closed_classes_known():
    assert closed_classes(np.eye(3)) == [[0], [1], [2]]
    assert closed_classes([[0.5, 0.5, 0], [0.5, 0.5, 0], [0.2, 0.3, 0.5]]) == [[0, 1]]
    tiny = np.array([[1.0, 0.0], [1e-300, 1 - 1e-300]])  # 1e-300 still connects 1 -> 0
    assert closed_classes(tiny) == [[0]]


@given(stochastic_matrices(st.integers(1, 6)))
def test_closed_classes_match_brute_force(pi):
    assert sorted(closed_classes(pi)) == _closed_classes_brute_force(pi)


# -- stationary --------------------------------------------------------------------------------------
@given(stochastic_matrices(st.integers(1, 6)))
def test_stationary_is_invariant_or_refused(pi):
    classes = closed_classes(pi)
    if len(classes) != 1:
        with pytest.raises(TheoryError, match=rf"{len(classes)} closed classes"):
            stationary(pi)
        return
    mu = stationary(pi)
    validate_prob_vector(mu, d=pi.shape[0])
    assert mu.min() >= 0
    np.testing.assert_allclose(mu @ pi, mu, rtol=0, atol=1e-14)
    transient = np.setdiff1d(np.arange(pi.shape[0]), classes[0])
    assert np.all(mu[transient] == 0.0)


def test_stationary_reducible_lists_classes():
    pi = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.5, 0.25, 0.25]]
    with pytest.raises(TheoryError, match=r"^pi has 2 closed classes \[\[0\], \[1\]\], so its stationary law is not "
                                          r"unique; pass an explicit root law \(root=\.\.\.\) instead of the stationary one$"):
        stationary(pi)
    pi = [[0.5, 0.5, 0, 0], [0.5, 0.5, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]]
    with pytest.raises(TheoryError, match=r"2 closed classes \[\[0, 1\], \[2, 3\]\]"):
        stationary(pi)


def test_stationary_periodic_chains():
    np.testing.assert_allclose(stationary([[0, 1], [1, 0]]), [0.5, 0.5], rtol=0, atol=1e-16)
    cycle = np.roll(np.eye(3), 1, axis=1)
    np.testing.assert_allclose(stationary(cycle), np.full(3, 1 / 3), rtol=0, atol=1e-16)
    # a bipartite chain with period 2: 0 <-> {1, 2}
    pi = [[0, 0.25, 0.75], [1, 0, 0], [1, 0, 0]]
    np.testing.assert_allclose(stationary(pi), [0.5, 0.125, 0.375], rtol=0, atol=1e-16)


def test_stationary_transient_states_get_exact_zero():
    pi = [[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]]
    mu = stationary(pi)
    assert mu[2] == 0.0
    np.testing.assert_allclose(mu, [0.5, 0.5, 0.0], rtol=0, atol=1e-16)


def test_stationary_one_state():
    np.testing.assert_array_equal(stationary([[1.0]]), [1.0])


def test_stationary_two_state_tiny_entry_relative_accuracy():
    eps = 1e-12
    mu = stationary([[1 - eps, eps], [0.5, 0.5]])  # mu1 / mu0 = eps / 0.5
    expected_1 = 2 * eps / (1 + 2 * eps)
    assert abs(mu[1] / expected_1 - 1) < 1e-14


def _exact_stationary(off_diagonal: dict, d: int):
    """Rational stationary law of the chain with these off-diagonal entries (diagonal = 1 - rest).

    The float entries are converted to rationals exactly; the diagonal is what the rows
    imply, which is also all the GTH algorithm reads.
    """
    P = np.zeros((d, d))
    R = sp.zeros(d, d)
    for (i, j), v in off_diagonal.items():
        P[i, j], R[i, j] = v, sp.Rational(v)
    for i in range(d):
        P[i, i] = 1 - P[i].sum()
        R[i, i] = 1 - sum(R[i, j] for j in range(d) if j != i)
    # mu (R - I) = 0 with sum(mu) = 1: replace the last balance equation by the normalisation.
    A = (R.T - sp.eye(d))[: d - 1, :].col_join(sp.ones(1, d))
    b = sp.zeros(d - 1, 1).col_join(sp.Matrix([1]))
    mu = A.LUsolve(b)
    assert sp.simplify(mu.T * R - mu.T) == sp.zeros(1, d)
    return P, np.array([float(x) for x in mu])


# Two strongly connected blocks {0, 1} and {2, 3} coupled by entries of order 1e-12: the
# second eigenvalue is 1 - 4e-12, so an eigenvector solver loses ~1e-5 relative accuracy.
NEARLY_DECOMPOSABLE = {(0, 1): 0.3, (1, 0): 0.6, (2, 3): 0.25, (3, 2): 0.5,
                       (0, 2): 1e-12, (2, 0): 3e-12, (1, 3): 2e-12}


def test_stationary_tiny_couplings_against_rational_reference():
    P, mu_exact = _exact_stationary(NEARLY_DECOMPOSABLE, 4)
    mu = stationary(P)
    np.testing.assert_allclose(mu, mu_exact, rtol=1e-13, atol=0)


def test_stationary_tiny_entries_against_rational_reference():
    off = {(0, 1): 1e-12, (1, 0): 0.3, (1, 2): 0.7, (2, 0): 1e-12, (2, 1): 0.5}
    P, mu_exact = _exact_stationary(off, 3)
    assert mu_exact[1] < 1e-11  # the tiny entry makes a tiny stationary mass
    np.testing.assert_allclose(stationary(P), mu_exact, rtol=1e-13, atol=0)


def test_eigenvector_variant_fails_the_tiny_coupling_check():
    # The check above can fail: the textbook eigenvector of pi^T misses it by ~5e-5.
    P, mu_exact = _exact_stationary(NEARLY_DECOMPOSABLE, 4)
    w, v = np.linalg.eig(P.T)
    naive = np.real(v[:, np.argmin(np.abs(w - 1))])
    naive /= naive.sum()
    assert np.abs(naive / mu_exact - 1).max() > 1e-8


def test_stationary_subnormal_coupling():
    # GTH used to divide by the subnormal row mass and return [0, nan, nan] here
    eps = 5e-309  # below the smallest normal float64 (2.2e-308)
    pi = np.array([[1 / 3, 1 / 3, 1 / 3], [0.0, 1.0 - eps, eps], [1 / 3, 1 / 3, 1 / 3]])
    # balance: mu0 = (mu0 + mu2)/3 and mu2 - mu0 = eps mu1, so mu = (eps, 1, 2 eps) / (1 + 3 eps)
    np.testing.assert_allclose(stationary(pi), [eps, 1.0, 2 * eps], rtol=1e-9, atol=0)


@given(stochastic_matrices(st.integers(2, 7), min_entry=0.01))
def test_stationary_against_scipy_eigenvector(pi):
    w, vl = scipy.linalg.eig(pi, left=True, right=False)
    v = np.real(vl[:, np.argmin(np.abs(w - 1))])
    v /= v.sum()
    np.testing.assert_allclose(stationary(pi), v, rtol=0, atol=1e-10)


def test_stationary_bad_input_is_validated():
    with pytest.raises(TheoryError, match=r"pi row 0 sums to"):
        stationary([[0.5, 0.4], [0.5, 0.5]])


# -- matrix powers --------------------------------------------------------------------------------
@given(stochastic_matrices(st.integers(1, 5)), st.integers(0, 6))
def test_matrix_powers(pi, k_max):
    out = matrix_powers(pi, k_max)
    assert out.shape == (k_max + 1,) + pi.shape
    for k in range(k_max + 1):
        np.testing.assert_allclose(out[k], np.linalg.matrix_power(pi, k), rtol=0, atol=1e-14)


def test_stationary_when_the_easiest_state_to_leave_holds_almost_no_mass():
    """Found by W.L2's property tier at master seed 13: states 1 and 2 are the easiest to
    leave, so GTH's default reference, but are reached only through an entry of 1.1e-308;
    every ratio to them overflows. The reduction must fall back to a heavy reference."""
    tiny = 1.11253693e-308
    pi = np.array([[0, 0, tiny, 1.0], [0.25] * 4, [0.25] * 4, [1.0, 0, 0, 0]])
    mu = stationary(pi)
    assert np.all(np.isfinite(mu)) and mu.sum() == pytest.approx(1.0, abs=1e-15)
    assert mu[0] == pytest.approx(0.5, abs=1e-15) and mu[3] == pytest.approx(0.5, abs=1e-15)
    # the light states: mu_2 = (mu_0 tiny + mu_1/4 + mu_2/4) / 1 with mu_1 = (mu_1 + mu_2)/4 -> exact ratios
    assert 0 < mu[1] < 1e-307 and 0 < mu[2] < 1e-307
    assert mu[2] / mu[1] == pytest.approx(3.0, rel=1e-6)
    assert np.abs(mu @ pi - mu).max() <= 1e-300


def test_the_overflowing_reference_is_retried_without_a_warning():
    """The fallback above is part of the algorithm, not a fault: the reduction that overflows
    (and divides by the zero an underflow leaves, and forms inf/inf) must not leak a
    RuntimeWarning to the caller, in stationary() or stationary_batch()."""
    import warnings

    tiny = 1.11253693e-308
    overflows = np.array([[0, 0, tiny, 1.0], [0.25] * 4, [0.25] * 4, [1.0, 0, 0, 0]])
    # a cycle 0 -> 1 -> 2 -> 3 -> 0 through entries near 1e-300: the first reduction's products underflow
    # to 0, so it divides by 0 and forms 0/0 (found by a random search over such chains)
    underflows = np.array([[0.64, 0.36, 0, 0], [1.0, 0, 3.4e-300, 0], [0, 1.0, 0, 2.8e-300],
                           [7.3e-301, 0.276, 0, 0.724]])
    for pi in (overflows, underflows):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            mu = stationary(pi)
            batch = stationary_batch(np.stack([pi, pi]))
        assert np.all(np.isfinite(mu)) and np.array_equal(batch[0], mu) and np.array_equal(batch[1], mu)
        assert np.abs(mu @ pi - mu).max() <= 1e-300


def test_stationary_birth_death_chain_known_value_with_extreme_entries():
    """A birth-death chain is reversible: mu[i+1] / mu[i] = up[i] / down[i+1] exactly (detailed balance),
    a known value independent of any elimination. Entries span 1e-250..0.6 and the state hardest to
    leave (GTH's reference, eliminated last) sits in the middle, so the reordering must be undone."""
    up = [0.4, 1e-250, 0.5, 0.3]  # i -> i + 1
    down = [0.0, 0.2, 1e-120, 0.6, 0.5]  # i -> i - 1
    d = len(down)
    P = np.zeros((d, d))
    for i in range(d - 1):
        P[i, i + 1], P[i + 1, i] = up[i], down[i + 1]
    P[np.arange(d), np.arange(d)] = 1 - P.sum(axis=1)
    log_mu = np.concatenate(([0.0], np.cumsum([np.log(up[i]) - np.log(down[i + 1]) for i in range(d - 1)])))
    expected = np.exp(log_mu - log_mu.max())
    expected /= expected.sum()
    np.testing.assert_allclose(stationary(P), expected, rtol=1e-12, atol=0)
    perm = np.array([3, 0, 4, 2, 1])  # relabelled states: the same law, relabelled
    np.testing.assert_allclose(stationary(P[np.ix_(perm, perm)]), expected[perm], rtol=1e-12, atol=0)


# -- stationary_batch: the one batched stationary law -------------------------------------------
def test_stationary_batch_matches_stationary_including_tiny_entries_and_the_reducible_fallback():
    rng = np.random.default_rng(8)
    pis = rng.dirichlet(np.full(4, 0.05), size=(50, 4))
    pis = np.maximum(pis, 1e-200)
    pis /= pis.sum(-1, keepdims=True)
    pis[0] = [[1, 0, 0, 0], [0.5, 0.5, 0, 0], [0, 0, 0.5, 0.5], [0, 0, 0.5, 0.5]]  # two closed classes
    with pytest.raises(TheoryError, match="closed classes"):
        stationary_batch(pis)
    # one closed class {0, 1}, states 2 and 3 transient; an entry of 1e-300 still connects 1 -> 0
    pis[0] = [[0.5, 0.5, 0, 0], [1e-300, 1 - 1e-300, 0, 0], [0.2, 0.2, 0.3, 0.3], [0.1, 0.1, 0.4, 0.4]]
    mu = stationary_batch(pis)
    for b in range(50):
        np.testing.assert_allclose(mu[b], stationary(pis[b]), rtol=1e-12, atol=1e-300)
    assert stationary_batch(pis.reshape(5, 10, 4, 4)).shape == (5, 10, 4)


def test_stationary_batch_is_exact_on_nearly_reducible_two_state_chains():
    """mu = (b, a) / (a + b) for off-diagonals a, b: exact to round-off even at a, b ~ 1e-16, where a
    linear solve of mu (I - P + 1 1^T) = 1 returns (4/9, 5/9) with a residual of 0 (found in
    sim.sampling's former batched law, 6 draws in 2000 of Dirichlet(0.1) rows)."""
    a = np.array([2.9525129102165034e-16, 1e-3, 0.5, 1e-250])
    b = np.array([1.8434227381335602e-16, 1e-9, 0.25, 3e-250])
    P = np.stack([np.stack([1 - a, a], -1), np.stack([b, 1 - b], -1)], axis=1)
    expected = np.stack([b, a], -1) / (a + b)[:, None]
    np.testing.assert_allclose(stationary_batch(P), expected, rtol=1e-13)


def test_stationary_batch_rejects_what_is_not_a_stack_of_square_matrices():
    with pytest.raises(TheoryError, match="square"):
        stationary_batch(np.ones((3, 2, 3)) / 3)


def test_stationary_batch_solves_irreducible_matrices_in_the_batch_and_only_the_rest_alone(monkeypatch):
    """The support test decides which matrices take the batched GTH: every irreducible one, sparse
    ones included (a 5-cycle needs paths of length 4), and only the others fall back to
    stationary(). A wrong test would give the same laws more slowly, so the fallbacks are counted."""
    import theory.markov as markov

    calls = []
    alone = markov.stationary
    monkeypatch.setattr(markov, "stationary", lambda pi: calls.append(np.array(pi)) or alone(pi))
    cycle = np.roll(np.eye(5), 1, axis=1)
    cycle[4] = [0.5, 0, 0, 0, 0.5]  # 0 -> 1 -> 2 -> 3 -> 4 -> {0, 4}: irreducible, aperiodic
    transient = np.full((5, 5), 0.2)
    transient[0] = [1, 0, 0, 0, 0]  # state 0 absorbing, the rest transient: reducible
    positive = np.random.default_rng(3).dirichlet(np.ones(5), size=(3, 5))
    stack = np.concatenate([positive, cycle[None], transient[None]])
    mu = stationary_batch(stack)
    assert len(calls) == 1 and np.array_equal(calls[0], transient)
    np.testing.assert_allclose(mu[3], np.array([1, 1, 1, 1, 2]) / 6, rtol=1e-14)
    np.testing.assert_allclose(mu[4], [1, 0, 0, 0, 0], atol=0)
    calls.clear()
    stationary_batch(np.concatenate([positive, cycle[None]]))
    assert calls == []


def test_stationary_batch_takes_one_matrix_a_stack_of_one_and_rows_off_one_by_round_off():
    P = np.array([[0.9, 0.1], [0.3, 0.7]])
    expected = np.array([0.75, 0.25])
    np.testing.assert_allclose(stationary_batch(P), expected, rtol=1e-14)
    np.testing.assert_allclose(stationary_batch(P[None]), expected[None], rtol=1e-14)
    # rows off 1 by a drift stationary() accepts: both normalise the rows first, so they agree to round-off
    drift = P * np.array([[1 + 4e-9], [1 - 3e-9]])
    np.testing.assert_allclose(stationary_batch(drift[None])[0], stationary(drift), rtol=1e-13)


def test_gth_references_are_tried_from_the_least_likely_to_be_left_on(monkeypatch):
    """GTH's reference is the state least likely to be left (smallest exit probability); when the
    ratios to it overflow, each next state of that order is tried once, until one works. Here
    states 1 and 2 are the hardest to leave but reached only through an entry of 1e-310, so
    they are tried first and overflow; state 3 (exit 0.9, about half the mass) works. The
    references are told apart by their distinct diagonals."""
    import theory.markov as markov

    tiny = 1e-310  # subnormal: the ratios mu_0 / mu_2 ~ 0.75 / tiny overflow
    pi = np.array([[0, 0, tiny, 1.0],  # exit 1
                   [0.2, 0.3, 0.1, 0.4],  # exit 0.7: tried first
                   [0.3, 0.2, 0.25, 0.25],  # exit 0.75: second
                   [0.9, 0, 0, 0.1]])  # exit 0.9: third, and it works
    diag = {float(pi[i, i]): i for i in range(4)}
    tried = []
    reduce = markov._gth_reduce

    def spy(A):
        tried.append(diag[float(A[0, 0, 0])])
        return reduce(A)

    monkeypatch.setattr(markov, "_gth_reduce", spy)
    mu = stationary(pi)
    assert tried == [1, 2, 3]
    assert np.all(np.isfinite(mu)) and mu.sum() == pytest.approx(1.0, abs=1e-15)
    assert np.allclose(mu @ pi, mu, rtol=1e-12, atol=0)  # entry by entry, the light ones included
    assert 0 < mu[1] < 1e-309 and 0 < mu[2] < 1e-309


def test_gth_first_reference_works_when_exit_probabilities_span_the_double_range(monkeypatch):
    """A state left with probability 1e-310 (subnormal) holds all but ~2e-310 of the mass: as the
    reference (the least likely to be left) every ratio is at most 1, so one reduction suffices.
    Taken the other way round the ratio 0.5 / 1e-310 overflows."""
    import theory.markov as markov

    a = 1e-310
    pi = np.array([[1 - a, a], [0.5, 0.5]])
    calls = []
    reduce = markov._gth_reduce
    monkeypatch.setattr(markov, "_gth_reduce", lambda A: calls.append(A.shape) or reduce(A))
    mu = stationary(pi)
    assert len(calls) == 1
    assert mu[1] == pytest.approx(2 * a, rel=1e-12) and mu[0] == pytest.approx(1.0, abs=1e-15)
    calls.clear()
    batch = stationary_batch(np.stack([pi, pi[::-1, ::-1]]))  # both orientations in one batched reduction
    assert len(calls) == 1  # no chain fell back to stationary() one by one
    assert np.array_equal(batch[0], mu) and np.array_equal(batch[1], mu[::-1])


def test_stationary_batch_of_an_empty_stack_keeps_its_shape():
    for shape in ((0, 3, 3), (2, 0, 3, 3)):
        out = stationary_batch(np.zeros(shape))
        assert out.shape == shape[:-1]


@pytest.mark.parametrize("d", [2, 3, 4, 5, 6, 9])
def test_stationary_batch_reduces_every_irreducible_chain_itself(monkeypatch, d):
    """The batched reachability test must see paths of length d - 1 (a cycle 0 -> 1 -> ... -> d-1 -> 0 needs
    them), so an irreducible chain is reduced in the batch, never handed to stationary() one by one."""
    import theory.markov as markov

    cycle = 0.9 * np.roll(np.eye(d), 1, axis=1) + 0.1 * np.eye(d)
    lazy = np.full((d, d), 1 / d)
    monkeypatch.setattr(markov, "stationary", lambda P: pytest.fail("fell back to stationary()"))
    out = stationary_batch(np.stack([cycle, lazy]))
    np.testing.assert_allclose(out, np.full((2, d), 1 / d), rtol=1e-14)


# -- stationary_positive: the fast path for matrices with every entry > 0 ---------------------------
@given(stochastic_matrices(st.integers(1, 12), min_entry=1e-9))
def test_stationary_positive_is_stationary_and_agrees_with_gth(pi):
    # up to d = 8 the scalar reduction, above it _gth: both checked against the general solver
    pi = np.maximum(pi, 1e-300)  # min_entry may round an entry to 0; every entry must be > 0 here
    pi /= pi.sum(axis=1, keepdims=True)
    mu = stationary_positive(pi)
    np.testing.assert_allclose(mu, stationary(pi), rtol=1e-12, atol=0)
    np.testing.assert_allclose(mu @ pi, mu, rtol=0, atol=1e-14)


def test_stationary_positive_keeps_relative_accuracy_for_tiny_entries():
    # the rational reference of test_stationary_tiny_entries_..., every zero replaced by a tiny entry
    off = {(0, 1): 1e-12, (0, 2): 1e-14, (1, 0): 0.3, (1, 2): 0.6, (2, 0): 1e-12, (2, 1): 0.5}
    P, mu_exact = _exact_stationary(off, 3)
    np.testing.assert_allclose(stationary_positive(P), mu_exact, rtol=1e-13, atol=0)


def test_stationary_positive_falls_back_to_gth_when_a_ratio_overflows(monkeypatch):
    # state 2 is left only through entries of 1e-310: the scalar reduction eliminates it first and its
    # ratios overflow; _gth (which orders the states by exit probability) is called and gets it right
    import theory.markov as markov

    P = np.array([[0.5, 0.25, 0.25], [0.5, 0.25, 0.25], [1e-310, 1e-310, 1 - 2e-310]])
    calls = []
    gth = markov._gth
    monkeypatch.setattr(markov, "_gth", lambda A: calls.append(A) or gth(A))
    mu = stationary_positive(P)
    assert len(calls) == 1
    np.testing.assert_allclose(mu, [5e-310, 3e-310, 1.0], rtol=1e-12, atol=0)


@pytest.mark.parametrize("bad, match", [
    ([[0.5, 0.5], [1.0, 0.0]], r"pi\[1, 1\] = 0.0 is not > 0"),
    ([[0.5, 0.5], [np.nan, 0.5]], r"pi\[1, 0\] = nan is not > 0"),
    ([[0.5, 0.5]], r"square matrix, got shape \(1, 2\)"),
    (np.zeros((0, 0)), r"got shape \(0, 0\)"),
])
def test_stationary_positive_refuses_what_it_does_not_cover(bad, match):
    with pytest.raises(TheoryError, match=match):
        stationary_positive(bad)
