"""Hand-written forward and backward passes for three pieces of :class:`sim.papers.markov.model.MarkovLM`,
each one autograd node instead of a dozen or more. At Edelman et al.'s sizes (width 16, two
states) a training step is made of many small operations, and PyTorch's kernels are slow along
rows as short as 16 or 2, so the layout of each array matters as much as the arithmetic:

* :class:`AttentionSublayer`: the pre-LayerNorm relative-position attention sublayer with its
  residual, ``h + W_O Att(LN(h))``. The gradients of ``q, k, v`` go straight into one buffer, so
  the three projection gradients are one matmul;
* :class:`LogitLoss`: the final LayerNorm, the unembedding and the mean cross-entropy,
  ``mean_i -log softmax(U LN(h_i))[y_i]``;
* :class:`TokenOnlyAttention`: the first attention layer when its input is the token embedding
  alone, computed from ``C``-row tables and one Toeplitz matmul; on the CPU at one torch thread
  the whole layer, forward and backward, is one C call each way instead
  (``csrc/token_attention.c``, built by :mod:`sim.accel.native`).

All three compute the same function as the plain autograd modules: tests hold values and every
parameter's gradient to them in float64, and pass ``gradcheck`` (``tests/papers/markov/test_markov_model.py``). The
backward passes use PyTorch's own LayerNorm backward kernel. Like
:class:`sim.accel.relative_attention.RelativeAttention` they are ``once_differentiable``.
"""
from __future__ import annotations

import ctypes
import math

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from sim.accel import native
from sim.accel.relative_attention import attention_backward, attention_forward, offsets_gradient, reversed_offsets

__all__ = ["AttentionSublayer", "LogitLoss", "TokenOnlyAttention", "ExponentUnderflow"]


def _layer_norm(h: Tensor, weight: Tensor, bias: Tensor, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """``LayerNorm`` over the last dimension of ``h`` ``(N, w)``: ``(out, mean, rstd)`` as
    ``torch.native_layer_norm`` returns them (``mean, rstd`` ``(N, 1)``), for its backward kernel.

    The row means are matmuls with ``1 / w``, faster than the fused kernel for rows as short as the
    models' widths (16). Two-pass variance, as the kernel's."""
    w = h.shape[-1]
    avg = torch.full((w, 1), 1.0 / w, dtype=h.dtype, device=h.device)
    mean = h @ avg
    xc = h - mean
    rstd = torch.rsqrt(torch.mm(xc * xc, avg).add_(eps))
    return torch.addcmul(bias, xc.mul_(rstd), weight), mean, rstd


def _heads(z: Tensor, B: int, T: int, nh: int, e: int) -> Tensor:
    """``(B, T, nh, e)`` -> ``(B nh, T, e)``; a view (no copy) for one head."""
    return z[:, :, 0] if nh == 1 else z.transpose(1, 2).reshape(B * nh, T, e)


def _merge_heads(y: Tensor, B: int, T: int, nh: int, e: int) -> Tensor:
    """``(B nh, T, e)`` -> ``(B T, nh e)``, the inverse of :func:`_heads`."""
    return y.view(B * T, e) if nh == 1 else y.view(B, nh, T, e).transpose(1, 2).reshape(B * T, nh * e)


class AttentionSublayer(torch.autograd.Function):
    """``AttentionSublayer.apply(h, ln_w, ln_b, Wq, Wk, Wv, Wo, r, heads, eps) -> h + W_O Att(LN(h))``.

    ``h`` ``(B, T, w)``; ``Wq, Wk, Wv, Wo`` ``(w, w)`` (``nn.Linear`` weights, no bias); ``r``
    ``(>= T, w)`` the offset vectors, head ``i`` in columns ``[i e, (i + 1) e)``, ``e = w / heads``.
    The attention is that of :mod:`sim.accel.relative_attention` with ``q = LN(h) W_q^T / sqrt(e)``.
    """

    @staticmethod
    def forward(ctx, h, ln_w, ln_b, Wq, Wk, Wv, Wo, r, heads: int, eps: float):
        """``h + W_O Att(LN(h))`` ``(B, T, w)``; saves the LayerNorm statistics, ``q, k, v`` and the
        attention's softmax state for ``backward``."""
        B, T, w = h.shape
        nh, e = heads, w // heads
        x, mean, rstd = _layer_norm(h.reshape(B * T, w), ln_w, ln_b, eps)  # (B T, w)
        Wqkv = torch.cat([Wq * (1.0 / math.sqrt(e)), Wk, Wv])  # (3w, w)
        qkv = torch.mm(x, Wqkv.t()).view(B, T, 3, nh, e)
        q, k, v = (_heads(qkv[:, :, i], B, T, nh, e) for i in range(3))
        rrev = reversed_offsets(r.view(r.shape[0], nh, e), T)
        y, saved = attention_forward(q, k, v, rrev)  # (B nh, T, e)
        y2 = _merge_heads(y, B, T, nh, e)
        out = torch.addmm(h.view(B * T, w), y2, Wo.t()).view(B, T, w)
        ctx.save_for_backward(h, x, mean, rstd, ln_w, ln_b, Wqkv, Wo, qkv, y, y2, rrev, *saved)
        ctx.shape = (B, T, w, nh, e, r.shape)
        return out

    @staticmethod
    @once_differentiable  # the attention backward writes into reused buffers
    def backward(ctx, dout):
        """From ``dout`` ``(B, T, w)``: the gradients of ``h, ln_w, ln_b, Wq, Wk, Wv, Wo, r`` (``None``
        for ``heads, eps``)."""
        h, x, mean, rstd, ln_w, ln_b, Wqkv, Wo, qkv, y, y2, rrev, *saved = ctx.saved_tensors
        B, T, w, nh, e, r_shape = ctx.shape
        dout2 = dout.reshape(B * T, w)
        dWo = dout2.t() @ y2
        dy = dout2 @ Wo  # (B T, w): gradient of the heads' outputs, concatenated
        dy = dy.view(B, T, e) if nh == 1 else dy.view(B, T, nh, e).transpose(1, 2).reshape(B * nh, T, e)
        q, k, v = (_heads(qkv[:, :, i], B, T, nh, e) for i in range(3))
        dqkv = torch.empty(B, T, 3, nh, e, dtype=h.dtype, device=h.device)
        if nh == 1:  # the attention writes into views of one buffer
            drrev = attention_backward(q, k, v, rrev, y, saved, dy, *(dqkv[:, :, i, 0] for i in range(3)))
        else:
            grads = [torch.empty(B * nh, T, e, dtype=h.dtype, device=h.device) for _ in range(3)]
            drrev = attention_backward(q, k, v, rrev, y, saved, dy, *grads)
            for i, g in enumerate(grads):
                dqkv[:, :, i] = g.view(B, nh, T, e).transpose(1, 2)
        dqkv2 = dqkv.view(B * T, 3 * w)
        dWqkv = dqkv2.t() @ x  # (3w, w)
        dh, dln_w, dln_b = torch.ops.aten.native_layer_norm_backward(
            dqkv2 @ Wqkv, h.reshape(B * T, w), (w,), mean, rstd, ln_w, ln_b, [True, True, True])
        dh = dh.view(B, T, w).add_(dout)
        dWq, dWk, dWv = dWqkv.split(w)
        dr = offsets_gradient(drrev, (r_shape[0], nh, e)).view(r_shape)
        return dh, dln_w, dln_b, dWq * (1.0 / math.sqrt(e)), dWk, dWv, dWo, dr, None, None


class LogitLoss(torch.autograd.Function):
    """``LogitLoss.apply(h, ln_w, ln_b, U, targets, eps) -> mean_i -log softmax(U LN(h_i))[targets_i]``.

    ``h`` ``(N, w)``, ``U`` ``(C, w)`` (the unembedding, no bias), ``targets`` ``(N,)`` in ``0..C-1``:
    ``F.cross_entropy(F.linear(F.layer_norm(h, ...), U), targets)`` in one node. The logits are
    kept as ``(C, N)`` (``U LN(h)^T``): with few states the GEMM then writes long rows, and the
    log-sum-exp reduces over the outer dimension.
    """

    @staticmethod
    def forward(ctx, h, ln_w, ln_b, U, targets, eps: float):
        """The mean cross-entropy (a scalar) of the logits ``U LN(h_i)`` ``(C, N)`` against ``targets``;
        saves the logits and their log-sum-exp for ``backward``."""
        N, w = h.shape
        x, mean, rstd = _layer_norm(h, ln_w, ln_b, eps)
        logits = U @ x.t()  # (C, N)
        lse = torch.logsumexp(logits, dim=0, keepdim=True)  # (1, N)
        target = targets.view(1, N)
        loss = (lse.sum() - logits.gather(0, target).sum()) / N
        ctx.save_for_backward(h, x, mean, rstd, ln_w, ln_b, U, logits, lse, target)
        return loss

    @staticmethod
    @once_differentiable
    def backward(ctx, dloss):
        """From the scalar ``dloss``: the gradients of ``h`` ``(N, w)``, ``ln_w, ln_b`` and ``U`` ``(C, w)``
        (``None`` for ``targets, eps``); ``dlogits = (softmax - onehot(targets)) dloss / N``."""
        h, x, mean, rstd, ln_w, ln_b, U, logits, lse, target = ctx.saved_tensors
        N, w = h.shape
        dlogits = (logits - lse).exp_()  # softmax, (C, N)
        dlogits.scatter_add_(0, target, torch.full((1, N), -1.0, dtype=h.dtype, device=h.device))
        dlogits *= dloss / N
        dU = dlogits @ x
        dh, dln_w, dln_b = torch.ops.aten.native_layer_norm_backward(
            dlogits.t() @ U, h, (w,), mean, rstd, ln_w, ln_b, [True, True, True])
        return dh, dln_w, dln_b, dU, None, None


class ExponentUnderflow(ArithmeticError):
    """:class:`TokenOnlyAttention` cannot represent this layer's softmax sums in float range; the
    caller takes the general path."""


class TokenOnlyAttention(torch.autograd.Function):
    """``TokenOnlyAttention.apply(tokens, E, ln_w, ln_b, Wq, Wk, Wv, Wo, r, heads, eps) -> h + W_O Att(LN(h))``
    for ``h[b, t] = E[x_t]`` (the first layer with relative positions): ``(B T, w)``.

    With token-only inputs, ``q, k, v`` take ``C`` values, and ``exp(score[t, j]) =
    exp(A[x_t, x_j]) exp(R[x_t, t - j])`` with ``A = Q K^T / sqrt(e)`` and ``R[a, d] = Q_a . r_d /
    sqrt(e)``. The softmax sums per key type are then causal convolutions of the one-hot tokens::

        W[t, b] = exp(A[x_t, b]) N[x_t, t, b],   N[a, t, b] = sum_{j <= t, x_j = b} exp(R[a, t - j])

        out[t] = E[x_t] + sum_{h, b} (W_h[t, b] / sum_b' W_h[t, b']) U_h[b],   U_h = V_h W_O^h

    ``N`` is one Toeplitz matmul per (head, query type). The backward is written out: the
    gradient of ``exp(R)`` sums the Toeplitz gradient along its diagonals (a strided view of a
    zero-padded buffer), that of ``exp(A)`` is one matmul with the one-hot tokens. ``A`` and
    ``R`` are shifted by their row maxima first (the output does not depend on the shift).
    Raises :class:`ExponentUnderflow` when the ``j = t`` term, which bounds each sum from below,
    is below ``exp(-60)``.
    """

    @staticmethod
    def forward(ctx, tokens, E, ln_w, ln_b, Wq, Wk, Wv, Wo, r, heads: int, eps: float):
        """The layer's output ``(B T, w)`` for ``tokens`` ``(B, T)``, by the native C call when it applies,
        else from the ``C``-row tables (see the class); saves what ``backward`` needs."""
        B, T = tokens.shape
        C, w = E.shape
        nh, e = heads, w // heads
        ctx.heads, ctx.eps, ctx.r_shape = heads, eps, r.shape
        lib = _native_token_core(E)
        ctx.native = lib is not None
        if lib is not None:  # the whole layer in C: one call each way, the C-row tables recomputed by both
            tokens = tokens.contiguous().to(torch.int64)
            params = [t.contiguous() for t in (E, ln_w, ln_b, Wq, Wk, Wv, Wo, r)]
            out = torch.empty(B * T, w, dtype=E.dtype)
            Wf, G = (torch.empty(B * T, nh * C, dtype=E.dtype) for _ in range(2))
            Z = torch.empty(B * T, nh, dtype=E.dtype)
            _native_call(getattr(lib, "token_layer_forward" + native.SUFFIXES[E.dtype]), B, T, C, w, nh, tokens,
                         *params[:3], ctypes.c_double(eps), *params[3:], out, Wf, G, Z)
            ctx.save_for_backward(tokens, *params, Wf, G, Z)
            return out
        # Arrays indexed by position keep the batch innermost, (.., T, C, B): reductions over the
        # C types are then sums of long contiguous rows (PyTorch is slow along short inner dims).
        X, mean, rstd = torch.native_layer_norm(E, (w,), ln_w, ln_b, eps)  # (C, w)
        Wqkv = torch.cat([Wq * (1.0 / math.sqrt(e)), Wk, Wv])  # (3w, w)
        Q, K, V = (z.view(C, nh, e).transpose(0, 1) for z in (X @ Wqkv.t()).split(w, dim=1))  # (nh, C, e)
        rh = r[:T].view(T, nh, e).transpose(0, 1)  # (nh, T, e)
        A = Q @ K.transpose(1, 2)  # (nh, C, C)
        R = Q @ rh.transpose(1, 2)  # (nh, C, T)
        A = A - A.max(dim=-1, keepdim=True).values
        R = R - R.max(dim=-1, keepdim=True).values
        if float((A.diagonal(dim1=-2, dim2=-1) + R[..., 0]).min()) < -60.0:
            raise ExponentUnderflow
        eA, eR = A.exp_(), R.exp_()
        U = (V @ Wo.view(w, nh, e).permute(1, 2, 0)).reshape(nh * C, w)  # [(h, b)]: W_O^h v_{h, b}
        Tz = _causal_toeplitz(eR)  # (nh, C, T, T): [a, t, j] = exp(R[a, t - j])
        xT = tokens.t()  # (T, B)
        # (T, C, B) one-hot
        O = (xT.unsqueeze(1) == torch.arange(C, device=E.device).view(1, C, 1)).to(E.dtype).contiguous()
        N = (Tz.reshape(nh * C, T, T) @ O.view(T, C * B)).view(nh, C, T, C, B)  # [a, t, b, n]
        G = N.gather(1, xT.view(1, 1, T, 1, B).expand(nh, 1, T, C, B))[:, 0]  # (nh, T, C, B): a = x_t
        eAx = eA.transpose(1, 2)[:, :, xT].transpose(1, 2)  # (nh, T, C, B): exp(A[x_t, b])
        W = eAx * G
        Z = W.sum(2, keepdim=True)
        Wn = W / Z  # (nh, T, C, B): attention weight on key type b
        Wf = Wn.permute(3, 1, 0, 2).reshape(B * T, nh * C)  # rows (n, t)
        out = torch.addmm(E.index_select(0, tokens.reshape(-1)), Wf, U)  # (B T, w): E[x_t] + attention
        ctx.save_for_backward(tokens, E, ln_w, ln_b, X, mean, rstd, Wqkv, Q, K, V, rh, Wo, eA, eR, Wf, U,
                              O, G, eAx, Wn, Z)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, dout):
        """From ``dout`` ``(B T, w)``: the gradients of ``E, ln_w, ln_b, Wq, Wk, Wv, Wo, r`` (``None`` for
        ``tokens, heads, eps``), by the path the forward pass took."""
        if ctx.native:
            tokens, E, ln_w, ln_b, Wq, Wk, Wv, Wo, r, Wf, G, Z = ctx.saved_tensors
            B, T = tokens.shape
            C, w = E.shape
            grads = [torch.empty_like(t) for t in (E, ln_w, ln_b, Wq, Wk, Wv, Wo, r)]
            _native_call(getattr(_native_token_core(E), "token_layer_backward" + native.SUFFIXES[E.dtype]), B, T, C,
                         w, ctx.heads, r.shape[0], tokens, E, ln_w, ln_b, ctypes.c_double(ctx.eps), Wq, Wk, Wv, Wo,
                         r, Wf, G, Z, dout.contiguous(), *grads)
            return None, *grads, None, None
        (tokens, E, ln_w, ln_b, X, mean, rstd, Wqkv, Q, K, V, rh, Wo, eA, eR, Wf, U,
         O, G, eAx, Wn, Z) = ctx.saved_tensors
        B, T = tokens.shape
        C, w = E.shape
        nh = ctx.heads
        e = w // nh
        dout = dout.reshape(B * T, w)
        dU = (Wf.t() @ dout).view(nh, C, w)
        dWn = (U @ dout.t()).view(nh, C, B, T).permute(0, 3, 1, 2).contiguous()  # (nh, T, C, B); wide output GEMM
        Woh = Wo.view(w, nh, e).permute(1, 2, 0)  # (nh, e, w)
        dV = dU @ Woh.transpose(1, 2)  # (nh, C, e)
        dWo = (V.transpose(1, 2) @ dU).permute(2, 0, 1).reshape(w, w)
        dW = (dWn - (dWn * Wn).sum(2, keepdim=True)) / Z  # through W / sum_b W
        deA = torch.einsum("tan,htbn->hab", O, dW * G)  # (nh, C, C): sum over positions with x_t = a
        dN = (dW * eAx).unsqueeze(1) * O.transpose(0, 1).unsqueeze(2)  # (nh, C, T, C, B): [x_t = a] dG[t, b, n]
        dTz = _padded(nh * C, T, dtype=E.dtype, device=E.device)
        dTz[:, :T * T].view(nh * C, T, T).copy_(dN.reshape(nh * C, T, C * B) @ O.view(T, C * B).t())  # [a, t, j]
        # d exp(R)[a, d] = sum_t dTz[a, t, t - d]: flat index d T + u (T + 1) for u = t - d;
        # u > T-1-d lands in the zero pad
        deR = dTz.as_strided((nh * C, T, T), (2 * T * T, T, T + 1)).sum(-1).view(nh, C, T)
        dA, dR = deA * eA, deR * eR
        dQ = dA @ K + dR @ rh  # (nh, C, e)
        dK = dA.transpose(1, 2) @ Q
        drh = dR.transpose(1, 2) @ Q  # (nh, T, e)
        dQKV = torch.cat([z.transpose(0, 1).reshape(C, w) for z in (dQ, dK, dV)], dim=1)  # (C, 3w)
        dWqkv = dQKV.t() @ X
        dE, dln_w, dln_b = torch.ops.aten.native_layer_norm_backward(
            dQKV @ Wqkv, E, (w,), mean, rstd, ln_w, ln_b, [True, True, True])
        dE.index_add_(0, tokens.reshape(-1), dout)  # the residual E[x_t]
        dr = torch.zeros(ctx.r_shape, dtype=E.dtype, device=E.device)
        dr[:T] = drh.transpose(0, 1).reshape(T, w)
        dWq, dWk, dWv = dWqkv.split(w)
        return None, dE, dln_w, dln_b, dWq * (1.0 / math.sqrt(e)), dWk, dWv, dWo, dr, None, None


_I, _D, _P = ctypes.c_int, ctypes.c_double, ctypes.c_void_p
#: the entry points of csrc/token_attention.c and their argument types: the whole layer, and its core
#: alone (the per-type softmax sums; tests hold it to its definition)
_SIGNATURES = {"token_attention_forward": [_I] * 4 + [_P] * 6, "token_attention_backward": [_I] * 4 + [_P] * 8,
               "token_layer_forward": [_I] * 5 + [_P] * 4 + [_D] + [_P] * 9,
               "token_layer_backward": [_I] * 6 + [_P] * 4 + [_D] + [_P] * 17}


def _native_token_core(like: Tensor):
    """The C core when it applies: CPU, float32/64, one torch thread, built; else ``None``."""
    return native.load("token_attention", _SIGNATURES) if native.applies(like) else None


def _native_call(fn, *args) -> None:
    status = fn(*(a.data_ptr() if isinstance(a, Tensor) else a for a in args))
    if status == 1:
        raise ValueError("a token is outside 0..C-1, where C is the number of embedding rows")
    if status == 4:
        raise ExponentUnderflow
    if status:
        raise MemoryError(f"{fn.__name__} could not allocate its buffers (status {status})")


def _native_token_forward(lib, tokens: Tensor, eA: Tensor, eR: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The C core alone: ``Wf, G`` ``(B T, nh C)`` and ``Z`` ``(B T, nh)`` from ``exp(A)``, ``exp(R)``."""
    B, T = tokens.shape
    nh, C, _ = eA.shape
    Wf, G = (torch.empty(B * T, nh * C, dtype=eA.dtype) for _ in range(2))
    Z = torch.empty(B * T, nh, dtype=eA.dtype)
    _native_call(getattr(lib, "token_attention_forward" + native.SUFFIXES[eA.dtype]), B, T, C, nh,
                 tokens.contiguous().to(torch.int64), eA.contiguous(), eR.contiguous(), Wf, G, Z)
    return Wf, G, Z


def _native_token_backward(lib, tokens, eA, Wf, G, Z, dWf) -> tuple[Tensor, Tensor]:
    """The C core's backward alone: the gradients of ``exp(A)`` and ``exp(R)`` from that of ``Wf``."""
    B, T = tokens.shape
    nh, C, _ = eA.shape
    deA, deR = torch.empty_like(eA), torch.empty(nh, C, T, dtype=eA.dtype)
    _native_call(getattr(lib, "token_attention_backward" + native.SUFFIXES[eA.dtype]), B, T, C, nh,
                 tokens.contiguous().to(torch.int64), eA.contiguous(), Wf, G, Z, dWf.contiguous(), deA, deR)
    return deA, deR


def _causal_toeplitz(kernel: Tensor) -> Tensor:
    """``(..., T)`` -> ``(..., T, T)``, ``out[..., t, j] = kernel[..., t - j]`` for ``j <= t``, else 0:
    the length-``T`` windows of ``[reversed kernel, 0 ... 0]`` (a Hankel matrix), flipped in ``t``."""
    T = kernel.shape[-1]
    padded = torch.cat([kernel.flip(-1), kernel.new_zeros(*kernel.shape[:-1], T - 1)], dim=-1)
    return padded.unfold(-1, T, 1).flip(-2)


def _padded(n: int, T: int, dtype, device) -> Tensor:
    """A fresh ``(n, 2 T^2)`` buffer whose second half is zero (the first is overwritten by the caller)."""
    buf = torch.empty(n, 2 * T * T, dtype=dtype, device=device)
    buf[:, T * T:].zero_()
    return buf
