"""sim.papers.markov.task_head: G's minimal model of the task-recognition head (claims G.6, G.8).

The encoder is MLP1 of the one-hot pair, computed once per pair (checked against MLP1 on each
position's concatenated one-hots); the pooling has no query (its weights depend on the key alone)
and is the plain average of the pair embeddings at w = 0; hook points have their documented
shapes, and patching phi through its hook changes the prediction (the identity patch changes
nothing); models on the model axis do not interact; a short batched training run writes records
the placement code reads, and memorises a few chains.
"""
import dataclasses

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from sim.models.hooks import run_with_cache, run_with_hooks
from sim.papers.markov.placement import placement
from sim.papers.markov.task_head import TaskHead, TaskHeadConfig, train_task_heads

C = 5


def model(models=2, **kw):
    torch.manual_seed(0)
    return TaskHead(TaskHeadConfig(vocab=C, max_len=12, d_phi=3, encoder_width=8, decoder_width=6, models=models, **kw),
                    generator=torch.Generator().manual_seed(1), dtype=torch.float64)


def tokens(M=2, B=3, T=9, seed=2):
    return torch.randint(0, C, (M, B, T), generator=torch.Generator().manual_seed(seed))


def test_hook_points_have_the_documented_shapes_and_meaning():
    m, x = model(), tokens()
    logits, cache = run_with_cache(m, x)
    assert logits.shape == (2, 3, 9, C)
    assert cache["encoder.out"].shape == (2, 3, 9, 3) and cache["phi"].shape == (2, 3, 9, 3)
    assert cache["pool.scores"].shape == cache["pool.pattern"].shape == (2, 3, 9, 9)
    assert cache["decoder.hidden"].shape == (2, 3, 9, 6) and (cache["decoder.hidden"] >= 0).all()
    u, a = cache["encoder.out"], cache["pool.pattern"]
    assert torch.equal(u[:, :, 0], torch.zeros_like(u[:, :, 0]))  # position 0 holds no pair
    assert torch.equal(a[:, :, 0], torch.zeros_like(a[:, :, 0]))  # ... so query 0 pools nothing: phi_0 = 0
    # at w = 0 the pooling is the plain average of the pairs seen so far
    n = torch.arange(1, 9, dtype=torch.float64).view(1, 1, 8, 1)
    torch.testing.assert_close(cache["phi"][:, :, 1:], u[:, :, 1:].cumsum(2) / n, rtol=0, atol=1e-14)


def test_the_pair_table_is_mlp1_on_each_pair():
    m, x = model(), tokens()
    _, cache = run_with_cache(m, x, names=["encoder.out"])
    X = F.one_hot(x, C).double()
    pairs = torch.cat([X[:, :, :-1], X[:, :, 1:]], dim=-1)  # (M, B, T-1, 2C): e_{x_{t-1}} ⊕ e_{x_t}
    h = torch.relu(torch.einsum("mbti,mio->mbto", pairs, m.enc_w1) + m.enc_b1[:, None, None])
    u = torch.einsum("mbti,mio->mbto", h, m.enc_w2) + m.enc_b2[:, None, None]
    torch.testing.assert_close(cache["encoder.out"][:, :, 1:], u, rtol=0, atol=1e-14)


def test_the_pooling_has_no_query():
    """The weight of key t is exp(w . u_t) normalised over the keys seen: the same ratios for every query."""
    m, x = model(), tokens()
    with torch.no_grad():
        m.pool_w.normal_(0, 1.0, generator=torch.Generator().manual_seed(3))
    _, cache = run_with_cache(m, x, names=["pool.pattern", "encoder.out"])
    a, u = cache["pool.pattern"], cache["encoder.out"]
    w = torch.exp(torch.einsum("mbtd,md->mbt", u, m.pool_w.detach()))
    for n in (3, 8):
        want = w[:, :, 1:n + 1] / w[:, :, 1:n + 1].sum(-1, keepdim=True)
        torch.testing.assert_close(a[:, :, n, 1:n + 1], want, rtol=1e-12, atol=0)
        assert torch.equal(a[:, :, n, n + 1:], torch.zeros_like(a[:, :, n, n + 1:]))


def test_patching_phi_through_its_hook_changes_the_prediction_and_the_identity_patch_changes_nothing():
    m, xa, xb = model(), tokens(seed=2), tokens(seed=3)
    plain = m(xa)
    _, own = run_with_cache(m, xa, names=["phi"])
    _, other = run_with_cache(m, xb, names=["phi"])
    same = run_with_hooks(m, xa, fwd_hooks={"phi": lambda t, hook: own["phi"]})
    assert torch.equal(same, plain)
    patched = run_with_hooks(m, xa, fwd_hooks={"phi": lambda t, hook: other["phi"]})
    assert not torch.allclose(patched, plain)


def test_models_on_the_model_axis_do_not_interact():
    m, x = model(models=3), tokens(M=3)
    loss = m.losses(x[..., :-1], x[..., 1:])
    assert loss.shape == (3,)
    grads = torch.autograd.grad(loss[1], list(m.parameters()), allow_unused=True)
    for g in grads:
        if g is not None:
            assert torch.equal(g[0], torch.zeros_like(g[0])) and torch.equal(g[2], torch.zeros_like(g[2]))
    shared = m(x[0, :, :])  # (B, T): the same tokens for every model
    assert shared.shape == (3, 3, 9, C)
    with pytest.raises(ValueError, match="tokens must be"):
        m(torch.zeros(2, 3, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="max_len"):
        m(torch.zeros(3, 1, 13, dtype=torch.long))


def test_config_is_validated():
    for bad in (dict(d_phi=0), dict(models=0), dict(vocab=1), dict(init_scale=0.0), dict(decoder_width=True)):
        with pytest.raises(ValueError):
            TaskHeadConfig(**bad)
    assert TaskHeadConfig().as_dict()["d_phi"] == 8


def test_batched_training_writes_records_the_placement_reads_and_memorises_two_chains():
    torch.set_num_threads(1)
    cfg = TaskHeadConfig(vocab=C, max_len=24, d_phi=4, encoder_width=16, decoder_width=32)
    runs = [{"K": 2, "seed": 11, "chain_seed": 12}, {"K": 2, "seed": 13, "chain_seed": 14}]
    recs = train_task_heads(cfg, runs, N=24, C=C, alpha=0.5, lr=1e-2, batch=32, steps=300, eval_every=50, n_eval=32)
    assert len(recs) == 2 and recs[0]["steps"][0] == 0 and recs[0]["steps"][-1] == 300
    for rec in recs:
        assert set(rec["eval"]) == {"id", "ood"} and set(rec["separations"]) == {"id", "ood"}
        assert placement(rec, "id", rec["pair_order"])["phase"] == "M2"  # two chains: recalled from phi
        assert rec["eval"]["id"]["M2"][-1] < rec["eval"]["id"]["M2"][0]
        assert len(rec["final_nll"]["ood"]) == 32 and set(rec["strategy_nll"]["id"]) == set(rec["pair_order"])
    # model k's run depends on its own seeds alone: trained beside another run or alone, the same curve
    alone = train_task_heads(cfg, runs[1:], N=24, C=C, alpha=0.5, lr=1e-2, batch=32, steps=50, eval_every=50, n_eval=32)
    both = train_task_heads(cfg, runs, N=24, C=C, alpha=0.5, lr=1e-2, batch=32, steps=50, eval_every=50, n_eval=32)
    np.testing.assert_allclose(alone[0]["eval"]["id"]["M2"], both[1]["eval"]["id"]["M2"], rtol=1e-4)
