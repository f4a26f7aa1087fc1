"""Tests for theory.dirichlet: N's task Bayes predictor (claim N.T).

Measured here (chain T = 6: parents [-1, 0, 1, 2, 3, -1], query 5; S = 2, alpha = 0.1; all
64 prompts enumerated; quadrature error <= 1e-15):

- add-alpha vs exact Bayes (roots ~ mu_pi): max |difference| = 0.3330, at prompt
  (1, 1, 1, 1, 0 | query 0): add-alpha says (0.5, 0.5), Bayes (0.1670, 0.8330);
- expected log-loss gap E[KL(Bayes || add-alpha)] = 0.017637 nats under the task law.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import integrate, special

from theory.dirichlet import (
    add_alpha_batch,
    add_alpha_predictive,
    bayes_predictive_estimate,
    bayes_quadrature_s2,
    dirichlet_row_entropy,
    edge_count_rows,
    edge_counts,
    entropy_rate_quadrature,
    exact_bayes_predictive,
)
from theory.errors import TheoryError
from theory.structures import CausalTree

CHAIN6 = [-1, 0, 1, 2, 3, -1]


def all_prompts(T, S=2):
    return [np.array(p) for p in itertools.product(range(S), repeat=T)]


@pytest.fixture(scope="module")
def chain6_table():
    """Exact Bayes (stationary roots) and add-alpha on every prompt of the T = 6 chain, alpha = 0.1."""
    rows = []
    for p in all_prompts(6):
        res = bayes_quadrature_s2(p, CHAIN6, 0.1)
        rows.append((p, res, add_alpha_predictive(p, CHAIN6, 0.1, 2)))
    return rows


# -- add-alpha ------------------------------------------------------------------------------------------
def test_add_alpha_hand_computed():
    # chain 0-1-2-3-4, query 5 = 0; edges (s_j, s_i): (0,1), (1,0), (0,0), (0,2); roots: s_0 = 0
    prompt, tree = [0, 1, 0, 0, 2, 0], CHAIN6
    n, r = edge_counts(prompt, tree, 3)
    assert n.tolist() == [[1, 1, 1], [1, 0, 0], [0, 0, 0]] and r.tolist() == [1, 0, 0]
    np.testing.assert_allclose(add_alpha_predictive(prompt, tree, 0.5, 3), [1.5, 1.5, 1.5] / np.array(4.5))
    # query 1: one edge from 1 (to 0)
    np.testing.assert_allclose(add_alpha_predictive([0, 1, 0, 0, 2, 1], tree, 0.5, 3), np.array([1.5, 0.5, 0.5]) / 2.5)
    # query 2: no edge from 2 -> uniform
    np.testing.assert_allclose(add_alpha_predictive([0, 1, 0, 0, 2, 2], tree, 0.5, 3), [1 / 3] * 3)


def test_edge_counts_on_a_forest():
    tree = [-1, 0, -1, 2, 2, -1]  # two trees: 0->1, 2->3, 2->4; query 5
    n, r = edge_counts([1, 1, 0, 1, 0, 1], tree, 2)
    assert n.tolist() == [[1, 1], [0, 1]] and r.tolist() == [1, 1]


# -- add-alpha over a batch of prompts --------------------------------------------------------------------
def random_dag(rng, T):
    """N's random-graph law on ``0..T-2`` (``p(i) ~ Unif{-1..i-1}``), the query ``T-1`` a root."""
    return [-1] + [int(rng.integers(-1, i)) for i in range(1, T - 1)] + [-1]


def test_add_alpha_batch_by_hand():
    # chain 0-1-2-3-4, query 5; context 0, 1, 0, 0, 2: edges (s_j, s_i) = (0,1), (1,0), (0,0), (0,2)
    x = np.array([[0, 1, 0, 0, 2, 0], [0, 1, 0, 0, 2, 1], [0, 1, 0, 0, 2, 2]])  # queries 0, 1, 2
    assert edge_count_rows(x, CHAIN6, 3).tolist() == [[1, 1, 1], [1, 0, 0], [0, 0, 0]]
    np.testing.assert_allclose(add_alpha_batch(x, CHAIN6, 0.5, 3),
                               [[1 / 3, 1 / 3, 1 / 3], [3 / 5, 1 / 5, 1 / 5], [1 / 3, 1 / 3, 1 / 3]], rtol=1e-15)
    # forest 0->1, 2->3, 2->4, query 5 = 1: one edge leaves a 1 (0->1, to a 1). N's code also reads the last
    # context token s_4 = 1 as the parent of each non-query root (0 and 2, tokens 1 and 0): two more children of q.
    forest, y = [-1, 0, -1, 2, 2, -1], np.array([[1, 1, 0, 1, 1, 1]])
    assert edge_count_rows(y, forest, 2).tolist() == [[0, 1]]
    assert edge_count_rows(y, forest, 2, root_source="last").tolist() == [[1, 2]]
    np.testing.assert_allclose(add_alpha_batch(y, forest, 1.0, 2, root_source="last"), [[2 / 5, 3 / 5]], rtol=1e-15)
    assert add_alpha_batch(np.zeros((0, 6), dtype=int), forest, 1.0, 2).shape == (0, 2)


@pytest.mark.parametrize("S", [2, 3, 5])
def test_add_alpha_batch_agrees_with_per_prompt_counts_on_random_prompts(S):
    """Row b of the batch is prompt b alone: against edge_counts' full count matrix (separate code) and the
    per-prompt add_alpha_predictive, on random DAGs (CausalTree or parent list) and tokens."""
    rng = np.random.default_rng(S)
    for T in (2, 3, 9, 16):
        par = random_dag(rng, T)
        x = rng.integers(0, S, (60, T))
        alpha = float(rng.uniform(0.05, 3.0))
        rows = edge_count_rows(x, CausalTree(par), S)
        batch = add_alpha_batch(x, par, alpha, S)
        for b, prompt in enumerate(x):
            n, _ = edge_counts(prompt, par, S)
            q = prompt[-1]
            assert rows[b].tolist() == n[q].tolist(), (T, b)
            np.testing.assert_allclose(batch[b], (alpha + n[q]) / (S * alpha + n[q].sum()), rtol=1e-14, atol=0)
            np.testing.assert_allclose(batch[b], add_alpha_predictive(prompt, par, alpha, S), rtol=1e-14, atol=0)


def _rows_by_definition(x, parents, S, root_source):
    """The query's row of the edge counts, from the definition, one prompt and one position at a time:
    position i < T-1 with parent p (p = T-2 for a root when root_source is "last") adds 1 at s_i when s_p = s_{T-1}."""
    T = len(parents)
    out = np.zeros((len(x), S))
    for b, prompt in enumerate(x):
        for i in range(T - 1):
            p = parents[i] if parents[i] >= 0 else (T - 2 if root_source == "last" else -1)
            if p >= 0 and prompt[p] == prompt[-1]:
                out[b, prompt[i]] += 1
    return out


@pytest.mark.parametrize("root_source", ["none", "last"])
def test_edge_count_rows_by_definition_with_children_of_position_zero(root_source):
    """Children of position 0 stay children of position 0 under root_source="last" (only roots read
    s_{T-2}), and roots read s_{T-2}, not s_{T-3}: prompts where the two differ."""
    rng = np.random.default_rng(7)
    parents = [-1, 0, 0, 1, -1, 3, -1]  # 1, 2 children of 0; 4 a root; query 6
    x = rng.integers(0, 3, (200, 7))
    assert np.any(x[:, 4] != x[:, 5])
    np.testing.assert_array_equal(edge_count_rows(x, parents, 3, root_source=root_source),
                                  _rows_by_definition(x, parents, 3, root_source))


def test_integral_float_tokens_of_any_float_dtype_are_read_as_integers():
    x = np.array([[0, 1, 0, 1, 1]], dtype=np.float32)
    assert edge_count_rows(x, [-1, 0, 1, 2, -1], 2).tolist() == [[1, 0]]  # query 1: edge 1 -> 2 leaves a 1, to a 0
    assert edge_count_rows(x.astype(np.float64), [-1, 0, 1, 2, -1], 2).tolist() == [[1, 0]]


# -- exact Bayes --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("alpha", [0.1, 1.0, 2.5])
@pytest.mark.parametrize("tree", [CHAIN6, [-1, 0, -1, 2, 2, -1], [-1, -1, -1, 2, -1, -1]])
def test_independent_roots_equal_add_alpha(alpha, tree):
    """Roots independent of pi: the Dirichlet prior is conjugate, so exact Bayes is add-alpha.

    The quadrature is used on this case too (weight 1), so this checks the integrator.
    """
    total = 0.0
    for p in all_prompts(len(tree)):
        res = bayes_quadrature_s2(p, tree, alpha, root_law="independent")
        np.testing.assert_allclose(res.predictive, add_alpha_predictive(p, tree, alpha, 2), rtol=0, atol=2e-15)
        np.testing.assert_allclose(exact_bayes_predictive(p, tree, alpha, root_law="independent"), res.predictive,
                                   atol=0)
        total += res.prompt_probability
    assert total == pytest.approx(1.0, abs=1e-13)


def test_hand_computed_single_root_alpha_one():
    """T = 2, tree [-1, -1]: one root s_0 ~ mu_pi and the query. alpha = 1 (a, b ~ U(0, 1)).

    mu_pi(0) = b/(a+b); E[b/(a+b)] = 1/2 and E[ab/(a+b)] = (2/3)(1 - log 2) (sympy), so
    P(y = 1 | s_0 = 0, q = 0) = E[a b/(a+b)] / E[b/(a+b)] = (4/3)(1 - log 2), while add-alpha says 1/2.
    """
    c = 4 / 3 * (1 - math.log(2))
    np.testing.assert_allclose(exact_bayes_predictive([0, 0], [-1, -1], 1.0), [1 - c, c], atol=1e-14)
    # q = 1: P(y = 0 | s_0 = 0) = E[b^2/(a+b)] / E[b/(a+b)] = 2 (1/2 - (2/3)(1 - log 2)) = 1 - c
    np.testing.assert_allclose(exact_bayes_predictive([0, 1], [-1, -1], 1.0), [1 - c, c], atol=1e-14)
    np.testing.assert_allclose(add_alpha_predictive([0, 0], [-1, -1], 1.0, 2), [0.5, 0.5])
    res = bayes_quadrature_s2([0, 0], [-1, -1], 1.0)
    assert res.prompt_probability == pytest.approx(0.25, abs=1e-15)  # (1/2) * E[mu(0)] = 1/4
    assert res.abserr < 1e-14


def _qaws_oracle(n, r, alpha, q):
    """Independent oracle: nested adaptive QUADPACK (algebraic-singularity weights) in (a, b)."""
    p1, q1, p2, q2 = alpha + n[0, 1], alpha + n[0, 0], alpha + n[1, 0], alpha + n[1, 1]

    def integral(psi):
        def inner(a):
            def f(b):
                s = a + b
                return 0.0 if s == 0 else (b / s) ** r[0] * (a / s) ** r[1] * psi(a, b)
            return integrate.quad(f, 0, 1, weight="alg", wvar=(p2 - 1, q2 - 1), epsabs=1e-14, epsrel=1e-13)[0]
        return integrate.quad(inner, 0, 1, weight="alg", wvar=(p1 - 1, q1 - 1), epsabs=1e-14, epsrel=1e-13)[0]

    Z = integral(lambda a, b: 1.0)
    p_one = integral(lambda a, b: a) / Z if q == 0 else 1 - integral(lambda a, b: b) / Z
    return np.array([1 - p_one, p_one])


@pytest.mark.parametrize("prompt", [[0, 1, 0, 1, 0, 0], [1, 1, 0, 0, 1, 1], [1, 0, 1, 1, 0, 1]])
def test_quadrature_against_adaptive_quadpack(prompt):
    n, r = edge_counts(prompt, CHAIN6, 2)
    got = bayes_quadrature_s2(prompt, CHAIN6, 0.5)
    np.testing.assert_allclose(got.predictive, _qaws_oracle(n, r, 0.5, prompt[-1]), atol=1e-10)
    assert got.abserr < 1e-13


def test_stationary_roots_differ_from_add_alpha_chain6(chain6_table):
    """Documents N.T's reference-code finding: with roots ~ mu_pi the Bayes predictor is *not* add-alpha
    (only N's code calls add-alpha ``bayes``)."""
    total = sum(res.prompt_probability for _, res, _ in chain6_table)
    assert total == pytest.approx(1.0, abs=1e-13)
    assert max(res.abserr for _, res, _ in chain6_table) < 1e-13
    diffs = [np.abs(res.predictive - aa).max() for _, res, aa in chain6_table]
    worst = int(np.argmax(diffs))
    assert chain6_table[worst][0].tolist() == [1, 1, 1, 1, 0, 0]
    assert diffs[worst] == pytest.approx(0.33298, abs=1e-4)
    gap = sum(res.prompt_probability * float(np.sum(res.predictive * np.log(res.predictive / aa)))
              for _, res, aa in chain6_table)
    assert gap == pytest.approx(0.017637, abs=1e-5)
    assert gap > 1e-3


def test_task_marginal_of_the_target_is_uniform(chain6_table):
    """sum_prompt P(prompt) E[pi(q, y) | prompt] = P(y) = 1/2 by the prior's symmetry."""
    py = sum(res.prompt_probability * res.predictive for _, res, _ in chain6_table)
    np.testing.assert_allclose(py, [0.5, 0.5], atol=1e-13)


def test_bayes_beats_add_alpha_in_expected_loss(chain6_table):
    """The exact predictive has the lower expected log-loss; a perturbed one is worse."""
    def loss(pred_of):
        return sum(res.prompt_probability * -float(np.sum(res.predictive * np.log(pred_of(p, res, aa))))
                   for p, res, aa in chain6_table)
    bayes = loss(lambda p, res, aa: res.predictive)
    assert bayes < loss(lambda p, res, aa: aa)
    assert bayes < loss(lambda p, res, aa: 0.99 * res.predictive + 0.005)


# -- importance sampling, any S ------------------------------------------------------------------------------
def test_estimate_agrees_with_quadrature_s2():
    for i, prompt in enumerate([[1, 1, 1, 1, 0, 0], [0, 1, 0, 1, 0, 1], [0, 0, 0, 0, 0, 0]]):
        exact = exact_bayes_predictive(prompt, CHAIN6, 0.1)
        est, se = bayes_predictive_estimate(prompt, CHAIN6, 0.1, 2, n_samples=100_000, seed=100 + i)
        assert np.all(se > 0)
        assert np.all(np.abs(est - exact) <= 4.5 * se), (est, exact, se)


def test_estimate_s3_independent_matches_add_alpha_and_stationary_does_not():
    tree = [-1, 0, 1, -1, 3, -1]
    prompt = [2, 2, 2, 1, 1, 0]  # no edge leaves state 0: add-alpha is uniform; the roots say otherwise
    aa = add_alpha_predictive(prompt, tree, 0.5, 3)
    est, se = bayes_predictive_estimate(prompt, tree, 0.5, 3, n_samples=100_000, seed=7, root_law="independent")
    assert np.all(np.abs(est - aa) <= 4.5 * se)
    est, se = bayes_predictive_estimate(prompt, tree, 0.5, 3, n_samples=100_000, seed=8)
    assert np.abs(est - aa).max() > 10 * se.max()


# -- L* -----------------------------------------------------------------------------------------------------------
def test_dirichlet_row_entropy_known_value_and_monte_carlo():
    assert dirichlet_row_entropy(1.0, 2) == pytest.approx(0.5, abs=1e-15)  # E[h(U)] = 1/2 nats
    rng = np.random.default_rng(12345)
    for alpha, S in [(0.1, 10), (1.0, 3), (2.5, 5)]:
        p = rng.dirichlet(np.full(S, alpha), size=200_000)
        with np.errstate(divide="ignore", invalid="ignore"):
            h = -np.where(p > 0, p * np.log(p), 0.0).sum(axis=1)
        mean, se = h.mean(), h.std(ddof=1) / math.sqrt(h.size)
        exact = dirichlet_row_entropy(alpha, S)
        assert abs(mean - exact) < 4 * se
        wrong = special.digamma(S * alpha) - special.digamma(alpha)  # dropped "+1": caught
        assert abs(mean - wrong) > 20 * se


def test_entropy_rate_quadrature_is_n_definition_and_matches_the_closed_form():
    """N's L* by 1-D quadrature of the Beta marginal equals psi(S a + 1) - psi(a + 1) to round-off,
    and to a plain 2-D integral over the rows for S = 2 (the definition, no exchangeability)."""
    for S in (2, 3, 10, 50):
        for a in (0.1, 0.5, 1.0, 3.0):
            val, err = entropy_rate_quadrature(a, S)
            exact = dirichlet_row_entropy(a, S)
            assert err < 1e-7
            assert abs(val - exact) <= err + 64 * np.finfo(float).eps * (1 + exact), (S, a, val - exact)
    # S = 2, alpha = 1: the rows are (1-u, u) with u uniform: L* = E[h(U)] = 1/2
    def h(u):
        return -(u * math.log(u) + (1 - u) * math.log(1 - u)) if 0 < u < 1 else 0.0
    two_d, _ = integrate.quad(h, 0, 1)
    assert entropy_rate_quadrature(1.0, 2)[0] == pytest.approx(two_d, abs=1e-13)
    # a dropped "+1" in the closed form is far outside the quadrature's error
    wrong = special.digamma(10 * 0.1) - special.digamma(0.1)
    assert abs(entropy_rate_quadrature(0.1, 10)[0] - wrong) > 1.0


# -- bad inputs ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: add_alpha_predictive([0, 1, 3], [-1, 0, -1], 1.0, 3), r"prompt position 2: token 3 is out of range"),
        (lambda: add_alpha_predictive([0, 1.5, 1], [-1, 0, -1], 1.0, 3), r"prompt position 1: token 1\.5"),
        (lambda: add_alpha_predictive([0, 1], [-1, 0, -1], 1.0, 2), r"length 2 but the tree has T = 3"),
        (lambda: add_alpha_predictive([0, 1, 1], [-1, 0, 1], 1.0, 2), r"query position T-1 = 2 must be a root"),
        (lambda: add_alpha_predictive([0, 1, 1], [-1, 0, -1], 0.0, 2), r"alpha = 0\.0 must be a finite number > 0"),
        (lambda: add_alpha_predictive([0, 1, 1], [-1, 0, -1], 1.0, 1), r"S = 1 must be an integer >= 2"),
        (lambda: exact_bayes_predictive([0, 1, 1], [-1, 0, -1], 1.0, S=3), r"S = 2 only \(got S = 3\)"),
        (lambda: bayes_quadrature_s2([0, 1, 1], [-1, 0, -1], 1.0, root_law="uniform"), r"unknown root_law 'uniform'"),
        (lambda: bayes_predictive_estimate([0, 1, 1], [-1, 0, -1], 1.0, 2), r"seed is required"),
        (lambda: bayes_predictive_estimate([0, 1, 1], [-1, 0, -1], 1.0, 2, n_samples=1, seed=0), r"n_samples = 1"),
        (lambda: dirichlet_row_entropy(-1, 2), r"alpha = -1 must be"),
        (lambda: entropy_rate_quadrature(0.1, 1), r"S = 1 must be an integer >= 2"),
        (lambda: add_alpha_batch([[0, 1, 3]], [-1, 0, -1], 1.0, 3), r"tokens\[0, 2\] = 3 is out of range 0\.\.2"),
        (lambda: add_alpha_batch([[0, 1, 1], [0, 1.5, 1]], [-1, 0, -1], 1.0, 3), r"tokens\[1, 1\] = 1\.5 is not an"),
        (lambda: add_alpha_batch([0, 1, 1], [-1, 0, -1], 1.0, 2), r"shape \(B, T\) with T = 3 .*got shape \(3,\)"),
        (lambda: add_alpha_batch([[0, 1, 1]], [-1, 0, 1], 1.0, 2), r"query position T-1 = 2 must be a root"),
        (lambda: add_alpha_batch([[0, 1, 1]], [-1, 0, -1], 0.0, 2), r"alpha = 0\.0 must be a finite number > 0"),
        (lambda: edge_count_rows([[0, 1, 1]], [-1, 2, -1], 2), r"node 1: parent 2 comes after it"),
        (lambda: edge_count_rows([[0, 1, 1]], [-1, 0, -1], 2, root_source="first"),
         r"root_source must be one of 'none', 'last', got 'first'"),
        (lambda: add_alpha_batch([[0, 1], [0]], [-1, -1], 1.0, 2), r"tokens could not be read as an array"),
        (lambda: add_alpha_batch([["a", "b"]], [-1, -1], 1.0, 2), r"tokens must be integers, got dtype <U1"),
        (lambda: add_alpha_batch([[0j, 1j]], [-1, -1], 1.0, 2), r"tokens must be integers, got dtype complex128"),
    ],
)
def test_bad_inputs(call, match):
    with pytest.raises(TheoryError, match=match):
        call()


def test_dirichlet_row_entropy_harmonic_numbers_and_beta_quadrature():
    """Two independent known values: alpha = 1 (uniform on the simplex) gives H_S - 1 (harmonic number);
    S = 2 is E[h(p)] for p ~ Beta(alpha, alpha), integrated here with quadpack."""
    for S in range(2, 7):
        assert dirichlet_row_entropy(1.0, S) == pytest.approx(sum(1 / k for k in range(1, S + 1)) - 1, abs=1e-14)
    for alpha in (0.3, 0.5, 2.5):
        density = lambda p: p ** (alpha - 1) * (1 - p) ** (alpha - 1) / special.beta(alpha, alpha)
        h = lambda p: -special.xlogy(p, p) - special.xlogy(1 - p, 1 - p)
        expected, _ = integrate.quad(lambda p: h(p) * density(p), 0, 1, epsabs=1e-13, limit=200)
        assert dirichlet_row_entropy(alpha, 2) == pytest.approx(expected, rel=1e-9)


# -- bayes_predictive_estimate, path by path ---------------------------------------------------------------
def test_estimate_standard_error_is_the_posterior_rows_spread_per_state():
    """With independent roots every weight is 1: the standard error of each coordinate is the sample
    standard deviation of pi(q, s') over the n draws over sqrt(n); the draws are Dirichlet(alpha + n(q, .)),
    whose marginal variance is a_s (a_0 - a_s) / (a_0^2 (a_0 + 1))."""
    tree, prompt, S, alpha, n = [-1, 0, 1, 2, -1], [0, 1, 0, 0, 1], 3, 0.5, 40_000
    est, se = bayes_predictive_estimate(prompt, tree, alpha, S, n_samples=n, seed=3, root_law="independent")
    counts = edge_counts(prompt, tree, S)[0][1]  # the query's row: state 1
    a = alpha + counts
    var = a * (a.sum() - a) / (a.sum() ** 2 * (a.sum() + 1))
    assert se.shape == (S,) and np.allclose(se, np.sqrt(var / n), rtol=0.03)
    assert np.allclose(est, a / a.sum(), atol=5 * se.max())


def test_estimate_is_reproducible_from_its_seed_or_generator():
    args = ([0, 1, 1, 0], [-1, 0, 1, -1], 1.0, 2)
    a = bayes_predictive_estimate(*args, n_samples=500, seed=5)
    b = bayes_predictive_estimate(*args, n_samples=500, seed=5)
    c = bayes_predictive_estimate(*args, n_samples=500, seed=np.random.default_rng(5))
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[0], c[0]) and np.array_equal(a[1], c[1])
    assert bayes_predictive_estimate(*args, n_samples=2, seed=0)[0].shape == (2,)  # n_samples = 2 is allowed


def test_estimate_with_many_roots_keeps_its_weights_finite():
    """1,200 roots: log w ~ 1,200 log(1/2), far below float64's exponent range; the weights are taken
    relative to the largest, so the estimate is still a probability vector."""
    T = 1200
    est, se = bayes_predictive_estimate([0, 1] * (T // 2), [-1] * T, 1.0, 2, n_samples=200, seed=1)
    assert np.all(np.isfinite(est)) and est.sum() == pytest.approx(1.0) and np.all(np.isfinite(se))


@pytest.mark.parametrize("call, message", [
    (lambda: bayes_predictive_estimate([0, 1], [-1, 0], 1.0, 2, seed=0, root_law="uniform"),
     "unknown root_law 'uniform'; expected one of stationary, independent"),
    (lambda: bayes_predictive_estimate([0, 1], [-1, 0], 1.0, 2, n_samples=True, seed=0),
     "n_samples = True must be an integer >= 2"),
    (lambda: bayes_predictive_estimate([0, 1], [-1, 0], 1.0, 2, n_samples=2.0, seed=0),
     "n_samples = 2.0 must be an integer >= 2"),
    (lambda: bayes_predictive_estimate([0, 1], [-1, 0], 1.0, 2),
     "seed is required (an int or numpy Generator): theory/ uses no global random state"),
])
def test_estimate_messages_word_for_word(call, message):
    import re

    with pytest.raises(TheoryError, match="^" + re.escape(message) + "$"):
        call()


def test_argument_messages_name_alpha_s_and_the_prompt():
    import re

    tree = CausalTree([-1, 0, -1])

    def raises(msg, f, *args, **kw):
        with pytest.raises(TheoryError, match="^" + re.escape(msg) + "$"):
            f(*args, **kw)

    raises("alpha = 'x' is not a number", add_alpha_predictive, [0, 1, 0], tree, "x", 2)
    raises("S = 2.5 must be an integer >= 2 (alphabet size)", edge_counts, [0, 1, 0], tree, 2.5)
    raises("prompt must be a non-empty 1-d token array s_0..s_(T-1), got shape (1, 3)", edge_counts, [[0, 1, 0]],
           tree, 2)
    raises("prompt position 1: token 3 is out of range 0..2 (S = 3)", edge_counts, [0, 3, 0], tree, 3)
    raises("prompt position 1: token 2 is out of range 0..1 (S = 2)", bayes_quadrature_s2, [0, 2, 0], tree, 1.0)
    raises("unknown root_law 'x'; expected one of stationary, independent", bayes_quadrature_s2, [0, 1, 0], tree,
           1.0, root_law="x")
    raises("exact_bayes_predictive integrates numerically for S = 2 only (got S = 3); use bayes_predictive_estimate "
           "for an importance-sampling estimate with its standard error", exact_bayes_predictive, [0, 1, 0], tree,
           1.0, 3)
    with pytest.raises(TheoryError, match="^prompt could not be read as an array: "):
        edge_counts([[0, 1], [0]], tree, 2)


def test_edge_counts_of_a_one_position_prompt_and_their_integer_dtype():
    n, r = edge_counts([1], CausalTree([-1]), 2)  # the query alone: no edge, no root before it
    assert n.tolist() == [[0, 0], [0, 0]] and r.tolist() == [0, 0]
    n, r = edge_counts([0, 1, 1, 0], CausalTree([-1, 0, -1, -1]), 2)
    assert n.dtype == np.int64 and r.dtype == np.int64
    assert n.tolist() == [[0, 1], [0, 0]] and r.tolist() == [1, 1]


def test_quadrature_equals_add_alpha_up_to_its_count_limit_and_refuses_beyond():
    """Under root_law="independent" the exact Bayes predictive is add-alpha (conjugacy), a closed form
    the quadrature must reproduce to round-off at every prompt length it takes: up to
    MAX_QUADRATURE_COUNTS = 128 edge and root counts (a chain of T = 129: 127 edges and 1 root),
    and it refuses one more."""
    import re

    from theory.dirichlet import MAX_QUADRATURE_COUNTS

    assert MAX_QUADRATURE_COUNTS == 128
    for seed in range(3):
        rng = np.random.default_rng(seed)
        for T in (20, 90, 129):
            tree = CausalTree([-1] + list(range(T - 2)) + [-1])
            x = rng.integers(0, 2, T)
            q = bayes_quadrature_s2(x, tree, 0.5, root_law="independent")
            assert np.abs(q.predictive - add_alpha_predictive(x, tree, 0.5, 2)).max() < 1e-14, (seed, T)
    tree = CausalTree([-1] + list(range(128)) + [-1])
    with pytest.raises(TheoryError, match="^" + re.escape("the prompt has 129 edge and root counts, above "
                                                          "MAX_QUADRATURE_COUNTS = 128, where the quadrature is "
                                                          "checked; use bayes_predictive_estimate")):
        exact_bayes_predictive(np.zeros(130, dtype=int), tree, 0.5)


def test_bayes_predictive_estimate_draws_200_000_samples_by_default():
    tree = CausalTree([-1, 0, 1, -1])
    est, se = bayes_predictive_estimate([0, 1, 2, 1], tree, 1.0, 3, seed=4)
    est2, se2 = bayes_predictive_estimate([0, 1, 2, 1], tree, 1.0, 3, n_samples=200_000, seed=4)
    assert np.array_equal(est, est2) and np.array_equal(se, se2)


@pytest.mark.parametrize("alpha", [0.05, 0.3, 1.0, 5.0])
@pytest.mark.parametrize("S", [2, 3])
def test_entropy_rate_quadrature_meets_its_stated_precision(alpha, S):
    """QUADPACK's contract at epsabs = 1e-15, epsrel = 1e-14: the error estimate of the integral is at
    most max(1e-15, 1e-14 |integral|); scaled by S / B(alpha, beta) that is max(1e-15 scale, 1e-14 |L*|).
    The value agrees with the digamma closed form within that error and round-off."""
    val, err = entropy_rate_quadrature(alpha, S)
    scale = S * math.exp(-special.betaln(alpha, (S - 1) * alpha))
    assert err <= max(1e-15 * scale, 1e-14 * abs(val))
    assert abs(val - dirichlet_row_entropy(alpha, S)) <= err + 1e-14 * abs(val)
