"""Tests of sim.models.hooks: identity, caching only on request, state restored, edits."""
import pytest
import torch
from torch import nn

from sim.models import HookPoint, hook_points, run_with_cache, run_with_hooks
from sim.papers.wei.model import WeiTransformer


class Toy(nn.Module):
    """y = relu(w x), w = 2, with hook points on both intermediate tensors."""

    def __init__(self):
        super().__init__()
        self.pre = HookPoint()
        self.block = nn.ModuleDict({"post": HookPoint()})
        self.w = nn.Parameter(torch.tensor(2.0))

    def forward(self, x, fail=False):
        if fail:
            raise RuntimeError("boom")
        x = self.pre(self.w * x)
        return self.block["post"](torch.relu(x))


def _states(model):
    return {n: (hp.caching, hp.cached, hp.hook_fn, hp.detach) for n, hp in hook_points(model).items()}


CLEAN = (False, None, None, True)


def test_hookpoint_is_identity_and_does_not_cache_by_default():
    hp = HookPoint()
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    assert hp(x) is x
    assert hp.cached is None


def test_hook_point_names_follow_module_paths():
    assert sorted(hook_points(Toy())) == ["block.post", "pre"]


def test_run_with_cache_returns_output_and_every_point():
    model = Toy()
    x = torch.tensor([-1.0, 0.5, 3.0])
    out, cache = run_with_cache(model, x)
    assert torch.equal(out, model(x))
    assert sorted(cache) == ["block.post", "pre"]
    assert torch.equal(cache["pre"], 2 * x)
    assert torch.equal(cache["block.post"], torch.tensor([0.0, 1.0, 6.0]))
    assert all(s == CLEAN for s in _states(model).values())


def test_run_with_cache_selected_names_and_unknown_name():
    model = Toy()
    _, cache = run_with_cache(model, torch.ones(2), names=["pre"])
    assert list(cache) == ["pre"]
    with pytest.raises(KeyError, match="nope"):
        run_with_cache(model, torch.ones(2), names=["nope"])


def test_state_restored_when_forward_raises():
    model = Toy()
    with pytest.raises(RuntimeError, match="boom"):
        run_with_cache(model, torch.ones(2), fail=True)
    with pytest.raises(RuntimeError, match="boom"):
        run_with_hooks(model, torch.ones(2), fail=True, fwd_hooks={"pre": lambda t, h: t * 0})
    assert all(s == CLEAN for s in _states(model).values())


def test_detach_option():
    model = Toy()
    x = torch.tensor([1.0, 2.0])
    _, cache = run_with_cache(model, x)
    assert not cache["block.post"].requires_grad
    _, cache = run_with_cache(model, x, detach=False)
    (g,) = torch.autograd.grad(cache["pre"].sum(), model.w)  # still on the graph: d(sum w x)/dw
    assert g == 3.0


def test_run_with_hooks_edits_and_removes_functions():
    model = Toy()
    x = torch.tensor([-1.0, 2.0])
    assert torch.equal(run_with_hooks(model, x, fwd_hooks={"pre": lambda t, h: -t}), torch.tensor([2.0, 0.0]))
    assert torch.equal(model(x), torch.tensor([0.0, 4.0]))
    assert torch.equal(run_with_hooks(model, x, fwd_hooks={"pre": lambda t, h: None}), model(x))
    assert all(s == CLEAN for s in _states(model).values())
    with pytest.raises(ValueError, match="changed the shape"):
        run_with_hooks(model, x, fwd_hooks={"pre": lambda t, h: t[:1]})


def test_cache_sees_the_edited_value_and_the_model_uses_it():
    model = WeiTransformer.init(3, 2, 4, generator=torch.Generator().manual_seed(0), scale=1.0)
    tokens = torch.randint(0, 3, (5, 3, 4), generator=torch.Generator().manual_seed(1))

    def uniform(t, hook):  # replace layer-2 attention by the uniform prior over h' < h
        u = torch.ones_like(t).tril(-1)
        return u / u.sum(-1, keepdim=True).clamp(min=1)

    base = model(tokens)
    edited = run_with_hooks(model, tokens, fwd_hooks={"layer2.pattern": uniform})
    assert not torch.allclose(base, edited)
    # the first prediction (h = 1) has a single candidate, so it cannot change
    assert torch.allclose(base[:, 0], edited[:, 0])
