"""Hand-written forward and backward passes for two pieces of :class:`sim.models.markov_lm.MarkovLM`,
each one autograd node instead of a dozen or more (the model's training step at Edelman et
al.'s sizes is dominated by per-operation overhead, not arithmetic):

* :class:`AttentionSublayer`: the pre-LayerNorm relative-position attention sublayer with its
  residual, ``h + W_O Att(LN(h))``;
* :class:`LogitLoss`: the final LayerNorm, the unembedding and the mean cross-entropy,
  ``mean_i -log softmax(U LN(h_i))[y_i]``.

Both compute the same function as the plain autograd modules (tested in float64 against them,
values and every parameter's gradient, in ``tests/sim/models``). Their backward passes call
PyTorch's own LayerNorm backward kernel and write the gradients of ``q, k, v`` straight into
one buffer, so the three projection gradients are one matmul. Like
:class:`sim.models.relative_attention.RelativeAttention` they are ``once_differentiable``.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from .relative_attention import attention_backward, attention_forward, offsets_gradient, reversed_offsets

__all__ = ["AttentionSublayer", "LogitLoss"]


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
    The attention is that of :mod:`sim.models.relative_attention` with ``q = LN(h) W_q^T / sqrt(e)``.
    """

    @staticmethod
    def forward(ctx, h, ln_w, ln_b, Wq, Wk, Wv, Wo, r, heads: int, eps: float):
        B, T, w = h.shape
        nh, e = heads, w // heads
        x, mean, rstd = torch.native_layer_norm(h, (w,), ln_w, ln_b, eps)
        Wqkv = torch.cat([Wq * (1.0 / math.sqrt(e)), Wk, Wv])  # (3w, w)
        qkv = torch.mm(x.view(B * T, w), Wqkv.t()).view(B, T, 3, nh, e)
        q, k, v = (_heads(qkv[:, :, i], B, T, nh, e) for i in range(3))
        rrev = reversed_offsets(r.view(r.shape[0], nh, e), T)
        y, patterns = attention_forward(q, k, v, rrev)  # (B nh, T, e)
        y2 = _merge_heads(y, B, T, nh, e)
        out = torch.addmm(h.view(B * T, w), y2, Wo.t()).view(B, T, w)
        ctx.save_for_backward(h, x, mean, rstd, ln_w, ln_b, Wqkv, Wo, qkv, y, y2, rrev, *patterns)
        ctx.shape = (B, T, w, nh, e, r.shape)
        return out

    @staticmethod
    @once_differentiable  # the attention backward writes into reused buffers
    def backward(ctx, dout):
        h, x, mean, rstd, ln_w, ln_b, Wqkv, Wo, qkv, y, y2, rrev, *patterns = ctx.saved_tensors
        B, T, w, nh, e, r_shape = ctx.shape
        dout2 = dout.reshape(B * T, w)
        dWo = dout2.t() @ y2
        dy = dout2 @ Wo  # (B T, w): gradient of the heads' outputs, concatenated
        dy = dy.view(B, T, e) if nh == 1 else dy.view(B, T, nh, e).transpose(1, 2).reshape(B * nh, T, e)
        q, k, v = (_heads(qkv[:, :, i], B, T, nh, e) for i in range(3))
        dqkv = torch.empty(B, T, 3, nh, e, dtype=h.dtype, device=h.device)
        if nh == 1:  # the attention writes into views of one buffer
            drrev = attention_backward(q, k, v, rrev, y, patterns, dy, *(dqkv[:, :, i, 0] for i in range(3)))
        else:
            grads = [torch.empty(B * nh, T, e, dtype=h.dtype, device=h.device) for _ in range(3)]
            drrev = attention_backward(q, k, v, rrev, y, patterns, dy, *grads)
            for i, g in enumerate(grads):
                dqkv[:, :, i] = g.view(B, nh, T, e).transpose(1, 2)
        dqkv2 = dqkv.view(B * T, 3 * w)
        dWqkv = dqkv2.t() @ x.view(B * T, w)  # (3w, w)
        dx = (dqkv2 @ Wqkv).view(B, T, w)
        dh, dln_w, dln_b = torch.ops.aten.native_layer_norm_backward(
            dx, h, (w,), mean, rstd, ln_w, ln_b, [True, True, True])
        dh += dout
        dWq, dWk, dWv = dWqkv.split(w)
        dr = offsets_gradient(drrev, (r_shape[0], nh, e)).view(r_shape)
        return dh, dln_w, dln_b, dWq * (1.0 / math.sqrt(e)), dWk, dWv, dWo, dr, None, None


class LogitLoss(torch.autograd.Function):
    """``LogitLoss.apply(h, ln_w, ln_b, U, targets, eps) -> mean_i -log softmax(U LN(h_i))[targets_i]``.

    ``h`` ``(N, w)``, ``U`` ``(C, w)`` (the unembedding, no bias), ``targets`` ``(N,)`` in ``0..C-1``:
    ``F.cross_entropy(F.linear(F.layer_norm(h, ...), U), targets)`` in one node.
    """

    @staticmethod
    def forward(ctx, h, ln_w, ln_b, U, targets, eps: float):
        N, w = h.shape
        x, mean, rstd = torch.native_layer_norm(h, (w,), ln_w, ln_b, eps)
        logp = torch.log_softmax(x @ U.t(), dim=-1)  # (N, C)
        loss = -logp.gather(1, targets.view(N, 1)).sum() / N
        ctx.save_for_backward(h, x, mean, rstd, ln_w, ln_b, U, logp, targets)
        ctx.eps = eps
        return loss

    @staticmethod
    @once_differentiable
    def backward(ctx, dloss):
        h, x, mean, rstd, ln_w, ln_b, U, logp, targets = ctx.saved_tensors
        N, w = h.shape
        dlogits = logp.exp()  # softmax
        dlogits.scatter_add_(1, targets.view(N, 1), torch.full((N, 1), -1.0, dtype=h.dtype, device=h.device))
        dlogits *= dloss / N
        dU = dlogits.t() @ x
        dh, dln_w, dln_b = torch.ops.aten.native_layer_norm_backward(
            dlogits @ U, h, (w,), mean, rstd, ln_w, ln_b, [True, True, True])
        return dh, dln_w, dln_b, dU, None, None
