"""W's two-layer disentangled transformer (Wei, Chen, He & Yang, ICLR 2026, sections 3-4).

Prompt and indices (0-based here; W writes ``l in [L+1]``, ``h in [H]``)
--------------------------------------------------------------------------
``tokens[b, l, h]``, shape ``(B, L+1, H)``, int64 in ``0..d-1``: examples ``l = 0..L-1``
are the context, example ``l = L`` is the target ``x^{L+1}``. The model predicts
``x^{L+1}_h`` for ``h = 1..H-1`` (position 0 has no candidate parent); ``forward``
returns log-probabilities of shape ``(B, H-1, d)`` whose row ``h-1`` is the prediction
for position ``h``.

Layer 1: K relative-position heads (the "copier")
-------------------------------------------------
For the query at target position ``(L, h)`` and a key at context position ``(l_j, h_j)``
head ``k`` scores

    s^k(h; l_j, h_j) = w_H[k, h - h_j + H - 1] + w_L[k, l_j],

i.e. column ``H - 1`` of ``w_H`` is the offset 0 (W's ``w^H[0]``) and column ``o + H - 1``
the offset ``o = h - h_j``. The softmax runs over the ``L*H`` *context* positions only
(flattened as ``n = l_j * H + h_j``), never over target tokens, so the token being
predicted cannot reach its own prediction (CLAIMS W.T1). W writes ``w^L in R^L`` as a
function ``w^L(L+1, l_j)`` of the key's example only, because the query is always in
example ``L+1``; ``w_L[k, l]`` is that reading. Only the target positions' layer-1 outputs
enter layer 2, so only those are computed: scores of shape ``(B, K, H, L*H)``; they do not
depend on the tokens (the batch axis of the hook is a broadcast view). The output is
``u^k_h = sum_n A^k[h, n] onehot(x_n)`` in ``R^d``.

Disentangled residual and layer 2
---------------------------------
``z_h = [x^{L+1}_h, u^0_h, ..., u^{K-1}_h]`` in ``R^{(K+1) d}``; ``v_h = [u^0_h, ..., u^{K-1}_h]``
(head-major: ``v_h[k*d + s] = u^k_h[s]``). One bilinear head, query ``h``, keys ``h' < h``:

    score(h, h') = v_{h'}^T W_KQ v_h,      A(h, .) = softmax_{h' < h} score(h, h'),

which is W's block-sparse ``W_KQ`` (the ``x``-block is zero by construction: only the
``(K d, K d)`` block is a parameter, so ``x^{L+1}_h`` never enters its own score).
Keys sit on the left, as ``log pi[parent, child]`` does: with ``W_KQ = blockdiag(log pi)``
and exact copying, ``score(h, h') = sum_l log pi[x^l_{h'}, x^l_h]`` (W Lemma 1's logit).

Output (``W_OV`` acts on the ``x``-block of the keys, row convention ``e_x^T W_OV``):

- ``"mixture"`` (default): ``f_h = sum_{h'} A(h, h') softmax(W_OV)[x^{L+1}_{h'}, :]``, the
  mixture in W's pseudo-code; with ``softmax(W_OV) = pi`` it is the BMA predictive.
- ``"logits"``: ``f_h = softmax( sum_{h'} A(h, h') W_OV[x^{L+1}_{h'}, :] )``, W's formula
  ``sigma(z^T W_KQ z)^T z^T W_OV`` read as logits followed by a softmax.

:class:`WeiContinuous` is the same architecture on real vectors (W section 8, Prop 2).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sim.models.hooks import HookPoint

__all__ = ["WeiTransformer", "WeiAbsolute", "WeiContinuous", "wei_construction", "OUTPUTS"]

OUTPUTS = ("mixture", "logits")


# ------------------------------------------------------------------------ shared pieces --
def _check_layer_params(w_H: Tensor, w_L: Tensor, W_KQ: Tensor) -> tuple[int, int, int]:
    """Return ``(K, L, H)`` after checking the shapes of the two layers' parameters."""
    if w_H.ndim != 2 or w_H.shape[1] % 2 == 0:
        raise ValueError(f"w_H must have shape (K, 2H-1), got {tuple(w_H.shape)}")
    K, H = w_H.shape[0], (w_H.shape[1] + 1) // 2
    if w_L.ndim != 2 or w_L.shape[0] != K:
        raise ValueError(f"w_L must have shape (K={K}, L), got {tuple(w_L.shape)}")
    L = w_L.shape[1]
    if W_KQ.ndim != 2 or W_KQ.shape[0] != W_KQ.shape[1] or W_KQ.shape[0] % K:
        raise ValueError(f"W_KQ must have shape (K d, K d) with K={K}, got {tuple(W_KQ.shape)}")
    return K, L, H


def _layer1_scores(w_H: Tensor, w_L: Tensor, H: int) -> Tensor:
    """RPE scores of the target's queries ``h = 0..H-1`` over the ``L*H`` context keys, ``(K, H, L*H)``."""
    K, L = w_L.shape
    H_max = (w_H.shape[1] + 1) // 2
    pos = torch.arange(H, device=w_H.device)
    offset = pos[:, None] - pos[None, :] + H_max - 1  # (H, H) [h, h_j] -> column of w_H
    s_H = w_H[:, offset]  # (K, H, H)  [k, h, h_j]
    s = s_H[:, :, None, :] + w_L[:, None, :, None]  # (K, H, L, H)  [k, h, l_j, h_j]
    return s.reshape(K, H, L * H)  # (K, H, L*H), key n = l_j * H + h_j


def _layer2_scores(v: Tensor, W_KQ: Tensor) -> Tensor:
    """``scores[b, h, h'] = v_{h'}^T W_KQ v_h`` with keys ``h' < h`` only (others ``-inf``), ``(B, H, H)``."""
    H = v.shape[1]
    Wv = v @ W_KQ.T  # (B, H, Kd): Wv[b, h] = W_KQ v_h
    scores = Wv @ v.transpose(1, 2)  # (B, H, H): [b, h, h'] = v_h'^T W_KQ v_h
    earlier = torch.ones(H, H, dtype=torch.bool, device=v.device).tril(diagonal=-1)  # (H, H) h' < h
    return scores.masked_fill(~earlier, float("-inf"))  # (B, H, H)


def _layer2_pattern(scores: Tensor) -> Tensor:
    """Row-softmax of masked scores; row 0 (no candidate) is all zeros, ``(B, H, H)``."""
    B, H, _ = scores.shape
    rest = torch.softmax(scores[:, 1:, :], dim=-1)  # (B, H-1, H), rows h = 1..H-1
    return torch.cat([rest.new_zeros(B, 1, H), rest], dim=1)  # (B, H, H)


def _layer2_rows(v: Tensor, W_KQ: Tensor) -> Tensor:
    """Rows ``h = 1..H-1`` of :func:`_layer2_pattern` of :func:`_layer2_scores`, ``(B, H-1, H)``, computed
    without row 0 (it has no candidate parent): what the output reads when no hook looks at layer 2."""
    H = v.shape[1]
    Wv = v[:, 1:] @ W_KQ.T  # (B, H-1, Kd): queries h = 1..H-1
    scores = Wv @ v.transpose(1, 2)  # (B, H-1, H): [b, h-1, h'] = v_h'^T W_KQ v_h
    later = torch.ones(H - 1, H, dtype=torch.bool, device=v.device).triu(diagonal=1)  # (H-1, H): h' >= h
    return torch.softmax(scores.masked_fill(later, float("-inf")), dim=-1)  # (B, H-1, H)


def _hooked(point) -> bool:
    """Whether a hook point edits or caches what flows through it (else the model may skip building it)."""
    return point.hook_fn is not None or point.caching


def _hook_group(*names: str) -> nn.ModuleDict:
    return nn.ModuleDict({n: HookPoint() for n in names})


class _WeiLayers(nn.Module):
    """The two attention layers and the layer-2 parameters, whatever layer 1's position scores are
    (a subclass's ``_layer1_scores``): W's RPE (:class:`_WeiBase`) or absolute positions
    (:class:`WeiAbsolute`)."""

    def __init__(self, layer1: dict[str, Tensor], L: int, H: int, W_KQ: Tensor, W_OV: Tensor):
        super().__init__()
        K = next(iter(layer1.values())).shape[0]
        if W_KQ.ndim != 2 or W_KQ.shape[0] != W_KQ.shape[1] or W_KQ.shape[0] % K:
            raise ValueError(f"W_KQ must have shape (K d, K d) with K={K}, got {tuple(W_KQ.shape)}")
        d = W_KQ.shape[0] // K
        if W_OV.shape != (d, d):
            raise ValueError(f"W_OV must have shape (d, d) = ({d}, {d}), got {tuple(W_OV.shape)}")
        self.d, self.L, self.H, self.K = d, L, H, K
        for name, value in layer1.items():  # layer 1's position scores, registered first
            setattr(self, name, nn.Parameter(value.detach().clone()))
        self.W_KQ = nn.Parameter(W_KQ.detach().clone())  # (K d, K d), head-major blocks
        self.W_OV = nn.Parameter(W_OV.detach().clone())  # (d, d)
        self.layer1 = _hook_group("scores", "pattern")
        self.layer2 = _hook_group("scores", "pattern")

    def _attend(self, cols: Tensor) -> Tensor:
        """Both attention layers on the context features ``cols`` ``(L*H, B*d)``, position-major (row
        ``n = l*H + h``, column ``b*d + s``: prompt ``b``'s feature ``s``); returns the layer-2 pattern's
        rows ``h = 1..H-1`` (the ones with a candidate parent), ``(B, H-1, H)``."""
        H, K, d, L = self.H, self.K, self.d, self.L
        B = cols.shape[1] // d
        s1 = self._layer1_scores()  # (K, H, L*H)
        edited = self.layer1["scores"].hook_fn is not None or self.layer1["pattern"].hook_fn is not None
        s1b = self.layer1["scores"](s1.unsqueeze(0).expand(B, -1, -1, -1))  # (B, K, H, L*H), a view
        if edited:  # a hook may make the pattern differ per prompt: the general (batched) product
            a1 = self.layer1["pattern"](torch.softmax(s1b, dim=-1))  # (B, K, H, L*H)
            ctx = cols.reshape(L * H, B, d).transpose(0, 1)  # (B, L*H, d)
            u = a1 @ ctx.unsqueeze(1)  # (B, K, H, d): u[b, k, h] = sum_n a1[b, k, h, n] ctx[b, n]
            v = u.permute(0, 2, 1, 3).reshape(B, H, K * d)  # (B, H, K*d), head-major
        else:
            # Layer 1's scores do not depend on the tokens: one softmax on (K, H, L*H), not B copies
            # of the pattern, and one GEMM (H*K, L*H) x (L*H, B*d) with the batch in its columns,
            # several times faster than B small products of (L*H, d).
            a1 = torch.softmax(s1, dim=-1)  # (K, H, L*H)
            self.layer1["pattern"](a1.unsqueeze(0).expand(B, -1, -1, -1))  # caching sees (B, K, H, L*H)
            u = a1.transpose(0, 1).reshape(H * K, L * H) @ cols  # (H*K, B*d): [h*K + k, b*d + s]
            v = u.reshape(H, K, B, d).permute(2, 0, 1, 3).reshape(B, H, K * d)  # (B, H, K*d), head-major
        if not (_hooked(self.layer2["scores"]) or _hooked(self.layer2["pattern"])):
            return _layer2_rows(v, self.W_KQ)  # (B, H-1, H)
        s2 = self.layer2["scores"](_layer2_scores(v, self.W_KQ))  # (B, H, H)
        return self.layer2["pattern"](_layer2_pattern(s2))[:, 1:]  # (B, H-1, H)

    def _layer1_scores(self) -> Tensor:
        """Layer 1's scores of the target's queries over the context keys, ``(K, H, L*H)``."""
        raise NotImplementedError

    def extra_repr(self) -> str:
        return f"d={self.d}, L={self.L}, H={self.H}, K={self.K}"


class _WeiBase(_WeiLayers):
    """W's layer 1: the RPE scores ``w_H[k, h - h_j + H - 1] + w_L[k, l_j]`` (the module docstring)."""

    def __init__(self, w_H: Tensor, w_L: Tensor, W_KQ: Tensor, W_OV: Tensor):
        K, L, H = _check_layer_params(w_H, w_L, W_KQ)
        # (K, 2H-1) with column H-1 = offset 0, and (K, L)
        super().__init__({"w_H": w_H, "w_L": w_L}, L, H, W_KQ, W_OV)

    def _layer1_scores(self) -> Tensor:
        """W's RPE scores of the target's queries over the context keys, ``(K, H, L*H)``."""
        return _layer1_scores(self.w_H, self.w_L, self.H)


def _normal(shape, generator: torch.Generator, dtype) -> Tensor:
    return torch.randn(shape, generator=generator, device=generator.device, dtype=dtype)


# ---------------------------------------------------------------------- discrete model --
class WeiTransformer(_WeiBase):
    """W's two-layer disentangled transformer on one-hot tokens (W sections 3-4).

    Parameters
    ----------
    w_H : Tensor, shape (K, 2H-1)
        Inner-example relative-position scores; column ``o + H - 1`` is offset ``o = h - h_j``.
    w_L : Tensor, shape (K, L)
        Cross-example scores of the key's example ``l_j`` (query is always the target).
    W_KQ : Tensor, shape (K d, K d)
        Layer-2 bilinear form on ``v = [u^0..u^{K-1}]`` (head-major blocks).
    W_OV : Tensor, shape (d, d)
        Layer-2 output map on the key's token ``x^{L+1}_{h'}`` (row ``x`` is read).
    output : {"mixture", "logits"}
        See the module docstring.

    ``forward(tokens)`` with ``tokens`` ``(B, L+1, H)`` int64 returns log-probabilities
    ``(B, H-1, d)`` for ``x^{L+1}_{1..H-1}``. Hook points: ``layer1.scores``,
    ``layer1.pattern`` ``(B, K, H, L*H)``; ``layer2.scores``, ``layer2.pattern`` ``(B, H, H)``
    (strictly lower-triangular; row 0 has scores ``-inf`` and pattern 0).
    """

    def __init__(self, w_H: Tensor, w_L: Tensor, W_KQ: Tensor, W_OV: Tensor, output: str = "mixture"):
        super().__init__(w_H, w_L, W_KQ, W_OV)
        if output not in OUTPUTS:
            raise ValueError(f"output must be one of {OUTPUTS}, got {output!r}")
        self.output = output

    @classmethod
    def init(cls, d: int, L: int, H: int, K: int | None = None, *, generator: torch.Generator,
             scale: float = 0.02, wH0: float = 0.0, output: str = "mixture",
             dtype: torch.dtype = torch.float32) -> "WeiTransformer":
        """Random initialisation: every entry ``N(0, scale^2)`` from ``generator`` (on its device).

        ``K`` defaults to ``L`` (one copier head per example, W section 9). ``wH0`` is added to
        the offset-0 column of ``w_H`` of every head: W's implementation note (seed 000
        section 9) says that entry should start well above the others; ``0`` is a plain init.
        """
        K = L if K is None else K
        if min(d, L, H, K) < 1 or H < 2:
            raise ValueError(f"need d, L, K >= 1 and H >= 2, got d={d}, L={L}, H={H}, K={K}")
        w_H = _normal((K, 2 * H - 1), generator, dtype) * scale  # (K, 2H-1)
        w_H[:, H - 1] += wH0
        w_L = _normal((K, L), generator, dtype) * scale  # (K, L)
        W_KQ = _normal((K * d, K * d), generator, dtype) * scale  # (Kd, Kd)
        W_OV = _normal((d, d), generator, dtype) * scale  # (d, d)
        return cls(w_H, w_L, W_KQ, W_OV, output=output)

    def _check_tokens(self, tokens: Tensor) -> None:
        if tokens.ndim != 3 or tokens.shape[1] != self.L + 1 or tokens.shape[2] != self.H:
            raise ValueError(f"tokens must have shape (B, L+1={self.L + 1}, H={self.H}), got {tuple(tokens.shape)}")
        if tokens.dtype != torch.int64:
            raise ValueError(f"tokens must be integer (int64), got {tokens.dtype}")

    def _one_hot_context(self, tokens: Tensor) -> Tensor:
        """The context examples' one-hot tokens, position-major, ``(L*H, B*d)``: row ``n = l*H + h``,
        column ``b*d + s`` is ``[x^l_h = s]`` of prompt ``b`` (built in that layout: no transposed copy)."""
        B, L, H, d = tokens.shape[0], self.L, self.H, self.d
        idx = tokens[:, :L, :].reshape(B, L * H).T.unsqueeze(-1)  # (L*H, B, 1)
        hot = torch.zeros(L * H, B, d, dtype=self.W_OV.dtype, device=tokens.device).scatter(2, idx, 1.0)
        return hot.reshape(L * H, B * d)  # (L*H, B*d)

    def _mixture(self, tokens: Tensor) -> Tensor:
        """``f_h = sum_{h'} A(h, h') row_{x_h'}(P)`` for ``h = 1..H-1``, ``(B, H-1, d)``: ``P = softmax(W_OV)``
        (``"mixture"``), or the logits with ``P = W_OV`` (``"logits"``)."""
        self._check_tokens(tokens)
        A = self._attend(self._one_hot_context(tokens))  # (B, H-1, H): rows h = 1..H-1, keys h' < h
        P = torch.softmax(self.W_OV, dim=-1) if self.output == "mixture" else self.W_OV  # (d, d)
        return A @ P[tokens[:, self.L, :]]  # (B, H-1, d): sum_h' A[h, h'] P[x_h', :]

    def forward(self, tokens: Tensor) -> Tensor:
        """Log-probabilities ``(B, H-1, d)`` of ``x^{L+1}_{1..H-1}`` for ``tokens`` ``(B, L+1, H)``."""
        f = self._mixture(tokens)  # (B, H-1, d)
        return torch.log(f) if self.output == "mixture" else torch.log_softmax(f, dim=-1)  # (B, H-1, d)

    def loss(self, tokens: Tensor) -> Tensor:
        """Mean cross-entropy of the predictions for ``x^{L+1}_{1..H-1}`` (nats); with the mixture output
        the log is taken of the targets' probabilities only."""
        target = tokens[:, self.L, 1:].unsqueeze(-1)  # (B, H-1, 1)
        if self.output == "mixture":
            return -torch.log(self._mixture(tokens).gather(-1, target)).mean()
        return -self(tokens).gather(-1, target).mean()


class WeiAbsolute(WeiTransformer):
    """W's discrete model with absolute positional encodings in layer 1 instead of the RPE (W Appendix G;
    claim W.E4); layer 2 and the output as :class:`WeiTransformer`.

    How the positions enter (the seed leaves it open; this is the choice made here): every position
    ``(l, h)`` is encoded by its example index and its position in the example, one-hot and
    concatenated, ``p(l, h) = [e_l; e_h]`` in ``R^{(L+1) + H}``, and head ``k`` scores a key against the
    target's query bilinearly, ``s^k(h; l_j, h_j) = p(L, h)^T M^k p(l_j, h_j)``. The query is always
    in the target example ``L``, so the form reduces exactly to two tables,

        s^k(h; l_j, h_j) = w_pos[k, h, h_j] + w_ex[k, h, l_j],

    ``w_pos = M_hh + 1 M_(L,h)`` (query position x key position) and ``w_ex = M_hl + 1 M_(L,l)``
    (query position x key example): every function of the absolute positions that such a form can
    express, and no parameter it cannot reach. W's RPE is the special case ``w_pos[k, h, h_j] =
    w_H[k, h - h_j + H - 1]``, ``w_ex[k, h, l] = w_L[k, l]`` (:meth:`from_relative`), so the two
    models share their layers, hooks and outputs and differ only in how layer 1 sees positions.

    Parameters
    ----------
    w_pos : Tensor, shape (K, H, H)
        ``[k, h, h_j]``: head ``k``'s score of key position ``h_j`` for the query at target position ``h``.
    w_ex : Tensor, shape (K, H, L)
        ``[k, h, l_j]``: head ``k``'s score of key example ``l_j`` for the query at target position ``h``.
    W_KQ, W_OV, output
        As :class:`WeiTransformer`.
    """

    def __init__(self, w_pos: Tensor, w_ex: Tensor, W_KQ: Tensor, W_OV: Tensor, output: str = "mixture"):
        if w_pos.ndim != 3 or w_pos.shape[1] != w_pos.shape[2] or w_pos.shape[1] < 2:
            raise ValueError(f"w_pos must have shape (K, H, H) with H >= 2, got {tuple(w_pos.shape)}")
        K, H = w_pos.shape[0], w_pos.shape[1]
        if w_ex.ndim != 3 or w_ex.shape[:2] != (K, H) or w_ex.shape[2] < 1:
            raise ValueError(f"w_ex must have shape (K={K}, H={H}, L), got {tuple(w_ex.shape)}")
        if output not in OUTPUTS:
            raise ValueError(f"output must be one of {OUTPUTS}, got {output!r}")
        # The shared layers, with the absolute tables in place of the RPE (WeiTransformer's own
        # constructor takes w_H and w_L).
        _WeiLayers.__init__(self, {"w_pos": w_pos, "w_ex": w_ex}, w_ex.shape[2], H, W_KQ, W_OV)
        self.output = output

    @classmethod
    def init(cls, d: int, L: int, H: int, K: int | None = None, *, generator: torch.Generator,
             scale: float = 0.02, wH0: float = 0.0, output: str = "mixture",
             dtype: torch.dtype = torch.float32) -> "WeiAbsolute":
        """Random initialisation: every entry ``N(0, scale^2)`` from ``generator`` (on its device).

        ``K`` defaults to ``L``. ``wH0`` is added to the same-position entries ``w_pos[k, h, h]``:
        the absolute-position counterpart of W's note that the offset-0 entry of ``w^H`` starts well
        above the others (seed 000 section 9), giving the same initial layer-1 pattern as
        :meth:`WeiTransformer.init` up to the noise.
        """
        K = L if K is None else K
        if min(d, L, H, K) < 1 or H < 2:
            raise ValueError(f"need d, L, K >= 1 and H >= 2, got d={d}, L={L}, H={H}, K={K}")
        w_pos = _normal((K, H, H), generator, dtype) * scale  # (K, H, H)
        w_pos.diagonal(dim1=1, dim2=2).add_(wH0)
        w_ex = _normal((K, H, L), generator, dtype) * scale  # (K, H, L)
        W_KQ = _normal((K * d, K * d), generator, dtype) * scale  # (Kd, Kd)
        W_OV = _normal((d, d), generator, dtype) * scale  # (d, d)
        return cls(w_pos, w_ex, W_KQ, W_OV, output=output)

    @classmethod
    def from_relative(cls, model: WeiTransformer) -> "WeiAbsolute":
        """The absolute-position model whose layer 1 scores exactly as ``model``'s RPE does (same
        ``W_KQ``, ``W_OV`` and output): ``w_pos[k, h, h_j] = w_H[k, h - h_j + H - 1]``,
        ``w_ex[k, h, l] = w_L[k, l]``."""
        H, L = model.H, model.L
        pos = torch.arange(H, device=model.w_H.device)
        w_pos = model.w_H.detach()[:, pos[:, None] - pos[None, :] + H - 1]  # (K, H, H)
        w_ex = model.w_L.detach()[:, None, :].expand(-1, H, -1)  # (K, H, L)
        return cls(w_pos, w_ex, model.W_KQ.detach(), model.W_OV.detach(), output=model.output)

    def _layer1_scores(self) -> Tensor:
        """Absolute-position scores of the target's queries over the context keys, ``(K, H, L*H)``."""
        K, H, L = self.K, self.H, self.L
        s = self.w_pos[:, :, None, :] + self.w_ex[:, :, :, None]  # (K, H, L, H)  [k, h, l_j, h_j]
        return s.reshape(K, H, L * H)  # (K, H, L*H), key n = l_j * H + h_j


def wei_construction(pi, L: int, H: int, beta: float, *, output: str = "mixture",
                     dtype: torch.dtype = torch.float32, device=None) -> WeiTransformer:
    """W Theorem 1's parameters: layer-2 attention -> BMA posterior as ``beta -> inf``.

    - ``K = L`` heads; ``w_H[k, H-1] = +beta`` (offset 0), every other offset ``-beta``;
    - ``w_L[k, l] = +beta`` if ``l == k`` else ``-beta`` (head ``k`` copies example ``k``);
    - ``W_KQ = blockdiag(log pi, ..., log pi)``, so with exact copies
      ``score(h, h') = sum_l log pi[x^l_{h'}, x^l_h]`` (W Lemma 1);
    - ``W_OV = log pi``, so ``softmax(W_OV) = pi`` row-wise.

    Head ``k``'s copy of ``x^k_h`` has weight ``e^{2 beta} / (e^{2 beta} + (L+H-2) + (L-1)(H-1) e^{-2 beta})``,
    so the layer-2 scores approach W's logits at rate ``O((L+H) e^{-2 beta})``.

    Parameters
    ----------
    pi : array_like, shape (d, d), row-stochastic with every entry ``> 0``
    L, H : int
    beta : float

    Raises
    ------
    ValueError
        If ``pi`` has a zero entry (``log pi = -inf``); the message names it. A
        non-stochastic ``pi`` raises ``theory.TheoryError`` (a ``ValueError``).
    """
    from theory import validate_stochastic

    pi_np = validate_stochastic(pi.detach().cpu().numpy() if isinstance(pi, Tensor) else pi)
    zeros = np.argwhere(pi_np <= 0)
    if zeros.size:
        r, c = zeros[0]
        raise ValueError(f"pi[{r}, {c}] = {pi_np[r, c]}: W's construction uses log pi (W_KQ blocks and W_OV), "
                         "which needs every entry of pi > 0")
    if L < 1 or H < 2:
        raise ValueError(f"need L >= 1 and H >= 2, got L={L}, H={H}")
    log_pi = torch.as_tensor(np.log(pi_np), dtype=dtype, device=device)  # (d, d)
    w_H = torch.full((L, 2 * H - 1), -float(beta), dtype=dtype, device=device)  # (K, 2H-1)
    w_H[:, H - 1] = float(beta)
    w_L = torch.full((L, L), -float(beta), dtype=dtype, device=device)  # (K, L)
    w_L.fill_diagonal_(float(beta))
    W_KQ = torch.block_diag(*([log_pi] * L))  # (L d, L d)
    return WeiTransformer(w_H, w_L, W_KQ, log_pi.clone(), output=output)


# --------------------------------------------------------------------- continuous model --
class WeiContinuous(_WeiBase):
    """W's architecture on real vectors (W section 8, Proposition 2), for claim W.P2.

    Inputs ``x`` ``(B, L+1, H, d)`` float: context examples ``0..L-1``, target ``L``.
    Layer 1 is the same RPE copier (it copies vectors: ``u^k_h = sum_n A^k[h, n] x_n``),
    layer 2 the same bilinear head ``v_{h'}^T W_KQ v_h`` over keys ``h' < h``; the output
    is the regression ``pred_h = sum_{h'} A(h, h') x^{L+1}_{h'}^T W_OV`` (row convention,
    as the discrete ``e_x^T softmax(W_OV)``: for ``x_h = rho A^T x_pa(h) + noise`` the
    matching map is ``W_OV = rho A``). ``forward`` returns ``(B, H-1, d)`` predictions for
    ``x^{L+1}_{1..H-1}``; ``loss`` is the mean squared error over batch, positions and
    coordinates (``F.mse_loss``). Hook points as in :class:`WeiTransformer`.
    """

    @classmethod
    def init(cls, d: int, L: int, H: int, K: int | None = None, *, generator: torch.Generator,
             scale: float = 0.02, wH0: float = 0.0, dtype: torch.dtype = torch.float32) -> "WeiContinuous":
        """Random initialisation as :meth:`WeiTransformer.init`."""
        K = L if K is None else K
        if min(d, L, H, K) < 1 or H < 2:
            raise ValueError(f"need d, L, K >= 1 and H >= 2, got d={d}, L={L}, H={H}, K={K}")
        w_H = _normal((K, 2 * H - 1), generator, dtype) * scale  # (K, 2H-1)
        w_H[:, H - 1] += wH0
        w_L = _normal((K, L), generator, dtype) * scale  # (K, L)
        W_KQ = _normal((K * d, K * d), generator, dtype) * scale  # (Kd, Kd)
        W_OV = _normal((d, d), generator, dtype) * scale  # (d, d)
        return cls(w_H, w_L, W_KQ, W_OV)

    def forward(self, x: Tensor) -> Tensor:
        """Predictions ``(B, H-1, d)`` of ``x^{L+1}_{1..H-1}`` for ``x`` ``(B, L+1, H, d)``."""
        if x.ndim != 4 or x.shape[1:] != (self.L + 1, self.H, self.d):
            raise ValueError(f"x must have shape (B, L+1={self.L + 1}, H={self.H}, d={self.d}), got {tuple(x.shape)}")
        B, L = x.shape[0], self.L
        cols = x[:, :L].reshape(B, L * self.H, self.d).transpose(0, 1).reshape(L * self.H, B * self.d)  # (L*H, B*d)
        A = self._attend(cols)  # (B, H-1, H)
        return A @ (x[:, L] @ self.W_OV)  # (B, H-1, d)

    def loss(self, x: Tensor) -> Tensor:
        """Mean squared error of the predictions for ``x^{L+1}_{1..H-1}``."""
        return F.mse_loss(self(x), x[:, self.L, 1:])
