"""A standard decoder-only transformer and N Knowl 7's exact maps to and from the
disentangled transformer (claim N.K7).

Standard model (attention-only form, N Knowl 7)
-----------------------------------------------
Rows are positions. ``h_0[t] = E e_{s_t} + P e_t`` (``E`` ``(d, S)``, ``P`` ``(d, T)``), i.e.
``h_0 = X E^T + P^T`` with ``X`` the one-hot prompt; layer ``l`` with heads ``i``:

    h_l = h_{l-1} + sum_i softmax(MASK(h_{l-1} Q_i K_i^T h_{l-1}^T)) h_{l-1} V_i^T,

``Q_i, K_i, V_i`` in ``R^{d x d}``, ``MASK`` keeps ``j <= i``; output ``W_O h_L[T'-1]``
(``W_O`` ``(d_out, d)``). Optionally each layer is followed by a residual ReLU MLP
``h <- h + W_2 relu(W_1 h + b_1) + b_2``, and ``layer_norm=True`` adds pre-LayerNorms
(before attention, before the MLP, and before the readout); N's exact maps are claimed for
the attention-only form only, and the maps below refuse the other forms.

Derivation of the maps
----------------------
Standard -> disentangled (:func:`to_disentangled`). Claim: ``h_l = h~_l M_l`` for the
disentangled state ``h~_l`` ``(T, d_l)`` and a matrix ``M_l`` ``(d_l, d)``.
``l = 0``: ``h~_0 = [X, I_T]`` and ``M_0 = [E^T; P^T]`` give ``h~_0 M_0 = X E^T + P^T = h_0``.
Step: if ``h_{l-1} = h~_{l-1} M`` then the standard scores are
``h_{l-1} Q_i K_i^T h_{l-1}^T = h~_{l-1} (M Q_i K_i^T M^T) h~_{l-1}^T``, so with
``A~_i = M Q_i K_i^T M^T`` both models have the same attention pattern ``G_i``, and

    h_l = h~_{l-1} M + sum_i G_i h~_{l-1} M V_i^T
        = [h~_{l-1}, G_1 h~_{l-1}, ..., G_m h~_{l-1}] [M; M V_1^T; ...; M V_m^T] = h~_l M_l.

Finally ``W_O h_L = W_O M_L^T h~_L``, so ``W~_O = W_O M_L^T``.

Disentangled -> standard (:func:`to_standard`), ``d = d_L``. Give ``h~_l`` the first
``d_l`` coordinates of the residual stream: ``h_l = h~_l J_l`` with ``J_l = [I_{d_l}, 0]``
``(d_l, d)``. ``E = J_0^T[:, :S]``, ``P = J_0^T[:, S:]`` give ``h_0 = [X, I_T, 0]``. In layer
``l`` (input width ``w = d_{l-1}``) head ``i`` (0-based) gets ``Q_i = J^T A~_i J``,
``K_i = I_d`` (so ``h Q_i K_i^T h^T = h~ A~_i h~^T``, using ``J J^T = I_w``), and
``V_i^T = J^T R_i`` where ``R_i`` ``(w, d)`` is the identity placed at columns
``(1 + i) w .. (2 + i) w - 1``, the block that ``h~_l`` reserves for head ``i``; those
coordinates are zero in ``h_{l-1}``, so the residual sum writes ``h~_l J_l``. ``W_O = W~_O``.
Both maps keep depth and heads, and the attention patterns are identical.
"""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sim.papers.nichani.model import DisentangledTransformer, _check_tokens, _layer_hooks, _masked_attention

__all__ = ["StandardTransformer", "to_disentangled", "to_standard"]


class _MLP(nn.Module):
    """``x -> W_2 relu(W_1 x + b_1) + b_2`` on rows, ``W_1`` ``(n, d)``, ``W_2`` ``(d, n)``."""

    def __init__(self, W1: Tensor, b1: Tensor, W2: Tensor, b2: Tensor):
        super().__init__()
        self.W1, self.b1 = nn.Parameter(W1.detach().clone()), nn.Parameter(b1.detach().clone())  # (n, d), (n,)
        self.W2, self.b2 = nn.Parameter(W2.detach().clone()), nn.Parameter(b2.detach().clone())  # (d, n), (d,)

    def forward(self, x: Tensor) -> Tensor:
        """``relu(x W1^T + b1) W2^T + b2``, ``(B, T, d)``."""
        return torch.relu(x @ self.W1.T + self.b1) @ self.W2.T + self.b2  # (B, T, d)


class StandardTransformer(nn.Module):
    """Standard decoder transformer of N Knowl 7 (see the module docstring for the formula).

    Parameters
    ----------
    E : Tensor (d, S)      token embedding (column ``s`` embeds token ``s``)
    P : Tensor (d, T)      positional embedding
    Q, K, V : sequences of Tensor, ``Q[l-1]`` of shape ``(m_l, d, d)``
    W_O : Tensor (d_out, d)
    mlps : sequence of ``(W1 (n, d), b1 (n,), W2 (d, n), b2 (d,))`` per layer, or None
    layer_norm : bool      pre-LayerNorms (only with ``mlps``-style models; see the maps)

    ``forward(tokens)`` with ``tokens`` ``(B, T')``, ``T' <= T``, returns ``(B, d_out)``.
    Hook points ``layer{l}.head{i}.scores`` / ``.pattern`` ``(B, T', T')``.
    """

    def __init__(self, E: Tensor, P: Tensor, Q: Sequence[Tensor], K: Sequence[Tensor], V: Sequence[Tensor],
                 W_O: Tensor, mlps: Sequence[tuple[Tensor, Tensor, Tensor, Tensor]] | None = None,
                 layer_norm: bool = False):
        super().__init__()
        d = E.shape[0]
        if E.ndim != 2 or P.ndim != 2 or P.shape[0] != d:
            raise ValueError(f"E must be (d, S) and P (d, T) with the same d, got {tuple(E.shape)}, {tuple(P.shape)}")
        if not len(Q) == len(K) == len(V):
            raise ValueError(f"Q, K, V need one entry per layer, got {len(Q)}, {len(K)}, {len(V)}")
        for l, (q, k, v) in enumerate(zip(Q, K, V), start=1):
            if not q.shape == k.shape == v.shape or q.ndim != 3 or q.shape[1:] != (d, d):
                raise ValueError(f"layer {l}: Q, K, V must all be (m, {d}, {d}), got "
                                 f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
        if W_O.ndim != 2 or W_O.shape[1] != d:
            raise ValueError(f"W_O must be (d_out, {d}), got {tuple(W_O.shape)}")
        if mlps is not None and len(mlps) != len(Q):
            raise ValueError(f"mlps needs one entry per layer ({len(Q)}), got {len(mlps)}")
        self.S, self.T, self.d = E.shape[1], P.shape[1], d
        self.heads = tuple(q.shape[0] for q in Q)
        self.E = nn.Parameter(E.detach().clone())  # (d, S)
        self.P = nn.Parameter(P.detach().clone())  # (d, T)
        self.Q = nn.ParameterList([nn.Parameter(q.detach().clone()) for q in Q])  # [(m_l, d, d)]
        self.K = nn.ParameterList([nn.Parameter(k.detach().clone()) for k in K])  # [(m_l, d, d)]
        self.V = nn.ParameterList([nn.Parameter(v.detach().clone()) for v in V])  # [(m_l, d, d)]
        self.W_O = nn.Parameter(W_O.detach().clone())  # (d_out, d)
        self.mlps = None if mlps is None else nn.ModuleList([_MLP(*m) for m in mlps])
        self.layer_norm = layer_norm
        if layer_norm:
            n_norms = 2 * len(Q) + 1 if mlps is not None else len(Q) + 1
            self.norms = nn.ModuleList([nn.LayerNorm(d, dtype=E.dtype, device=E.device) for _ in range(n_norms)])
        for l, m in enumerate(self.heads, start=1):
            self.add_module(f"layer{l}", _layer_hooks(m))

    @classmethod
    def init(cls, S: int, T: int, d: int, heads: Sequence[int], d_out: int | None = None, *,
             generator: torch.Generator, scale: float | None = None, mlp_hidden: int | None = None,
             layer_norm: bool = False, dtype: torch.dtype = torch.float32) -> "StandardTransformer":
        """``N(0, scale^2)`` entries (default ``scale = d^{-1/2}``) from ``generator``; MLP blocks of
        width ``mlp_hidden`` when given (zero biases)."""
        scale = d ** -0.5 if scale is None else scale
        dev = generator.device

        def rnd(*shape):
            return scale * torch.randn(shape, generator=generator, dtype=dtype, device=dev)

        Q = [rnd(m, d, d) for m in heads]
        K = [rnd(m, d, d) for m in heads]
        V = [rnd(m, d, d) for m in heads]
        mlps = None
        if mlp_hidden is not None:
            z = lambda n: torch.zeros(n, dtype=dtype, device=dev)  # noqa: E731
            mlps = [(rnd(mlp_hidden, d), z(mlp_hidden), rnd(d, mlp_hidden), z(d)) for _ in heads]
        return cls(rnd(d, S), rnd(d, T), Q, K, V, rnd(S if d_out is None else d_out, d), mlps, layer_norm)

    @property
    def attention_only(self) -> bool:
        return self.mlps is None and not self.layer_norm

    def forward(self, tokens: Tensor) -> Tensor:
        """The last position's readout, logits ``(B, d_out)``, for ``tokens`` ``(B, T')``."""
        _check_tokens(tokens, self.T, self.S)
        B, T = tokens.shape
        h = self.E.T[tokens] + self.P.T[:T]  # (B, T', d)
        norms = iter(self.norms) if self.layer_norm else None
        for l in range(len(self.heads)):
            hooks = getattr(self, f"layer{l + 1}")
            x = next(norms)(h) if norms else h  # (B, T', d)
            for i in range(self.heads[l]):
                A_i = self.Q[l][i] @ self.K[l][i].T  # (d, d)
                h = h + _masked_attention(x, A_i, hooks[f"head{i}"]) @ self.V[l][i].T  # (B, T', d)
            if self.mlps is not None:
                h = h + self.mlps[l](next(norms)(h) if norms else h)  # (B, T', d)
        last = h[:, -1]  # (B, d)
        if norms:
            last = next(norms)(last)
        return last @ self.W_O.T  # (B, d_out)

    def loss(self, tokens: Tensor, targets: Tensor) -> Tensor:
        """Mean cross-entropy of ``softmax(forward(tokens))`` against ``targets`` ``(B,)``."""
        return F.cross_entropy(self(tokens), targets)


# ------------------------------------------------------------------------------- maps --
def to_disentangled(model: StandardTransformer) -> DisentangledTransformer:
    """N Knowl 7, standard -> disentangled: ``A~_i = M Q_i K_i^T M^T``, ``M_l = [M; M V_1^T; ...]``,
    ``W~_O = W_O M_L^T`` (derivation in the module docstring). Same depth and heads."""
    if not model.attention_only:
        raise ValueError("to_disentangled maps the attention-only form only (no MLP blocks, no LayerNorm)")
    with torch.no_grad():
        M = torch.cat([model.E.T, model.P.T], dim=0)  # (S+T, d) = M_0
        A = []
        for q, k, v in zip(model.Q, model.K, model.V):
            A.append(torch.stack([M @ q[i] @ k[i].T @ M.T for i in range(q.shape[0])]))  # (m, d_{l-1}, d_{l-1})
            M = torch.cat([M] + [M @ v[i].T for i in range(v.shape[0])], dim=0)  # (d_l, d)
        W_O = model.W_O @ M.T  # (d_out, d_L)
    return DisentangledTransformer(model.S, model.T, A, W_O)


def to_standard(model: DisentangledTransformer) -> StandardTransformer:
    """N Knowl 7, disentangled -> standard with ``d = d_L``: block ``h~_l`` lives in the first
    ``d_l`` residual coordinates; ``Q_i = J^T A~_i J``, ``K_i = I``, ``V_i^T = J^T R_i``,
    ``W_O = W~_O`` (derivation in the module docstring)."""
    S, T = model.S, model.T
    d = model.widths[-1]
    dtype, dev = model.W_O.dtype, model.W_O.device
    eye = torch.eye(d, dtype=dtype, device=dev)  # (d, d)
    with torch.no_grad():
        Q, K, V = [], [], []
        for A_l, w in zip(model.A, model.widths[:-1]):
            m = A_l.shape[0]
            J = eye[:w]  # (w, d) = [I_w, 0]
            Q.append(torch.stack([J.T @ A_l[i] @ J for i in range(m)]))  # (m, d, d)
            K.append(eye.expand(m, d, d).clone())  # (m, d, d)
            V_T = []
            for i in range(m):
                R = torch.zeros(w, d, dtype=dtype, device=dev)  # (w, d)
                R[:, (1 + i) * w:(2 + i) * w] = torch.eye(w, dtype=dtype, device=dev)
                V_T.append(J.T @ R)  # (d, d)
            V.append(torch.stack([vt.T for vt in V_T]))  # (m, d, d)
        E = eye[:, :S].clone()  # (d, S)
        P = eye[:, S:S + T].clone()  # (d, T)
    return StandardTransformer(E, P, Q, K, V, model.W_O.detach().clone())
