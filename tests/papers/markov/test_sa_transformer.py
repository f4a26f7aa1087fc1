"""sim.papers.markov.sa_transformer: G's SA-transformer (claim G.2).

Layer 1's output is checked to be exactly ``x_n ⊕ x_{n-1}`` for the hard-wired head (with
``p_0 = 0``), and the check is shown to catch a wrong offset (``x_{n-2}``, ``x_n`` twice);
the learned head is checked at ``delta = 0`` (uniform pooling) and large ``delta`` (the
previous token); the O(T) last-position path equals the full forward; hook points have
their documented shapes; seeds on the leading axis do not interact; the fast sampler
draws the same tokens as sim.papers.markov.task.fresh_sequences; a short training run moves from
G1 to G2, records the trajectory of the scalars and is kept for reuse; the shuffled task keeps each
sequence's tokens; the unigram solution and the loss's first-order coefficients around it (G.7)
agree with brute force and with finite differences.
"""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from sim.papers.markov.task import fresh_sequences, predict_g1, predict_g2
from sim.models.hooks import run_with_cache
from sim.papers.markov import sa_transformer as sa
from sim.papers.markov.sa_transformer import (SAConfig, SATransformer, fresh_batch, last_position_strategies, loss_surface,
                                              train_tau, unigram_expansion, unigram_solution)

C = 10


def tokens(S=2, B=3, T=9, seed=1):
    return torch.randint(0, C, (S, B, T), generator=torch.Generator().manual_seed(seed))


def model(seeds=2, scale=1.0, **kw):
    return SATransformer(SAConfig(vocab=C, seeds=seeds, init_std=scale, **kw),
                         generator=torch.Generator().manual_seed(0))


def previous_token_concat(x):
    """The specification: ``[e_{x_n}, e_{x_{n-1}}]``, ``e_{x_{-1}} = 0``."""
    X = F.one_hot(x, C).double()
    prev = torch.zeros_like(X)
    prev[..., 1:, :] = X[..., :-1, :]
    return torch.cat([X, prev], dim=-1)


def is_previous_token_head(m, x) -> bool:
    """Whether ``m``'s layer-1 output equals ``x_n ⊕ x_{n-1}`` exactly at every position."""
    return torch.equal(m.layer1_output(x), previous_token_concat(x))


def test_hard_layer1_output_is_exactly_the_previous_token_concatenation():
    x = tokens()
    m = model(layer1="hard")
    h = m.layer1_output(x)
    assert h.shape == (2, 3, 9, 2 * C)
    assert torch.equal(h, previous_token_concat(x))  # exact, not approximate
    assert torch.equal(h[:, :, 0, C:], torch.zeros(2, 3, C, dtype=h.dtype))  # position 0: no previous token
    assert is_previous_token_head(m, x)


@pytest.mark.parametrize("offset", [0, 2])
def test_a_wrong_offset_is_caught(offset):
    x = tokens()
    wrong = model(layer1="hard", offset=offset)  # x_n twice, or x_{n-2}
    assert not is_previous_token_head(wrong, x)
    h = wrong.layer1_output(x)
    X = F.one_hot(x, C).double()
    if offset == 0:
        assert torch.equal(h[..., C:], X)
    else:
        assert torch.equal(h[..., 2:, C:], X[..., :-2, :])


def test_learned_layer1_pools_uniformly_at_delta_zero_and_copies_the_previous_token_as_delta_grows():
    x = tokens()
    m = model(layer1="learned")
    X = F.one_hot(x, C).double()
    with torch.no_grad():
        m.delta.zero_()
    p = m.layer1_output(x)[..., C:]
    n = torch.arange(1, 10, dtype=torch.float64).view(1, 1, 9, 1)
    torch.testing.assert_close(p, X.cumsum(2) / n, rtol=0, atol=1e-15)  # unigram frequencies of x_0..x_n
    with torch.no_grad():
        m.delta.fill_(60.0)
    p = m.layer1_output(x)[..., C:]
    # at n >= 1 the weight off the previous token is n e^-60 / (1 + n e^-60) < 1e-25
    torch.testing.assert_close(p[:, :, 1:], X[:, :, :-1], rtol=0, atol=1e-24)
    torch.testing.assert_close(p[:, :, 0], X[:, :, 0], rtol=0, atol=0)  # position 0 attends to itself
    assert not is_previous_token_head(m, x)  # ... which the hard-wired head's convention (p_0 = 0) tells apart


@pytest.mark.parametrize("layer1,offset", [("learned", 1), ("hard", 1), ("hard", 2), ("hard", 0)])
def test_last_position_path_equals_the_full_forward(layer1, offset):
    x = tokens(T=13)
    m = model(layer1=layer1, offset=offset, scale=2.0)
    torch.testing.assert_close(m.last_logits(x), m(x)[:, :, -1], rtol=0, atol=1e-12)
    # key_match is layer 2's scores at the last position divided by beta
    _, cache = run_with_cache(m, x, names=["layer2.scores"])
    torch.testing.assert_close(m.key_match(x) * m.beta.view(-1, 1, 1), cache["layer2.scores"][:, :, -1], rtol=0,
                               atol=1e-12)


def test_hook_points_have_the_documented_shapes():
    S, B, T = 2, 3, 9
    x = tokens(S, B, T)
    out, cache = run_with_cache(model(layer1="learned"), x)
    assert out.shape == (S, B, T, C)
    assert sorted(cache) == ["layer1.out", "layer1.pattern", "layer2.pattern", "layer2.scores"]
    assert cache["layer1.pattern"].shape == (S, B, T, T)
    assert cache["layer1.out"].shape == (S, B, T, 2 * C)
    assert cache["layer2.scores"].shape == cache["layer2.pattern"].shape == (S, B, T, T)
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    assert torch.isinf(cache["layer2.scores"][..., future]).all()  # causal: masked scores are -inf
    assert (cache["layer2.pattern"][..., future] == 0).all()
    torch.testing.assert_close(cache["layer2.pattern"].sum(-1), torch.ones(S, B, T, dtype=torch.float64))
    _, cache = run_with_cache(model(layer1="hard"), x)
    assert sorted(cache) == ["layer1.out", "layer2.pattern", "layer2.scores"]  # no layer-1 attention to read


def test_two_dimensional_tokens_are_shared_by_the_seeds_and_wrong_shapes_are_refused():
    m = model(seeds=3)
    x = tokens(S=1)[0]
    assert m(x).shape == (3, 3, 9, C)
    with pytest.raises(ValueError, match="tokens must be"):
        m(tokens(S=2))


def test_seeds_on_the_leading_axis_do_not_interact():
    x = tokens(S=3)
    big = model(seeds=3, scale=1.0)
    for i in range(3):
        one = SATransformer(SAConfig(vocab=C, seeds=1))
        with torch.no_grad():
            for name in ("delta", "beta", "v"):
                getattr(one, name).copy_(getattr(big, name)[i:i + 1])
        torch.testing.assert_close(one(x[i:i + 1]), big(x)[i:i + 1], rtol=0, atol=1e-14)
    y = x[..., -1]
    big.last_loss(x, y)[0].backward()  # seed 0's loss moves seed 0's scalars only
    for name in ("delta", "beta", "v"):
        g = getattr(big, name).grad
        assert g[0] != 0 and (g[1:] == 0).all()


def test_config_is_validated():
    with pytest.raises(ValueError, match="layer1"):
        SAConfig(layer1="soft")
    with pytest.raises(ValueError, match="offset applies"):
        SAConfig(layer1="learned", offset=2)
    with pytest.raises(ValueError, match="seeds"):
        SAConfig(seeds=0)


@pytest.mark.parametrize("alpha", [0.1, 1.0, 0.003])
def test_fresh_batch_draws_the_same_tokens_as_fresh_sequences(alpha):
    r = np.random.default_rng(5)
    want = fresh_sequences(r, r, C, 40, 25, alpha=alpha)[0]
    got = fresh_batch(np.random.default_rng(5), C, 40, 25, alpha).numpy()
    assert np.array_equal(got, want)


def test_last_position_strategies_are_g1_and_g2_at_the_last_position():
    r = np.random.default_rng(2)
    x = fresh_sequences(r, r, C, 30, 17, alpha=0.1)[0]
    got = last_position_strategies(x, C, 0.1)
    np.testing.assert_allclose(got["G1"], predict_g1(x, C, 0.1)[:, -1], rtol=0, atol=1e-15)
    np.testing.assert_allclose(got["G2"], predict_g2(x, C, 0.1)[:, -1], rtol=0, atol=1e-15)


def test_short_training_goes_from_g1_to_g2_and_the_hard_wired_head_skips_the_delta_plateau():
    torch.set_num_threads(1)
    kw = dict(N=16, seeds=[3, 4], batch=32, max_steps=600, eval_every=10, n_eval=256, data_seed=7, eval_seed=8)
    rec = train_tau(**kw)
    assert all(t is not None and t > 0 for t in rec["tau"]), rec["tau"]
    for i in range(2):
        assert rec["kl_G2"][i][-1] < rec["kl_G1"][i][-1]  # nearer the in-context bigram at the end
        assert rec["kl_G1"][i][0] > min(rec["kl_G1"][i])  # it passed near G1 on the way
    assert min(rec["final"]["delta"]) > 1 and min(rec["final"]["beta"]) > 1  # both biases grew
    hard = train_tau(layer1="hard", **kw)
    assert max(hard["tau"]) < min(rec["tau"])  # nothing to learn in layer 1: a shorter G1 plateau


def test_training_records_the_trajectory_and_keeps_the_record_for_reuse(monkeypatch):
    torch.set_num_threads(1)
    sa.clear_cache()
    kw = dict(N=8, seeds=[3, 4], batch=16, max_steps=30, eval_every=10, n_eval=64, data_seed=7, eval_seed=8)
    rec = train_tau(**kw)
    tr = rec["trajectory"]
    assert set(tr) == {"delta", "beta", "v", "loss"} and len(tr["beta"]) == 2
    assert all(len(tr[k][i]) == len(rec["steps"]) for k in tr for i in range(2))
    assert tr["beta"][0][-1] == pytest.approx(rec["final"]["beta"][0])
    assert tr["loss"][0][0] == pytest.approx(np.log(C), abs=1e-3)  # init N(0, 0.01^2): the uniform prediction
    calls = []
    monkeypatch.setattr(sa, "_train_tau", lambda **k: calls.append(k))
    again = train_tau(**kw)  # the same arguments: from the cache, not retrained
    assert calls == [] and again == rec and again is not rec
    train_tau(**{**kw, "data_seed": 9})  # another argument: trained
    assert len(calls) == 1
    sa.clear_cache()


def test_the_shuffled_task_permutes_each_sequence_in_time(monkeypatch):
    """The control's sequences keep their tokens (the unigram counts), in another order (no transitions)."""
    seen = {}
    real_batch = sa.fresh_batch

    def spy(rng, C_, n, length, alpha):
        out = real_batch(rng, C_, n, length, alpha)
        seen["raw"] = out.clone()
        return out

    monkeypatch.setattr(sa, "fresh_batch", spy)
    got = []
    real_loss = SATransformer.last_loss

    def grab(self, x, y):
        got.append(torch.cat([x, y.unsqueeze(-1)], -1).clone())
        return real_loss(self, x, y)

    monkeypatch.setattr(SATransformer, "last_loss", grab)
    train_tau(N=12, seeds=[1], batch=8, max_steps=1, eval_every=1, n_eval=8, task="shuffled", cache=False)
    shuffled, raw = got[0][0], seen["raw"].view(-1, 8, 13)[0]
    assert torch.equal(shuffled.sort(-1).values, raw.sort(-1).values) and not torch.equal(shuffled, raw)
    with pytest.raises(ValueError, match="task"):
        train_tau(N=4, seeds=1, task="iid")


def test_unigram_solution_minimises_the_loss_at_beta_zero():
    x = fresh_batch(np.random.default_rng(3), C, 300, 21, 0.1)
    v = unigram_solution(x[:, :-1], x[:, -1])
    m = SATransformer(SAConfig(vocab=C, seeds=41, init_std=0.0))
    grid = v + torch.linspace(-0.2, 0.2, 41, dtype=torch.float64)
    with torch.no_grad():
        m.v.copy_(grid)
        L = m.last_loss(x[:, :-1], x[:, -1].expand(41, -1))
    assert int(L.argmin()) == 20 and L[20] < L[19] and L[20] < L[21]  # the grid's centre is its minimum


def test_first_order_coefficients_agree_with_finite_differences():
    """c_beta = -dL/d beta, c_beta_delta = -d2L/d beta d delta at (0, 0, v*) by autograd, against central
    differences of the same sequences' mean loss; c_delta is exactly 0 (delta acts only through beta)."""
    x = fresh_batch(np.random.default_rng(4), C, 200, 17, 0.1)
    e = unigram_expansion(x[:, :-1], x[:, -1])
    v = e["v_star"]

    def L(beta, delta):
        m = SATransformer(SAConfig(vocab=C, seeds=1, init_std=0.0))
        with torch.no_grad():
            m.beta.fill_(beta)
            m.delta.fill_(delta)
            m.v.fill_(v)
            return float(m.last_loss(x[:, :-1], x[:, -1].unsqueeze(0))[0])

    h = 1e-4
    fd_beta = -(L(h, 0) - L(-h, 0)) / (2 * h)
    fd_mixed = -(L(h, h) - L(h, -h) - L(-h, h) + L(-h, -h)) / (4 * h * h)
    assert e["c_beta"].mean() == pytest.approx(fd_beta, rel=1e-6, abs=1e-9)
    assert e["c_beta_delta"].mean() == pytest.approx(fd_mixed, rel=1e-4)
    assert np.all(e["c_delta"] == 0.0) and L(0, 0.5) == L(0, -0.5)
    assert e["loss"].mean() == pytest.approx(L(0, 0), rel=1e-12)
    # the same surface through loss_surface (grid points on the seed axis)
    S = loss_surface(x[:, :-1], x[:, -1], [-h, h], [0.0, 0.3], v)
    assert S[0, 0] == pytest.approx(L(-h, 0), rel=1e-12) and S[1, 1] == pytest.approx(L(h, 0.3), rel=1e-12)
