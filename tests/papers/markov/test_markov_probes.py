"""Tests of sim.papers.markov.probes and the Markov LM's intervention hooks: the detection patterns
and scores on hand-built attention, uniform pooling against its competitors, each intervention at
its identity changing nothing (to float round-off: a patch from the same sequence, no injection)
and away from it changing what it should (an ablated head, a patched task vector, an injected
task), the random phi, and the pairs probe on features that do and do not encode the pair."""
import numpy as np
import pytest
import torch

from sim.models.hooks import hook_points, run_with_cache, run_with_hooks
from sim.papers.markov import fast as F
from sim.papers.markov import probes as pr
from sim.papers.markov.model import MarkovLM, MarkovLMConfig, TaskInjection


def _model(seed=0, **cfg):
    """A small float64 G-style model (attention + MLP) with weights large enough to matter."""
    config = MarkovLMConfig(**{"vocab": 3, "max_len": 12, "width": 8, "layers": 2, **cfg})
    model = MarkovLM(config, generator=torch.Generator().manual_seed(seed)).double()
    with torch.no_grad():
        g = torch.Generator().manual_seed(seed + 1)
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return model.eval()


def _tokens(n=5, T=12, C=3, seed=2):
    return torch.randint(0, C, (n, T), generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------------------- patterns --
def test_patterns_by_hand():
    U = pr.uniform_pattern(3)
    assert np.allclose(U, [[1, 0, 0], [0.5, 0.5, 0], [1 / 3, 1 / 3, 1 / 3]])
    assert np.array_equal(pr.previous_state_pattern(3), [[0, 0, 0], [1, 0, 0], [0, 1, 0]])
    # x = 0 1 0 1: from t = 2 (x_t = 0) the key j = 1 follows x_0 = 0; from t = 3 (x_t = 1) j = 2 follows x_1 = 1
    P = pr.induction_pattern(np.array([[0, 1, 0, 1]]))[0]
    want = np.zeros((4, 4))
    want[2, 1] = want[3, 2] = 1
    assert np.array_equal(P, want)


def test_detection_score_is_0_for_the_uniform_head_and_1_on_the_pattern():
    T = 6
    prev = pr.previous_state_pattern(T)
    on = prev.copy()
    on[0, 0] = 1.0  # row 0 has no pattern entry; any row-stochastic value
    for attn, want in ((pr.uniform_pattern(T), 0.0), (on, 1.0)):
        sc = pr.detection_scores(np.stack([attn, attn]), prev)
        assert np.allclose(sc["score"], want, atol=1e-12)
    u = np.mean(1 / np.arange(2, T + 1))
    assert np.allclose(sc["uniform"], u)
    # half way (in mass) between the uniform head and the pattern: score 1/2
    half = 0.5 * (pr.uniform_pattern(T) + on)
    assert np.allclose(pr.detection_scores(half[None], prev)["score"], 0.5)
    assert np.isnan(pr.detection_scores(pr.uniform_pattern(3)[None], np.zeros((3, 3)))["score"][0])


def test_uniformity_places_the_uniform_head_and_not_a_previous_state_head():
    x = np.array([[0, 1, 0, 1, 1, 0, 0, 1]])
    T = x.shape[1]
    comps = [pr.previous_state_pattern(T), pr.self_pattern(T), pr.induction_pattern(x)]
    uni = pr.uniformity(pr.uniform_pattern(T)[None], comps)
    assert uni["tv"][0] == pytest.approx(0.0, abs=1e-12) and uni["radius"][0] > 0.2
    prev = pr.previous_state_pattern(T)
    prev[0, 0] = 1.0
    away = pr.uniformity(prev[None], comps)
    assert away["tv"][0] > away["radius"][0]
    # the radius is half the uniform head's distance to the nearest competitor (1 - 1/(t+1) for a point pattern)
    assert away["radius"][0] <= 0.5 * np.mean(1 - 1 / np.arange(2, T + 1)) + 1e-12


# ------------------------------------------------------------------ hooks and interventions --
def test_new_hook_points_decompose_the_residual_stream():
    """resid_l = resid_{l-1} + attn_out_l + mlp_out_l, and with no hook set the model's output is
    the fused one it always was (hook points reading change nothing)."""
    model, x = _model(), _tokens()
    names = {f"layer{l}.{k}" for l in (1, 2) for k in ("attn_out", "mlp_out")}
    assert names <= set(hook_points(model))
    y, cache = run_with_cache(model, x)
    for l in (1, 2):
        assert torch.allclose(cache[f"resid{l}"], cache[f"resid{l - 1}"] + cache[f"layer{l}.attn_out"]
                              + cache[f"layer{l}.mlp_out"], atol=1e-12)
    assert torch.allclose(y, model(x), atol=1e-12)


def test_patching_from_the_same_sequence_changes_nothing_and_from_another_changes_the_output():
    model, x = _model(), _tokens()
    plain = model(x)
    same = pr.patched_logits(model, x, donor=x)
    assert torch.allclose(same, plain, atol=1e-12, rtol=0)
    other = pr.patched_logits(model, x, donor=_tokens(seed=9))
    assert not torch.allclose(other, plain, atol=1e-3)
    with pytest.raises(ValueError, match="either donor tokens or the value"):
        pr.patched_logits(model, x)


def test_ablations_remove_the_head():
    """``uniform``: layer 1's pattern is the uniform causal one (so a model whose layer 1 already pools
    uniformly is unchanged); ``zero``: the head adds nothing, as a zero output projection would."""
    model, x = _model(), _tokens()
    with torch.no_grad():
        y = run_with_hooks(model, x, fwd_hooks=pr.ablate_head(1, "uniform"))
    assert not torch.allclose(y, model(x), atol=1e-3)
    with torch.no_grad():
        zeroed = run_with_hooks(model, x, fwd_hooks=pr.ablate_head(1, "zero"))
        model.blocks[0].Wo.weight.zero_()
        assert torch.allclose(zeroed, model(x), atol=1e-12)
    targets = _tokens(seed=4)
    assert pr.sequence_losses(model, x, targets).shape == (5,)
    with pytest.raises(ValueError, match="ablation mode"):
        pr.ablate_head(1, "mean")


def test_ablating_to_uniform_is_the_identity_on_a_uniform_head():
    model, x = _model(), _tokens()
    with torch.no_grad():  # scores constant in j: queries zero, no relative term -> uniform pattern
        model.blocks[0].Wq.weight.zero_()
    _, cache = run_with_cache(model, x, names=["layer1.pattern"])
    assert torch.allclose(cache["layer1.pattern"][0, 0], torch.as_tensor(pr.uniform_pattern(12)), atol=1e-12)
    assert np.allclose(pr.sequence_losses(model, x, x, pr.ablate_head(1)), pr.sequence_losses(model, x, x),
                       atol=1e-12, rtol=0)


def test_task_injection_adds_the_chain_vector_and_none_changes_nothing():
    model, x = _model(), _tokens()
    inj = TaskInjection(4, 8, generator=torch.Generator().manual_seed(3)).double()
    plain = model(x)
    with inj.injecting(model, torch.full((5,), -1)):
        assert F._fused(model) is False  # a hook set: the plain forward, which honours it
        none = model(x)
        loss = F.training_loss(model, x[:, :-1], x[:, 1:])
    assert torch.allclose(none, plain, atol=1e-12, rtol=0)
    assert torch.allclose(loss, model.loss(x[:, :-1], x[:, 1:]), atol=1e-12)
    chains = torch.tensor([0, 1, -1, 3, 0])
    with inj.injecting(model, chains):
        _, cache = run_with_cache(model, x, names=["resid0"])
        injected = model(x)
    base = model.embed_tokens(x)
    delta = cache["resid0"] - base
    assert torch.allclose(delta[0], inj.table[0].expand(12, -1))
    assert torch.allclose(delta[2], torch.zeros(12, 8, dtype=delta.dtype))
    assert not torch.allclose(injected[0], plain[0], atol=1e-6) and torch.allclose(injected[2], plain[2], atol=1e-12)
    assert model.resid[0].hook_fn is None and F._fused(model)  # removed after the block


def test_random_phi_keeps_phis_mean_and_spread_and_names_no_sequence():
    phi = torch.randn(4000, 3, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 2.0 + 1.0
    r = pr.random_phi(phi, np.random.default_rng(1))
    assert r.shape == phi.shape
    assert torch.allclose(r.mean(0), phi.mean(0), atol=0.2) and torch.allclose(r.std(0), phi.std(0), atol=0.2)
    assert abs(np.corrcoef(r[:, 0, 0].numpy(), phi[:, 0, 0].numpy())[0, 1]) < 0.1


def test_pair_probe_reads_an_encoding_of_the_pair_and_not_of_the_current_state_alone():
    rng = np.random.default_rng(0)
    C, n, T = 3, 40, 20
    x = rng.integers(0, C, size=(n, T))
    labels = pr.pair_labels(x, C)
    assert labels.shape == (n, T - 1) and labels[0, 0] == x[0, 0] * C + x[0, 1]
    pairs = np.eye(C * C)[labels]  # one-hot of the pair: a perfect encoding
    current = np.eye(C)[x[:, 1:]]  # the current state alone
    good, bad = pr.pair_probe(pairs, labels, C * C), pr.pair_probe(current, labels, C * C)
    assert good["accuracy"] == 1.0 and bad["accuracy"] < 0.5 and good["n_test"] == n // 2
    assert bad["se"] > 0
    with pytest.raises(ValueError, match="at least 4 sequences"):
        pr.pair_probe(pairs[:3], labels[:3], C * C)
