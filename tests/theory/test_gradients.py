"""Tests for theory.gradients: W Theorem 3 (gradient at W = 0) and N Knowl 3 (idealised gradient = chi-square MI).

Findings documented here (see the module report):

- W Theorem 3 (argmax of the expected negative gradient is the true parent) held in every
  searched case with a **stationary** root for the "mixture" reading, and for the "logits"
  reading when ``min pi >= 0.01``; it **fails** for the "logits" reading on a nearly
  reducible chain with a stationary root, and for **both** readings with a uniform root law.
- N's gap bound ``g[i,p(i)] - g[i,j] >= gamma^3/(2S)`` fails when gamma is read off the entry
  floor alone (``gamma = S min pi``), because the bound also needs N's non-degeneracy
  assumption; with gamma the largest value meeting both assumptions it held everywhere searched.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from theory.errors import TheoryError
from theory.gradients import (
    nichani_gradient_signal,
    nichani_parent_chi2,
    wei_chi2_signal,
    wei_gradient_at_zero,
)
from theory.information import mutual_information
from theory.joint import pairwise_joint
from theory.markov import stationary


# -- independent oracles (plain python loops) ----------------------------------------------------------
def sequences_with_prob(pi, parents, h, nu):
    """Yield (x_0..x_h, probability) for every sequence of positive probability, by loops."""
    d = len(pi)
    for x in itertools.product(range(d), repeat=h + 1):
        p = 1.0
        for k in range(h + 1):
            p *= nu[x[k]] if parents[k] < 0 else pi[x[parents[k]]][x[k]]
        if p > 0:
            yield x, p


def loop_loss(pi, parents, h, nu, scores, reading):
    """Exact expected cross-entropy E[l(p_hat)] of W's model, by loops."""
    att = np.exp(scores - np.max(scores))
    att /= att.sum()
    total = 0.0
    for x, p in sequences_with_prob(pi, parents, h, nu):
        if reading == "mixture":
            f = sum(att[k] * pi[x[k]][x[h]] for k in range(h))
            total += -p * math.log(f)
        else:
            z = [sum(att[k] * math.log(pi[x[k]][b]) for k in range(h)) for b in range(len(pi))]
            lse = math.log(sum(math.exp(v) for v in z))
            total += p * (lse - z[x[h]])
    return total


def loop_gradient_mixture(pi, parents, h, nu):
    """-E[dl/dp_hat] at uniform attention for the mixture reading, by loops."""
    g = np.zeros(h)
    for x, p in sequences_with_prob(pi, parents, h, nu):
        f = sum(pi[x[k]][x[h]] for k in range(h)) / h
        for k in range(h):
            g[k] += p * (pi[x[k]][x[h]] / f - 1) / h
    return g


def random_tree(rng, H):
    return [-1] + [int(rng.integers(0, h)) for h in range(1, H)]


# -- W Theorem 3: the gradient formula ---------------------------------------------------------------------
def test_mixture_gradient_matches_loop_enumeration():
    rng = np.random.default_rng(0)
    for _ in range(5):
        pi = rng.dirichlet(np.ones(3), size=3)
        parents = random_tree(rng, 5)
        for root in (None, rng.dirichlet(np.ones(3))):
            nu = stationary(pi) if root is None else root
            for h in range(1, 5):
                np.testing.assert_allclose(wei_gradient_at_zero(pi, parents, h, root=root),
                                           loop_gradient_mixture(pi, parents, h, nu), rtol=0, atol=1e-14)


@pytest.mark.parametrize("reading", ["mixture", "logits"])
@pytest.mark.parametrize("at_zero", [True, False])
def test_gradient_matches_finite_difference_of_exact_loss(reading, at_zero):
    """Central differences of the loop-enumerated expected loss check the derived gradient formulas."""
    rng = np.random.default_rng(1 if at_zero else 2)
    for _ in range(3):
        d, H = 3, 5
        pi = rng.dirichlet(np.ones(d), size=d) + 0.02
        pi /= pi.sum(axis=1, keepdims=True)
        parents = random_tree(rng, H)
        nu = rng.dirichlet(np.ones(d))
        h = H - 1
        scores = np.zeros(h) if at_zero else rng.normal(size=h)
        eps = 1e-5
        fd = np.empty(h)
        for k in range(h):
            e = np.zeros(h)
            e[k] = eps
            fd[k] = -(loop_loss(pi, parents, h, nu, scores + e, reading)
                      - loop_loss(pi, parents, h, nu, scores - e, reading)) / (2 * eps)
        got = wei_gradient_at_zero(pi, parents, h, root=nu, reading=reading,
                                   scores=None if at_zero else scores)
        np.testing.assert_allclose(got, fd, rtol=0, atol=1e-9)


def test_finite_difference_catches_a_wrong_gradient():
    """Dropping the softmax centring (-1) in the mixture formula is caught by the same check."""
    rng = np.random.default_rng(3)
    pi = rng.dirichlet(np.ones(3), size=3)
    parents, h = [-1, 0, 1, 0], 3
    nu = stationary(pi)
    fd = np.array([-(loop_loss(pi, parents, h, nu, 1e-5 * np.eye(h)[k], "mixture")
                     - loop_loss(pi, parents, h, nu, -1e-5 * np.eye(h)[k], "mixture")) / 2e-5 for k in range(h)])
    right = wei_gradient_at_zero(pi, parents, h)
    wrong = right + 1.0 / h  # A_k pi/f without the "- 1"
    assert np.abs(right - fd).max() < 1e-9 < 1e-3 < np.abs(wrong - fd).max()


@given(seed=st.integers(0, 2**32 - 1), d=st.integers(2, 4), H=st.integers(2, 6),
       reading=st.sampled_from(["mixture", "logits"]))
def test_gradient_sums_to_zero_and_vanishes_for_identical_rows(seed, d, H, reading):
    rng = np.random.default_rng(seed)
    pi = rng.dirichlet(np.ones(d), size=d) + 1e-3
    pi /= pi.sum(axis=1, keepdims=True)
    parents = random_tree(rng, H)
    h = int(rng.integers(1, H))
    g = wei_gradient_at_zero(pi, parents, h, reading=reading)
    assert abs(g.sum()) < 1e-13  # softmax Jacobian: scores are shift invariant
    flat = np.tile(pi[0], (d, 1))
    np.testing.assert_allclose(wei_gradient_at_zero(flat, parents, h, reading=reading), 0, atol=1e-14)


def test_mixture_reading_accepts_zero_entries():
    pi = np.array([[0.0, 1.0, 0.0], [0.0, 0.5, 0.5], [0.5, 0.0, 0.5]])
    parents, h = [-1, 0, 1, 1], 3
    nu = stationary(pi)
    g = wei_gradient_at_zero(pi, parents, h)
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(g, loop_gradient_mixture(pi, parents, h, nu), atol=1e-14)


# -- W Theorem 3: chi-square proxy ------------------------------------------------------------------------
@given(seed=st.integers(0, 2**32 - 1), d=st.integers(2, 4), H=st.integers(2, 7))
def test_chi2_signal_at_parent_is_chi2_mutual_information(seed, d, H):
    rng = np.random.default_rng(seed)
    pi = rng.dirichlet(np.full(d, 0.7), size=d) + 1e-4
    pi /= pi.sum(axis=1, keepdims=True)
    parents = random_tree(rng, H)
    h = int(rng.integers(1, H))
    sig = wei_chi2_signal(pi, parents, h)
    I = mutual_information(pairwise_joint(pi, parents, parents[h], h), kind="chi2")
    assert sig[parents[h]] == pytest.approx(I, abs=1e-12)
    assert sig.max() <= sig[parents[h]] + 1e-12  # Cauchy-Schwarz on pi diag(1/mu) pi^T (stationary root)
    # by direct loops, every candidate
    m = pairwise_joint(pi, parents, 0, h).sum(axis=0)
    for c in range(h):
        J = pairwise_joint(pi, parents, c, h)
        direct = sum(J[a, b] * pi[a, b] / m[b] for a in range(d) for b in range(d)) - 1
        assert sig[c] == pytest.approx(direct, abs=1e-13)


def test_chi2_signal_with_uniform_root_is_not_maximised_at_parent():
    """Off stationarity the proxy loses its meaning: here it peaks at the root, not the parent."""
    pi = np.array([[0.001, 0.067, 0.932], [0.002, 0.987, 0.011], [0.005, 0.885, 0.110]])
    sig = wei_chi2_signal(pi, [-1, 0, 0, 1, 1], 4, root=np.full(3, 1 / 3))
    assert np.argmax(sig) == 0
    assert np.argmax(wei_chi2_signal(pi, [-1, 0, 0, 1, 1], 4)) == 1


# -- W Theorem 3: is the argmax the parent? ----------------------------------------------------------------
@given(seed=st.integers(0, 2**32 - 1), d=st.integers(2, 3), H=st.integers(3, 6),
       reading=st.sampled_from(["mixture", "logits"]))
def test_argmax_is_parent_stationary_root_full_support(seed, d, H, reading):
    """Empirical: with a stationary root and min pi >= 0.01 the parent's entry is the largest.

    Not a proof: W Theorem 3 is stated without these conditions, and the cases below show
    that both matter. Sweeps (36k random cases and Nelder-Mead searches over every
    recursive tree with H <= 5, d <= 3) found no violation in this regime.
    """
    rng = np.random.default_rng(seed)
    pi = rng.dirichlet(np.full(d, float(rng.choice([0.2, 1.0, 5.0]))), size=d)
    pi = 0.01 + (1 - 0.01 * d) * pi
    parents = random_tree(rng, H)
    h = int(rng.integers(2, H))
    g = wei_gradient_at_zero(pi, parents, h, reading=reading)
    others = np.delete(g, parents[h])
    assert g[parents[h]] >= others.max() - 1e-15


# Counterexamples to W Theorem 3 (exact enumeration; margins far above round-off, ~1e-17).
NEAR_REDUCIBLE = np.array([[0.001, 0.953, 0.046], [0.001, 0.998, 0.001], [0.001, 0.001, 0.998]])
UNIFORM_ROOT_CASE = np.array([[0.001, 0.067, 0.932], [0.002, 0.987, 0.011], [0.005, 0.885, 0.110]])
SIBLINGS = [-1, 0, 0, 1, 1]  # h = 4 has parent 1; candidate 3 is its sibling (same parent 1)


def test_counterexample_logits_reading_stationary_root():
    g = wei_gradient_at_zero(NEAR_REDUCIBLE, SIBLINGS, 4, reading="logits")
    # g ~ [-1.1582e-3, 1.2177e-3, -1.2991e-3, 1.2396e-3]: the sibling beats the parent
    assert np.argmax(g) == 3
    assert g[3] - g[1] > 2e-5
    loop = np.array([-(loop_loss(NEAR_REDUCIBLE, SIBLINGS, 4, stationary(NEAR_REDUCIBLE), 1e-5 * e, "logits")
                       - loop_loss(NEAR_REDUCIBLE, SIBLINGS, 4, stationary(NEAR_REDUCIBLE), -1e-5 * e, "logits"))
                     / 2e-5 for e in np.eye(4)])
    np.testing.assert_allclose(g, loop, atol=1e-9)  # an independent computation agrees
    # the mixture reading and the chi-square proxy pick the parent on the same input
    assert np.argmax(wei_gradient_at_zero(NEAR_REDUCIBLE, SIBLINGS, 4, reading="mixture")) == 1
    assert np.argmax(wei_chi2_signal(NEAR_REDUCIBLE, SIBLINGS, 4)) == 1


@pytest.mark.parametrize("reading", ["mixture", "logits"])
def test_counterexample_uniform_root_both_readings(reading):
    uniform = np.full(3, 1 / 3)
    g = wei_gradient_at_zero(UNIFORM_ROOT_CASE, SIBLINGS, 4, root=uniform, reading=reading)
    # mixture: [-0.05227, 0.01816, 0.01367, 0.02043]; logits: [-0.02779, 0.00966, 0.00266, 0.01546]
    assert np.argmax(g) == 3 and g[3] - g[1] > 2e-3
    if reading == "mixture":
        nu = uniform
        np.testing.assert_allclose(g, loop_gradient_mixture(UNIFORM_ROOT_CASE, SIBLINGS, 4, nu), atol=1e-14)
    # with the stationary root the same pi and tree give the parent
    assert np.argmax(wei_gradient_at_zero(UNIFORM_ROOT_CASE, SIBLINGS, 4, reading=reading)) == 1


# -- W: bad inputs ---------------------------------------------------------------------------------------------
def test_wei_bad_inputs():
    pi = np.full((2, 2), 0.5)
    with pytest.raises(TheoryError, match=r"unknown reading 'softmax'"):
        wei_gradient_at_zero(pi, [-1, 0], 1, reading="softmax")
    with pytest.raises(TheoryError, match=r"pi\[0, 1\] = 0 \(row 0\) makes log pi = -inf"):
        wei_gradient_at_zero([[1.0, 0.0], [0.5, 0.5]], [-1, 0], 1, reading="logits")
    with pytest.raises(TheoryError, match=r"h = 0 is out of range"):
        wei_gradient_at_zero(pi, [-1, 0], 0)
    with pytest.raises(TheoryError, match=r"h = 2 is out of range"):
        wei_chi2_signal(pi, [-1, 0], 2)
    with pytest.raises(TheoryError, match=r"d\*\*\(h\+1\) = 10\*\*8 .* exceeds the limit"):
        wei_gradient_at_zero(np.full((10, 10), 0.1), [-1] + list(range(7)), 7)
    with pytest.raises(TheoryError, match=r"scores must be a finite vector of shape \(1,\)"):
        wei_gradient_at_zero(pi, [-1, 0], 1, scores=[0.0, 1.0])
    with pytest.raises(TheoryError, match=r"pi row 1 sums to"):
        wei_gradient_at_zero([[0.5, 0.5], [0.5, 0.6]], [-1, 0], 1)


# -- N Knowl 3 ----------------------------------------------------------------------------------------------------
def random_forest(rng, T):
    return [-1] + [int(rng.integers(-1, i)) for i in range(1, T)]


def chi2_mi_given_pi(pi):
    mu = stationary(pi)
    return mutual_information(mu[:, None] * pi, kind="chi2")


@given(seed=st.integers(0, 2**32 - 1), S=st.integers(2, 4), T=st.integers(2, 7), K=st.integers(1, 4))
def test_nichani_parent_entry_is_chi2_mi_and_roots_vanish(seed, S, T, K):
    rng = np.random.default_rng(seed)
    pis = rng.dirichlet(np.full(S, 0.8), size=(K, S)) + 1e-3
    pis /= pis.sum(axis=2, keepdims=True)
    w = rng.dirichlet(np.ones(K))
    parents = random_forest(rng, T)
    g = nichani_gradient_signal(pis, parents, weights=w)
    assert g.shape == (T, T) and np.all(np.triu(g, 1) == 0)
    expect_chi2 = sum(w[k] * chi2_mi_given_pi(pis[k]) for k in range(K))
    parent_chi2 = nichani_parent_chi2(pis, parents, weights=w)
    for i, p in enumerate(parents):
        if p >= 0:
            assert g[i, p] == pytest.approx(expect_chi2, abs=1e-12)  # N Knowl 3 item 1
            assert parent_chi2[i] == pytest.approx(expect_chi2, abs=1e-12)
            for j in range(i):
                if j != p:
                    assert g[i, p] - g[i, j] >= -1e-13  # DPI (Cauchy-Schwarz), any prior, j < i
        else:
            assert parent_chi2[i] == 0
            np.testing.assert_allclose(g[i, :i], 0.0, atol=1e-14)  # N Knowl 3 item 3 (round-off only)
        # j = i: P(s_i = s, s_i = s') = diag(mu), so g[i, i] = E[trace pi] - 1
        assert g[i, i] == pytest.approx(sum(w[k] * np.trace(pis[k]) for k in range(K)) - 1, abs=1e-13)


def test_nichani_matches_loop_enumeration():
    rng = np.random.default_rng(4)
    S, parents = 2, [-1, 0, -1, 1, 2]
    pis = rng.dirichlet(np.ones(S), size=(2, S))
    g = nichani_gradient_signal(pis, parents)
    T = len(parents)
    expect = np.zeros((T, T))
    for pi in pis:
        mu = stationary(pi)
        for x in itertools.product(range(S), repeat=T):
            p = math.prod(mu[x[k]] if parents[k] < 0 else pi[x[parents[k]], x[k]] for k in range(T))
            for i in range(T):
                for j in range(i + 1):
                    expect[i, j] += 0.5 * p * pi[x[j], x[i]] / mu[x[i]]
    expect = np.tril(expect - 0.5 * 2)
    np.testing.assert_allclose(g, expect, atol=1e-13)


def test_nichani_diagonal_needs_uniform_mean_not_just_symmetry():
    """g[i, i] = E[trace pi] - 1: zero under N's uniform-mean assumption E[pi] = 11^T/S, not otherwise.

    Conjugation symmetry (sigma^-1 pi sigma =d pi, N's assumption 3a) leaves the trace
    unchanged, so it does not make g[i, i] vanish by itself; averaging over column
    permutations (pi[:, sigma]) does give E[pi] = 11^T/S and g[i, i] = 0.
    """
    rng = np.random.default_rng(5)
    S, parents = 3, [-1, 0, 1, -1, 3]
    base = rng.dirichlet(np.ones(S), size=(4, S)) + 0.05
    base /= base.sum(axis=2, keepdims=True)
    perms = [np.array(p) for p in itertools.permutations(range(S))]
    conj = np.array([b[np.ix_(p, p)] for b in base for p in perms])  # sigma^-1 pi sigma
    cols = np.array([c[:, p] for c in conj for p in perms])  # plus column shuffles: uniform mean
    np.testing.assert_allclose(cols.mean(axis=0), np.full((S, S), 1 / S), atol=1e-15)
    g_base, g_conj, g_cols = (nichani_gradient_signal(x, parents) for x in (base, conj, cols))
    mean_trace = np.mean([np.trace(b) for b in base])
    for i in range(len(parents)):
        assert g_base[i, i] == pytest.approx(mean_trace - 1, abs=1e-13)
        assert g_conj[i, i] == pytest.approx(mean_trace - 1, abs=1e-13)
        assert abs(g_cols[i, i]) < 1e-13
    assert abs(mean_trace - 1) > 0.05  # so the first two are visibly non-zero


def _gamma_floor(pis):
    return pis.shape[1] * pis.min()


def _gamma_both(pis):
    """Largest gamma meeting N's lower bound (min pi >= gamma/S) and non-degeneracy
    (sum_s ||pi(s,.) - mu||^2 >= gamma^2/S) for every sample."""
    S = pis.shape[1]
    nondeg = min(((p - stationary(p)[None, :]) ** 2).sum() for p in pis)
    return min(S * pis.min(), math.sqrt(S * nondeg))


@given(seed=st.integers(0, 2**32 - 1), S=st.integers(2, 4), T=st.integers(3, 7), K=st.integers(1, 3),
       alpha=st.sampled_from([0.3, 1.0, 3.0]))
def test_nichani_gap_bound_with_both_assumptions(seed, S, T, K, alpha):
    rng = np.random.default_rng(seed)
    pis = rng.dirichlet(np.full(S, alpha), size=(K, S))
    parents = random_forest(rng, T)
    g = nichani_gradient_signal(pis, parents)
    bound = _gamma_both(pis) ** 3 / (2 * S)
    for i, p in enumerate(parents):
        if p >= 0:
            for j in range(i):
                if j != p:
                    assert g[i, p] - g[i, j] >= bound * (1 - 1e-9)


def test_nichani_gap_bound_fails_with_entry_floor_alone():
    """gamma = S * min entry without the non-degeneracy assumption: the bound is false.

    Near-identical rows have a large entry floor but almost no dependence between tokens,
    so every g[i, j] (and every gap) is close to 0 while gamma^3/(2S) is not.
    """
    pi = np.array([[0.50, 0.50], [0.49, 0.51]])
    parents = [-1, 0, 1]  # chain; i = 2, p(i) = 1, j = 0
    g = nichani_gradient_signal(pi[None], parents)
    gap = g[2, 1] - g[2, 0]
    gamma = _gamma_floor(pi[None])  # 0.98
    assert gap < 1e-3 < gamma ** 3 / (2 * 2)  # ~1e-4 vs 0.235
    # with gamma limited by non-degeneracy as well, the bound holds
    assert gap >= _gamma_both(pi[None]) ** 3 / 4


def test_nichani_wrong_variant_caught():
    """Using mu(s) (parent's law) instead of mu(s') in the denominator breaks item 1."""
    rng = np.random.default_rng(6)
    pi = rng.dirichlet(np.ones(3), size=3)
    mu = stationary(pi)
    joint = mu[:, None] * pi
    right = np.sum(joint * pi / mu[None, :]) - 1
    wrong = np.sum(joint * pi / mu[:, None]) - 1
    g = nichani_gradient_signal(pi[None], [-1, 0])
    assert g[1, 0] == pytest.approx(right, abs=1e-14)
    assert abs(wrong - right) > 1e-3


def test_nichani_bad_inputs():
    good = np.full((2, 2), 0.5)
    with pytest.raises(TheoryError, match=r"pis\[1\] row 0 sums to"):
        nichani_gradient_signal(np.stack([good, [[0.6, 0.6], [0.5, 0.5]]]), [-1, 0])
    with pytest.raises(TheoryError, match=r"pis\[0\] \(prior sample 0\).*closed classes"):
        nichani_gradient_signal(np.eye(2)[None], [-1, 0])
    with pytest.raises(TheoryError, match=r"shape \(K, S, S\)"):
        nichani_gradient_signal(good, [-1, 0])
    with pytest.raises(TheoryError, match=r"weights sums to"):
        nichani_gradient_signal(np.stack([good, good]), [-1, 0], weights=[0.5, 0.6])
    with pytest.raises(TheoryError, match=r"weights has length 1, expected 2"):
        nichani_parent_chi2(np.stack([good, good]), [-1, 0], weights=[1.0])
    with pytest.raises(TheoryError, match=r"node 1: parent 1 is itself"):
        nichani_gradient_signal(good[None], [-1, 1])


def test_logits_reading_refuses_a_zero_even_where_no_entry_is_one():
    pi = [[0.6, 0.4, 0.0], [0.3, 0.3, 0.4], [0.2, 0.3, 0.5]]
    with pytest.raises(TheoryError, match=r"pi\[0, 2\] = 0 \(row 0\) makes log pi = -inf; use reading='mixture' or a "
                                          r"pi with full support$"):
        wei_gradient_at_zero(pi, [-1, 0, 1], 2, reading="logits")
    with pytest.raises(TheoryError, match=r"^unknown reading 'softmax'; expected one of mixture, logits$"):
        wei_gradient_at_zero(pi, [-1, 0, 1], 2, reading="softmax")


def test_bad_positions_and_prior_shapes_are_named():
    good = np.full((2, 2), 0.5)
    with pytest.raises(TheoryError, match=r"^h = 3 is out of range: it needs candidate parents 0..h-1, so 1 <= h <= 2 "
                                          r"for a tree with 3 nodes$"):
        wei_chi2_signal(good, [-1, 0, 1], 3)
    with pytest.raises(TheoryError, match=r"^h = True is not an integer position$"):
        wei_chi2_signal(good, [-1, 0, 1], True)
    with pytest.raises(TheoryError, match=r"^h = 1.0 is not an integer position$"):
        wei_gradient_at_zero(good, [-1, 0, 1], 1.0)
    for bad in (np.zeros((0, 2, 2)), np.full((1, 2, 3), 0.5), np.zeros((1, 0, 0))):
        with pytest.raises(TheoryError, match=r"^pis must be a non-empty stack of square matrices, shape \(K, S, S\), "
                                              rf"got \({bad.shape[0]}, {bad.shape[1]}, {bad.shape[2]}\)$"):
            nichani_gradient_signal(bad, [-1, 0])
    with pytest.raises(TheoryError, match=r"^pis could not be read as an array of numbers: "):
        nichani_parent_chi2([[["a", "b"], ["c", "d"]]], [-1, 0])


# A transient state (stationary mass 0) carries no mass: the signals on the chain with it equal those on the
# chain without it. Terms with mu(s') = 0 are skipped (0/0); a mask that let them through would give nan.
WITH_TRANSIENT = np.array([[0.5, 0.5, 0.0], [0.3, 0.7, 0.0], [0.2, 0.3, 0.5]])
WITHOUT = WITH_TRANSIENT[:2, :2]


def test_a_transient_state_does_not_change_n_signals():
    tree = [-1, 0, 1, 0, 2]
    for fn in (nichani_gradient_signal, nichani_parent_chi2):
        with_t, without = fn(WITH_TRANSIENT[None], tree), fn(WITHOUT[None], tree)
        assert np.all(np.isfinite(with_t))
        np.testing.assert_allclose(with_t, without, rtol=1e-12, atol=1e-14)


def test_a_transient_state_does_not_change_w_chi2_signal():
    tree = [-1, 0, 1, 1]
    with_t, without = wei_chi2_signal(WITH_TRANSIENT, tree, 3), wei_chi2_signal(WITHOUT, tree, 3)
    assert np.all(np.isfinite(with_t))
    np.testing.assert_allclose(with_t, without, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("reading", ["mixture", "logits"])
def test_scores_enter_through_a_softmax_that_does_not_overflow(reading):
    """softmax(s) = softmax(s + c): scores near 1000 give the gradient of scores near 0."""
    pi = np.array([[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.25, 0.15, 0.6]])
    s = np.array([0.3, -0.2, 0.1])
    near_zero = wei_gradient_at_zero(pi, [-1, 0, 1, 1], 3, reading=reading, scores=s)
    np.testing.assert_allclose(wei_gradient_at_zero(pi, [-1, 0, 1, 1], 3, reading=reading, scores=s + 1000.0),
                               near_zero, rtol=1e-9, atol=1e-15)


def test_logits_reading_with_entries_near_the_smallest_double_stays_finite():
    """log pi down to about -690: the gradient stays finite and sums to 0 (the attention's gradient is
    centred)."""
    eps = 1e-300
    pi = np.array([[1 - eps, eps], [eps, 1 - eps]])
    g = wei_gradient_at_zero(pi, [-1, 0, 1], 2, reading="logits")
    assert np.all(np.isfinite(g)) and abs(g.sum()) < 1e-12


def test_logits_reading_with_a_state_of_mass_1e_320_is_the_chain_without_that_state():
    """State 2 is entered with probability 1e-320 from every state and never starts the chain, so it
    carries no mass: the gradient must be that of the 2-state chain without it (to ~1e-320). Every
    candidate gives it log pi = -737, so the logits z(b) span more than 709 (exp overflows unless
    softmax shifts by the largest z)."""
    t = 1e-320
    pi2 = np.array([[0.7, 0.3], [0.2, 0.8]])
    pi3 = np.array([[0.7, 0.3, t], [0.2, 0.8, t], [0.5, 0.5, t]])
    tree, h = [-1, 0, 1], 2
    want = wei_gradient_at_zero(pi2, tree, h, root=[0.4, 0.6], reading="logits")
    got = wei_gradient_at_zero(pi3, tree, h, root=[0.4, 0.6, 0.0], reading="logits")
    assert np.all(np.isfinite(got)) and np.any(want != 0)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-14)
