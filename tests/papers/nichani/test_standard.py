"""Tests of sim.papers.nichani.standard: N Knowl 7's exact maps in both directions (claim N.K7)."""
import itertools

import pytest
import torch

from sim.models import run_with_cache
from sim.papers.nichani.model import DisentangledTransformer
from sim.papers.nichani.standard import StandardTransformer, to_disentangled, to_standard

F64 = torch.float64
HEADS = [[1], [2], [1, 1], [2, 1], [1, 2, 1]]
SIZES = [(2, 4), (3, 3)]  # (S, T): every prompt of [S]^T is checked


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _all_prompts(S, T):
    return torch.tensor(list(itertools.product(range(S), repeat=T)))  # (S^T, T)


def _max_diff(a, b, tokens):
    with torch.no_grad():
        return (a(tokens) - b(tokens)).abs().max().item()


@pytest.mark.parametrize("S,T", SIZES)
@pytest.mark.parametrize("heads", HEADS)
def test_standard_to_disentangled_is_exact(S, T, heads):
    std = StandardTransformer.init(S, T, 6, heads, generator=_gen(sum(heads) + 10 * S), dtype=F64)
    dis = to_disentangled(std)
    assert dis.heads == std.heads and dis.n_layers == len(heads)
    tokens = _all_prompts(S, T)
    with torch.no_grad():
        scale = std(tokens).abs().max().item()
    assert scale > 0.1  # a non-trivial function
    assert _max_diff(std, dis, tokens) < 1e-10
    assert _max_diff(std, dis, tokens[:, : T - 1]) < 1e-10  # shorter prompts too
    # the map preserves every attention pattern, head by head
    _, c_std = run_with_cache(std, tokens)
    _, c_dis = run_with_cache(dis, tokens)
    assert sorted(c_std) == sorted(c_dis)
    for name in c_std:
        if name.endswith("pattern"):
            assert (c_std[name] - c_dis[name]).abs().max() < 1e-12, name


@pytest.mark.parametrize("S,T", SIZES)
@pytest.mark.parametrize("heads", HEADS)
def test_disentangled_to_standard_is_exact(S, T, heads):
    dis = DisentangledTransformer.init(S, T, heads, generator=_gen(sum(heads) + 20 * S), scale=0.3, dtype=F64)
    std = to_standard(dis)
    assert std.d == dis.widths[-1] and std.heads == dis.heads
    tokens = _all_prompts(S, T)
    with torch.no_grad():
        assert dis(tokens).abs().max() > 0.1
    assert _max_diff(std, dis, tokens) < 1e-10
    # and back again
    assert _max_diff(to_disentangled(std), dis, tokens) < 1e-10


def test_wrong_standard_to_disentangled_map_is_caught():
    """Transposing one block (M K Q^T M^T instead of M Q K^T M^T) changes the function."""
    S, T = 2, 4
    std = StandardTransformer.init(S, T, 6, [2, 1], generator=_gen(1), dtype=F64)
    tokens = _all_prompts(S, T)
    for layer, head in [(0, 1), (1, 0)]:
        dis = to_disentangled(std)
        with torch.no_grad():
            dis.A[layer][head] = dis.A[layer][head].T.clone()
        assert _max_diff(std, dis, tokens) > 1e-3
    # and the value map: M V instead of M V^T in layer 1 (a standard model with V transposed)
    bad = StandardTransformer(std.E, std.P, list(std.Q), list(std.K), [v.transpose(1, 2) for v in std.V], std.W_O)
    assert _max_diff(std, to_disentangled(bad), tokens) > 1e-3


def test_wrong_disentangled_to_standard_map_is_caught():
    """Writing head 0's output into head 1's reserved block changes the function."""
    S, T = 2, 4
    dis = DisentangledTransformer.init(S, T, [2, 1], generator=_gen(2), scale=0.3, dtype=F64)
    std = to_standard(dis)
    tokens = _all_prompts(S, T)
    with torch.no_grad():
        std.V[0][[0, 1]] = std.V[0][[1, 0]].clone()
    assert _max_diff(std, dis, tokens) > 1e-3


def test_mlp_and_layer_norm_variants_run_and_are_not_mapped():
    S, T, B = 3, 5, 7
    tokens = torch.randint(0, S, (B, T), generator=_gen(3))
    for layer_norm in (False, True):
        model = StandardTransformer.init(S, T, 8, [2, 1], generator=_gen(4), mlp_hidden=16, layer_norm=layer_norm)
        out = model(tokens)
        assert out.shape == (B, S) and out.dtype == torch.float32 and torch.isfinite(out).all()
        model.loss(tokens, tokens[:, 0]).backward()
        assert all(torch.isfinite(p.grad).all() for p in model.parameters())
        assert model.mlps[0].W1.grad.abs().max() > 0
        assert not model.attention_only
        with pytest.raises(ValueError, match="attention-only"):
            to_disentangled(model)
    # the MLP changes the function (same attention parameters)
    plain = StandardTransformer.init(S, T, 8, [2, 1], generator=_gen(4))
    mlp = StandardTransformer.init(S, T, 8, [2, 1], generator=_gen(4), mlp_hidden=16)
    assert torch.equal(plain.Q[0], mlp.Q[0]) and not torch.allclose(plain(tokens), mlp(tokens))


def test_shape_validation():
    E, P = torch.zeros(4, 2), torch.zeros(4, 3)
    q = torch.zeros(1, 4, 4)
    with pytest.raises(ValueError, match="layer 1"):
        StandardTransformer(E, P, [q], [q], [torch.zeros(1, 3, 3)], torch.zeros(2, 4))
    with pytest.raises(ValueError, match="W_O"):
        StandardTransformer(E, P, [q], [q], [q], torch.zeros(2, 5))
    with pytest.raises(ValueError, match="layer 2"):
        DisentangledTransformer(2, 3, [torch.zeros(1, 5, 5), torch.zeros(1, 5, 5)], torch.zeros(2, 10))
