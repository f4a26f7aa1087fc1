"""Tests of sim.papers.wei.model: shapes, causal structure, W Theorem 1's construction vs exact BMA, and the
absolute-position variant (WeiAbsolute: the same layers, the RPE its special case)."""
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from theory import TheoryError, bma_posterior, bma_predictive
from theory.strategies import stochastic_matrices
from sim.models import run_with_cache
from sim.papers.wei.model import WeiAbsolute, WeiContinuous, WeiTransformer, wei_construction

F64 = torch.float64


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _tokens(seed, B, L, H, d):
    return torch.as_tensor(np.random.default_rng(seed).integers(0, d, (B, L + 1, H)))


def _pi(seed, d, floor=0.02):
    p = np.random.default_rng(seed).dirichlet(np.ones(d), size=d)
    return (1 - d * floor) * p + floor  # non-symmetric, min entry >= floor


def _max_posterior_error(pattern, tokens, pi, L):
    """max_h max_h' |A(h, h') - P(pa(h) = h' | context)| against theory.bma_posterior."""
    ctx = tokens[:, :L].numpy()
    return max(np.abs(pattern[:, h, :h].numpy() - bma_posterior(ctx, pi, h)).max() for h in range(1, tokens.shape[2]))


# ----------------------------------------------------------------------------- shapes --
@pytest.mark.parametrize("output", ["mixture", "logits"])
def test_shapes_hooks_and_normalisation(output):
    d, L, H, K, B = 4, 3, 5, 2, 6
    model = WeiTransformer.init(d, L, H, K, generator=_gen(0), scale=1.0, output=output)
    tokens = _tokens(1, B, L, H, d)
    logp, cache = run_with_cache(model, tokens)
    assert logp.shape == (B, H - 1, d) and logp.dtype == torch.float32
    assert torch.allclose(logp.exp().sum(-1), torch.ones(B, H - 1), atol=1e-6)
    assert sorted(cache) == ["layer1.pattern", "layer1.scores", "layer2.pattern", "layer2.scores"]
    assert cache["layer1.scores"].shape == cache["layer1.pattern"].shape == (B, K, H, L * H)
    assert torch.allclose(cache["layer1.pattern"].sum(-1), torch.ones(B, K, H))
    A = cache["layer2.pattern"]
    assert A.shape == cache["layer2.scores"].shape == (B, H, H)
    assert torch.equal(A, A.tril(-1))  # strictly earlier keys only
    assert torch.all(A[:, 0] == 0) and torch.all(torch.isinf(cache["layer2.scores"][:, 0]))
    assert torch.allclose(A[:, 1:].sum(-1), torch.ones(B, H - 1))
    loss = model.loss(tokens)
    manual = -logp.gather(-1, tokens[:, L, 1:, None]).mean()
    assert torch.isclose(loss, manual)


@pytest.mark.parametrize("output", ["mixture", "logits"])
def test_shared_layer1_pattern_path_equals_the_per_prompt_path(output):
    """Layer 1's pattern is the same for every prompt, so the model applies it once to all prompts'
    features; an identity edit hook forces the general per-prompt product instead. Both must give
    the same predictions and the same gradients (K != L and d != H, so no axis mix-up hides)."""
    from sim.models import run_with_hooks

    d, L, H, K, B = 3, 2, 6, 4, 5
    model = WeiTransformer.init(d, L, H, K, generator=_gen(2), scale=1.0, output=output, dtype=F64)
    tokens = _tokens(3, B, L, H, d)
    shared = model.loss(tokens)
    g_shared = torch.autograd.grad(shared, list(model.parameters()))
    per_prompt = run_with_hooks(model, tokens, fwd_hooks={"layer1.pattern": lambda x, hook: x.clone()})
    loss = -per_prompt.gather(-1, tokens[:, L, 1:, None]).mean()
    g_per_prompt = torch.autograd.grad(loss, list(model.parameters()))
    assert torch.allclose(shared, loss, rtol=1e-12, atol=0)
    for a, b in zip(g_shared, g_per_prompt):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("output", ["mixture", "logits"])
def test_fast_paths_equal_the_fully_hooked_model(output):
    """With no hook the model skips what nobody reads (layer 2's row 0, the full (B, H, H) pattern) and takes
    the log of the targets' probabilities only; identity hooks on every point force the general path. Both
    give the same loss and gradients, for the RPE and the absolute-position model."""
    from sim.models import run_with_hooks

    d, L, H, K, B = 3, 2, 6, 4, 5
    tokens = _tokens(8, B, L, H, d)
    rpe = WeiTransformer.init(d, L, H, K, generator=_gen(9), scale=1.0, output=output, dtype=F64)
    for model in (rpe, WeiAbsolute.init(d, L, H, K, generator=_gen(10), scale=1.0, output=output, dtype=F64)):
        fast = model.loss(tokens)
        g_fast = torch.autograd.grad(fast, list(model.parameters()))
        ident = {name: (lambda x, hook: x.clone()) for name in ("layer1.scores", "layer1.pattern", "layer2.scores",
                                                                 "layer2.pattern")}
        logp = run_with_hooks(model, tokens, fwd_hooks=ident)
        slow = -logp.gather(-1, tokens[:, L, 1:, None]).mean()
        g_slow = torch.autograd.grad(slow, list(model.parameters()))
        assert torch.allclose(fast, slow, rtol=1e-12, atol=0)
        for a, b in zip(g_fast, g_slow):
            assert torch.allclose(a, b, rtol=1e-10, atol=1e-13)


def test_layer1_score_indexing_by_hand():
    """Head 0 score for query h and key (l_j, h_j) is w_H[0, h - h_j + H - 1] + w_L[0, l_j]."""
    d, L, H = 2, 2, 3
    w_H = torch.arange(2 * H - 1, dtype=F64)[None] * 10  # (1, 5): offset o -> 10 (o + 2)
    w_L = torch.tensor([[0.0, 1.0]], dtype=F64)
    model = WeiTransformer(w_H, w_L, torch.zeros(d, d, dtype=F64), torch.zeros(d, d, dtype=F64))
    _, cache = run_with_cache(model, torch.zeros(1, L + 1, H, dtype=torch.long))
    s = cache["layer1.scores"][0, 0]  # (H, L*H)
    for h in range(H):
        for l in range(L):
            for hj in range(H):
                assert s[h, l * H + hj] == 10 * (h - hj + H - 1) + l


def test_bad_inputs_are_rejected():
    model = WeiTransformer.init(3, 2, 4, generator=_gen(0))
    with pytest.raises(ValueError, match="L\\+1=3"):
        model(torch.zeros(2, 4, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="int64"):
        model(torch.zeros(2, 3, 4))
    with pytest.raises(ValueError, match="output"):
        WeiTransformer.init(3, 2, 4, generator=_gen(0), output="argmax")
    with pytest.raises(ValueError, match="w_L"):
        WeiTransformer(torch.zeros(2, 7), torch.zeros(3, 2), torch.zeros(6, 6), torch.zeros(3, 3))


# ------------------------------------------------------------------ causal structure --
@pytest.mark.parametrize("output", ["mixture", "logits"])
def test_prediction_at_h_ignores_target_tokens_at_h_and_later(output):
    d, L, H, B = 3, 3, 6, 4
    model = WeiTransformer.init(d, L, H, generator=_gen(3), scale=1.5, output=output).double()
    tokens = _tokens(4, B, L, H, d)
    base = model(tokens)
    for h in range(1, H):
        changed = tokens.clone()
        changed[:, L, h:] = (changed[:, L, h:] + 1) % d  # x^{L+1}_h and every later target token
        out = model(changed)
        assert torch.equal(out[:, :h], base[:, :h])  # predictions for positions 1..h
        if h < H - 1:
            assert not torch.allclose(out[:, h:], base[:, h:])  # later predictions do see x_h (sanity)
    # earlier target tokens and the context do reach the prediction
    changed = tokens.clone()
    changed[:, L, 0] = (changed[:, L, 0] + 1) % d
    assert not torch.allclose(model(changed)[:, 0], base[:, 0])
    changed = tokens.clone()
    changed[:, 0] = (changed[:, 0] + 1) % d
    assert not torch.allclose(model(changed), base)


def test_gradients_flow_and_float64():
    model = WeiTransformer.init(3, 2, 4, generator=_gen(5), scale=0.5, dtype=F64)
    tokens = _tokens(6, 8, 2, 4, 3)
    loss = model.loss(tokens)
    assert loss.dtype == F64
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().max() > 0, name


def test_init_uses_only_the_generator_and_wH0():
    torch.manual_seed(0)
    a = WeiTransformer.init(3, 4, 5, generator=_gen(7), wH0=3.0)
    torch.manual_seed(123)
    b = WeiTransformer.init(3, 4, 5, generator=_gen(7), wH0=3.0)
    c = WeiTransformer.init(3, 4, 5, generator=_gen(7), wH0=0.0)
    for (n, p), q in zip(a.named_parameters(), b.parameters()):
        assert torch.equal(p, q), n
    assert a.K == 4  # K defaults to L
    assert torch.allclose(a.w_H - c.w_H, torch.nn.functional.pad(torch.full((4, 1), 3.0), (4, 4)))


# -------------------------------------------------------------- W Theorem 1 construction --
def test_construction_attention_converges_to_bma_posterior():
    d, L, H = 3, 4, 5
    pi = _pi(10, d)
    tokens = _tokens(11, 16, L, H, d)
    betas = [1.0, 2.0, 4.0, 6.0, 8.0, 16.0]
    errs = []
    for beta in betas:
        _, cache = run_with_cache(wei_construction(pi, L, H, beta, dtype=F64), tokens)
        errs.append(_max_posterior_error(cache["layer2.pattern"], tokens, pi, L))
    assert all(b < a for a, b in zip(errs, errs[1:])), errs
    assert errs[0] > 0.05  # small beta is far from BMA: the test can fail
    assert errs[-1] < 1e-10
    # rate: the copy error is O((L+H) e^{-2 beta}), so the error falls by ~e^{-4} per +2 in beta
    slope = math.log(errs[4] / errs[3]) / (betas[4] - betas[3])
    assert -2.3 < slope < -1.7, slope


@settings(max_examples=25)
@given(pi=stochastic_matrices(st.integers(2, 4), min_entry=0.01), seed=st.integers(0, 2**16))
def test_construction_mixture_is_bma_predictive(pi, seed):
    d = pi.shape[0]
    L, H = 3, 4
    tokens = _tokens(seed, 4, L, H, d)
    logp = wei_construction(pi, L, H, 20.0, dtype=F64)(tokens)
    for b in range(tokens.shape[0]):
        for h in range(1, H):
            want = bma_predictive(tokens[b, :L].numpy(), tokens[b, L].numpy(), pi, h)
            assert np.abs(logp[b, h - 1].detach().exp().numpy() - want).max() < 1e-10


def test_construction_logits_reading():
    """output="logits": softmax(sum_h' post[h'] log pi[x_h', :]), a different predictor."""
    d, L, H = 3, 3, 4
    pi = _pi(12, d)
    tokens = _tokens(13, 5, L, H, d)
    logp_l = wei_construction(pi, L, H, 20.0, output="logits", dtype=F64)(tokens)
    logp_m = wei_construction(pi, L, H, 20.0, output="mixture", dtype=F64)(tokens)
    for b in range(5):
        for h in range(1, H):
            post = bma_posterior(tokens[b, :L].numpy(), pi, h)
            z = post @ np.log(pi)[tokens[b, L, :h].numpy()]
            want = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
            assert np.abs(logp_l[b, h - 1].detach().exp().numpy() - want).max() < 1e-10
    assert (logp_l - logp_m).abs().max() > 1e-3  # the two readings differ


def test_wrong_construction_is_caught():
    """W = (log pi)^T in W_KQ scores log pi[child, parent]: layer-2 attention leaves BMA."""
    d, L, H = 3, 4, 5
    pi = _pi(14, d)
    tokens = _tokens(15, 16, L, H, d)
    model = wei_construction(pi, L, H, 16.0, dtype=F64)
    with torch.no_grad():
        model.W_KQ.copy_(torch.block_diag(*([torch.as_tensor(np.log(pi).T)] * L)))
    _, cache = run_with_cache(model, tokens)
    assert _max_posterior_error(cache["layer2.pattern"], tokens, pi, L) > 0.05


def test_construction_layer1_copies_example_k():
    d, L, H = 2, 3, 4
    _, cache = run_with_cache(wei_construction(_pi(16, d), L, H, 12.0, dtype=F64), _tokens(17, 1, L, H, d))
    a1 = cache["layer1.pattern"][0]  # (K, H, L*H)
    for k in range(L):
        for h in range(H):
            assert a1[k, h, k * H + h] > 1 - 1e-9


def test_construction_rejects_zero_and_non_stochastic_pi():
    pi = np.array([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])
    with pytest.raises(ValueError, match=r"pi\[0, 2\] = 0"):
        wei_construction(pi, 2, 3, 1.0)
    with pytest.raises(TheoryError, match="row"):
        wei_construction(np.array([[0.5, 0.6], [0.5, 0.5]]), 2, 3, 1.0)


# ------------------------------------------------------------------ continuous variant --
def test_continuous_shapes_causality_and_gradients():
    d, L, H, B = 3, 2, 5, 4
    model = WeiContinuous.init(d, L, H, generator=_gen(20), scale=1.0, dtype=F64)
    x = torch.randn(B, L + 1, H, d, generator=_gen(21), dtype=F64)
    pred = model(x)
    assert pred.shape == (B, H - 1, d)
    for h in range(1, H):
        changed = x.clone()
        changed[:, L, h:] += 1.0
        assert torch.equal(model(changed)[:, :h], pred[:, :h])
    model.loss(x).backward()
    assert all(torch.isfinite(p.grad).all() and p.grad.abs().max() > 0 for p in model.parameters())


def test_continuous_copier_gives_bilinear_scores_and_regression():
    """With copying layer 1 and W_KQ = blockdiag(W): score(h, h') = sum_l x^l_h'^T W x^l_h, pred = sum A x_h'^T W_OV."""
    d, L, H, beta = 2, 3, 4, 20.0
    W = torch.randn(d, d, generator=_gen(22), dtype=F64)
    W_OV = torch.randn(d, d, generator=_gen(23), dtype=F64)
    w_H = torch.full((L, 2 * H - 1), -beta, dtype=F64)
    w_H[:, H - 1] = beta
    w_L = -beta + 2 * beta * torch.eye(L, dtype=F64)
    model = WeiContinuous(w_H, w_L, torch.block_diag(*([W] * L)), W_OV)
    x = torch.randn(3, L + 1, H, d, generator=_gen(24), dtype=F64)
    pred, cache = run_with_cache(model, x)
    want = torch.einsum("blgi,ij,blhj->bhg", x[:, :L], W, x[:, :L])  # (B, H, H) [b, h, h']
    s = cache["layer2.scores"]
    mask = torch.ones(H, H, dtype=torch.bool).tril(-1)
    assert torch.allclose(s[:, mask], want[:, mask], atol=1e-10)
    A = cache["layer2.pattern"]
    assert torch.allclose(pred, A[:, 1:] @ (x[:, L] @ W_OV), atol=1e-12)
    assert torch.isclose(model.loss(x), ((pred - x[:, L, 1:]) ** 2).mean())


# ------------------------------------------------------------------- absolute positions --
def test_absolute_model_shapes_hooks_and_score_indexing():
    """WeiAbsolute's layer 1 scores key (l_j, h_j) for query h as w_pos[k, h, h_j] + w_ex[k, h, l_j]; its
    hooks and outputs have WeiTransformer's shapes."""
    d, L, H, K, B = 3, 2, 4, 3, 5
    model = WeiAbsolute.init(d, L, H, K, generator=_gen(11), scale=1.0, dtype=F64)
    assert [n for n, _ in model.named_parameters()] == ["w_pos", "w_ex", "W_KQ", "W_OV"]
    assert model.w_pos.shape == (K, H, H) and model.w_ex.shape == (K, H, L) and (model.K, model.L) == (K, L)
    tokens = _tokens(12, B, L, H, d)
    logp, cache = run_with_cache(model, tokens)
    assert logp.shape == (B, H - 1, d) and torch.allclose(logp.exp().sum(-1), torch.ones(B, H - 1, dtype=F64))
    assert cache["layer1.pattern"].shape == (B, K, H, L * H) and cache["layer2.pattern"].shape == (B, H, H)
    s = cache["layer1.scores"][0]  # (K, H, L*H)
    for k, h, l, hj in [(0, 0, 0, 0), (2, 3, 1, 1), (1, 1, 1, 3)]:
        assert s[k, h, l * H + hj] == model.w_pos[k, h, hj] + model.w_ex[k, h, l]
    assert torch.isclose(model.loss(tokens), -logp.gather(-1, tokens[:, L, 1:, None]).mean())


def test_absolute_model_from_relative_is_the_rpe_model():
    """The RPE is the special case w_pos[k, h, h_j] = w_H[k, h - h_j + H - 1], w_ex[k, h, l] = w_L[k, l]:
    converted, W's construction (and a random RPE model) give the same scores, patterns and predictions."""
    pi = _pi(13, 3)
    tokens = _tokens(14, 6, 3, 5, 3)
    for rpe in (wei_construction(pi, 3, 5, 2.0, dtype=F64),
                WeiTransformer.init(3, 3, 5, 2, generator=_gen(15), scale=1.0, output="logits", dtype=F64)):
        absolute = WeiAbsolute.from_relative(rpe)
        assert absolute.output == rpe.output and absolute.K == rpe.K
        a, ca = run_with_cache(absolute, tokens)
        b, cb = run_with_cache(rpe, tokens)
        assert torch.allclose(a, b, rtol=0, atol=1e-12)
        for name in ("layer1.scores", "layer1.pattern", "layer2.pattern"):
            assert torch.allclose(ca[name], cb[name], rtol=0, atol=1e-12), name


def test_absolute_init_puts_wH0_on_the_same_position_and_rejects_bad_shapes():
    a = WeiAbsolute.init(3, 4, 5, 2, generator=_gen(16), wH0=3.0)
    c = WeiAbsolute.init(3, 4, 5, 2, generator=_gen(16), wH0=0.0)
    assert torch.allclose(a.w_pos - c.w_pos, 3.0 * torch.eye(5).expand(2, 5, 5))
    assert torch.equal(a.w_ex, c.w_ex) and a.K == 2 and WeiAbsolute.init(3, 4, 5, generator=_gen(0)).K == 4
    with pytest.raises(ValueError, match="w_pos"):
        WeiAbsolute(torch.zeros(2, 4, 3), torch.zeros(2, 4, 2), torch.zeros(6, 6), torch.zeros(3, 3))
    with pytest.raises(ValueError, match="w_ex"):
        WeiAbsolute(torch.zeros(2, 4, 4), torch.zeros(2, 3, 2), torch.zeros(6, 6), torch.zeros(3, 3))
    with pytest.raises(ValueError, match="W_KQ"):
        WeiAbsolute(torch.zeros(2, 4, 4), torch.zeros(2, 4, 2), torch.zeros(5, 5), torch.zeros(3, 3))
    with pytest.raises(ValueError, match="output"):
        WeiAbsolute.init(3, 2, 4, generator=_gen(0), output="argmax")
