"""Tests for theory.continuous: Gaussian BMA logits of W Proposition 2 (claim W.P2)."""
import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import multivariate_normal, ortho_group

from theory.continuous import (
    bilinear_logits,
    gaussian_bma_constants,
    gaussian_bma_logits,
    gaussian_bma_posterior,
)
from theory.errors import TheoryError


def sample_system(rng, A, rho, L, H, parents=None):
    """Context (L, H, d) from the continuous system on a random recursive tree."""
    d = A.shape[0]
    if parents is None:
        parents = [-1] + [int(rng.integers(0, h)) for h in range(1, H)]
    x = np.empty((L, H, d))
    x[:, 0] = rng.standard_normal((L, d))
    for h in range(1, H):
        x[:, h] = rho * x[:, parents[h]] @ A + math.sqrt(1 - rho ** 2) * rng.standard_normal((L, d))
    return x, parents


def closed_form_logits(x, A, rho, h):
    c1, c2 = gaussian_bma_constants(rho)
    bil = np.einsum("lkd,de,le->k", x[:, :h], A, x[:, h])
    sq = (x[:, :h] ** 2).sum(axis=(0, 2))
    return c1 * bil + c2 * sq


def test_constants_known_values():
    c1, c2 = gaussian_bma_constants(0.5)
    assert c1 == pytest.approx(0.5 / 0.75) and c2 == pytest.approx(-0.25 / 1.5)
    assert gaussian_bma_constants(0.0) == (0.0, 0.0)
    c1, c2 = gaussian_bma_constants(-0.3)
    assert c1 < 0 and c2 < 0


@given(st.integers(0, 10_000), st.floats(-0.95, 0.95), st.integers(1, 4), st.integers(2, 5), st.integers(1, 3))
def test_logits_equal_c1_c2_form_up_to_constant(seed, rho, L, H, d):
    rng = np.random.default_rng(seed)
    A = ortho_group.rvs(d, random_state=seed) if d > 1 else np.array([[1.0 if seed % 2 else -1.0]])
    x = rng.standard_normal((L, H, d)) * 2
    for h in range(1, H):
        got = gaussian_bma_logits(x, A, rho, h)
        ref = closed_form_logits(x, A, rho, h)
        assert got.max() == 0.0
        np.testing.assert_allclose(got - got[0], ref - ref[0], atol=1e-10 * (1 + np.abs(ref).max()))


def test_perturbed_c2_is_caught():
    # The same comparison with c2 missing its factor 1/2 fails: the test above can fail.
    rng = np.random.default_rng(0)
    A = ortho_group.rvs(3, random_state=1)
    rho = 0.7
    x = rng.standard_normal((3, 5, 3))
    c1, c2 = gaussian_bma_constants(rho)
    got = gaussian_bma_logits(x, A, rho, 4)
    bil = np.einsum("lkd,de,le->k", x[:, :4], A, x[:, 4])
    sq = (x[:, :4] ** 2).sum(axis=(0, 2))
    wrong = c1 * bil + 2 * c2 * sq
    assert np.abs((got - got[0]) - (wrong - wrong[0])).max() > 1e-2


def test_posterior_matches_bayes_over_all_trees():
    # Brute force: joint density of every node under every recursive tree (H = 4: 6 trees).
    rng = np.random.default_rng(3)
    d, L, H, rho = 2, 2, 4, 0.6
    A = ortho_group.rvs(d, random_state=4)
    x, _ = sample_system(rng, A, rho, L, H)
    trees = [(-1,) + t for t in itertools.product(*[range(j) for j in range(1, H)])]

    def log_joint(tree):
        out = 0.0
        for l in range(L):
            out += multivariate_normal.logpdf(x[l, 0], np.zeros(d), np.eye(d))
            for j in range(1, H):
                out += multivariate_normal.logpdf(x[l, j], rho * A.T @ x[l, tree[j]], (1 - rho ** 2) * np.eye(d))
        return out

    lj = np.array([log_joint(t) for t in trees])
    w = np.exp(lj - lj.max())
    for h in range(1, H):
        post = np.array([w[[t[h] == k for t in trees]].sum() for k in range(h)]) / w.sum()
        np.testing.assert_allclose(gaussian_bma_posterior(x, A, rho, h), post, rtol=1e-10, atol=1e-14)


def test_batched_shapes_and_rho_zero():
    rng = np.random.default_rng(5)
    A = ortho_group.rvs(3, random_state=6)
    xb = rng.standard_normal((4, 2, 5, 3))  # (B, L, H, d)
    out = gaussian_bma_logits(xb, A, 0.4, 3)
    assert out.shape == (4, 3)
    for b in range(4):
        np.testing.assert_allclose(out[b], gaussian_bma_logits(xb[b], A, 0.4, 3), atol=1e-12)
    post = gaussian_bma_posterior(xb, A, 0.4, 3)
    np.testing.assert_allclose(post.sum(axis=-1), 1.0)
    W = rng.standard_normal((3, 3))
    bl = bilinear_logits(xb, W, 3)
    assert bl.shape == (4, 3)
    assert bl[1, 2] == pytest.approx(sum(xb[1, l, 2] @ W @ xb[1, l, 3] for l in range(2)))
    np.testing.assert_array_equal(gaussian_bma_logits(xb, A, 0.0, 4), np.zeros((4, 4)))


def _fit_bilinear(contexts, targets, h):
    """Least-squares W for score differences s_k - s_0 ~ sum_l (x_k - x_0)^T W x_h; relative residual."""
    feats, ys = [], []
    for x, y in zip(contexts, targets):
        for k in range(1, h):
            feats.append(np.einsum("ld,le->de", x[:, k] - x[:, 0], x[:, h]).ravel())
            ys.append(y[k] - y[0])
    F, Y = np.array(feats), np.array(ys)
    coef, *_ = np.linalg.lstsq(F, Y, rcond=None)
    resid = Y - F @ coef
    return np.linalg.norm(resid) / np.linalg.norm(Y), coef


def test_no_bilinear_w_reproduces_bma_but_a_bilinear_target_is_fit():
    rng = np.random.default_rng(11)
    d, L, H, h, rho = 2, 3, 5, 4, 0.6
    A = ortho_group.rvs(d, random_state=12)
    contexts = [sample_system(rng, A, rho, L, H)[0] for _ in range(1500)]
    bma = [gaussian_bma_logits(x, A, rho, h) for x in contexts]
    rel, _ = _fit_bilinear(contexts, bma, h)
    assert rel > 0.2  # bounded away from 0: the ||x_h'||^2 term is not bilinear
    # Control: a target that IS bilinear (c1 A, and also a random W) is fit exactly.
    c1, _ = gaussian_bma_constants(rho)
    for W in (c1 * A, rng.standard_normal((d, d))):
        target = [bilinear_logits(x, W, h) for x in contexts]
        rel0, coef = _fit_bilinear(contexts, target, h)
        assert rel0 < 1e-10
        np.testing.assert_allclose(coef.reshape(d, d), W, atol=1e-8)
    # And removing the c2 term from the BMA target makes it bilinear again.
    _, c2 = gaussian_bma_constants(rho)
    stripped = [s - c2 * (x[:, :h] ** 2).sum(axis=(0, 2)) for s, x in zip(bma, contexts)]
    rel1, coef = _fit_bilinear(contexts, stripped, h)
    assert rel1 < 1e-10
    np.testing.assert_allclose(coef.reshape(d, d), c1 * A, atol=1e-8)


def test_bad_inputs_rejected():
    A = np.eye(2)
    x = np.zeros((2, 3, 2))
    with pytest.raises(TheoryError, match=r"A is not orthogonal: max \|A\^T A - I\| = 0.21"):
        gaussian_bma_logits(x, [[1.1, 0.0], [0.0, 1.0]], 0.5, 1)
    with pytest.raises(TheoryError, match=r"A must have shape \(d, d\) = \(2, 2\)"):
        gaussian_bma_logits(x, np.eye(3), 0.5, 1)
    for rho in (1.0, -1.0, 1.5, math.nan, math.inf):
        with pytest.raises(TheoryError, match="outside"):
            gaussian_bma_logits(x, A, rho, 1)
    with pytest.raises(TheoryError, match="outside"):
        gaussian_bma_constants(1.0)
    with pytest.raises(TheoryError, match="rho must be a real number"):
        gaussian_bma_constants("a")
    with pytest.raises(TheoryError, match=r"shape \(L, H, d\) or \(B, L, H, d\)"):
        gaussian_bma_logits(np.zeros((3, 2)), A, 0.5, 1)
    bad = x.copy()
    bad[1, 2, 0] = np.nan
    with pytest.raises(TheoryError, match=r"context\[1, 2, 0\] = nan is not finite"):
        gaussian_bma_logits(bad, A, 0.5, 1)
    with pytest.raises(TheoryError, match="need 1 <= h < H = 3"):
        gaussian_bma_logits(x, A, 0.5, 3)
    with pytest.raises(TheoryError, match="need 1 <= h < H = 3"):
        bilinear_logits(x, A, 0)
    with pytest.raises(TheoryError, match=r"W must have shape \(d, d\)"):
        bilinear_logits(x, np.eye(3), 1)
    with pytest.raises(TheoryError, match=r"W\[0, 1\] = inf is not finite"):
        bilinear_logits(x, [[0.0, np.inf], [0.0, 0.0]], 1)


def test_bad_inputs_are_named_exactly():
    A = np.eye(2)
    x = np.zeros((2, 3, 2))
    with pytest.raises(TheoryError, match=r"^rho must be a real number with \|rho\| < 1, got True$"):
        gaussian_bma_constants(True)
    with pytest.raises(TheoryError, match=r"^rho must be a real number with \|rho\| < 1, got 'a'$"):
        gaussian_bma_constants("a")
    for h in (True, 1.0):  # True is not the position 1
        with pytest.raises(TheoryError, match=rf"^h must be an integer position, got {h!r}$"):
            gaussian_bma_logits(x, A, 0.5, h)
    with pytest.raises(TheoryError, match=r"^h = 3 has no candidate parents or is out of range: need 1 <= h < H = 3$"):
        gaussian_bma_logits(x, A, 0.5, 3)
    # complex numbers are not read as real: no silent cast, no ComplexWarning
    with pytest.raises(TheoryError, match=r"^context could not be read as an array of numbers: "):
        gaussian_bma_logits(x + 1j, A, 0.5, 1)
    with pytest.raises(TheoryError, match=r"^A could not be read as an array of numbers: "):
        gaussian_bma_logits(x, A + 1j, 0.5, 1)
    with pytest.raises(TheoryError, match=r"^W could not be read as an array of numbers: "):
        bilinear_logits(x, A + 1j, 1)
    with pytest.raises(TheoryError, match=r"^context must have shape \(L, H, d\) or \(B, L, H, d\) with no empty axis, "
                                          r"got \(2, 0, 2\)$"):
        gaussian_bma_logits(np.zeros((2, 0, 2)), A, 0.5, 1)
    bad = np.array([[1.0, np.nan], [np.inf, 1.0]])  # the first non-finite entry is named
    with pytest.raises(TheoryError, match=r"^A\[0, 1\] = nan is not finite$"):
        gaussian_bma_logits(x, bad, 0.5, 1)
