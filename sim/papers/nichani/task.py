"""Bayes baselines for N's task at any alphabet size (claims N.E, N.K1, and N.T's reference-code findings).

N's task (Knowl 2, 0-indexed): a fixed DAG on positions ``0..T-1``, ``pi`` with i.i.d.
``Dirichlet(alpha)`` rows, non-query roots ``~ mu_pi``, non-roots ``~ pi(s_p(i), .)``, the
query ``s_{T-1} ~ Unif[S]``, the target ``y ~ pi(s_{T-1}, .)``. A predictor ``f`` of ``y``
from the prompt has the population loss ``E[-sum_y pi(q, y) log f(y)]`` (N's code trains
and reports this form). It is minimised by the posterior predictive
``P*(.) = E[pi(q, .) | prompt]``, with value the Bayes loss ``E_prompt[H(P*)]``.

With roots ``~ mu_pi`` the likelihood carries ``prod_roots mu_pi(s_r)``, so ``P*`` is not the
add-alpha estimator (claim N.T). Here:

- :func:`unigram_batch`: the structure-blind in-context unigram estimator (add-alpha along
  the DAG's edges, and N's code's variant that counts roots as children of ``s_{T-2}``, is
  :func:`theory.dirichlet.add_alpha_batch`);
- :func:`posterior_predictive_is`: ``P*`` by importance sampling, batched over prompts:
  proposal = the conjugate posterior ``Dirichlet(alpha + n(s, .))`` per row, weights
  ``prod_roots mu_pi(s_r)`` (stationary laws by GTH elimination, no subtractions), with
  the add-alpha mean as a control variate;
- :func:`posterior_predictive_levels`: the same estimator on all ``K`` samples and on their
  halves and quarters (for Richardson extrapolation of its ``O(1/K)`` bias), with the
  proposal drawn through the gamma additivity ``Gamma(alpha + n) = Gamma(alpha) + Gamma(n)``;
  :func:`bayes_gap_richardson` turns it into ``KL(P* || add-alpha)`` and ``H(P*) - H(add-alpha)``
  per prompt (claim N.T's Bayes loss and add-alpha's excess over it);
- :func:`bayes_loss_bracket`: the Bayes loss bracketed from both sides. Upper: the loss of
  the importance-sampling predictor ``hat P`` itself, evaluated against the true ``pi`` --
  a predictor computed from the prompt alone, so its expected loss is ``>=`` the Bayes
  loss exactly (up to Monte Carlo error over prompts). Lower: the plug-in entropy
  ``H(hat P)``, below ``H(P*)`` by concavity up to the ``O(1/K)`` bias of self-normalised
  importance sampling. The bracket's width says how far the estimate can be trusted;
- :func:`best_mixture_losses`: the floor of N's perturbed loss for any predictor whose
  output is a mixture of the prompt's tokens (N's reduced model), even one that knows ``pi``.

Everything is numpy, takes explicit generators, and returns values with standard errors.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from theory.dirichlet import add_alpha_batch
from theory.markov import stationary_batch
from sim.montecarlo import Estimate, mean_estimate
from theory.graphs import GivenGraph, k_parent_sets, n_parents

__all__ = [
    "N_S",
    "N_T",
    "N_ALPHA",
    "GRAPHS",
    "n_graph",
    "unigram_batch",
    "population_losses",
    "posterior_predictive_is",
    "posterior_predictive_levels",
    "richardson_blocks",
    "bayes_gap_richardson",
    "BayesBracket",
    "bayes_loss_bracket",
    "best_mixture_losses",
    "multiparent_add_alpha",
]

#: N's task as N's code runs it (Knowl 2): alphabet S, prompt length T, Dirichlet(alpha) rows
N_S, N_T, N_ALPHA = 10, 20, 0.1
#: N's graph families (``single_parent.py``)
GRAPHS = ("chain", "icl", "random", "many")


def _check(tokens, parents, S):
    x = np.asarray(tokens)
    par = np.asarray(parents, dtype=np.int64)
    if x.ndim != 2 or x.shape[1] != par.size:
        raise ValueError(f"tokens must have shape (B, T) with T = len(parents) = {par.size}, got {x.shape}")
    if x.size and (x.min() < 0 or x.max() >= S):
        raise ValueError(f"tokens must lie in 0..{S - 1}")
    if np.any(par >= np.arange(par.size)) or np.any(par < -1):
        raise ValueError(f"parents must satisfy -1 <= p(i) < i, got {par.tolist()}")
    return x.astype(np.int64), par


def unigram_batch(tokens, alpha: float, S: int) -> np.ndarray:
    """Structure-blind in-context unigram ``(alpha + #{i < T-1 : s_i = y}) / (S alpha + T - 1)``, ``(B, S)``."""
    x = np.asarray(tokens, dtype=np.int64)
    B, T = x.shape
    c = np.zeros((B, S))
    np.add.at(c, (np.repeat(np.arange(B), T - 1), x[:, :-1].ravel()), 1.0)
    c += alpha
    return c / c.sum(axis=1, keepdims=True)


def population_losses(pred, rows) -> np.ndarray:
    """``-sum_y rows[b, y] log pred[b, y]`` per prompt, ``(B,)`` (``0 log 0 = 0``; ``+inf`` where
    ``pred = 0 < rows``)."""
    pred, rows = np.asarray(pred, dtype=np.float64), np.asarray(rows, dtype=np.float64)
    with np.errstate(divide="ignore"):
        logp = np.log(pred)
    pos = rows > 0
    return -np.where(pos, rows * np.where(pos, logp, 0.0), 0.0).sum(axis=-1)


def _dirichlet_log_space(rng: np.random.Generator, shape_params: np.ndarray) -> np.ndarray:
    """Dirichlet draws along the last axis with concentration ``shape_params`` (any ``> 0``),
    via ``log G(a) = log G(a + 1) + log(U) / a`` so small ``a`` never underflows to 0."""
    logg = np.log(rng.standard_gamma(shape_params + 1.0)) + np.log(rng.random(shape_params.shape)) / shape_params
    logg -= logg.max(axis=-1, keepdims=True)
    g = np.maximum(np.exp(logg), 1e-300)  # positive entries keep mu_pi unique
    return g / g.sum(axis=-1, keepdims=True)


def _is_setup(tokens, parents, alpha: float, S: int, n_samples: int, blocks: int, blocks_name: str):
    """Validated inputs of the importance samplers: ``(x, context parents, edge positions,
    root positions, K)`` with ``K`` = ``n_samples`` rounded down to a multiple of ``blocks``."""
    x, par = _check(tokens, parents, S)
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    if n_samples < 2 * blocks:
        raise ValueError(f"n_samples must be >= 2 * {blocks_name} = {2 * blocks}, got {n_samples}")
    ctx_par = par[: x.shape[1] - 1]
    return x, ctx_par, np.flatnonzero(ctx_par >= 0), np.flatnonzero(ctx_par < 0), (n_samples // blocks) * blocks


def _is_chunk(xb, ctx_par, edges, roots, alpha: float, S: int, draw):
    """One chunk of prompts ``xb (P, T)``: the add-alpha estimator ``a (P, S)`` (the proposal's
    mean of row ``q``), the normalised weights ``w = prod_r mu_pi(s_r)`` ``(P, K)`` of the
    conjugate-posterior draws ``draw(counts) (P, K, S, S)``, and ``dev = pi_k(q, .) - a``
    ``(P, K, S)``."""
    P = xb.shape[0]
    rows_p = np.arange(P)
    n = np.zeros((P, S, S))
    np.add.at(n, (np.repeat(rows_p, edges.size), xb[:, ctx_par[edges]].ravel(), xb[:, edges].ravel()), 1.0)
    r = np.zeros((P, S))
    np.add.at(r, (np.repeat(rows_p, roots.size), xb[:, roots].ravel()), 1.0)
    q = xb[:, -1]
    nq = n[rows_p, q]
    a = (alpha + nq) / (S * alpha + nq.sum(-1, keepdims=True))  # (P, S): add-alpha
    pis = draw(n)  # (P, K, S, S)
    if roots.size:
        logw = (np.log(stationary_batch(pis)) * r[:, None, :]).sum(axis=-1)  # (P, K)
        w = np.exp(logw - logw.max(axis=1, keepdims=True))
    else:
        w = np.ones(pis.shape[:2])
    return a, w, pis[rows_p, :, q] - a[:, None]


def posterior_predictive_is(tokens, parents, alpha: float, S: int, n_samples: int, rng: np.random.Generator, *,
                            groups: int = 8, chunk_elems: int = 4_000_000) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``P*(.) = E[pi(q, .) | prompt]`` for every prompt by importance sampling with a control variate.

    Proposal per prompt: rows ``pi(s, .) ~ Dirichlet(alpha + n(s, .))`` independently (the
    conjugate posterior of the edges, whose mean of row ``q`` is the add-alpha estimator
    ``a``); weight ``w = prod_{non-query roots r} mu_pi(s_r)``. Then
    ``P* = E[w pi(q, .)] / E[w] = a + Cov(w, pi(q, .)) / E[w]``, estimated by
    ``a + sum_k (w_k - mean w)(pi_k(q, .) - a) / sum_k w_k``: the proposal's own spread of
    ``pi(q, .)`` (the bulk of the noise of plain self-normalised sampling) cancels, and the
    estimate sums to 1. Entries are floored at ``1e-12 a`` and renormalised (rare).

    Returns ``(estimate (B, S), stderr (B, S), ess (B,))``; the standard error is from
    ``groups`` independent batches of the samples (batch means), the effective sample size
    is ``(sum w)^2 / sum w^2``.
    """
    x, ctx_par, edges, roots, K = _is_setup(tokens, parents, alpha, S, n_samples, groups, "groups")
    B = x.shape[0]
    est, se, ess = np.empty((B, S)), np.empty((B, S)), np.empty(B)
    step = max(1, chunk_elems // (K * S * S))

    def draw(n):  # (P, S, S) counts -> (P, K, S, S) conjugate-posterior draws
        conc = np.ascontiguousarray(np.broadcast_to((alpha + n)[:, None], (n.shape[0], K, S, S)))
        return _dirichlet_log_space(rng, conc)

    for lo in range(0, B, step):
        a, w, dev = _is_chunk(x[lo:lo + step], ctx_par, edges, roots, alpha, S, draw)
        P = a.shape[0]

        def estimate(wg, dg):  # (P, k), (P, k, S) -> (P, S)
            c = wg - wg.mean(axis=1, keepdims=True)
            return a + (c[..., None] * dg).sum(axis=1) / wg.sum(axis=1)[:, None]

        e = estimate(w, dev)
        parts = np.stack([estimate(w[:, g::groups], dev[:, g::groups]) for g in range(groups)])  # (G, P, S)
        floor = 1e-12 * a
        e = np.maximum(e, floor)
        est[lo:lo + P] = e / e.sum(axis=1, keepdims=True)
        se[lo:lo + P] = parts.std(axis=0, ddof=1) / np.sqrt(groups)
        ess[lo:lo + P] = w.sum(axis=1) ** 2 / (w ** 2).sum(axis=1)
    return est, se, ess


def _conjugate_posterior_draws(rng: np.random.Generator, alpha: float, n: np.ndarray, K: int) -> np.ndarray:
    """``K`` draws per prompt of ``pi`` with independent rows ``Dirichlet(alpha + n(s, .))``, ``(P, K, S, S)``.

    Uses ``Gamma(alpha + m) = Gamma(alpha) + Gamma(m)`` (independent summands): every entry
    gets a ``Gamma(alpha)`` draw with the scalar shape (fast), and only the entries with a
    count ``m = n(s, s') > 0`` (at most ``T - 1`` of the ``S^2``) get an extra ``Gamma(m)``.
    Entries are floored at the smallest normal float (a ``Gamma(0.1)`` draw underflows with
    probability ~1e-31) so every draw is positive and its stationary law unique.
    """
    P, S, _ = n.shape
    g = rng.standard_gamma(alpha, size=(P, K, S, S))
    p_idx, s_idx, t_idx = np.nonzero(n > 0)
    if p_idx.size:
        g[p_idx, :, s_idx, t_idx] += rng.standard_gamma(n[p_idx, s_idx, t_idx][:, None], size=(p_idx.size, K))
    g = np.maximum(g, np.finfo(np.float64).tiny)
    return g / g.sum(axis=-1, keepdims=True)


def posterior_predictive_levels(tokens, parents, alpha: float, S: int, n_samples: int, rng: np.random.Generator, *,
                                levels: int = 3, chunk_elems: int = 4_000_000) -> list[np.ndarray]:
    """``P*(.) = E[pi(q, .) | prompt]`` by importance sampling, on ``K`` samples and on ``K / 2^l`` blocks.

    Proposal per prompt: the conjugate posterior of the edges (rows ``Dirichlet(alpha + n(s, .))``,
    independent; the mean of row ``q`` is the add-alpha estimator ``a``); weight
    ``w = prod_{non-query roots r} mu_pi(s_r)`` (GTH stationary laws). On a block of samples
    the estimate is the control-variate form of :func:`posterior_predictive_is`,

        hat P = a + sum_k (w_k - mean w) (pi_k(q, .) - a) / sum_k w_k,

    a smooth function of sample means, so its bias (and that of any smooth function of it,
    e.g. a KL divergence) expands as ``b_1 / K + b_2 / K^2 + ...``.

    Returns ``[E_0, E_1, .., E_{levels-1}]`` with ``E_l`` of shape ``(2^l, B, S)``: level ``l``
    splits the ``K`` samples into ``2^l`` disjoint blocks of ``K / 2^l`` (``E_0[0]`` uses all).
    ``n_samples`` is rounded down to a multiple of ``2^(levels-1)``. Entries below
    ``1e-12 a`` are floored and the rows renormalised (rare; only at tiny ``K``).
    """
    if levels < 1:
        raise ValueError(f"levels must be >= 1, got {levels}")
    x, ctx_par, edges, roots, K = _is_setup(tokens, parents, alpha, S, n_samples, 2 ** (levels - 1), "2^(levels-1)")
    B = x.shape[0]
    out = [np.empty((2 ** lv, B, S)) for lv in range(levels)]
    step = max(1, chunk_elems // (K * S * S))
    for lo in range(0, B, step):
        a, w, dev = _is_chunk(x[lo:lo + step], ctx_par, edges, roots, alpha, S,
                              lambda n: _conjugate_posterior_draws(rng, alpha, n, K))
        P = a.shape[0]
        for lv in range(levels):
            nb = 2 ** lv
            wg = w.reshape(P, nb, K // nb)
            dg = dev.reshape(P, nb, K // nb, S)
            c = wg - wg.mean(axis=2, keepdims=True)
            e = a[:, None] + (c[..., None] * dg).sum(axis=2) / wg.sum(axis=2)[..., None]  # (P, nb, S)
            e = np.maximum(e, 1e-12 * a[:, None])
            out[lv][:, lo:lo + P] = np.swapaxes(e / e.sum(axis=-1, keepdims=True), 0, 1)
    return out


def _kl_rows(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``sum_y p_y log(p_y / q_y)`` along the last axis (``0 log 0 = 0``)."""
    pos = p > 0
    return np.where(pos, p * (np.log(np.where(pos, p, 1.0)) - np.log(q)), 0.0).sum(axis=-1)


def _entropy_rows(p: np.ndarray) -> np.ndarray:
    """``-sum_y p_y log p_y`` along the last axis (``0 log 0 = 0``)."""
    pos = p > 0
    return -np.where(pos, p * np.log(np.where(pos, p, 1.0)), 0.0).sum(axis=-1)


def richardson_blocks(levels: Sequence[np.ndarray], f) -> dict[str, np.ndarray]:
    """Richardson extrapolation of a per-prompt functional ``f`` of :func:`posterior_predictive_levels`.

    With ``g_l`` the mean of ``f`` over the ``2^l`` blocks of level ``l`` (``K / 2^l`` samples
    each), a bias ``b_1 / K + b_2 / K^2`` becomes

        g_R(K) = 2 g_0 - g_1                       (residual -2 b_2 / K^2),
        g_R(K/2) = mean over halves of 2 g(half) - mean g(its quarters)   (residual -8 b_2 / K^2),

    so ``g_R(K/2) - g_R(K) = -6 b_2 / K^2`` measures what the extrapolation leaves (needs 3 levels).
    Returns per-prompt arrays ``plugin`` (``g_0``), ``richardson`` (``g_R(K)``), ``correction``
    (``g_0 - g_R(K)``, the removed bias) and ``richardson_half`` (``g_R(K/2)``).
    """
    if len(levels) < 3:
        raise ValueError(f"Richardson with a residual check needs 3 levels, got {len(levels)}")
    vals = [f(e) for e in levels[:3]]  # (2^l, B)
    g0, g1 = vals[0][0], vals[1].mean(axis=0)
    rich = 2.0 * g0 - g1
    halves = [2.0 * vals[1][h] - 0.5 * (vals[2][2 * h] + vals[2][2 * h + 1]) for h in range(2)]
    return {"plugin": g0, "richardson": rich, "correction": g0 - rich, "richardson_half": 0.5 * (halves[0] + halves[1])}


def bayes_gap_richardson(tokens, parents, alpha: float, S: int, n_samples: int, rng: np.random.Generator, *,
                         add_alpha_pred=None) -> dict[str, dict[str, np.ndarray]]:
    """Per-prompt terms of the Bayes loss of N's task against add-alpha ``a``, ``O(1/K)`` bias removed.

    On a prompt ``x`` the population loss of a predictor ``f`` is ``E[-sum_y pi(q, y) log f(y) | x]
    = H(P*) + KL(P* || f)``, so

    - ``"kl"``: ``KL(P*(x) || a(x))``, whose mean is ``loss(add-alpha) - Bayes loss``;
    - ``"entropy_diff"``: ``H(P*(x)) - H(a(x))``, whose mean plus ``E[H(a)]`` is the Bayes loss.

    Both from the importance-sampling ``hat P`` of :func:`posterior_predictive_levels` (``K =
    n_samples``), each as the dict of :func:`richardson_blocks` (plug-in, extrapolated, the
    correction and the residual check).
    """
    levels = posterior_predictive_levels(tokens, parents, alpha, S, n_samples, rng, levels=3)
    a = add_alpha_batch(tokens, parents, alpha, S) if add_alpha_pred is None else np.asarray(add_alpha_pred)
    ha = _entropy_rows(a)
    return {"kl": richardson_blocks(levels, lambda e: _kl_rows(e, a[None])),
            "entropy_diff": richardson_blocks(levels, lambda e: _entropy_rows(e) - ha[None])}


@dataclass(frozen=True)
class BayesBracket:
    """The Bayes loss of N's task on a set of prompts, bracketed (see the module docstring).

    ``upper``: loss of the importance-sampling predictor against the true ``pi`` (``>=`` Bayes);
    ``lower``: mean plug-in entropy ``H(hat P)``; ``add_alpha_minus_upper``: paired difference
    (how much the importance-sampling predictor beats add-alpha on the same prompts);
    ``min_ess``: the smallest effective sample size over prompts.
    """

    upper: Estimate
    lower: Estimate
    add_alpha: Estimate
    add_alpha_minus_upper: Estimate
    n_samples: int
    min_ess: float

    @property
    def width(self) -> float:
        return self.upper.value - self.lower.value


def bayes_loss_bracket(tokens, pis, parents, alpha: float, S: int, *, n_samples: int, seed: int,
                       add_alpha_pred=None) -> BayesBracket:
    """Bracket the Bayes loss on ``tokens`` ``(B, T)`` with their matrices ``pis`` ``(B, S, S)``.

    ``seed`` drives the importance sampling (reported next to the numbers).
    """
    x = np.asarray(tokens, dtype=np.int64)
    rows = np.asarray(pis)[np.arange(x.shape[0]), x[:, -1]]  # (B, S): pi(q, .)
    rng = np.random.default_rng(seed)
    est, _, ess = posterior_predictive_is(x, parents, alpha, S, n_samples, rng)
    up = population_losses(est, rows)
    lo = population_losses(est, est)
    aa = add_alpha_batch(x, parents, alpha, S) if add_alpha_pred is None else add_alpha_pred
    la = population_losses(aa, rows)
    return BayesBracket(upper=mean_estimate(up, seed), lower=mean_estimate(lo, seed),
                        add_alpha=mean_estimate(la, seed), add_alpha_minus_upper=mean_estimate(la - up, seed),
                        n_samples=int(n_samples), min_ess=float(ess.min()))



def best_mixture_losses(rows, present, eps: float, *, iters: int = 100) -> np.ndarray:
    """Oracle floor for predictors whose output is a mixture of the prompt's tokens (N's
    reduced model, Knowl 6): per prompt ``min_f -sum_y rows[y] log(f_y + eps)`` over probability
    vectors ``f`` supported on the tokens present in the prompt, knowing the true ``rows``.

    KKT: ``f_y = max(rows[y] / lam - eps, 0)`` on the present tokens with ``lam`` set so that
    ``sum f = 1`` (found by bisection on ``log lam``); absent tokens pay ``-rows[y] log eps``.
    No predictor of this class -- trained or not, knowing ``pi`` or not -- has a lower
    perturbed loss on the prompt. Shapes: ``rows`` ``(B, S)``, ``present`` ``(B, S)`` bool; returns ``(B,)``.
    """
    r = np.asarray(rows, dtype=np.float64)
    pres = np.asarray(present, dtype=bool)
    if r.shape != pres.shape:
        raise ValueError(f"rows {r.shape} and present {pres.shape} must have the same shape")
    if not eps > 0:
        raise ValueError(f"eps must be > 0, got {eps}")
    rp = np.where(pres, r, 0.0)
    B = r.shape[0]
    lo = np.full(B, np.log(1e-300))  # f-sum at lam: decreasing in lam
    hi = np.log(np.maximum(rp.max(axis=1), 1e-300) / eps) + 1.0  # there every f_y = 0
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        total = np.maximum(rp / np.exp(mid)[:, None] - eps, 0.0).sum(axis=1)
        big = total > 1.0
        lo = np.where(big, mid, lo)
        hi = np.where(big, hi, mid)
    f = np.maximum(rp / np.exp(hi)[:, None] - eps, 0.0)
    s = f.sum(axis=1, keepdims=True)
    none = rp.sum(axis=1) <= 0  # no mass on the present tokens: any mixture of them does equally
    f = np.where(none[:, None], pres / np.maximum(pres.sum(axis=1, keepdims=True), 1), f / np.where(s > 0, s, 1.0))
    f = np.where(pres, f, 0.0)
    return -(r * np.log(f + eps)).sum(axis=1)


def multiparent_add_alpha(tokens, parent_sets, alpha: float, S: int, *, use: Sequence[int] | None = None) -> np.ndarray:
    """Add-alpha predictive of the target node ``T`` of a multi-parent task (N Knowl 9), ``(B, S)``.

    Counts every non-root prompt position ``i <= T-1`` whose parents' tokens (those listed in
    ``use``, all by default) equal the target's parents' tokens. With i.i.d.
    ``Dirichlet(alpha)`` rows ``pi(. | a_1..a_k)`` and roots independent of ``pi`` (N's
    ``InContextDAG`` draws them uniformly) this is the exact posterior predictive (conjugacy);
    with ``use`` a subset it is the estimator that conditions on those parents only (N's
    notebook's "one NN" line uses the last parent).
    """
    sets = [tuple(int(p) for p in ps) for ps in parent_sets]
    x = np.asarray(tokens, dtype=np.int64)
    B, T = x.shape
    if len(sets) != T + 1:
        raise ValueError(f"parent_sets must have length T + 1 = {T + 1}, got {len(sets)}")
    k = len(sets[-1])
    cols = list(range(k)) if use is None else [int(c) for c in use]
    query = x[:, [sets[T][c] for c in cols]]  # (B, |use|)
    counts = np.zeros((B, S))
    for i in range(T):
        if sets[i]:
            match = (x[:, [sets[i][c] for c in cols]] == query).all(axis=1)
            counts[np.arange(B), x[:, i]] += match
    counts += alpha
    return counts / counts.sum(axis=1, keepdims=True)


# ------------------------------------------------------------- N's multi-parent task (Knowl 9) --
def multiparent_graph(name: str, T: int, k: int = 2, rng: np.random.Generator | None = None) -> list[tuple[int, ...]]:
    """Parent sets of length ``T + 1`` (node ``T`` is the target): ``ngram``, ``notebook`` (N's
    ``multi_parent.ipynb``, k = 2) or ``random`` (a sorted ``k``-subset, as N's notebook's
    commented-out code); the laws are :func:`theory.graphs.k_parent_sets`'s."""
    return k_parent_sets(name, T, k, rng)


def _dirichlet_tensor(rng, alpha: float, shape: tuple) -> np.ndarray:
    """Dirichlet(alpha 1) vectors along the last axis of ``shape``, drawn in log space (no underflow)."""
    if alpha >= 1:
        g = rng.standard_gamma(alpha, size=shape)
        return g / g.sum(-1, keepdims=True)
    logg = np.log(rng.standard_gamma(alpha + 1.0, size=shape)) + np.log(rng.random(shape)) / alpha
    g = np.exp(logg - logg.max(-1, keepdims=True))
    return g / g.sum(-1, keepdims=True)


def sample_multiparent_prompts(rng, S: int, parent_sets, alpha: float, n: int, *, rows: bool = False):
    """N's ``InContextDAG`` prompts ``(n, T)``: per prompt a ``k``-parent tensor
    ``pi(. | a_1..a_k)`` with i.i.d. ``Dirichlet(alpha)`` rows; roots ``~ Unif[S]`` (N's code
    uses the uniform law for roots here, not a stationary law); every other node
    ``~ pi(. | its parents)``. The target node ``T`` is not drawn. With ``rows=True`` also returns
    the target's true row ``pi(. | s_{p(T)_1}, .., s_{p(T)_k})``, ``(n, S)``."""
    T = len(parent_sets) - 1
    k = max(len(p) for p in parent_sets)
    pis = _dirichlet_tensor(rng, alpha, (n,) + (S,) * (k + 1))  # (n, S, .., S)
    x = np.empty((n, T), dtype=np.int64)
    b = np.arange(n)
    u = rng.random((n, T))
    for i in range(T):
        ps = parent_sets[i]
        if not ps:
            x[:, i] = np.minimum((u[:, i] * S).astype(np.int64), S - 1)
        else:
            probs = pis[(b,) + tuple(x[:, p] for p in ps)]  # (n, S)
            x[:, i] = (u[:, i, None] >= probs.cumsum(-1)[:, :-1]).sum(-1)
    if not rows:
        return x
    return x, pis[(b,) + tuple(x[:, p] for p in parent_sets[T])]


# ----------------------------------------------------------------------------- graphs --
def n_graph(name: str, T: int, rng: np.random.Generator | None = None) -> np.ndarray:
    """N's graphs as parent arrays of length ``T``; the query ``T-1`` is a root.

    ``name`` is one of :data:`GRAPHS`: ``chain``, ``icl`` (the in-context function graph),
    ``random`` (``p(i) ~ Unif{-1..i-1}``, needs ``rng``) or ``many`` (N's ``many_graphs.ipynb`` law:
    each context position a root w.p. 1/2, needs ``rng``); the laws are
    :func:`theory.graphs.n_parents`'s. A user's graph (:class:`theory.graphs.GivenGraph`,
    ``icl-verify run --graph``) stands for itself.
    """
    if name not in GRAPHS and not isinstance(name, GivenGraph):
        raise ValueError(f"unknown graph {name!r}; expected one of {GRAPHS}")
    return n_parents(name, T, rng)
