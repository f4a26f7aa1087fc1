"""Tests of sim.papers.markov.model, sim.papers.markov.fast and sim.accel.relative_attention: the
accelerated paths (token-only first layer, fused relative attention, fused loss head) compute the
same function and gradients as the plain model, on several shapes and with the query blocks forced
small; each with the C cores (sim.accel.native) and with the PyTorch ones (the ``core`` fixture).
The model's own forward is always the plain one, which hook points observe."""
import pytest
import torch

import sim.accel.fused_layers as fl
import sim.accel.relative_attention as ra
from sim.accel.fused_layers import AttentionSublayer, LogitLoss, TokenOnlyAttention
from sim.accel.relative_attention import relative_attention
from sim.models import run_with_cache
from sim.papers.markov import fast as F
from sim.papers.markov.model import MarkovLM, MarkovLMConfig, relative_scores
from sim.papers.markov.model import causal_attention as relative_attention_reference


def _qkvr(B, nh, T, e, seed, n_offsets=None):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, nh, T, e, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    r = torch.randn(n_offsets or T, nh, e, generator=g, dtype=torch.float64, requires_grad=True)
    return q, k, v, r


def _causal(T):
    return torch.ones(T, T, dtype=torch.bool).triu(1).view(1, 1, T, T)


@pytest.fixture(params=["native", "pytorch"])
def core(request, monkeypatch):
    """Run the test with the C cores (skipped where they cannot be built) and with the PyTorch ones.
    The suite runs at one torch thread (tests/conftest.py), where the C cores apply."""
    monkeypatch.setenv("ICL_VERIFY_NATIVE", "1" if request.param == "native" else "0")
    if request.param == "native" and ra.native_core(torch.zeros(1, 1, 1, dtype=torch.float64)) is None:
        pytest.skip("the native kernels cannot be built here")
    return request.param


@pytest.fixture
def small_blocks(monkeypatch):
    """Query blocks of 3: several blocks, a short last one, and gradient buffers reused across blocks."""
    monkeypatch.setattr(ra, "BLOCK_ELEMENTS", 1)
    monkeypatch.setattr(ra, "MIN_BLOCK", 3)


def test_relative_scores_are_q_dot_r_of_the_offset():
    q, _, _, r = _qkvr(2, 2, 6, 3, seed=0)
    got = relative_scores(q, r)
    for t in range(6):
        for j in range(t + 1):
            want = (q[:, :, t] * r[t - j].unsqueeze(0)).sum(-1)
            assert torch.allclose(got[:, :, t, j], want)


@pytest.mark.parametrize("nh", [1, 2])
@pytest.mark.parametrize("T", [1, 3, 7, 10])
def test_fused_attention_matches_the_reference(core, small_blocks, nh, T):
    for seed in (1, 2):  # the second call reuses the gradient buffers of the first
        q, k, v, r = _qkvr(3, nh, T, 4, seed, n_offsets=T + 2)
        y = relative_attention(q, k, v, r[:T])
        y_ref = relative_attention_reference(q, k, v, r[:T], _causal(T))
        assert torch.allclose(y, y_ref, atol=1e-12)
        g = torch.randn_like(y)
        grads = torch.autograd.grad(y, (q, k, v, r), g)
        grads_ref = torch.autograd.grad(y_ref, (q, k, v, r), g)
        for a, b in zip(grads, grads_ref):
            assert torch.allclose(a, b, atol=1e-12)


@pytest.mark.parametrize("nh", [1, 2])
def test_fused_attention_gradcheck(core, small_blocks, nh):
    q, k, v, r = _qkvr(2, nh, 7, 3, seed=3)
    assert torch.autograd.gradcheck(lambda q, k, v, r: relative_attention(q, k, v, r), (q, k, v, r))


def test_the_comparison_sees_a_wrong_offset(core, small_blocks):
    """The reference comparison can fail: offsets shifted by one give a different function."""
    q, k, v, r = _qkvr(2, 1, 7, 3, seed=4, n_offsets=8)
    y = relative_attention(q, k, v, r[1:8])
    assert not torch.allclose(y, relative_attention_reference(q, k, v, r[:7], _causal(7)), atol=1e-3)


def _perturbed(cfg, seed=0):
    torch.manual_seed(seed)
    model = MarkovLM(cfg).double()
    with torch.no_grad():  # away from the symmetric initialisation, so every path matters
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return model


def _output_and_grads(model, x, fast: bool):
    model.zero_grad()
    y = F.eval_logits(model, x) if fast else model(x)
    (y ** 2).sum().backward()
    return y.detach(), [p.grad.clone() for p in model.parameters()]


def _loss_and_grads(model, x, fast: bool):
    model.zero_grad()
    loss = F.training_loss(model, x[:, :-1], x[:, 1:]) if fast else model.loss(x[:, :-1], x[:, 1:])
    (3.0 * loss).backward()  # an upstream gradient other than 1
    return loss.detach(), [p.grad.clone() for p in model.parameters()]


def _assert_same_gradients(model, grads, grads_ref):
    for (n, _), a, b in zip(model.named_parameters(), grads, grads_ref):
        assert torch.allclose(a, b, rtol=1e-9, atol=1e-9), n


CONFIGS = {
    "E main (C=2, attention only)": MarkovLMConfig(vocab=2, width=16, mlp=False, max_len=20),
    "G (C=3, MLP, 2 heads)": MarkovLMConfig(vocab=3, width=8, heads=2, max_len=20),
    "3 layers, 3 heads": MarkovLMConfig(vocab=4, width=12, heads=3, layers=3, max_len=20),
    "absolute positions": MarkovLMConfig(vocab=3, width=8, heads=2, max_len=20, positions="absolute"),
}


# what is compared: (function of model, tokens, fast) -> (value, gradients), sequence length, data seed, tolerance
COMPARED = {
    "logits, gradients of sum(logits^2)": (_output_and_grads, 15, 1, 1e-10),
    "fused loss vs cross-entropy, gradients": (_loss_and_grads, 16, 5, 1e-12),
}


@pytest.mark.parametrize("what", list(COMPARED))
@pytest.mark.parametrize("name", list(CONFIGS))
def test_fast_paths_match_the_plain_model(core, small_blocks, name, what):
    run, T, seed, atol = COMPARED[what]
    model = _perturbed(CONFIGS[name])
    x = torch.randint(0, model.config.vocab, (5, T), generator=torch.Generator().manual_seed(seed))
    value, grads = run(model, x, True)
    value_ref, grads_ref = run(model, x, False)
    assert torch.allclose(value, value_ref, atol=atol)
    _assert_same_gradients(model, grads, grads_ref)


def test_the_loss_comparison_sees_a_shifted_target():
    """The comparison can fail: targets shifted by one position give a different loss and gradients."""
    model = _perturbed(CONFIGS["E main (C=2, attention only)"])
    x = torch.randint(0, 2, (4, 16), generator=torch.Generator().manual_seed(6))
    fused = F.training_loss(model, x[:, :-2], x[:, 2:])
    assert not torch.allclose(fused, model.loss(x[:, :-2], x[:, 1:-1]), atol=1e-3)


def test_the_model_forward_is_always_plain_and_what_hooks_observe_equals_the_fast_output(monkeypatch):
    """Hook points observe the plain model (its forward never takes a fused kernel), and the
    accelerated logits equal it."""
    model = _perturbed(CONFIGS["E main (C=2, attention only)"])
    x = torch.randint(0, 2, (3, 12), generator=torch.Generator().manual_seed(2))
    y_fast = F.eval_logits(model, x)

    def refuse(*args):
        raise AssertionError("a fused kernel ran inside MarkovLM.forward")
    for kernel in (AttentionSublayer, TokenOnlyAttention, LogitLoss):
        monkeypatch.setattr(kernel, "apply", refuse)
    y, cache = run_with_cache(model, x, names=["layer1.pattern", "layer2.pattern"])
    model.loss(x[:, :-1], x[:, 1:])
    assert torch.allclose(y, y_fast, atol=1e-12)
    for name in ("layer1.pattern", "layer2.pattern"):
        pattern = cache[name]
        assert pattern.shape == (3, 1, 12, 12)
        assert torch.allclose(pattern.sum(-1), torch.ones(3, 1, 12, dtype=pattern.dtype))
        assert torch.all(pattern.triu(1) == 0)


def test_token_only_layer_falls_back_when_its_exponentials_could_underflow():
    model = _perturbed(CONFIGS["E main (C=2, attention only)"])
    with torch.no_grad():
        model.blocks[0].rel[1:] *= 0
        model.blocks[0].rel[0] = 1e3 * model.blocks[0].Wq.weight[0]  # R[a, 0] far above every other offset
    x = torch.randint(0, 2, (2, 10), generator=torch.Generator().manual_seed(3))
    assert F._token_only_first_layer(model, x) is None
    y, _ = _output_and_grads(model, x, fast=True)
    y_ref, _ = _output_and_grads(model, x, fast=False)
    assert torch.allclose(y, y_ref, atol=1e-10) and torch.isfinite(y).all()


def test_dropout_in_training_uses_the_plain_path_and_still_runs(monkeypatch):
    cfg = MarkovLMConfig(vocab=2, width=8, mlp=False, max_len=10, dropout=0.5)
    model = MarkovLM(cfg, generator=torch.Generator().manual_seed(0))
    x = torch.randint(0, 2, (4, 10), generator=torch.Generator().manual_seed(4))
    assert F._dropout_active(model)
    monkeypatch.setattr(TokenOnlyAttention, "apply", lambda *a: pytest.fail("fused first layer under dropout"))
    monkeypatch.setattr(AttentionSublayer, "apply", lambda *a: pytest.fail("fused sublayer under dropout"))
    F.training_loss(model, x[:, :-1], x[:, 1:]).backward()
    model.eval()
    assert not F._dropout_active(model)


def test_with_the_switch_off_the_accelerated_functions_are_the_plain_model(monkeypatch):
    model = _perturbed(CONFIGS["G (C=3, MLP, 2 heads)"])
    x = torch.randint(0, 3, (2, 9), generator=torch.Generator().manual_seed(11))
    monkeypatch.setenv("ICL_VERIFY_ACCEL", "0")
    monkeypatch.setattr(LogitLoss, "apply", lambda *a: pytest.fail("fused loss with ICL_VERIFY_ACCEL=0"))
    assert torch.equal(F.training_loss(model, x[:, :-1], x[:, 1:]), model.loss(x[:, :-1], x[:, 1:]))
    assert torch.equal(F.eval_logits(model, x), model(x))


@pytest.mark.parametrize("bad, message", [
    (dict(vocab=1), "vocab must be >= 2"),
    (dict(width=10, heads=3), "divisible by heads"),
    (dict(positions="rotary"), "'relative' or 'absolute'"),
    (dict(dropout=1.0), "dropout must be in"),
    (dict(layers=0), "layers must be a positive integer"),
])
def test_bad_configs_name_the_field(bad, message):
    with pytest.raises(ValueError, match=message):
        MarkovLMConfig(**bad)


def test_inputs_longer_than_max_len_or_not_2d_are_refused():
    model = MarkovLM(MarkovLMConfig(vocab=2, width=8, max_len=5))
    with pytest.raises(ValueError, match="exceeds the model's max_len 5"):
        model(torch.zeros(1, 6, dtype=torch.long))
    with pytest.raises(ValueError, match="must be \\(B, T\\)"):
        model(torch.zeros(6, dtype=torch.long))


def test_double_backward_is_refused_not_silently_wrong():
    q, k, v, r = _qkvr(2, 1, 5, 3, seed=5)
    y = relative_attention(q, k, v, r)
    (gq,) = torch.autograd.grad(y.sum(), q, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable|does not require grad|trying to differentiate"):
        torch.autograd.grad(gq.sum(), q)


def _block_args(cfg, seed):
    model = _perturbed(cfg, seed)
    block = model.blocks[0]
    ln = block.ln_att
    return model, [ln.weight, ln.bias, block.Wq.weight, block.Wk.weight, block.Wv.weight, block.Wo.weight, block.rel]


@pytest.mark.parametrize("heads", [1, 2])
def test_fused_functions_pass_gradcheck(core, small_blocks, heads):
    cfg = MarkovLMConfig(vocab=3, width=4, heads=heads, mlp=False, max_len=6)
    model, params = _block_args(cfg, seed=7)
    tokens = torch.randint(0, 3, (2, 5), generator=torch.Generator().manual_seed(8))
    h = torch.randn(2, 5, 4, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, 3, (10,), generator=torch.Generator().manual_seed(9))
    eps = model.blocks[0].ln_att.eps
    assert torch.autograd.gradcheck(lambda h, *p: AttentionSublayer.apply(h, *p, heads, eps), (h, *params))
    assert torch.autograd.gradcheck(lambda E, *p: TokenOnlyAttention.apply(tokens, E, *p, heads, eps),
                                    (model.embed.weight, *params))
    ln, U = model.ln_f, model.unembed.weight
    assert torch.autograd.gradcheck(lambda h, w, b, U: LogitLoss.apply(h, w, b, U, targets, eps),
                                    (h.view(10, 4), ln.weight, ln.bias, U))


def test_causal_toeplitz_is_the_lagged_kernel():
    kernel = torch.arange(1.0, 5.0).view(1, 4)
    want = torch.tensor([[1.0, 0, 0, 0], [2, 1, 0, 0], [3, 2, 1, 0], [4, 3, 2, 1]])
    assert torch.equal(fl._causal_toeplitz(kernel)[0], want)


def test_the_token_only_comparison_sees_a_shifted_toeplitz(monkeypatch):
    """The fast-vs-plain comparison can fail: offsets read one step late in the first layer
    (of the PyTorch core; tests/sim/accel/test_native.py perturbs the C core's inputs)."""
    monkeypatch.setenv("ICL_VERIFY_NATIVE", "0")
    model = _perturbed(CONFIGS["E main (C=2, attention only)"])
    x = torch.randint(0, 2, (3, 12), generator=torch.Generator().manual_seed(10))
    y_ref, _ = _output_and_grads(model, x, fast=False)
    right = fl._causal_toeplitz
    monkeypatch.setattr(fl, "_causal_toeplitz", lambda k: torch.nn.functional.pad(right(k), (1, 0))[..., :-1])
    y, _ = _output_and_grads(model, x, fast=True)
    assert not torch.allclose(y, y_ref, atol=1e-3)
