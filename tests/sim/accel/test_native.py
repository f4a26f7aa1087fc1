"""The C cores (sim/accel/csrc, built by sim.accel.native) against their PyTorch twins.

tests/papers/markov/test_markov_model.py runs every fast-path test (values, gradients, gradcheck) with
both cores; here: shapes and strides the models do not reach, inputs perturbed so that the
comparison must fail, and the fallbacks (no compiler, switched off, more threads, bad tokens)."""
import warnings

import pytest
import torch

import sim.accel.fused_layers as fl
import sim.accel.native as native
import sim.accel.relative_attention as ra

pytestmark = pytest.mark.filterwarnings("error::sim.accel.native.NativeBuildWarning")


@pytest.fixture
def built(monkeypatch):
    monkeypatch.setenv("ICL_VERIFY_NATIVE", "1")
    if ra.native_core(torch.zeros(1, 1, 1)) is None or fl._native_token_core(torch.zeros(1)) is None:
        pytest.skip("the native kernels cannot be built here")


def _close(a, b, rtol) -> bool:
    """Within ``rtol`` of the larger of ``b``'s scale and the inputs' (unit): some gradients are zero
    in exact arithmetic (one position: a softmax over one key) and roundoff in either core."""
    return torch.allclose(a, b, rtol=rtol, atol=rtol * max(float(b.abs().max()), 1.0))


def _attention(q, k, v, rrev, dy, native_on, monkeypatch):
    """``y`` and the gradients of ``q, k, v, rrev`` from one core."""
    monkeypatch.setenv("ICL_VERIFY_NATIVE", "1" if native_on else "0")
    y, saved = ra.attention_forward(q, k, v, rrev)
    assert (len(saved) == 1) == native_on  # the core that ran is the one asked for
    dq, dk, dv = (torch.empty(q.shape, dtype=q.dtype) for _ in range(3))
    drrev = ra.attention_backward(q, k, v, rrev, y, saved, dy, dq, dk, dv)
    return [y, dq, dk, dv, drrev]


def _inputs(BH, nh, T, e, dtype, seed=0):
    """``q, k, v`` as strided views of one ``(BH, T, 3, e)`` buffer, as the sublayer passes them."""
    g = torch.Generator().manual_seed(seed)
    qkv = torch.randn(BH, T, 3, e, generator=g, dtype=dtype)
    rrev = torch.randn(nh, T, e, generator=g, dtype=dtype)
    dy = torch.randn(BH, T, e, generator=g, dtype=dtype)
    return qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], rrev, dy


@pytest.mark.parametrize("dtype, rtol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
@pytest.mark.parametrize("nh, T, e", [(1, 100, 16), (2, 37, 16), (1, 1, 16), (1, 13, 8), (3, 50, 24), (2, 20, 32),
                                      (1, 9, 64)])
def test_relative_attention_core_matches_pytorch(built, monkeypatch, dtype, rtol, nh, T, e):
    """T not a multiple of the tiles (8, 16); widths 16, multiples of 16 (column chunks) and others
    (scalar loops); several heads; float32 (a polynomial exponential) and float64 (libm's)."""
    args = _inputs(4 * nh, nh, T, e, dtype)
    got = _attention(*args, native_on=True, monkeypatch=monkeypatch)
    want = _attention(*args, native_on=False, monkeypatch=monkeypatch)
    for name, a, b in zip(["y", "dq", "dk", "dv", "drrev"], got, want):
        assert _close(a, b, rtol), name


def test_relative_attention_comparison_sees_shifted_offsets(built, monkeypatch):
    """The comparison can fail: the C core given the offsets one step late differs beyond its tolerance."""
    q, k, v, rrev, dy = _inputs(4, 1, 30, 16, torch.float64)
    late = torch.cat([rrev[:, 1:], rrev[:, :1]], dim=1)
    got = _attention(q, k, v, late, dy, native_on=True, monkeypatch=monkeypatch)
    want = _attention(q, k, v, rrev, dy, native_on=False, monkeypatch=monkeypatch)
    assert not torch.allclose(got[0], want[0], rtol=1e-12, atol=1e-12)


def _token_core(tokens, eA, eR, dWf, native_on, monkeypatch):
    """The token-only layer's core through the public function: ``Wf`` and the gradients of ``eA, eR``."""
    monkeypatch.setenv("ICL_VERIFY_NATIVE", "1" if native_on else "0")
    if native_on:
        lib = fl._native_token_core(eA)
        Wf, G, Z = fl._native_token_forward(lib, tokens, eA, eR)
        return [Wf, *fl._native_token_backward(lib, tokens, eA, Wf, G, Z, dWf)]
    eA, eR = eA.clone().requires_grad_(), eR.clone().requires_grad_()
    nh, C, _ = eA.shape
    B, T = tokens.shape
    # the definition, position by position (slow and plain): G[t, b] = sum_{j <= t, x_j = b} eR[x_t, t - j]
    rows = []
    for n in range(B):
        for t in range(T):
            a = int(tokens[n, t])
            per_head = []
            for h in range(nh):
                G = torch.stack([sum((eR[h, a, t - j] for j in range(t + 1) if int(tokens[n, j]) == b),
                                     torch.zeros((), dtype=eA.dtype)) for b in range(C)])
                W = eA[h, a] * G
                per_head.append(W / W.sum())
            rows.append(torch.cat(per_head))
    Wf = torch.stack(rows)
    deA, deR = torch.autograd.grad(Wf, (eA, eR), dWf)
    return [Wf.detach(), deA, deR]


@pytest.mark.parametrize("dtype, rtol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
@pytest.mark.parametrize("nh, C, T", [(1, 2, 11), (2, 3, 9), (1, 5, 1)])
def test_token_core_matches_its_definition(built, monkeypatch, dtype, rtol, nh, C, T):
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, C, (3, T), generator=g)
    eA = torch.rand(nh, C, C, generator=g, dtype=dtype) + 0.1
    eR = torch.rand(nh, C, T, generator=g, dtype=dtype) + 0.1
    dWf = torch.randn(3 * T, nh * C, generator=g, dtype=dtype)
    got = _token_core(tokens, eA, eR, dWf, native_on=True, monkeypatch=monkeypatch)
    want = _token_core(tokens, eA, eR, dWf, native_on=False, monkeypatch=monkeypatch)
    for name, a, b in zip(["Wf", "deA", "deR"], got, want):
        assert _close(a, b, rtol), name


def test_token_core_comparison_sees_shifted_offsets(built, monkeypatch):
    """The comparison can fail: the C core given ``exp(R)`` one lag late differs from the definition."""
    g = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, 2, (2, 8), generator=g)
    eA = torch.rand(1, 2, 2, generator=g, dtype=torch.float64) + 0.1
    eR = torch.rand(1, 2, 8, generator=g, dtype=torch.float64) + 0.1
    dWf = torch.randn(16, 2, generator=g, dtype=torch.float64)
    got = _token_core(tokens, eA, eR.roll(1, dims=-1), dWf, native_on=True, monkeypatch=monkeypatch)
    want = _token_core(tokens, eA, eR, dWf, native_on=False, monkeypatch=monkeypatch)
    assert not torch.allclose(got[0], want[0], rtol=1e-6, atol=1e-6)


def _token_layer(tokens, params, native_on, monkeypatch):
    monkeypatch.setenv("ICL_VERIFY_NATIVE", "1" if native_on else "0")
    return fl.TokenOnlyAttention.apply(tokens, *params, 2, 1e-5)


def test_token_layer_in_c_matches_pytorch_and_sees_shifted_offsets(built, monkeypatch):
    """The whole layer in C equals the PyTorch path (float64, two heads), and offsets read one row
    late are caught by the same comparison."""
    g = torch.Generator().manual_seed(3)
    w, T = 16, 12
    randn = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float64)  # noqa: E731
    params = [randn(3, w), 1 + 0.1 * randn(w), 0.1 * randn(w)]  # embedding rows, LayerNorm
    params += [0.3 * randn(w, w) for _ in range(4)] + [0.3 * randn(T + 2, w)]  # Wq, Wk, Wv, Wo, offsets
    tokens = torch.randint(0, 3, (4, T), generator=g)
    want = _token_layer(tokens, params, False, monkeypatch)
    assert _close(_token_layer(tokens, params, True, monkeypatch), want, 1e-12)
    late = params[:-1] + [torch.cat([params[-1][1:], params[-1][:1]])]
    assert not torch.allclose(_token_layer(tokens, late, True, monkeypatch), want, rtol=1e-6, atol=1e-6)


def test_token_core_refuses_tokens_out_of_range(built):
    eA, eR = torch.ones(1, 2, 2), torch.ones(1, 2, 4)
    with pytest.raises(ValueError, match="outside 0..C-1"):
        fl._native_token_forward(fl._native_token_core(eA), torch.tensor([[0, 1, 2, 0]]), eA, eR)


def test_switched_off_or_more_threads_take_the_pytorch_core(built, monkeypatch):
    q = torch.zeros(1, 4, 16)
    monkeypatch.setenv("ICL_VERIFY_NATIVE", "0")
    assert ra.native_core(q) is None and fl._native_token_core(q) is None
    monkeypatch.setenv("ICL_VERIFY_NATIVE", "1")
    old = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert ra.native_core(q) is None and fl._native_token_core(q) is None
    finally:
        torch.set_num_threads(old)
    assert ra.native_core(q) is not None


def test_a_failed_build_warns_once_and_falls_back(monkeypatch, tmp_path):
    """No compiler: one warning naming the kernel, then ``None``; the attention still runs (PyTorch core)."""
    monkeypatch.setenv("ICL_VERIFY_NATIVE", "1")
    monkeypatch.setenv("CC", "no-such-compiler-here")
    monkeypatch.setenv("ICL_VERIFY_CACHE", str(tmp_path))
    monkeypatch.setattr(native, "_LOADED", {})
    with pytest.warns(native.NativeBuildWarning, match="relative_attention.*no-such-compiler-here"):
        assert native.load("relative_attention") is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert native.load("relative_attention") is None  # remembered: no second warning
        q, k, v, rrev, dy = _inputs(2, 1, 6, 16, torch.float64)
        y, saved = ra.attention_forward(q, k, v, rrev)
    assert len(saved) == 2  # the PyTorch core's blocks
    assert not list(tmp_path.iterdir())  # nothing half-written left in the cache


def test_a_compile_error_is_reported_with_the_compiler_output(monkeypatch, tmp_path):
    monkeypatch.setenv("ICL_VERIFY_CACHE", str(tmp_path))
    monkeypatch.setattr(native, "SOURCES", tmp_path)
    (tmp_path / "broken.c").write_text("int f(void) { return undefined_name; }\n")
    with pytest.raises(RuntimeError, match="undefined_name"):
        native._build("broken")
    assert [p.name for p in tmp_path.iterdir()] == ["broken.c"]
