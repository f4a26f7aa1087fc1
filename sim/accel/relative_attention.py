"""Causal softmax attention with one learned vector per relative offset, fused for speed.

For queries ``q_t`` (already divided by ``sqrt(e)``), keys ``k_j``, values ``v_j`` and offset
vectors ``r_d`` (one per ``d = t - j``, per head)::

    s[t, j] = q_t . k_j + q_t . r_{t-j}     for j <= t   (-inf above the diagonal)
    P = softmax_j(s),   y_t = sum_j P[t, j] v_j

The plain autograd composition is the model's own
(:func:`sim.papers.markov.model.causal_attention`); :class:`RelativeAttention` computes the same
function with a hand-written backward and far fewer ``T x T`` passes:

* queries go in blocks ``[t0, t1)`` that see keys ``[0, t1)`` only, so the causal triangle
  costs about half the square, and each block's buffers stay in cache;
* a block's relative scores come from one matmul ``M = q R^T`` against the offsets in
  reverse order, ``M[t, c] = q_t . r_{t1-1-c}``, read in place through the "skew" view
  ``rel[t, j] = M[t, t1-1-t+j]`` (a strided view, no copy);
* the causal mask is an additive ``-inf`` triangle (one add, not a masked fill);
* backward uses ``rowsum(P * dP) = rowsum(dY * y)`` (an ``O(T e)`` reduction, as in
  FlashAttention) and writes ``dS = P * (dP - rowsum)`` once, into a zeroed buffer laid out so
  that ``dM[t, c] = dS[t, c + t - (t1-1)]`` is another strided view of it: the gradients of
  the offsets are then one matmul, with no scatter. The blocks go last first, so the last
  block, which sees every key, writes ``dk, dv`` instead of adding to zeros.

:func:`attention_forward` and :func:`attention_backward` are that core on flattened heads; the
fused attention sublayer (:mod:`sim.accel.fused_layers`) calls them with ``q, k, v`` read as
strided views of one projection buffer and its gradients written into views of another.

On the CPU at one torch thread (sweep workers, the benchmarks), float32 or float64 and head
width at most 64, the core runs in C instead (``csrc/relative_attention.c``, built at first use by
:mod:`sim.accel.native`): per sequence, the same products as 4 x 16 register tiles over the
causal triangle, the exponential vectorised, every buffer in cache; it saves the whole pattern
``P`` for the backward (the gain is in ``benchmarks/bench_edelman.py``). With more threads, on a GPU, or without a C compiler the PyTorch core
runs (``ICL_VERIFY_NATIVE=0`` forces it).

Both need ``T`` at most the number of offsets. Exactness against the reference (values and
gradients, including ``torch.autograd.gradcheck``, for both cores) is tested in ``tests/papers/markov/test_markov_model.py`` and ``tests/sim/accel``.
"""
from __future__ import annotations

import ctypes
import threading

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from sim.accel import native

__all__ = ["RelativeAttention", "relative_attention",
           "attention_forward", "attention_backward", "reversed_offsets", "offsets_gradient", "native_core"]


def _skew(M: Tensor, t0: int) -> Tensor:
    """Block ``[t0, t1)`` of ``M`` ``(n, t1 - t0, t1)`` contiguous -> view ``V[i, t - t0, j] =
    M[i, t - t0, t1-1-t+j]`` (valid for ``j <= t``; above the diagonal it reads neighbouring
    entries, which the mask removes)."""
    n, Tb, t1 = M.shape
    return M.as_strided((n, Tb, t1), (Tb * t1, t1 - 1, 1), M.storage_offset() + t1 - 1 - t0)


#: Target size (elements) of one query block's ``(BH, block, keys)`` buffers: small enough to stay
#: in a core's L2 cache. Measured at B = 64, T = 100, e = 16 on one CPU thread.
BLOCK_ELEMENTS = 1 << 17
MIN_BLOCK = 8


def _blocks(BH: int, T: int) -> list[tuple[int, int]]:
    size = min(T, max(MIN_BLOCK, BLOCK_ELEMENTS // (BH * T)))
    return [(t0, min(t0 + size, T)) for t0 in range(0, T, size)]


def attention_forward(q: Tensor, k: Tensor, v: Tensor, rrev: Tensor) -> tuple[Tensor, list[Tensor]]:
    """Forward of :class:`RelativeAttention` on ``(BH, T, e)`` inputs (any strides with the last
    dimension contiguous) and the offsets in reverse order ``rrev`` ``(nh, T, e)``,
    ``rrev[h, c] = r_{T-1-c, h}``. Returns ``y`` ``(BH, T, e)`` and, per query block, its pattern
    ``P`` and its queries (contiguous, which the backward's offset gradient needs as one matrix);
    from the native core, the one padded pattern (see :func:`native_core`)."""
    lib = native_core(q)
    if lib is not None:
        return _native_forward(lib, q, k, v, rrev)
    BH, T, e = q.shape
    nh = rrev.shape[0]
    bias = _causal_bias(T, q)
    y = torch.empty(BH, T, e, dtype=q.dtype, device=q.device)
    saved = []
    for t0, t1 in _blocks(BH, T):
        qb = q[:, t0:t1].contiguous()  # (BH, Tb, e)
        M = _matmul_heads(qb, rrev[:, T - t1:].transpose(1, 2), nh)  # (BH, Tb, t1): [t, c] = q_t . r_{t1-1-c}
        s = torch.baddbmm(_skew(M, t0), qb, k[:, :t1].transpose(1, 2)).add_(bias[t0:t1, :t1])
        P = torch.softmax(s, dim=-1)  # (BH, Tb, t1)
        y[:, t0:t1] = torch.bmm(P, v[:, :t1])
        saved += [P, qb]
    return y, saved


def attention_backward(q: Tensor, k: Tensor, v: Tensor, rrev: Tensor, y: Tensor, saved: list[Tensor],
                       dy: Tensor, dq: Tensor, dk: Tensor, dv: Tensor) -> Tensor:
    """Backward of :func:`attention_forward`: writes the gradients of ``q, k, v`` into ``dq, dk, dv``
    (``(BH, T, e)``, any strides with the last dimension contiguous, e.g. views of one buffer)
    and returns that of ``rrev``. The blocks go last first: the last block sees every key, so its
    ``dk, dv`` are written rather than added to zeros."""
    if len(saved) == 1:  # the native forward's pattern (the PyTorch core saves two tensors per block)
        return _native_backward(_native_library(), q, k, v, rrev, y, saved[0], dy, dq, dk, dv)
    BH, T, e = q.shape
    nh = rrev.shape[0]
    drrev = torch.zeros_like(rrev)  # (nh, T, e)
    rowsum = (dy * y).sum(-1, keepdim=True)  # (BH, T, 1) = sum_j P[t, j] dP[t, j]
    for (t0, t1), P, qb in reversed(list(zip(_blocks(BH, T), saved[0::2], saved[1::2]))):
        Tb = t1 - t0
        dyb = dy[:, t0:t1]
        dS, dM = _gradient_buffers(BH, t0, t1, q)
        dvb = torch.bmm(P.transpose(1, 2), dyb)
        dP = torch.bmm(dyb, v[:, :t1].transpose(1, 2)).sub_(rowsum[:, t0:t1])
        torch.mul(P, dP, out=dS)  # masked entries: P = 0
        dqb = torch.bmm(dS, k[:, :t1])
        dkb = torch.bmm(dS.transpose(1, 2), qb)
        if t1 == T:
            dv.copy_(dvb)
            dk.copy_(dkb)
        else:
            dv[:, :t1] += dvb
            dk[:, :t1] += dkb
        rb = rrev[:, T - t1:]  # (nh, t1, e)
        if nh == 1:  # dM is then one (BH Tb, t1) matrix with row stride 2 t1
            dM2 = dM.as_strided((BH * Tb, t1), (2 * t1, 1))
            dqb.view(BH * Tb, e).addmm_(dM2, rb[0])
            drrev[0, T - t1:].addmm_(dM2.t(), qb.view(BH * Tb, e))
        else:
            dqb += _matmul_heads(dM, rb, nh)
            drrev[:, T - t1:] += _matmul_heads(dM.transpose(1, 2), qb, nh, reduce=True)
        dq[:, t0:t1] = dqb
    return drrev


_NATIVE_MAX_WIDTH = 64  # the C core's per-tile accumulators


def native_core(q: Tensor):
    """The C core's library when it applies to ``q`` ``(BH, T, e)``: on the CPU, float32 or float64,
    ``e <= 64``, at one torch thread, and built; else ``None``."""
    return _native_library() if native.applies(q) and q.shape[-1] <= _NATIVE_MAX_WIDTH else None


_I, _L, _P = ctypes.c_int, ctypes.c_long, ctypes.c_void_p
#: the C core's entry points (csrc/relative_attention.c) and their argument types
SIGNATURES = {
    "relative_attention_forward": [_I] * 4 + [_P, _L, _L] * 3 + [_P] * 3,
    "relative_attention_backward": [_I] * 4 + [_P, _L, _L] * 3 + [_P] * 4 + [_P, _L, _L] * 3 + [_P],
}


def _native_library():
    return native.load("relative_attention", SIGNATURES)


def _strided(x: Tensor) -> list:
    """Pointer, sequence stride and row stride of ``(n, T, e)`` ``x``, whose rows must be dense."""
    if x.stride(-1) != 1:
        raise ValueError(f"the native core needs dense rows (last stride 1), got strides {x.stride()}")
    return [x.data_ptr(), x.stride(0), x.stride(1)]


def _padded(T: int) -> int:
    return (T + 7) // 8 * 8


def _native_forward(lib, q: Tensor, k: Tensor, v: Tensor, rrev: Tensor) -> tuple[Tensor, list[Tensor]]:
    BH, T, e = q.shape
    rrev = rrev.contiguous()
    y = torch.empty(BH, T, e, dtype=q.dtype)
    P = torch.empty(BH, _padded(T), _padded(T), dtype=q.dtype)  # zeros above the diagonal
    status = getattr(lib, "relative_attention_forward" + native.SUFFIXES[q.dtype])(
        BH, T, e, rrev.shape[0], *_strided(q), *_strided(k), *_strided(v), rrev.data_ptr(), y.data_ptr(),
        P.data_ptr())
    if status:
        raise MemoryError(f"the native relative-attention forward could not allocate its buffers (status {status})")
    return y, [P]


def _native_backward(lib, q, k, v, rrev, y, P, dy, dq, dk, dv) -> Tensor:
    BH, T, e = q.shape
    rrev, y, dy = rrev.contiguous(), y.contiguous(), dy.contiguous()
    drrev = torch.empty_like(rrev)
    status = getattr(lib, "relative_attention_backward" + native.SUFFIXES[q.dtype])(
        BH, T, e, rrev.shape[0], *_strided(q), *_strided(k), *_strided(v), rrev.data_ptr(), y.data_ptr(),
        P.data_ptr(), dy.data_ptr(), *_strided(dq), *_strided(dk), *_strided(dv), drrev.data_ptr())
    if status:
        raise MemoryError(f"the native relative-attention backward could not allocate its buffers (status {status})")
    return drrev


def reversed_offsets(r: Tensor, T: int) -> Tensor:
    """``(nh, T, e)``, ``[h, c] = r[T-1-c, h]``, from offsets ``r`` ``(>= T, nh, e)``."""
    return r[:T].flip(0).permute(1, 0, 2).contiguous()


def offsets_gradient(drrev: Tensor, shape) -> Tensor:
    """The gradient of ``r`` (``shape`` = ``(>= T, nh, e)``) from that of :func:`reversed_offsets`."""
    T = drrev.shape[1]
    dr = torch.zeros(shape, dtype=drrev.dtype, device=drrev.device)
    dr[:T] = drrev.permute(1, 0, 2).flip(0)
    return dr


class RelativeAttention(torch.autograd.Function):
    """``y = RelativeAttention.apply(q, k, v, r)``: ``q, k, v`` ``(BH, T, e)`` (batch and heads
    flattened, head-major within each sequence: ``n = b * nh + h``), ``r`` ``(>= T, nh, e)`` the
    offsets of each head. Returns ``y`` ``(BH, T, e)``. See the module docstring."""

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, r: Tensor) -> Tensor:
        """``y`` ``(BH, T, e)`` by :func:`attention_forward` on the offsets in reverse order; saves its
        softmax state for ``backward``."""
        rrev = reversed_offsets(r, q.shape[1])
        y, saved = attention_forward(q, k, v, rrev)
        ctx.save_for_backward(q, k, v, rrev, y, *saved)
        ctx.r_shape = r.shape
        return y

    @staticmethod
    @once_differentiable  # the backward writes into reused buffers: not differentiable again
    def backward(ctx, dy: Tensor):
        """From ``dy`` ``(BH, T, e)``: the gradients of ``q, k, v`` ``(BH, T, e)`` and of ``r`` (its shape),
        by :func:`attention_backward`."""
        q, k, v, rrev, y, *saved = ctx.saved_tensors
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        drrev = attention_backward(q, k, v, rrev, y, saved, dy.contiguous(), dq, dk, dv)
        return dq, dk, dv, offsets_gradient(drrev, ctx.r_shape)


def _matmul_heads(x: Tensor, w: Tensor, nh: int, reduce: bool = False) -> Tensor:
    """``out[n] = x[n] @ w[n % nh]`` for ``x`` ``(n, a, m)`` and per-head ``w`` ``(nh, m, b)`` -> ``(n, a, b)``;
    ``reduce``: ``x[n] @ w[n]`` summed over the sequences of each head -> ``(nh, a, b)`` (then
    ``w`` is ``(n, m, b)``)."""
    n, a, m = x.shape
    if nh == 1 and not reduce and x.is_contiguous():
        return (x.view(n * a, m) @ w[0]).view(n, a, -1)
    if reduce:
        return (x.unflatten(0, (n // nh, nh)) @ w.unflatten(0, (n // nh, nh))).sum(0)
    return (x.unflatten(0, (n // nh, nh)) @ w).flatten(0, 1)


_LOCAL = threading.local()


def _gradient_buffers(n: int, t0: int, t1: int, like: Tensor) -> tuple[Tensor, Tensor]:
    """Two views of one zeroed ``(n Tb, 2 t1)`` buffer (``Tb = t1 - t0``), reused per thread and block:

    * ``dS`` ``(n, Tb, t1)``, strides ``(2 Tb t1, 2 t1 - 1, 1)``, offset ``t1-1-t0``: ``dS[i, t-t0, j]``
      sits in row ``i Tb + t - t0`` at column ``t1-1-t+j``;
    * ``dM`` ``(n, Tb, t1)``, strides ``(2 Tb t1, 2 t1, 1)``: ``dM[i, t-t0, c] = dS[i, t-t0, c+t-(t1-1)]``,
      zero where that column is negative (never written, so the zeros stay between uses).
    """
    Tb = t1 - t0
    key = (n, t0, t1, like.dtype, like.device)
    cache = getattr(_LOCAL, "buffers", None)
    if cache is None:
        cache = _LOCAL.buffers = {}
    G = cache.get(key)
    if G is None:
        if len(cache) >= 64:  # one per block and batch shape (training, evaluation): a few dozen at most
            cache.clear()
        G = cache[key] = torch.zeros(n * Tb, 2 * t1, dtype=like.dtype, device=like.device)
    dS = G.as_strided((n, Tb, t1), (2 * Tb * t1, 2 * t1 - 1, 1), G.storage_offset() + t1 - 1 - t0)
    dM = G.as_strided((n, Tb, t1), (2 * Tb * t1, 2 * t1, 1), G.storage_offset())
    return dS, dM


_BIAS_CACHE: dict = {}


def _causal_bias(T: int, like: Tensor) -> Tensor:
    """``(T, T)`` additive mask: 0 on and below the diagonal, ``-inf`` above (cached per T, dtype, device)."""
    key = (T, like.dtype, like.device)
    bias = _BIAS_CACHE.get(key)
    if bias is None:
        bias = torch.full((T, T), float("-inf"), dtype=like.dtype, device=like.device).triu_(1)
        _BIAS_CACHE[key] = bias
    return bias


def relative_attention(q: Tensor, k: Tensor, v: Tensor, r: Tensor) -> Tensor:
    """Fused form for ``(B, nh, T, e)`` inputs and ``r`` ``(>= T, nh, e)`` -> ``y`` ``(B, nh, T, e)``."""
    B, nh, T, e = q.shape
    flat = lambda x: x.reshape(B * nh, T, e)  # noqa: E731
    return RelativeAttention.apply(flat(q), flat(k), flat(v), r).view(B, nh, T, e)
