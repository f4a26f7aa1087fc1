"""Vectorised samplers for both tasks, in numpy (reference) and torch (CPU or CUDA).

W's task (Wei et al.): a random recursive tree (``parents[h] ~ Unif{0..h-1}``), one
transition matrix ``pi``, and ``L + 1`` sequences on that tree: ``L`` context examples
and the target. Tokens come back as ``(B, L + 1, H)`` (the target is index ``L``).

N's task (Nichani et al.): a fixed DAG on positions ``0..T-1`` (at most one parent each),
``pi`` drawn per prompt from a prior, non-query roots ``~ mu_pi``, non-roots
``~ pi(. | parent)``, the query ``s_{T-1} ~ Unif[S]`` (a root by construction) and the
target ``y ~ pi(. | s_{T-1})``.

Randomness is split by purpose: every function takes the generator(s) for the purpose
it serves (``rng_tree``, ``rng_pi``, ``rng_seq``), so drawing more sequences never
changes which trees or matrices are drawn.
"""
from __future__ import annotations

import numpy as np

from theory import CausalTree, stationary, validate_stochastic
from theory.markov import stationary_batch
from theory.graphs import random_recursive_parents  # W's trees: the law lives with the graph families

__all__ = [
    "random_recursive_parents",
    "categorical",
    "sample_tree_sequences",
    "sample_w_prompts",
    "sample_n_prompts",
    "torch_categorical",
    "sample_w_prompts_torch",
    "sample_n_prompts_torch",
    "dirichlet_rows",
]


# -------------------------------------------------------------------------------- numpy ---
def categorical(u: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """Inverse-CDF draws: ``u`` uniforms of shape ``S``, ``probs`` of shape ``S + (d,)``."""
    cdf = np.cumsum(probs, axis=-1)
    idx = (u[..., None] >= cdf[..., :-1]).sum(axis=-1)  # first k with u < cdf[k]
    return idx.astype(np.int64)


def sample_tree_sequences(rng_seq: np.random.Generator, pi: np.ndarray, tree, n_seq: int, root=None) -> np.ndarray:
    """``n_seq`` i.i.d. sequences on one tree/forest, shape ``(n_seq, n)``.

    Roots draw from ``root`` (default: the stationary law of ``pi``).
    """
    pi = validate_stochastic(pi)
    tree = tree if isinstance(tree, CausalTree) else CausalTree(tree)
    nu = stationary(pi) if root is None else np.asarray(root, dtype=float)
    x = np.empty((n_seq, tree.n), dtype=np.int64)
    u = rng_seq.random((n_seq, tree.n))
    for h, p in enumerate(tree.parents.tolist()):
        probs = np.broadcast_to(nu, (n_seq, nu.size)) if p < 0 else pi[x[:, p]]
        x[:, h] = categorical(u[:, h], probs)
    return x


def sample_w_prompts(rng_seq: np.random.Generator, pis: np.ndarray, parents: np.ndarray, L: int,
                     roots: np.ndarray | None = None) -> np.ndarray:
    """W prompts for a batch: tokens ``(B, L + 1, H)`` from ``pis`` ``(B, d, d)`` (or one
    ``(d, d)``) and ``parents`` ``(B, H)`` (or one ``(H,)``); row ``L`` is the target.

    ``roots``: ``(B, d)`` root laws (default: each ``pi``'s stationary law). Assumes
    validated inputs (this is the hot path of Monte Carlo).
    """
    parents = np.atleast_2d(parents)
    B, H = parents.shape
    pis = np.broadcast_to(pis, (B,) + pis.shape[-2:]) if pis.ndim == 2 else pis
    d = pis.shape[-1]
    if roots is None:
        roots = stationary_batch(pis)
    roots = np.broadcast_to(roots, (B, d))
    x = np.empty((B, L + 1, H), dtype=np.int64)
    u = rng_seq.random((B, L + 1, H))
    bidx = np.arange(B)[:, None]
    for h in range(H):
        p = parents[:, h]  # (B,)
        is_root = p < 0
        prev = x[bidx, :, np.where(is_root, 0, p)[:, None]].reshape(B, L + 1) if h > 0 else None
        probs = np.empty((B, L + 1, d))
        if h > 0:
            probs[:] = pis[bidx, prev]  # (B, L+1, d)
        probs[is_root] = roots[is_root][:, None, :]
        x[:, :, h] = categorical(u[:, :, h], probs)
    return x


def dirichlet_rows(rng_pi: np.random.Generator, alpha: float, n: int, d: int) -> np.ndarray:
    """``n`` matrices with i.i.d. ``Dirichlet(alpha 1_d)`` rows, shape ``(n, d, d)``.

    Drawn in log space (``log G = log Gamma(alpha + 1) + log(U) / alpha`` for
    ``alpha < 1``) so that tiny alpha (N uses 0.1) never underflows a row to zeros.
    """
    if alpha >= 1:
        g = rng_pi.standard_gamma(alpha, size=(n, d, d))
        return g / g.sum(axis=-1, keepdims=True)
    logg = np.log(rng_pi.standard_gamma(alpha + 1.0, size=(n, d, d))) + np.log(rng_pi.random((n, d, d))) / alpha
    logg -= logg.max(axis=-1, keepdims=True)
    g = np.exp(logg)
    return g / g.sum(axis=-1, keepdims=True)


def sample_n_prompts(rng_seq: np.random.Generator, pis: np.ndarray, tree) -> tuple[np.ndarray, np.ndarray]:
    """N prompts for matrices ``pis`` ``(B, S, S)`` on a fixed DAG with ``T`` positions.

    Position ``T-1`` is the query (its parent entry, if any, is ignored: the query is a
    root drawn uniformly). Returns ``(tokens (B, T), targets (B,))``.
    """
    tree = tree if isinstance(tree, CausalTree) else CausalTree(tree)
    B, S, _ = pis.shape
    T = tree.n
    mu = stationary_batch(pis)
    x = np.empty((B, T), dtype=np.int64)
    u = rng_seq.random((B, T + 1))
    b = np.arange(B)
    for i, p in enumerate(tree.parents.tolist()[: T - 1]):
        probs = mu if p < 0 else pis[b, x[:, p]]
        x[:, i] = categorical(u[:, i], probs)
    x[:, T - 1] = np.minimum((u[:, T - 1] * S).astype(np.int64), S - 1)
    y = categorical(u[:, T], pis[b, x[:, T - 1]])
    return x, y


# -------------------------------------------------------------------------------- torch ---
def torch_categorical(u, probs):
    """Inverse-CDF draws in torch (any device): ``u`` shape ``S``, ``probs`` shape ``S + (d,)``."""
    cdf = probs.cumsum(-1)
    return (u.unsqueeze(-1) >= cdf[..., :-1]).sum(-1)


def sample_w_prompts_torch(gen, pis, parents, L: int, roots=None):
    """Torch twin of :func:`sample_w_prompts` on ``pis.device``; ``gen`` a ``torch.Generator``
    on that device. Shapes as in the numpy version; returns int64 ``(B, L + 1, H)``.

    The same inverse-CDF draws as :func:`torch_categorical` on each position's law, with the
    cumulative sums taken once per call, not once per position: row ``d`` of a prompt's table is
    its root law's CDF and rows ``0..d-1`` its ``pi``'s, so a position reads its law with one
    gather whether it is a root or not, and counts the CDF entries at or below its uniform with
    ``torch.searchsorted(..., right=True)`` (the ``>=`` of :func:`torch_categorical`)."""
    import torch

    B, H = parents.shape
    d = pis.shape[-1]
    if roots is None:
        roots = torch.as_tensor(stationary_batch(pis.detach().cpu().double().numpy()), dtype=pis.dtype,
                                device=pis.device)
    # A prompt batch usually shares one pi (an expanded view): its CDFs are computed once, not B times.
    shared = pis.shape[0] > 1 and pis.stride(0) == 0 and roots.stride(0) == 0
    P, R = (pis[:1], roots[:1]) if shared else (pis, roots)
    cdf = torch.cat([P, R.unsqueeze(1)], dim=1).cumsum(-1)[..., :-1]  # (1 or B, d+1, d-1); row d: the root law
    rows = cdf.reshape(-1, d - 1)  # row b * (d+1) + s: prompt b's CDF given state s (b = 0 when shared)
    offset = 0 if shared else (torch.arange(B, device=pis.device) * (d + 1))[:, None]  # (B, 1)
    u = torch.rand((B, L + 1, H), generator=gen, device=pis.device, dtype=pis.dtype)
    u = u.permute(2, 0, 1).reshape(H, B * (L + 1), 1).contiguous()  # position-major: u[h] contiguous for searchsorted
    x = torch.empty((B, L + 1, H), dtype=torch.long, device=pis.device)
    for h in range(H):
        p = parents[:, h]  # (B,)
        if h == 0:
            state = torch.full((B, L + 1), d, dtype=torch.long, device=pis.device)
        else:
            state = x.gather(2, p.clamp(min=0)[:, None, None].expand(B, L + 1, 1)).squeeze(2)  # parent's token
            state = state.masked_fill((p < 0)[:, None], d)
        law = rows.index_select(0, (state + offset).reshape(-1))  # (B*(L+1), d-1)
        x[:, :, h] = torch.searchsorted(law, u[h], right=True).reshape(B, L + 1)
    return x


def sample_n_prompts_torch(gen, pis, parents, mu=None):
    """Torch twin of :func:`sample_n_prompts`: ``pis`` ``(B, S, S)`` on the target device,
    ``parents`` a python list of length ``T``; returns ``(tokens (B, T), targets (B,))``."""
    import torch

    B, S, _ = pis.shape
    T = len(parents)
    if mu is None:
        mu = torch.as_tensor(stationary_batch(pis.detach().cpu().double().numpy()), dtype=pis.dtype,
                             device=pis.device)
    u = torch.rand((B, T + 1), generator=gen, device=pis.device, dtype=pis.dtype)
    x = torch.empty((B, T), dtype=torch.long, device=pis.device)
    b = torch.arange(B, device=pis.device)
    for i, p in enumerate(list(parents)[: T - 1]):
        probs = mu if p < 0 else pis[b, x[:, p]]
        x[:, i] = torch_categorical(u[:, i], probs)
    x[:, T - 1] = torch.clamp((u[:, T - 1] * S).long(), max=S - 1)
    y = torch_categorical(u[:, T], pis[b, x[:, T - 1]])
    return x, y
