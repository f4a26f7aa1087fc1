"""N's models (Nichani, Damian & Lee, ICML 2024): the reduced model, the disentangled
transformer, and the constructions of Knowl 8 (one parent) and Knowl 9 (k parents).

Index conventions (0-based; N writes positions ``1..T``)
--------------------------------------------------------
A prompt is ``tokens[b, t]``, shape ``(B, T)``, int64 in ``0..S-1``. Position ``T-1`` is
N's ``s_T``. For single-parent tasks a graph is a parent array of length ``T`` (a
:class:`theory.CausalTree` or a sequence) with ``parents[i] < i`` and ``-1`` for roots;
the entry of the query ``T-1`` is ignored (N Knowl 2: the query is drawn uniformly, a
root), exactly as ``sim.sampling.sample_n_prompts`` does. For multi-parent tasks
(Knowl 9) ``parent_sets`` has length ``T+1``: nodes ``0..T-1`` are the prompt and node
``T`` is the target ``y = s_{T+1}``; each entry is ``()`` for a root or a strictly
increasing tuple of exactly ``k`` earlier nodes (the order pairs parent ``l`` of ``i``
with parent ``l`` of the target, and head ``l`` copies parent ``l``).

Attention everywhere in this file: ``score[i, j] = h_i^T A h_j`` with the query ``i`` on
the left, causal mask ``j <= i`` (N's ``MASK``: the diagonal is kept), row softmax.
Layers are numbered from 1 (N's superscripts ``(1)``, ``(2)``), heads from 0; hook
names are ``layer{l}.head{i}.scores`` / ``.pattern``.

The construction's limit (an observation, see :func:`nichani_construction_limit`)
----------------------------------------------------------------------------------
With Knowl 8's matrices the second layer scores key ``j`` by ``beta2 * c_j[s_T]`` where
``c_j`` is what layer 1 wrote at ``j``: the parent token for a non-root, but the *average
of all tokens up to j* for a root. Position 0 is always a root and copies itself, so
whenever ``s_0 = s_T`` (probability about ``1/S``) key 0 ties with the matching edges and
its own token ``s_0 = s_T`` joins the average: the ``beta -> inf`` limit is then not the
empirical estimator. Likewise in Knowl 9 the query position ``T-1`` copies the target's
parents, so as a key it always matches fully and ``s_{T-1}`` joins the average. The
functions below build the paper's matrices by default and report the exact limit;
``strict=True`` adds one position-position term (query position ``T-1`` against key
positions that are roots, and the query itself in Knowl 9, weight ``-beta2``) after
which the limit is the estimator whenever the estimator is defined.

Rates (with ``beta1 = beta2 = beta``): layer 1 copies up to ``O(T e^{-beta})``; layer 2
leaves a key whose score trails the maximum by ``g`` with weight ``~ e^{-beta g}``. With
``strict`` every losing key trails by ``g >= 1``; without it a root trails by a prefix
fraction, ``g >= 1/T`` when the estimator is defined, and only ``g >= 1/T^2`` between two
roots' fractions when it is not, so the paper's matrices need ``beta`` of order ``T^2``
for float64 agreement with the limit on such prompts.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sim.models.hooks import HookPoint

__all__ = [
    "ReducedModel",
    "DisentangledTransformer",
    "nichani_construction",
    "nichani_multiparent_construction",
    "empirical_transition_estimator",
    "empirical_multiparent_estimator",
    "nichani_construction_limit",
    "nichani_multiparent_construction_limit",
]


def _causal_mask(T: int, device) -> Tensor:
    """``True`` where key ``j`` is visible from query ``i`` (``j <= i``), ``(T, T)``."""
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()


def _check_tokens(tokens: Tensor, T_max: int, S: int) -> None:
    if tokens.ndim != 2 or not 1 <= tokens.shape[1] <= T_max:
        raise ValueError(f"tokens must have shape (B, T) with 1 <= T <= {T_max}, got {tuple(tokens.shape)}")
    if tokens.dtype != torch.int64:
        raise ValueError(f"tokens must be int64, got {tokens.dtype}")


# ------------------------------------------------------------------------ reduced model --
class ReducedModel(nn.Module):
    """N's reduced two-layer model (Knowl 6; Knowl 1's ``f_theta``).

    ``f(s_{1:T}) = X^T softmax( softmax(MASK(A1)) X A2^T e_{s_T} )`` in ``R^S``, with ``X``
    ``(T, S)`` the one-hot prompt. Reading: layer 1 (position-only, ``A1`` ``(T, T)``,
    lower-triangular with the diagonal) writes ``c_i = sum_{j<=i} S(A1)[i, j] e_{s_j}``;
    layer 2 scores every position ``i`` (all ``T``, the query included) by
    ``e_{s_T}^T A2 c_i`` and returns the attention-weighted average of the tokens ``e_{s_i}``,
    a probability vector. ``A2`` ``(S, S)`` is not forced symmetric.

    ``forward(tokens)`` with ``tokens`` ``(B, T')``, ``T' <= T`` (the leading block of ``A1``
    is used) returns probabilities ``(B, S)``. Hook points: ``layer1.pattern``
    ``softmax(MASK(A1))`` ``(T', T')`` (token independent, no batch axis);
    ``layer2.scores`` and ``layer2.pattern`` ``(B, T')``.

    ``t_eff`` sets the default loss perturbation ``eps = t_eff^{-1/2}`` (N Knowl 6); it
    defaults to ``T`` (the chain's effective length).
    """

    def __init__(self, A1: Tensor, A2: Tensor, t_eff: float | None = None):
        super().__init__()
        if A1.ndim != 2 or A1.shape[0] != A1.shape[1]:
            raise ValueError(f"A1 must be square (T, T), got {tuple(A1.shape)}")
        if A2.ndim != 2 or A2.shape[0] != A2.shape[1]:
            raise ValueError(f"A2 must be square (S, S), got {tuple(A2.shape)}")
        self.T, self.S = A1.shape[0], A2.shape[0]
        self.t_eff = float(self.T if t_eff is None else t_eff)
        if not self.t_eff > 0:
            raise ValueError(f"t_eff must be > 0, got {t_eff}")
        self.A1 = nn.Parameter(A1.detach().clone())  # (T, T), query row, key column
        self.A2 = nn.Parameter(A2.detach().clone())  # (S, S)
        self.layer1 = nn.ModuleDict({"pattern": HookPoint()})
        self.layer2 = nn.ModuleDict({"scores": HookPoint(), "pattern": HookPoint()})

    @classmethod
    def init(cls, S: int, T: int, beta0: float, *, t_eff: float | None = None,
             dtype: torch.dtype = torch.float32, device=None) -> "ReducedModel":
        """N's initialisation (Knowl 5): ``A1 = 0``, ``A2 = beta0 I_S``."""
        A1 = torch.zeros(T, T, dtype=dtype, device=device)  # (T, T)
        A2 = beta0 * torch.eye(S, dtype=dtype, device=device)  # (S, S)
        return cls(A1, A2, t_eff=t_eff)

    def forward(self, tokens: Tensor) -> Tensor:
        """The predicted law of the next token, probabilities ``(B, S)``, for ``tokens`` ``(B, T')``."""
        _check_tokens(tokens, self.T, self.S)
        B, T = tokens.shape
        X = F.one_hot(tokens, self.S).to(self.A2.dtype)  # (B, T, S)
        A1 = self.A1[:T, :T].masked_fill(~_causal_mask(T, tokens.device), float("-inf"))  # (T, T)
        a1 = self.layer1["pattern"](torch.softmax(A1, dim=-1))  # (T, T)
        q = self.A2[tokens[:, -1]]  # (B, S): row s_T of A2 = A2^T e_{s_T}
        # e_{s_T}^T A2 c_i with c_i = sum_j a1[i, j] e_{s_j} (the soft copied parent token), summed
        # over j directly: O(B T^2) instead of forming c_i, O(B T^2 S)
        s2 = self.layer2["scores"](q.gather(1, tokens) @ a1.T)  # (B, T)
        a2 = self.layer2["pattern"](torch.softmax(s2, dim=-1))  # (B, T)
        return (a2.unsqueeze(1) @ X).squeeze(1)  # (B, S)

    def loss(self, tokens: Tensor, targets: Tensor | None = None, pis: Tensor | None = None,
             eps: float | None = None) -> Tensor:
        """Perturbed cross-entropy (N Knowl 6), mean over the batch.

        With ``pis`` ``(B, S, S)`` (each prompt's transition matrix), N's population form
        ``-sum_{s'} pi(s'|s_T) log(f_{s'} + eps)``; with ``targets`` ``(B,)``, the sampled
        form ``-log(f_y + eps)``. ``eps`` defaults to ``t_eff^{-1/2}``; pass ``0`` for the
        unperturbed loss.
        """
        if (targets is None) == (pis is None):
            raise ValueError("give exactly one of targets (B,) or pis (B, S, S)")
        eps = self.t_eff ** -0.5 if eps is None else float(eps)
        logf = torch.log(self(tokens) + eps)  # (B, S)
        if pis is not None:
            if pis.shape != (tokens.shape[0], self.S, self.S):
                raise ValueError(f"pis must have shape (B, S, S) = ({tokens.shape[0]}, {self.S}, {self.S}), "
                                 f"got {tuple(pis.shape)}")
            row = pis[torch.arange(tokens.shape[0], device=tokens.device), tokens[:, -1]]  # (B, S)
            return -(row * logf).sum(-1).mean()
        return -logf.gather(-1, targets.unsqueeze(-1)).mean()


# -------------------------------------------------------------- disentangled transformer --
def _layer_hooks(n_heads: int) -> nn.ModuleDict:
    return nn.ModuleDict({f"head{i}": nn.ModuleDict({"scores": HookPoint(), "pattern": HookPoint()})
                          for i in range(n_heads)})


def _masked_attention(h: Tensor, A: Tensor, hooks: nn.ModuleDict) -> Tensor:
    """``softmax(MASK(h A h^T)) h`` for one head; ``h`` ``(B, T, w)``, ``A`` ``(w, w)``."""
    T = h.shape[1]
    scores = (h @ A) @ h.transpose(1, 2)  # (B, T, T): [b, i, j] = h_i^T A h_j
    scores = hooks["scores"](scores.masked_fill(~_causal_mask(T, h.device), float("-inf")))  # (B, T, T)
    pattern = hooks["pattern"](torch.softmax(scores, dim=-1))  # (B, T, T)
    return pattern @ h  # (B, T, w)


class DisentangledTransformer(nn.Module):
    """N's disentangled transformer (Knowl 7; N's reference code calls it ``CatFormer``).

    ``h_0 = [e_{s_t}, e_t]`` in ``R^{S+T}`` (token one-hot, then position one-hot); layer
    ``l`` with ``m_l`` heads concatenates
    ``h_l = [h_{l-1}, attn(h_{l-1}; A_{l,0}), ..., attn(h_{l-1}; A_{l,m_l-1})]``, width
    ``d_l = (1 + m_l) d_{l-1}``, where ``attn(h; A) = softmax(MASK(h A h^T)) h``; the output
    is the linear readout ``W_O h_L[T'-1]`` of the last position (``forward`` returns it
    without a softmax; N's code applies a softmax for training, see :meth:`loss`; the
    Knowl 8/9 constructions read it directly as probabilities).

    Parameters
    ----------
    S, T : int
        Alphabet size and the length of the position one-hot (prompts may be shorter).
    A : sequence of Tensor
        ``A[l-1]`` has shape ``(m_l, d_{l-1}, d_{l-1})``.
    W_O : Tensor, shape (d_out, d_L)

    Hook points ``layer{l}.head{i}.scores`` / ``.pattern``, ``(B, T', T')``.
    """

    def __init__(self, S: int, T: int, A: Sequence[Tensor], W_O: Tensor):
        super().__init__()
        self.S, self.T = S, T
        widths = [S + T]
        for l, A_l in enumerate(A, start=1):
            if A_l.ndim != 3 or A_l.shape[1:] != (widths[-1], widths[-1]) or A_l.shape[0] < 1:
                raise ValueError(f"layer {l}: A must have shape (m, {widths[-1]}, {widths[-1]}) with m >= 1, "
                                 f"got {tuple(A_l.shape)}")
            widths.append((1 + A_l.shape[0]) * widths[-1])
        if W_O.ndim != 2 or W_O.shape[1] != widths[-1]:
            raise ValueError(f"W_O must have shape (d_out, {widths[-1]}), got {tuple(W_O.shape)}")
        self.widths = tuple(widths)  # (d_0, ..., d_L)
        self.heads = tuple(A_l.shape[0] for A_l in A)
        self.A = nn.ParameterList([nn.Parameter(A_l.detach().clone()) for A_l in A])  # [(m_l, d_{l-1}, d_{l-1})]
        self.W_O = nn.Parameter(W_O.detach().clone())  # (d_out, d_L)
        for l, m in enumerate(self.heads, start=1):
            self.add_module(f"layer{l}", _layer_hooks(m))

    @classmethod
    def init(cls, S: int, T: int, heads: Sequence[int], d_out: int | None = None, *,
             generator: torch.Generator | None = None, scale: float = 0.0,
             dtype: torch.dtype = torch.float32, device=None) -> "DisentangledTransformer":
        """All blocks zero (N's code trains from zero), or ``N(0, scale^2)`` entries from ``generator``."""
        if scale and generator is None:
            raise ValueError("a random init (scale != 0) needs a torch.Generator")
        device = generator.device if generator is not None else device

        def block(*shape):
            if not scale:
                return torch.zeros(shape, dtype=dtype, device=device)
            return scale * torch.randn(shape, generator=generator, dtype=dtype, device=device)

        w, A = S + T, []
        for m in heads:
            A.append(block(m, w, w))  # (m, w, w)
            w *= 1 + m
        return cls(S, T, A, block(S if d_out is None else d_out, w))

    @property
    def n_layers(self) -> int:
        return len(self.heads)

    def embed(self, tokens: Tensor) -> Tensor:
        """``h_0 = [e_{s_t}, e_t]``, ``(B, T', S + T)``."""
        B, T = tokens.shape
        X = F.one_hot(tokens, self.S).to(self.W_O.dtype)  # (B, T', S)
        pos = torch.eye(T, self.T, dtype=self.W_O.dtype, device=tokens.device)  # (T', T)
        return torch.cat([X, pos.expand(B, T, self.T)], dim=-1)  # (B, T', S+T)

    def residual(self, tokens: Tensor) -> Tensor:
        """The final disentangled state ``h_L``, ``(B, T', d_L)``."""
        _check_tokens(tokens, self.T, self.S)
        h = self.embed(tokens)  # (B, T', d_0)
        for l, A_l in enumerate(self.A, start=1):
            hooks = getattr(self, f"layer{l}")
            outs = [_masked_attention(h, A_l[i], hooks[f"head{i}"]) for i in range(A_l.shape[0])]  # m x (B, T', d_{l-1})
            h = torch.cat([h, *outs], dim=-1)  # (B, T', d_l)
        return h

    def forward(self, tokens: Tensor) -> Tensor:
        """The readout ``W_O h_L[T'-1]`` ``(B, d_out)`` for ``tokens`` ``(B, T')``, no softmax."""
        return self.residual(tokens)[:, -1] @ self.W_O.T  # (B, d_out)

    def loss(self, tokens: Tensor, targets: Tensor | None = None, probs: Tensor | None = None) -> Tensor:
        """Cross-entropy of ``softmax(forward(tokens))``: against sampled ``targets`` ``(B,)``,
        or against target distributions ``probs`` ``(B, d_out)`` (N's code uses ``pi(.|s_T)``)."""
        if (targets is None) == (probs is None):
            raise ValueError("give exactly one of targets (B,) or probs (B, d_out)")
        logp = torch.log_softmax(self(tokens), dim=-1)  # (B, d_out)
        if probs is not None:
            return -(probs * logp).sum(-1).mean()
        return -logp.gather(-1, targets.unsqueeze(-1)).mean()


# ------------------------------------------------------------------ graph normalisation --
def _single_parents(tree) -> np.ndarray:
    """Parent array of length T with the query ``T-1`` forced to a root (validated by CausalTree)."""
    from theory import CausalTree

    par = (tree if isinstance(tree, CausalTree) else CausalTree(tree)).parents.copy()  # (T,)
    if par.size < 2:
        raise ValueError(f"need T >= 2 positions (context and query), got {par.size}")
    par[-1] = -1
    return par


def _parent_sets(parent_sets) -> tuple[list[tuple[int, ...]], int]:
    """Validate Knowl 9's parent sets (length ``T+1``); return ``(sets, k)``."""
    sets = [tuple(int(p) for p in ps) for ps in parent_sets]
    if len(sets) < 2:
        raise ValueError(f"parent_sets needs the prompt nodes and the target node (length T+1 >= 2), got {len(sets)}")
    k = len(sets[-1])
    if k == 0:
        raise ValueError(f"the target node {len(sets) - 1} has no parents: the estimator conditions on them")
    for i, ps in enumerate(sets):
        if not ps:
            continue
        if len(ps) != k:
            raise ValueError(f"node {i} has {len(ps)} parents {ps}; every non-root needs exactly k = {k} "
                             "(the target's number, N Knowl 9)")
        if any(b <= a for a, b in zip(ps, ps[1:])) or ps[0] < 0 or ps[-1] >= i:
            raise ValueError(f"node {i}: parents {ps} must be strictly increasing and in 0..{i - 1}")
    return sets, k


def _np_tokens(tokens, S: int) -> tuple[np.ndarray, bool]:
    arr = np.asarray(tokens.detach().cpu() if isinstance(tokens, Tensor) else tokens)
    if arr.ndim not in (1, 2) or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"tokens must be an integer array (T,) or (B, T), got {arr.dtype} {arr.shape}")
    if arr.size and (arr.min() < 0 or arr.max() >= S):
        raise ValueError(f"tokens must lie in 0..{S - 1}, found {arr.min()}..{arr.max()}")
    return np.atleast_2d(arr).astype(np.int64), arr.ndim == 1


def _finish(est: np.ndarray, defined: np.ndarray, single: bool):
    return (est[0], bool(defined[0])) if single else (est, defined)


# ------------------------------------------------------------------- Knowl 8: one parent --
def nichani_construction(tree, S: int, beta1: float, beta2: float, *, strict: bool = False,
                         dtype: torch.dtype = torch.float32, device=None) -> DisentangledTransformer:
    """N Knowl 8: a 2-layer, 1+1-head disentangled transformer whose readout tends to the
    empirical transition estimator as ``beta1, beta2 -> inf`` (``beta2 e^{-beta1} -> 0``).

    With ``d_0 = S + T`` and ``h_0 = [tok (S), pos (T)]``:

    - layer 1: ``A^(1) = blockdiag(0_S, A1)``, ``A1[i, p(i)] = beta1`` for non-roots ``i``
      (query row ``i``, key column ``p(i)``), rows of roots zero (uniform over ``j <= i``).
      ``h_1 = [tok, pos, ctok, cpos]``, ``d_1 = 2 d_0``.
    - layer 2: ``A^(2)`` is zero except ``beta2 I_S`` in the block (query ``tok``, key
      ``ctok``): the query's token ``s_{T-1}`` is compared with each key's copied parent.
      ``strict=True`` adds ``A^(2)[pos_{T-1}, pos_j] = -beta2`` for every root ``j``
      (the query included).
    - readout ``W_O = [0_{S x d_1}, I_S, 0_{S x T}, 0_{S x d_1}]`` on ``h_2 = [h_1, attn_2]``:
      the token part of the layer-2 average.

    ``tree``: parent array of length ``T`` (the query entry is ignored); see the module
    docstring. The exact limit is :func:`nichani_construction_limit`.
    """
    par = _single_parents(tree)
    T = par.size
    d0 = S + T
    A1 = torch.zeros(1, d0, d0, dtype=dtype, device=device)  # (1, d0, d0)
    for i, p in enumerate(par.tolist()):
        if p >= 0:
            A1[0, S + i, S + p] = beta1
    d1 = 2 * d0
    A2 = torch.zeros(1, d1, d1, dtype=dtype, device=device)  # (1, d1, d1)
    A2[0, :S, d0:d0 + S] = beta2 * torch.eye(S, dtype=dtype, device=device)
    if strict:
        for j in np.flatnonzero(par < 0).tolist():
            A2[0, S + T - 1, S + j] = -beta2
    W_O = torch.zeros(S, 2 * d1, dtype=dtype, device=device)  # (S, d2)
    W_O[:, d1:d1 + S] = torch.eye(S, dtype=dtype, device=device)
    return DisentangledTransformer(S, T, [A1, A2], W_O)


def empirical_transition_estimator(tokens, tree, S: int):
    """N Knowl 8's ``hat pi(s' | s_T) = #{edges j->i: (s_j, s_i) = (s_T, s')} / #{edges j->i: s_j = s_T}``.

    Edges are ``p(i) -> i`` for the context positions ``i = 0..T-2`` (the query ``T-1``
    is a root). Unlike N's reference ``bayes`` (``problems.InContextTree``) there is no
    ``alpha`` smoothing, and roots contribute nothing.

    Parameters
    ----------
    tokens : int array, shape (T,) or (B, T)
    tree : parent array of length T (query entry ignored)
    S : int

    Returns
    -------
    estimate : ndarray, shape (S,) or (B, S)
        NaN rows where undefined.
    defined : bool or ndarray of bool, shape (B,)
        False when ``s_T`` is never a parent token (denominator 0).
    """
    par = _single_parents(tree)
    x, single = _np_tokens(tokens, S)
    if x.shape[1] != par.size:
        raise ValueError(f"tokens have length {x.shape[1]} but the tree has {par.size} positions")
    B = x.shape[0]
    child = np.flatnonzero(par >= 0)  # non-root context positions
    counts = np.zeros((B, S))
    match = x[:, par[child]] == x[:, -1:]  # (B, n_edges): parent token == s_T
    np.add.at(counts, (np.repeat(np.arange(B), child.size), x[:, child].ravel()), match.ravel())
    total = counts.sum(-1)  # (B,)
    defined = total > 0
    est = np.full((B, S), np.nan)
    est[defined] = counts[defined] / total[defined, None]
    return _finish(est, defined, single)


def _limit_average(x: np.ndarray, scores: np.ndarray, S: int) -> np.ndarray:
    """Uniform average of the tokens of the arg-max keys, ``(B, S)``; ties within 1e-9."""
    top = scores >= scores.max(-1, keepdims=True) - 1e-9  # (B, T); distinct scores differ by >= 1/T^2
    onehot = np.eye(S)[x]  # (B, T, S)
    return (top[..., None] * onehot).sum(1) / top.sum(-1, keepdims=True)


def _prefix_means(x: np.ndarray, S: int) -> np.ndarray:
    """``m[b, j] = mean_{i <= j} e_{x[b, i]}`` (a root's layer-1 output), ``(B, T, S)``."""
    onehot = np.eye(S)[x]  # (B, T, S)
    return onehot.cumsum(1) / np.arange(1, x.shape[1] + 1)[None, :, None]


def nichani_construction_limit(tokens, tree, S: int, *, strict: bool = False):
    """Exact ``beta1, beta2 -> inf`` limit of :func:`nichani_construction`'s readout.

    Layer 1 writes ``c_j = e_{s_p(j)}`` at a non-root ``j`` and the prefix mean
    ``(1/(j+1)) sum_{i<=j} e_{s_i}`` at a root; layer 2 scores ``c_j[s_T]`` (minus 1 at roots
    when ``strict``); the limit is the uniform average of ``e_{s_j}`` over the arg-max keys.
    Equals :func:`empirical_transition_estimator` when the estimator is defined and no
    root ``j < T-1`` has ``s_0 = ... = s_j = s_T`` (always, when ``strict``).

    Returns an array ``(S,)`` or ``(B, S)`` (always defined).
    """
    par = _single_parents(tree)
    x, single = _np_tokens(tokens, S)
    if x.shape[1] != par.size:
        raise ValueError(f"tokens have length {x.shape[1]} but the tree has {par.size} positions")
    B, T = x.shape
    root = par < 0
    c = _prefix_means(x, S)  # (B, T, S), roots' layer-1 output
    nonroot = np.flatnonzero(~root)
    c[:, nonroot] = np.eye(S)[x[:, par[nonroot]]]  # copied parent tokens
    scores = c[np.arange(B), :, x[:, -1]]  # (B, T): c_j[s_T]
    if strict:
        scores = scores - root[None, :]
    out = _limit_average(x, scores, S)
    return out[0] if single else out


# ----------------------------------------------------------------- Knowl 9: k parents --
def nichani_multiparent_construction(parent_sets, S: int, beta1: float, beta2: float, *, strict: bool = False,
                                     dtype: torch.dtype = torch.float32, device=None) -> DisentangledTransformer:
    """N Knowl 9: ``k`` first-layer heads copy the ``k`` parents; the readout tends to the
    multi-parent empirical estimator as ``beta1, beta2 -> inf``.

    With ``d_0 = S + T`` (``T = len(parent_sets) - 1`` prompt positions):

    - layer 1, head ``l`` (``0..k-1``): ``A_l = blockdiag(0_S, P_l)`` with
      ``P_l[i, p(i)_l] = beta1`` for non-root prompt positions ``i < T-1`` and
      ``P_l[T-1, p(T)_l] = beta1`` (the query position copies the *target's* parents);
      root rows zero. ``h_1 = [h_0, head_0, ..., head_{k-1}]``, ``d_1 = (1 + k) d_0``.
    - layer 2: ``A^(2) = diag(0_{d_0}, B, ..., B)``, ``B = blockdiag(beta2 I_S, 0_T)``: score
      ``beta2 sum_l 1(s_{p(j)_l} = s_{p(T)_l})``. ``strict=True`` adds
      ``A^(2)[pos_{T-1}, pos_j] = -beta2`` for every root ``j`` and for ``j = T-1``.
    - readout: the token part of the layer-2 average, ``W_O[:, d_1:d_1+S] = I_S``.

    The exact limit is :func:`nichani_multiparent_construction_limit`.
    """
    sets, k = _parent_sets(parent_sets)
    T = len(sets) - 1
    d0 = S + T
    A1 = torch.zeros(k, d0, d0, dtype=dtype, device=device)  # (k, d0, d0)
    rows = [(i, sets[i]) for i in range(T - 1) if sets[i]] + [(T - 1, sets[T])]
    for i, ps in rows:
        for l, p in enumerate(ps):
            A1[l, S + i, S + p] = beta1
    d1 = (1 + k) * d0
    A2 = torch.zeros(1, d1, d1, dtype=dtype, device=device)  # (1, d1, d1)
    for l in range(k):
        o = (1 + l) * d0  # head l's block in h_1; its token part is o..o+S-1
        A2[0, o:o + S, o:o + S] = beta2 * torch.eye(S, dtype=dtype, device=device)
    if strict:
        for j in [j for j in range(T - 1) if not sets[j]] + [T - 1]:
            A2[0, S + T - 1, S + j] = -beta2
    W_O = torch.zeros(S, 2 * d1, dtype=dtype, device=device)  # (S, d2)
    W_O[:, d1:d1 + S] = torch.eye(S, dtype=dtype, device=device)
    return DisentangledTransformer(S, T, [A1, A2], W_O)


def empirical_multiparent_estimator(tokens, parent_sets, S: int, *, include_last: bool = False):
    """N Knowl 9's estimator ``hat pi(s' | s_{p(T)_1..k})``.

    ``#{i : s_i = s', (s_{p(i)_l})_l = (s_{p(T)_l})_l} / #{i : (s_{p(i)_l})_l = (s_{p(T)_l})_l}``
    over non-root prompt positions ``i``, where ``T`` here is the target node. Knowl 9
    writes ``i < T`` in 1-based positions, i.e. ``i = 0..T-2`` here, leaving out the last
    prompt position (default). ``include_last=True`` also counts ``i = T-1`` with its own
    parents, as N's reference ``problems.InContextDAG.bayes`` does (without ``alpha``).

    Returns ``(estimate, defined)`` as :func:`empirical_transition_estimator`.
    """
    sets, k = _parent_sets(parent_sets)
    T = len(sets) - 1
    x, single = _np_tokens(tokens, S)
    if x.shape[1] != T:
        raise ValueError(f"tokens have length {x.shape[1]} but parent_sets describe {T} prompt positions")
    B = x.shape[0]
    query = x[:, list(sets[T])]  # (B, k)
    last = T if include_last else T - 1
    counts = np.zeros((B, S))
    for i in range(last):
        if sets[i]:
            match = (x[:, list(sets[i])] == query).all(-1)  # (B,)
            counts[np.arange(B), x[:, i]] += match
    total = counts.sum(-1)
    defined = total > 0
    est = np.full((B, S), np.nan)
    est[defined] = counts[defined] / total[defined, None]
    return _finish(est, defined, single)


def nichani_multiparent_construction_limit(tokens, parent_sets, S: int, *, strict: bool = False):
    """Exact ``beta1, beta2 -> inf`` limit of :func:`nichani_multiparent_construction`'s readout.

    Key ``j``'s score is ``sum_l <c^l_{T-1}, c^l_j>`` with ``c^l_j = e_{s_{p(j)_l}}`` (non-root
    ``j < T-1``), ``c^l_{T-1} = e_{s_{p(T)_l}}``, and the prefix mean for roots; when
    ``strict``, roots and ``j = T-1`` lose 1. The limit averages ``e_{s_j}`` over the
    arg-max keys. Without ``strict`` the query position always scores ``k`` and adds
    ``s_{T-1}`` to the average.
    """
    sets, k = _parent_sets(parent_sets)
    T = len(sets) - 1
    x, single = _np_tokens(tokens, S)
    if x.shape[1] != T:
        raise ValueError(f"tokens have length {x.shape[1]} but parent_sets describe {T} prompt positions")
    means = _prefix_means(x, S)  # (B, T, S)
    c = np.repeat(means[:, :, None, :], k, axis=2)  # (B, T, k, S): c[b, j, l]
    for j in range(T - 1):
        if sets[j]:
            c[:, j] = np.eye(S)[x[:, list(sets[j])]]  # (B, k, S)
    c[:, T - 1] = np.eye(S)[x[:, list(sets[T])]]
    scores = np.einsum("bls,bjls->bj", c[:, T - 1], c)  # (B, T)
    if strict:
        penal = np.array([not sets[j] for j in range(T - 1)] + [True], dtype=float)
        scores = scores - penal[None, :]
    out = _limit_average(x, scores, S)
    return out[0] if single else out
