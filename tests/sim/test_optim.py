"""FlatAdamW (sim.optim) is torch.optim.AdamW's update over one flat buffer."""
import pytest
import torch

from sim.models.markov_lm import MarkovLM, MarkovLMConfig
from sim.optim import FlatAdamW


def _trained(opt_kind, steps=25, lr=5e-3, betas=(0.9, 0.95), wd=0.1, seed=0):
    """A small MarkovLM after ``steps`` steps of one optimiser, in float64 on fixed batches."""
    model = MarkovLM(MarkovLMConfig(vocab=3, width=8, heads=2, max_len=12),
                     generator=torch.Generator().manual_seed(seed)).double()
    decayed, rest = model.decay_groups()
    groups = [{"params": decayed, "weight_decay": wd}, {"params": rest, "weight_decay": 0.0}]
    opt = opt_kind(groups, lr=lr, betas=betas)
    g = torch.Generator().manual_seed(seed + 1)
    for _ in range(steps):
        x = torch.randint(0, 3, (4, 12), generator=g)
        loss = model.loss(x[:, :-1], x[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def test_flat_adamw_takes_torch_adamw_steps():
    want = _trained(torch.optim.AdamW)
    got = _trained(FlatAdamW)
    for a, b in zip(got, want):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("change", ["no weight decay", "other betas"])
def test_the_comparison_sees_a_different_update(change):
    """The comparison can fail: a different decay or different betas move the weights visibly."""
    want = _trained(torch.optim.AdamW)
    got = _trained(FlatAdamW, **({"wd": 0.0} if change == "no weight decay" else {"betas": (0.8, 0.95)}))
    assert any(not torch.allclose(a, b, rtol=1e-9, atol=1e-9) for a, b in zip(got, want))


def test_parameters_and_gradients_are_views_that_accumulate():
    w = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    b = torch.nn.Parameter(torch.tensor([3.0]))
    opt = FlatAdamW([w, b], lr=0.1)
    assert w.data_ptr() == opt.flat.data_ptr() and b.grad.data_ptr() == opt.grad.data_ptr() + 2 * 4
    for _ in range(2):  # two backward passes add up in the flat buffer
        ((w * w).sum() + 3 * b.sum()).backward()
    assert torch.equal(opt.grad, torch.tensor([4.0, 8.0, 6.0]))
    opt.step()
    assert torch.equal(w.detach(), opt.flat[:2]) and not torch.equal(opt.flat[:2], torch.tensor([1.0, 2.0]))
    opt.zero_grad()
    assert not opt.grad.any() and not w.grad.any()


@pytest.mark.parametrize("params, kwargs, message", [
    ([], {"lr": 0.1}, "no parameters"),
    ([torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(2, dtype=torch.float64))], {"lr": 0.1},
     "one dtype and device"),
    ([torch.nn.Parameter(torch.ones(2))], {"lr": 0.0}, "lr > 0"),
    ([torch.nn.Parameter(torch.ones(2))], {"lr": 0.1, "betas": (0.9, 1.0)}, "betas < 1"),
])
def test_bad_input_is_refused_with_the_reason(params, kwargs, message):
    with pytest.raises(ValueError, match=message):
        FlatAdamW(params, **kwargs)


def test_a_parameter_in_two_groups_is_refused():
    p = torch.nn.Parameter(torch.ones(2))
    with pytest.raises(ValueError, match="more than one group"):
        FlatAdamW([{"params": [p]}, {"params": [p]}], lr=0.1)
