"""Tests for theory.bma: W Lemma 1 (closed-form BMA posterior) and W Lemma 4 (expected log-likelihood)."""
from __future__ import annotations

import math
import time

import numpy as np
import pytest
from hypothesis import given, strategies as st

from theory.bma import (
    bma_log_scores,
    bma_posterior,
    bma_posterior_bruteforce,
    bma_posterior_matrix,
    bma_predictive,
    expected_loglik,
    recursive_trees,
)
from theory.errors import TheoryError
from theory.information import mutual_information
from theory.joint import marginals, pairwise_joint
from theory.markov import stationary


# -- local helpers (explicit rng everywhere) -----------------------------------------------------
def sample_sequences(rng, pi, parents, L, nu):
    """``L`` sequences on the tree ``parents`` (root ~ nu, child ~ pi[parent]); shape (L, H)."""
    pi, nu = np.asarray(pi, float), np.asarray(nu, float)
    H = len(parents)
    x = np.empty((L, H), dtype=np.int64)
    for h, p in enumerate(parents):
        probs = nu[None, :].repeat(L, 0) if p < 0 else pi[x[:, p]]
        cdf = np.cumsum(probs, axis=1)
        cdf /= cdf[:, -1:]
        # first index with cdf > u: never a zero-probability state
        x[:, h] = (rng.random((L, 1)) >= cdf).sum(axis=1)
    return x


def random_recursive_tree(rng, H):
    return [-1] + [int(rng.integers(0, h)) for h in range(1, H)]


def random_pi(rng, d, *, tiny=False, zeros=False, alpha=1.0):
    pi = rng.dirichlet(np.full(d, alpha), size=d)
    if tiny:  # a few entries far below 1e-8
        mask = rng.random((d, d)) < 0.3
        pi[mask] = 10.0 ** rng.uniform(-14, -9, size=mask.sum())
    if zeros:
        mask = rng.random((d, d)) < 0.25
        mask[np.arange(d), rng.integers(0, d, d)] = False  # keep a positive entry per row
        pi[mask] = 0.0
    return pi / pi.sum(axis=1, keepdims=True)


def root_for(pi, rng, kind):
    """Root law: stationary (if unique), uniform or a random law."""
    d = len(pi)
    if kind == "stationary":
        try:
            return stationary(pi)
        except TheoryError:
            return np.full(d, 1.0 / d)
    if kind == "uniform":
        return np.full(d, 1.0 / d)
    return rng.dirichlet(np.ones(d))


def closed_form_by_hand(context, pi, h):
    """Straight python: prod_l pi[x_h', x_h], normalised (the textbook reading of W Lemma 1)."""
    like = [math.prod(pi[row[c]][row[h]] for row in context) for c in range(h)]
    return np.array(like) / sum(like)


# -- W Lemma 1: closed form == brute force over all trees ---------------------------------------
@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("root_kind", ["stationary", "uniform", "random"])
def test_closed_form_matches_bruteforce_on_sampled_contexts(seed, root_kind):
    rng = np.random.default_rng(1000 + seed)
    d = int(rng.integers(2, 6))
    H = int(rng.integers(3, 8))
    L = int(rng.integers(1, 5))
    pi = random_pi(rng, d, tiny=seed % 3 == 1, zeros=seed % 3 == 2, alpha=float(rng.choice([0.3, 1.0, 3.0])))
    parents = random_recursive_tree(rng, H)
    nu = root_for(pi, rng, root_kind)
    ctx = sample_sequences(rng, pi, parents, L, nu)
    target = sample_sequences(rng, pi, parents, 1, nu)[0]
    root = None if root_kind == "stationary" and np.allclose(nu @ pi, nu) else nu
    for h in range(1, H):
        closed = bma_posterior(ctx, pi, h)
        brute = bma_posterior_bruteforce(ctx, pi, h, root=root)
        with_prefix = bma_posterior_bruteforce(ctx, pi, h, root=root, target_prefix=target[:h])
        np.testing.assert_allclose(closed, brute, rtol=0, atol=1e-10)
        np.testing.assert_allclose(closed, with_prefix, rtol=0, atol=1e-10)  # the prefix leaves it unchanged
        assert abs(closed.sum() - 1) < 1e-12


@pytest.mark.parametrize("seed", range(6))
def test_closed_form_matches_bruteforce_with_tiny_entries_arbitrary_contexts(seed):
    """Contexts that use the 1e-14..1e-9 transitions on purpose: log-space sums must stay exact."""
    rng = np.random.default_rng(2000 + seed)
    d, H, L = 3, 6, 3
    pi = random_pi(rng, d, tiny=True)
    pi[0, 1] = 1e-13
    pi[0] /= pi[0].sum()
    ctx = rng.integers(0, d, size=(L, H))
    ctx[:, 0] = 0
    ctx[:, 1] = 1  # every example makes the 1e-13 transition if pa(1) = 0 (the only choice)
    for h in range(1, H):
        np.testing.assert_allclose(bma_posterior(ctx, pi, h), bma_posterior_bruteforce(ctx, pi, h),
                                   rtol=0, atol=1e-10)


@given(
    seed=st.integers(0, 2**32 - 1),
    d=st.integers(2, 4),
    H=st.integers(2, 6),
    L=st.integers(1, 4),
    floor=st.sampled_from([0.0, 1e-12, 1e-3]),
    root_kind=st.sampled_from(["stationary", "uniform", "random"]),
)
def test_property_closed_form_equals_bruteforce(seed, d, H, L, floor, root_kind):
    rng = np.random.default_rng(seed)
    pi = rng.dirichlet(np.full(d, 0.5), size=d) + floor
    pi /= pi.sum(axis=1, keepdims=True)
    parents = random_recursive_tree(rng, H)
    nu = root_for(pi, rng, root_kind)
    ctx = sample_sequences(rng, pi, parents, L, nu)
    prefix = sample_sequences(rng, pi, parents, 1, nu)[0]
    h = int(rng.integers(1, H))
    closed = bma_posterior(ctx, pi, h)
    np.testing.assert_allclose(closed, bma_posterior_bruteforce(ctx, pi, h, root=nu, target_prefix=prefix[:h]),
                               rtol=0, atol=1e-10)
    assert np.all(closed >= 0) and abs(closed.sum() - 1) < 1e-12


def test_hand_computed_two_example_case():
    # pi = [[.9,.1],[.2,.8]], x^1 = (0,1,1), x^2 = (1,0,0), h = 2:
    # cand 0: pi[0,1] pi[1,0] = .1 * .2 = .02; cand 1: pi[1,1] pi[0,0] = .8 * .9 = .72.
    pi = np.array([[0.9, 0.1], [0.2, 0.8]])
    ctx = np.array([[0, 1, 1], [1, 0, 0]])
    expect = np.array([0.02, 0.72]) / 0.74
    np.testing.assert_allclose(bma_posterior(ctx, pi, 2), expect, rtol=1e-14)
    np.testing.assert_allclose(bma_log_scores(ctx, pi, 2), [math.log(0.02), math.log(0.72)], rtol=1e-14)
    np.testing.assert_allclose(bma_posterior_bruteforce(ctx, pi, 2), expect, rtol=1e-12)
    np.testing.assert_allclose(closed_form_by_hand(ctx.tolist(), pi.tolist(), 2), expect, rtol=1e-14)


def test_transposed_variant_is_caught():
    """softmax(sum_l log pi[x_h, x_h']) (rows and columns swapped) is not the Bayes posterior."""
    rng = np.random.default_rng(7)
    worst = 0.0
    for _ in range(20):
        pi = random_pi(rng, 3)
        parents = random_recursive_tree(rng, 5)
        ctx = sample_sequences(rng, pi, parents, 3, stationary(pi))
        brute = bma_posterior_bruteforce(ctx, pi, 4)
        np.testing.assert_allclose(bma_posterior(ctx, pi, 4), brute, atol=1e-10)
        scores = np.log(pi)[ctx[:, 4:5], ctx[:, :4]].sum(axis=0)  # log pi[x_h, x_h']
        wrong = np.exp(scores - scores.max())
        wrong /= wrong.sum()
        worst = max(worst, np.abs(wrong - brute).max())
    assert worst > 0.1


def test_uniform_prior_over_candidates_including_self_is_caught():
    """A prior over 0..h (one candidate too many, W's 1-indexing slip) changes the answer."""
    rng = np.random.default_rng(8)
    pi = random_pi(rng, 3)
    ctx = sample_sequences(rng, pi, random_recursive_tree(rng, 5), 4, stationary(pi))
    brute = bma_posterior_bruteforce(ctx, pi, 3)
    scores = np.log(pi)[ctx[:, :4], ctx[:, 3:4]].sum(axis=0)  # candidates 0..3, self included
    wrong = np.exp(scores - scores.max())
    wrong = (wrong / wrong.sum())[:3]
    assert np.abs(wrong - brute).max() > 1e-3


def test_exact_zeros_with_positive_probability_context():
    # pi with zeros; the context avoids them for some but not all candidates.
    pi = np.array([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.5, 0.0, 0.5]])
    ctx = np.array([[0, 1, 2, 2], [1, 2, 0, 0]])
    post = bma_posterior(ctx, pi, 3)
    np.testing.assert_allclose(post, bma_posterior_bruteforce(ctx, pi, 3), atol=1e-12)
    # cand 0: pi[0,2]=0 -> excluded; cand 1: pi[1,2] pi[2,0] = .25; cand 2: pi[2,2] pi[0,0] = .25
    np.testing.assert_allclose(post, [0.0, 0.5, 0.5], atol=1e-15)
    assert np.all(np.isfinite(bma_log_scores(ctx, pi, 3)[1:])) and bma_log_scores(ctx, pi, 3)[0] == -np.inf


def test_zero_probability_context_raises():
    pi = np.eye(2)
    with pytest.raises(TheoryError, match=r"probability 0 under pi for every candidate parent of h = 1"):
        bma_posterior([[0, 1]], pi, 1)
    batch = np.array([[[0, 0]], [[0, 1]]])
    with pytest.raises(TheoryError, match=r"context\[b=1\].*every candidate parent of h = 1"):
        bma_posterior(batch, pi, 1)
    with pytest.raises(TheoryError, match=r"context\[b=1\].*every candidate parent of h = 1"):
        bma_posterior_matrix(batch, pi)
    with pytest.raises(TheoryError, match=r"probability 0 under pi for every recursive tree"):
        bma_posterior_bruteforce([[0, 1]], pi, 1, root=[0.5, 0.5])


# -- batching and the posterior matrix ---------------------------------------------------------------
def test_batched_equals_unbatched_and_matrix_rows():
    rng = np.random.default_rng(3)
    d, B, L, H = 4, 7, 3, 9
    pi = random_pi(rng, d, tiny=True)
    batch = np.stack([sample_sequences(rng, pi, random_recursive_tree(rng, H), L, stationary(pi)) for _ in range(B)])
    mats = bma_posterior_matrix(batch, pi)
    assert mats.shape == (B, H, H)
    for h in range(1, H):
        post = bma_posterior(batch, pi, h)
        assert post.shape == (B, h)
        for b in range(B):
            np.testing.assert_allclose(post[b], bma_posterior(batch[b], pi, h), rtol=0, atol=1e-15)
            np.testing.assert_allclose(mats[b, h, :h], post[b], rtol=0, atol=1e-15)
            np.testing.assert_allclose(bma_posterior_matrix(batch[b], pi)[h, :h], post[b], rtol=0, atol=1e-15)
    assert np.all(mats[:, 0] == 0)
    assert np.all(mats[:, np.triu_indices(H)[0], np.triu_indices(H)[1]] == 0)
    np.testing.assert_allclose(mats[:, 1:].sum(axis=2), 1.0, atol=1e-13)


def test_benchmark_size_is_fast():
    """W's benchmark size: 4096 contexts, L = 10, H = 50, d = 20."""
    rng = np.random.default_rng(11)
    d, B, L, H = 20, 4096, 10, 50
    pi = random_pi(rng, d)
    ctx = rng.integers(0, d, size=(B, L, H))
    t0 = time.perf_counter()
    post = bma_posterior(ctx, pi, H - 1)
    elapsed = time.perf_counter() - t0
    assert post.shape == (B, H - 1)
    assert elapsed < 2.0, f"bma_posterior on {B} contexts took {elapsed:.2f}s"
    np.testing.assert_allclose(post[17], closed_form_by_hand(ctx[17].tolist(), pi.tolist(), H - 1), rtol=1e-9)


# -- predictive ---------------------------------------------------------------------------------------
def test_predictive_matches_bruteforce_mixture():
    rng = np.random.default_rng(5)
    d, H, L = 3, 5, 2
    pi = random_pi(rng, d)
    parents = random_recursive_tree(rng, H)
    ctx = sample_sequences(rng, pi, parents, L, stationary(pi))
    target = sample_sequences(rng, pi, parents, 1, stationary(pi))[0]
    for h in range(1, H):
        post = bma_posterior_bruteforce(ctx, pi, h, target_prefix=target[:h])
        expect = sum(post[c] * pi[target[c]] for c in range(h))
        got = bma_predictive(ctx, target[:h], pi, h)
        np.testing.assert_allclose(got, expect, atol=1e-12)
        np.testing.assert_allclose(bma_predictive(ctx, target, pi, h), got, atol=0)  # extra tokens unused
        assert abs(got.sum() - 1) < 1e-12


# -- recursive trees ------------------------------------------------------------------------------------
@pytest.mark.parametrize("H", range(1, 8))
def test_recursive_trees_count_and_validity(H):
    trees = list(recursive_trees(H))
    assert len(trees) == math.factorial(H - 1)
    assert len(set(trees)) == len(trees)
    for t in trees:
        assert t[0] == -1 and all(0 <= t[h] < h for h in range(1, H))


# -- bad inputs ------------------------------------------------------------------------------------------
PI3 = np.full((3, 3), 1 / 3)


@pytest.mark.parametrize(
    "context, h, match",
    [
        ([[0, 1, 2], [0, 5, 1]], 1, r"example l=1, position h=1: token 5 is out of range 0\.\.2"),
        ([[0, 1, 2], [0, 1, -1]], 1, r"example l=1, position h=2: token -1 is out of range"),
        ([[0, 1.5, 2]], 1, r"example l=0, position h=1: token 1\.5 is not an integer"),
        ([[0, 1, 2]], 0, r"h = 0 is out of range"),
        ([[0, 1, 2]], 3, r"h = 3 is out of range.*1\.\.2"),
        ([[0, 1, 2]], 1.5, r"h = 1\.5 is not an integer"),
        ([0, 1, 2], 1, r"shape \(L, H\)"),
        ([["a", "b"]], 1, r"integer tokens"),
        ([[True, False]], 1, r"integer tokens"),
    ],
)
def test_bad_context_and_h(context, h, match):
    with pytest.raises(TheoryError, match=match):
        bma_posterior(context, PI3, h)


def test_bad_inputs_other_functions():
    with pytest.raises(TheoryError, match=r"context\[b=1\] example l=0, position h=2: token 3"):
        bma_posterior(np.array([[[0, 1, 2]], [[0, 1, 3]]]), PI3, 1)
    with pytest.raises(TheoryError, match=r"H = 8 exceeds the limit H <= 7"):
        bma_posterior_bruteforce(np.zeros((1, 8), dtype=int), PI3, 1)
    with pytest.raises(TheoryError, match=r"target_prefix has length 1"):
        bma_posterior_bruteforce([[0, 1, 2]], PI3, 2, target_prefix=[0])
    with pytest.raises(TheoryError, match=r"target_prefix position 1: token 4 is out of range"):
        bma_predictive([[0, 1, 2]], [0, 4], PI3, 2)
    with pytest.raises(TheoryError, match=r"pi row 1 sums to 0\.6"):
        bma_posterior([[0, 1]], [[0.5, 0.4, 0.1], [0.2, 0.2, 0.2], [1 / 3, 1 / 3, 1 / 3]], 1)
    with pytest.raises(TheoryError, match=r"H = 0 must be a positive integer"):
        list(recursive_trees(0))
    with pytest.raises(TheoryError, match=r"cand = 2 is not a candidate parent of h = 2"):
        expected_loglik(PI3, [-1, 0, 0], 2, 2)
    with pytest.raises(TheoryError, match=r"h = 3 is out of range"):
        expected_loglik(PI3, [-1, 0, 0], 0, 3)


# -- W Lemma 4 --------------------------------------------------------------------------------------------
def _conditional_kl_term(pi, tree, cand, h, root):
    """E_a KL(P(x_h | x_cand = a) || pi[a, .]) by direct loops (0 log 0 = 0)."""
    joint = pairwise_joint(pi, tree, cand, h, root=root)
    total = 0.0
    for a in range(len(pi)):
        pa_ = joint[a].sum()
        for b in range(len(pi)):
            if joint[a, b] > 0:
                total += joint[a, b] * math.log((joint[a, b] / pa_) / pi[a, b])
    return total


@given(seed=st.integers(0, 2**32 - 1), d=st.integers(2, 4), H=st.integers(3, 7),
       root_kind=st.sampled_from(["stationary", "uniform", "random"]), zeros=st.booleans())
def test_lemma4_nonstrict_and_identity(seed, d, H, root_kind, zeros):
    """E log pi(x_h|x_pa) - E log pi(x_h|x_h') = I(x_h;x_pa) - I(x_h;x_h') + E KL(P(x_h|x_h') || pi) >= 0."""
    rng = np.random.default_rng(seed)
    pi = random_pi(rng, d, zeros=zeros, alpha=0.7)
    tree = random_recursive_tree(rng, H)
    nu = root_for(pi, rng, root_kind)
    h = int(rng.integers(1, H))
    p = tree[h]
    at_parent = expected_loglik(pi, tree, p, h, root=nu)
    assert np.isfinite(at_parent)
    I_pa = mutual_information(pairwise_joint(pi, tree, p, h, root=nu))
    for c in range(h):
        val = expected_loglik(pi, tree, c, h, root=nu)
        assert val <= at_parent + 1e-12
        if np.isfinite(val):
            I_c = mutual_information(pairwise_joint(pi, tree, c, h, root=nu))
            kl = _conditional_kl_term(pi, tree, c, h, nu)
            assert at_parent - val == pytest.approx(I_pa - I_c + kl, abs=1e-10)


@given(seed=st.integers(0, 2**32 - 1), d=st.integers(2, 4), H=st.integers(3, 7))
def test_lemma4_strict_with_full_support(seed, d, H):
    rng = np.random.default_rng(seed)
    pi = rng.dirichlet(np.full(d, 0.5), size=d) + 0.05
    pi /= pi.sum(axis=1, keepdims=True)
    tree = random_recursive_tree(rng, H)
    h = int(rng.integers(2, H))
    if mutual_information(pairwise_joint(pi, tree, tree[h], h)) <= 1e-9:
        return
    at_parent = expected_loglik(pi, tree, tree[h], h)
    for c in range(h):
        if c != tree[h]:
            assert expected_loglik(pi, tree, c, h) < at_parent


def test_lemma4_equality_cases():
    # identical rows: every token is independent of the others with law r = pi[a, .]; all candidates tie
    r = np.array([0.2, 0.5, 0.3])
    pi = np.tile(r, (3, 1))
    tree = [-1, 0, 1, 0, 2, 3]
    vals = [expected_loglik(pi, tree, c, 5) for c in range(5)]
    np.testing.assert_allclose(vals, float(r @ np.log(r)), rtol=1e-13)
    # identity permutation: all tokens equal, every candidate scores log 1 = 0
    vals = [expected_loglik(np.eye(3), tree, c, 5, root=np.full(3, 1 / 3)) for c in range(5)]
    assert vals == [0.0] * 5
    # swap on d = 2, chain 0-1-2-3: x_3 = swap(x_2) = x_1 = swap(x_0):
    # parent 2 and great-grandparent 0 both score 0 (equality), grandparent 1 gives -inf
    swap = np.array([[0.0, 1.0], [1.0, 0.0]])
    chain = [-1, 0, 1, 2]
    assert expected_loglik(swap, chain, 2, 3) == 0.0
    assert expected_loglik(swap, chain, 0, 3) == 0.0
    assert expected_loglik(swap, chain, 1, 3) == -math.inf


def test_lemma4_wrong_variant_caught():
    """The transposed score E[log pi(x_h' | x_h)] is not maximised at the parent in general."""
    rng = np.random.default_rng(21)
    found = False
    for _ in range(200):
        pi = random_pi(rng, 3, alpha=0.5)
        pi = (pi + 0.01) / (1 + 0.03)
        tree = random_recursive_tree(rng, 5)
        h, p = 4, tree[4]
        def transposed(c):
            joint = pairwise_joint(pi, tree, c, h)
            return float(np.sum(joint * np.log(pi.T)))
        if max(transposed(c) for c in range(h) if c != p) > transposed(p) + 1e-6:
            found = True
            break
    assert found
    # ...while the true score is maximised at the parent on that same input
    assert all(expected_loglik(pi, tree, c, h) <= expected_loglik(pi, tree, p, h) for c in range(h))


def test_expected_loglik_minus_inf_and_zero_log_zero():
    pi = np.array([[1.0, 0.0], [0.5, 0.5]])  # closed class {0}; use explicit root
    tree = [-1, 0, 0]
    # cand 1 for h = 2: (x_1, x_2) can be (1, 1) only through... x_1 = 1 needs root 1; then x_2 ~ pi[1] can be 1
    # and pi[1, 1] = .5 > 0, but (x_1, x_2) = (0, 1) has mass when root = 1, x_1 = 0, x_2 = 1: pi[0, 1] = 0
    assert expected_loglik(pi, tree, 1, 2, root=[0.5, 0.5]) == -math.inf
    assert expected_loglik(pi, tree, 1, 2, root=[1.0, 0.0]) == 0.0  # all mass on (0, 0); 0 log 0 terms dropped
    val = expected_loglik(pi, tree, 0, 2, root=[0.5, 0.5])
    assert val == pytest.approx(0.5 * math.log(0.5), abs=1e-15)
    assert np.all(np.isfinite(marginals(pi, tree, root=[0.5, 0.5])))


# -- the oracle's parent prior and the batched posterior (second, independent checks) ----------------
def _recency_prior(H):
    """``q[k, j] ∝ j + 1`` for ``j < k``: a non-uniform independent parent prior."""
    q = np.zeros((H, H))
    for k in range(1, H):
        q[k, :k] = np.arange(1, k + 1) / (k * (k + 1) / 2)
    return q


@pytest.mark.parametrize("seed", range(3))
def test_bruteforce_honours_parent_prior_as_a_log_prior_on_the_scores(seed):
    """With independent parents and no target prefix the likelihood factorises per node, so the exact
    posterior is ``softmax_c(log q[h, c] + s_c)`` with the closed form's scores ``s``: a non-uniform
    prior must move the brute-force posterior exactly there (and away from W's uniform closed form)."""
    rng = np.random.default_rng(100 + seed)
    d, H, L = 3, 5, 3
    pi = random_pi(rng, d)
    context = sample_sequences(rng, pi, random_recursive_tree(rng, H), L, stationary(pi))
    q = _recency_prior(H)
    for h in range(2, H):
        s = bma_log_scores(context, pi, h) + np.log(q[h, :h])
        expected = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
        got = bma_posterior_bruteforce(context, pi, h, parent_prior=q)
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
        assert np.abs(got - bma_posterior(context, pi, h)).max() > 1e-3


def test_bruteforce_with_a_point_mass_parent_prior_returns_that_parent():
    """A prior that fixes every parent leaves one tree: the posterior is that parent, whatever the data
    (the zeros of the prior are log 0 = -inf on purpose, without a warning)."""
    import warnings

    pi = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]])
    context = np.array([[0, 0, 1, 2], [1, 1, 1, 1]])
    q = np.zeros((4, 4))
    q[1, 0], q[2, 1], q[3, 0] = 1.0, 1.0, 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(bma_posterior_bruteforce(context, pi, 2, parent_prior=q), [0.0, 1.0])
        np.testing.assert_array_equal(bma_posterior_bruteforce(context, pi, 3, parent_prior=q), [1.0, 0.0, 0.0])


@pytest.mark.parametrize("rows, match", [
    ({1: [0.5]}, r"parent_prior row 1 must be a probability vector over 0\.\.0, got \[0\.5\]"),
    ({2: [1.5, -0.5]}, r"parent_prior row 2 must be a probability vector over 0\.\.1, got \[1\.5, -0\.5\]"),
    ({2: [float("nan"), 1.0]}, r"parent_prior row 2 must be a probability vector over 0\.\.1"),
    ({2: [0.4, 0.6, 0.1]}, r"parent_prior row 2 puts mass on positions >= 2"),
])
def test_bruteforce_rejects_a_bad_parent_prior_naming_the_row(rows, match):
    q = _recency_prior(4)
    for k, row in rows.items():
        q[k, :len(row)] = row
    context = np.array([[0, 1, 1, 0]])
    pi = np.array([[0.6, 0.4], [0.3, 0.7]])
    with pytest.raises(TheoryError, match=match):
        bma_posterior_bruteforce(context, pi, 2, parent_prior=q)
    with pytest.raises(TheoryError, match=r"parent_prior must have shape \(4, 4\), got \(3, 3\)"):
        bma_posterior_bruteforce(context, pi, 2, parent_prior=np.eye(3))


def test_posterior_matrix_rows_equal_per_position_posteriors_with_a_heavy_diagonal():
    """Row ``h`` of :func:`bma_posterior_matrix` is :func:`bma_posterior` at ``h`` and nothing else: with
    ``pi`` concentrated on its diagonal, letting position ``h`` be its own candidate would take most of
    the row's mass, so every row must match, sum to 1 and be zero on and above the diagonal."""
    pi = np.array([[0.9, 0.05, 0.05], [0.05, 0.9, 0.05], [0.1, 0.1, 0.8]])
    context = np.array([[0, 1, 1, 2, 2], [2, 2, 0, 0, 1], [1, 0, 1, 1, 2]])
    M = bma_posterior_matrix(context, pi)
    H = context.shape[1]
    for h in range(1, H):
        np.testing.assert_allclose(M[h, :h], bma_posterior(context, pi, h), rtol=0, atol=1e-15)
        np.testing.assert_allclose(M[h, :h], closed_form_by_hand(context, pi, h), rtol=1e-12)
        assert np.all(M[h, h:] == 0.0)
    assert np.all(M[0] == 0.0)


def test_posterior_matrix_works_in_log_space_far_below_exp_range():
    """Every candidate scores 2 log(1e-300) ~ -1381 (exp underflows to 0): the softmax must subtract
    the top score first and give the uniform posterior, as bma_posterior does."""
    tiny = 1e-300
    pi = np.array([[1 - tiny, tiny], [tiny, 1 - tiny]])
    context = np.array([[0, 0, 1], [1, 1, 0]])  # x_2 differs from both earlier tokens in each example
    M = bma_posterior_matrix(context, pi)
    np.testing.assert_allclose(M[2, :2], [0.5, 0.5], rtol=1e-12)
    np.testing.assert_allclose(M[2, :2], bma_posterior(context, pi, 2), rtol=1e-12)


def test_posterior_matrix_errors_name_the_position():
    with pytest.raises(TheoryError, match=r"^the context has probability 0 under pi for every candidate parent of "
                                          r"h = 2 \(all log-scores are -inf\), so the posterior of pa\(2\) is undefined$"):
        bma_posterior_matrix([[0, 0, 1]], np.eye(2))
    with pytest.raises(TheoryError, match=r"context has H = 1 positions; the posterior matrix needs H >= 2"):
        bma_posterior_matrix([[0]], np.eye(2))


def test_bruteforce_takes_one_context_not_a_batch():
    with pytest.raises(TheoryError, match=r"context must have shape \(L, H\), got shape \(2, 1, 3\)"):
        bma_posterior_bruteforce(np.zeros((2, 1, 3), dtype=int), [[0.75, 0.25], [0.25, 0.75]], 1)


def test_bruteforce_up_to_its_limit_of_seven_positions():
    """H = 7 (720 trees) is the documented limit, included; the root law's zeros matter only at x_0."""
    pi = np.array([[0.6, 0.4], [0.3, 0.7]])
    context = np.array([[0, 1, 1, 0, 1, 0, 0]])
    np.testing.assert_allclose(bma_posterior_bruteforce(context, pi, 6, root=[1.0, 0.0]),
                               bma_posterior(context, pi, 6), rtol=0, atol=1e-12)
    with pytest.raises(TheoryError, match=r"H = 8 exceeds the limit H <= 7"):
        bma_posterior_bruteforce(np.zeros((1, 8), dtype=int), pi, 1)
    with pytest.raises(TheoryError, match=r"^the context has probability 0 under pi for every candidate parent"):
        bma_posterior([[0, 1]], np.eye(2), 1)


def test_every_argument_error_names_the_argument_and_its_exact_range():
    """The messages a researcher reads: which argument, which position, and the range it must lie in."""
    tree = [-1, 0, 0]
    cases = [
        (lambda: expected_loglik(PI3, tree, 0, 1.5), r"^h = 1\.5 is not an integer position$"),
        (lambda: expected_loglik(PI3, tree, 0.5, 2), r"^cand = 0\.5 is not an integer position$"),
        (lambda: expected_loglik(PI3, tree, 0, 3), r"^h = 3 is out of range 1\.\.2 for a tree with 3 nodes$"),
        (lambda: expected_loglik(PI3, tree, 2, 2),
         r"^cand = 2 is not a candidate parent of h = 2 \(candidates are 0\.\.1\)$"),
        (lambda: bma_posterior([[0, 1], [0]], PI3, 1), r"^context could not be read as an array: "),
        (lambda: bma_posterior(np.array([[0, None]], dtype=object), PI3, 1),
         r"^context could not be read as a rectangular integer array \(ragged or mixed types\)$"),
        (lambda: bma_posterior(np.zeros((1, 1, 1, 3), dtype=int), PI3, 1),
         r"^context must have shape \(L, H\) or a batch \(B, L, H\), got shape \(1, 1, 1, 3\)$"),
        (lambda: bma_predictive(np.zeros((2, 1, 3), dtype=int), [0, 0], PI3, 2),
         r"^context must have shape \(L, H\), got shape \(2, 1, 3\)$"),
        (lambda: bma_predictive([[0, 1, 2]], [[0], [1, 2]], PI3, 2), r"^target_prefix could not be read as an array: "),
        (lambda: bma_predictive([[0, 1, 2]], [[0, 1]], PI3, 2),
         r"^target_prefix must be a 1-d token array x\^\(L\+1\)_0\.\.x\^\(L\+1\)_\(h-1\), got shape \(1, 2\)$"),
        (lambda: bma_predictive([[0, 1, 2]], [0], PI3, 2),
         r"^target_prefix has length 1, but positions 0\.\.1 \(h = 2 tokens\) are needed$"),
        (lambda: bma_predictive([[0, 1, 2]], [0, 1.5], PI3, 2), r"^target_prefix position 1: token 1\.5 is not an integer$"),
        (lambda: bma_predictive([[0, 1, 2]], [0, 3], PI3, 2),
         r"^target_prefix position 1: token 3 is out of range 0\.\.2 \(d = 3 states\)$"),
    ]
    for call, match in cases:
        with pytest.raises(TheoryError, match=match):
            call()


def test_zero_entries_of_pi_give_log_zero_without_a_warning(recwarn):
    """``log 0 = -inf`` is the convention (a transition that pi forbids rules its candidate out); it is taken
    silently, in the scores and in the expected log-likelihood's -inf."""
    swap = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    scores = bma_log_scores([[0, 1, 2, 1]], swap, 3)
    assert scores.tolist() == [0.0, -math.inf, -math.inf]  # x_3 = 1 follows only x_0 = 0 under the cycle
    assert expected_loglik(swap, [-1, 0, 1], 0, 2) == -math.inf  # x_2 = x_0 + 2 (mod 3), pi[a, a + 2] = 0
    assert not recwarn.list, [str(w.message) for w in recwarn.list]


def test_context_tokens_and_h_of_any_integral_type_and_nothing_else():
    """Integral floats of any float dtype read as tokens and positions; a non-integral one is refused where it
    sits (batched contexts name the batch index); booleans are never integers; an empty context is refused."""
    ctx = [[0, 1, 2], [2, 1, 0]]
    want = bma_posterior(ctx, PI3, 2)
    for dtype in (np.float64, np.float32):
        np.testing.assert_array_equal(bma_posterior(np.array(ctx, dtype=dtype), PI3, 2), want)
    np.testing.assert_array_equal(bma_posterior(ctx, PI3, 2.0), want)
    with pytest.raises(TheoryError, match=r"^context example l=1, position h=2: token 1\.5 is not an integer$"):
        bma_posterior(np.array([[0, 1, 2], [2, 1, 1.5]], dtype=np.float32), PI3, 2)
    with pytest.raises(TheoryError, match=r"^context\[b=1\] example l=0, position h=2: token 1\.5 is not an integer$"):
        bma_posterior(np.array([[[0, 1, 2]], [[2, 1, 1.5]]]), PI3, 2)
    with pytest.raises(TheoryError, match=r"^h = True is not an integer position$"):
        bma_posterior(ctx, PI3, True)
    with pytest.raises(TheoryError, match=r"^context is empty \(shape \(0, 3\)\); it needs L >= 1 examples of length H >= 2$"):
        bma_posterior(np.zeros((0, 3), dtype=int), PI3, 1)


def test_posterior_matrix_in_chunks_equals_it_context_by_context(monkeypatch):
    """The batched matrix is computed in chunks (to bound memory); with chunks of 2 contexts a batch of 7 still
    gets every row, equal to each context's own matrix."""
    import theory.bma as bma

    rng = np.random.default_rng(11)
    pi = rng.dirichlet(np.ones(3), size=3)
    ctx = rng.integers(0, 3, size=(7, 4, 5))
    whole = [bma_posterior_matrix(c, pi) for c in ctx]
    monkeypatch.setattr(bma, "_CHUNK_ENTRIES", 2 * 4 * 5 * 5)  # chunk = 2 contexts
    np.testing.assert_allclose(bma_posterior_matrix(ctx, pi), np.stack(whole), rtol=1e-13, atol=0)
