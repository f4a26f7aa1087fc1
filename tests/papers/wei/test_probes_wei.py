"""Tests of sim.papers.wei.probes: detection patterns, copier readout, W_KQ blocks, column/row softmax
errors, the Bayes baselines in torch (against theory), and that each probe can fail."""
import math

import numpy as np
import pytest
import torch

from sim.papers.wei.model import WeiTransformer, wei_construction
from sim.papers.wei import probes as P
from theory import bma_posterior_matrix, bma_predictive

F64 = torch.float64


def _pi(seed, d, floor=0.03):
    p = np.random.default_rng(seed).dirichlet(np.ones(d), size=d)
    return (1 - d * floor) * p + floor


def _tokens(seed, B, L, H, d):
    return torch.as_tensor(np.random.default_rng(seed).integers(0, d, (B, L + 1, H)))


def _task_tokens(pi, B, L, H, seed):
    from sim.sampling import random_recursive_parents, sample_w_prompts

    rng = np.random.default_rng(seed)
    return torch.as_tensor(sample_w_prompts(rng, pi, random_recursive_parents(rng, H, B), L))


# ------------------------------------------------------------------------------ patterns --
def test_patterns_and_mass_by_hand():
    P1 = P.copier_pattern(2, 3, 1)
    assert P1.shape == (3, 6) and P1.sum() == 3
    assert P1[0, 3] == P1[1, 4] == P1[2, 5] == 1
    T = P.tree_pattern([-1, 0, 0, 1])
    assert T.tolist() == [[0, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0]]
    assert P.tree_pattern([[-1, 0], [-1, 0]]).shape == (2, 2, 2)
    attn = np.array([[0.0, 0, 0, 0], [1, 0, 0, 0], [0.3, 0.7, 0, 0], [0.2, 0.5, 0.3, 0]])
    assert P.pattern_mass(attn, T).tolist() == pytest.approx([0, 1, 0.3, 0.5])
    with pytest.raises(ValueError, match="outside"):
        P.copier_pattern(2, 3, 2)


# ------------------------------------------------------------------------------ copiers --
@pytest.mark.parametrize("L,H", [(3, 4), (5, 6)])
def test_copier_report_of_the_construction_matches_its_closed_form(L, H):
    pi = _pi(0, 3)
    beta = 1.3
    rep = P.copier_report(wei_construction(pi, L, H, beta, dtype=F64))
    # Head k copies example k; its weight on x^k_h is e^{2b} / (e^{2b} + (L-1) + (H-1) + (L-1)(H-1) e^{-2b}).
    e2 = math.exp(2 * beta)
    expect = e2 / (e2 + (L - 1) + (H - 1) + (L - 1) * (H - 1) / e2)
    assert rep.example.tolist() == list(range(L)) and rep.all_covered
    assert np.allclose(rep.score, expect, atol=1e-12) and np.allclose(rep.mean_score, expect, atol=1e-12)
    assert rep.mass.shape == (L, L, H)
    assert P.copier_probe(wei_construction(pi, L, H, 8.0)) > 0.99


def test_copier_report_sees_collisions_and_weak_heads():
    pi = _pi(1, 3)
    model = wei_construction(pi, 3, 4, 6.0, dtype=F64)
    with torch.no_grad():
        model.w_L[2] = model.w_L[0]  # head 2 now copies example 0 too
    rep = P.copier_report(model)
    assert rep.example.tolist() == [0, 1, 0] and rep.covered == [0, 1] and not rep.all_covered
    assert P.copier_probe(model) == 0.0  # coverage fails, so the probe says no mechanism
    weak = P.copier_report(WeiTransformer.init(3, 3, 4, generator=torch.Generator().manual_seed(0)))
    assert weak.min_score < 0.1  # a random small init is no copier: the threshold 0.9 can fail
    assert weak.as_dict()["n_covered"] == weak.n_covered


# ----------------------------------------------------------------------------- W_KQ, W --
def test_learned_W_and_block_structure():
    pi = _pi(2, 4)
    model = wei_construction(pi, 3, 5, 5.0, dtype=F64)
    assert np.allclose(P.learned_W(model), np.log(pi))
    assert P.learned_W(model, "per-head").shape == (3, 4, 4)
    blk = P.block_structure(model)
    assert blk.offdiag_norm == 0 and blk.ratio == 0 and blk.diag_norm > 0
    with torch.no_grad():  # a column shift in an off-diagonal block: invisible to layer 2, centred norm 0
        model.W_KQ[0:4, 4:8] += torch.tensor([1.0, -2.0, 0.5, 3.0], dtype=F64)[None, :]
    blk = P.block_structure(model)
    assert blk.ratio == pytest.approx(0, abs=1e-12) and blk.offdiag_norm_raw > 0
    with torch.no_grad():  # a row pattern does change layer 2: the centred norm sees it
        model.W_KQ[0:4, 4:8] += torch.arange(4, dtype=F64)[:, None]
    assert P.block_structure(model).ratio > 0.1
    with pytest.raises(ValueError, match="reading"):
        P.learned_W(model, "median")


def test_column_and_row_softmax_errors():
    pi = _pi(3, 4)
    lp = np.log(pi)
    a, b = np.array([0.3, -1.0, 2.0, 0.1]), np.array([1.0, -0.5, 0.0, 2.0])
    col_shift, row_shift = lp + a[None, :], lp + b[:, None]
    assert P.column_softmax_error(col_shift, lp) == pytest.approx(0, abs=1e-14)
    assert P.row_softmax_error(col_shift, lp) > 0.05  # W's point: the row softmax is not shift-blind
    assert P.row_softmax_error(row_shift, lp) == pytest.approx(0, abs=1e-14)
    assert P.column_softmax_error(row_shift, lp) > 0.05
    assert np.allclose(P.row_softmax(lp), pi) and np.allclose(P.column_softmax(lp).sum(0), 1)
    # By hand, d = 2: W = 0 vs log pi with pi = [[0.9, 0.1], [0.5, 0.5]].
    pi2 = np.array([[0.9, 0.1], [0.5, 0.5]])
    col = np.array([[0.9 / 1.4, 0.1 / 0.6], [0.5 / 1.4, 0.5 / 0.6]])
    assert P.column_softmax_error(np.zeros((2, 2)), np.log(pi2)) == pytest.approx(np.abs(col - 0.5).sum() / 2)
    assert P.row_softmax_error(np.zeros((2, 2)), np.log(pi2)) == pytest.approx((0.4 + 0.4) / 2)
    # log 0 entries are fine; an all -inf column is undefined and says so.
    with np.errstate(divide="ignore"):
        assert P.column_softmax(np.log(np.array([[1.0, 0.5], [0.0, 0.5]])))[1, 0] == 0
    with pytest.raises(ValueError, match="column 0"):
        P.column_softmax(np.array([[-np.inf, 0.0], [-np.inf, 1.0]]))
    with pytest.raises(ValueError, match="same square shape"):
        P.column_softmax_error(np.zeros((2, 2)), np.zeros((3, 3)))


def test_ov_error():
    pi = _pi(4, 3)
    model = wei_construction(pi, 2, 3, 1.0, dtype=F64)
    assert P.ov_error(model, pi) == pytest.approx(0, abs=1e-12)
    with torch.no_grad():
        model.W_OV.zero_()
    assert P.ov_error(model, pi) == pytest.approx(np.abs(pi - 1 / 3).sum() / 3)


# ------------------------------------------------------------------------ Bayes baselines --
def test_bma_posterior_torch_matches_theory():
    pi = _pi(5, 3, floor=0.001)
    ctx = _tokens(6, 7, 4, 6, 3)[:, :4]
    ours = P.bma_posterior_torch(ctx, torch.as_tensor(np.log(pi)))
    assert np.allclose(ours.numpy(), bma_posterior_matrix(ctx.numpy(), pi), atol=1e-12)


def test_prompt_losses_against_theory_and_by_hand():
    d, L, H = 3, 4, 5
    pi = _pi(7, d, floor=0.005)
    tokens = _task_tokens(pi, 64, L, H, seed=8)  # prompts of W's task, so BMA beats the blind predictor
    model = wei_construction(pi, L, H, 30.0, dtype=F64)  # copies are exact to ~1e-24: the model is the BMA
    out = P.prompt_losses(model, tokens, pi, chunk=4)
    for b in range(0, 64, 9):
        ctx, tgt = tokens[b, :L].numpy(), tokens[b, L].numpy()
        bma = np.mean([-np.log(bma_predictive(ctx, tgt, pi, h)[tgt[h]]) for h in range(1, H)])
        blind = np.mean([-np.log(np.mean(pi[tgt[:h], tgt[h]])) for h in range(1, H)])
        assert out["bma"][b] == pytest.approx(bma, abs=1e-12)
        assert out["blind"][b] == pytest.approx(blind, abs=1e-12)
    assert np.allclose(out["model"], out["bma"], atol=1e-9)
    assert P.gap_closed(out["model"].mean(), out["blind"].mean(), out["bma"].mean()) == pytest.approx(1, abs=1e-6)
    weak = wei_construction(pi, L, H, 0.0, dtype=F64)  # beta = 0: no copying, uniform attention = blind
    out0 = P.prompt_losses(weak, tokens, pi)
    assert np.allclose(out0["model"], out0["blind"], atol=1e-12)
    assert P.gap_closed(out0["model"].mean(), out0["blind"].mean(), out0["bma"].mean()) == pytest.approx(0, abs=1e-9)


def test_bma_loss_on_k_examples_against_brute_force():
    """BMA on a subset S of the context examples (W.E3's baseline) against the posterior summed over every
    recursive tree (theory.bma_posterior_bruteforce, which does not use Lemma 1's factorisation), with the
    target's prefix, prompt by prompt; S = all examples is prompt_losses' BMA; and fewer examples lose
    evidence on average (BMA on 1 > on 2 > on all 4, beyond 5 s.e. of the prompts)."""
    from theory import bma_posterior_bruteforce

    d, L, H = 3, 4, 5
    pi = _pi(21, d, floor=0.02)
    tokens = _task_tokens(pi, 40, L, H, seed=22)
    for S in ([2], [0, 3], [1, 2, 3]):
        ours = P.bma_loss_on(tokens, pi, S, chunk=7)
        for b in range(0, 40, 7):
            ctx, tgt = tokens[b, S].numpy(), tokens[b, L].numpy()
            brute = np.mean([-np.log(bma_posterior_bruteforce(ctx, pi, h, target_prefix=tgt) @ pi[tgt[:h], tgt[h]])
                             for h in range(1, H)])
            assert ours[b] == pytest.approx(brute, abs=1e-10), (S, b)
    assert np.allclose(P.bma_loss_on(tokens, pi, range(L)), P.prompt_losses(wei_construction(pi, L, H, 30.0, dtype=F64),
                                                                           tokens, pi)["bma"], atol=1e-12)
    sharp = 0.6 * np.eye(d) + 0.4 / d  # a child mostly repeats its parent: every example is informative
    many = _task_tokens(sharp, 3000, L, H, seed=23)
    one, two, four = (P.bma_loss_on(many, sharp, S) for S in ([0], [0, 1], range(L)))
    for a, b in ((one, two), (two, four)):
        diff = a - b
        assert diff.mean() > 5 * diff.std() / math.sqrt(diff.size)
    with pytest.raises(ValueError, match="distinct indices"):
        P.bma_loss_on(tokens, pi, [0, 0])
    with pytest.raises(ValueError, match="distinct indices"):
        P.bma_loss_on(tokens, pi, [L])


def test_gap_closed_and_its_undefined_case():
    assert P.gap_closed(1.1, 1.5, 1.0) == pytest.approx(0.8)
    with pytest.raises(ValueError, match="undefined"):
        P.gap_closed(1.0, 1.0, 1.0)


def test_layer2_tv_and_parent_accuracy():
    d, L, H = 3, 6, 6
    pi = _pi(9, d, floor=0.01)
    tokens = _tokens(10, 5, L, H, d)
    assert P.layer2_bma_tv(wei_construction(pi, L, H, 30.0, dtype=F64), tokens, pi).max() < 1e-9
    assert P.layer2_bma_tv(wei_construction(pi, L, H, 0.0, dtype=F64), tokens, pi).min() > 0.01
    attn = np.zeros((2, 4, 4))
    attn[:, 2] = [0.2, 0.8, 0, 0]
    attn[:, 3] = [0.1, 0.1, 0.8, 0]
    parents = np.array([[-1, 0, 1, 2], [-1, 0, 0, 0]])
    assert P.parent_accuracy(attn, parents).tolist() == [1.0, 0.0]
    assert P.parent_accuracy(attn, parents, start=3).tolist() == [1.0, 0.0]


def test_probes_run_on_continuous_model():
    from sim.papers.wei.model import WeiContinuous

    m = WeiContinuous.init(2, 3, 4, generator=torch.Generator().manual_seed(0), wH0=6.0)
    rep = P.copier_report(m)
    assert rep.mass.shape == (3, 3, 4)
    x = torch.randn(5, 4, 4, 2, generator=torch.Generator().manual_seed(1))
    A = P.layer2_attention(m, x, chunk=2)
    assert A.shape == (5, 4, 4) and np.allclose(A[:, 1:].sum(-1), 1)
