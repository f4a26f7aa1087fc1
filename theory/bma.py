"""Bayesian model averaging over the parent of a position (W Lemma 1, W Lemma 4).

Setting (W section 1, 0-indexed here): ``L`` example sequences ``x^l_0..x^l_{H-1}`` share
one unknown random recursive tree (``pa(h) ~ Unif{0..h-1}`` independently for ``h >= 1``,
root at 0); each root token is drawn from a root law ``nu`` and each ``x^l_h`` from
``pi[x^l_pa(h), .]``. A *context* is an integer array of shape ``(L, H)`` (or a batch of
shape ``(B, L, H)``), tokens in ``0..d-1``. W writes positions ``1..H`` and ``h in 2..H``;
here position ``h >= 1`` has candidate parents ``0..h-1``.

Because the tree prior and the likelihood both factor over nodes, the posterior of
``pa(h)`` is (W Lemma 1)

    P(pa(h) = h' | context) = softmax_{h' < h}( sum_l log pi[x^l_h', x^l_h] ),

independent of the root law and of the other nodes' parents, and unchanged by
conditioning on the target's prefix ``x^{L+1}_{0..h-1}`` (which involves ``pa(1..h-1)``
only). :func:`bma_posterior_bruteforce` computes the same posterior by summing over every
recursive tree, without using that factorisation; it is the oracle for the closed form.
"""
from __future__ import annotations

import itertools
import math
from typing import Iterator

import numpy as np

from .errors import TheoryError
from .joint import as_tree, pairwise_joint
from .markov import validate_stochastic
from .joint import root_law as _root_law

__all__ = [
    "bma_log_scores",
    "bma_posterior",
    "bma_posterior_matrix",
    "bma_posterior_bruteforce",
    "bma_predictive",
    "recursive_trees",
    "expected_loglik",
    "MAX_BRUTEFORCE_H",
]

#: Largest sequence length for :func:`bma_posterior_bruteforce` (``(H-1)! = 720`` trees).
MAX_BRUTEFORCE_H = 7

# Memory bound (float64 entries) for one chunk of the batched posterior matrix.
_CHUNK_ENTRIES = 4_000_000


# -- validation ------------------------------------------------------------------------
def _is_integer_scalar(v) -> bool:
    if isinstance(v, (bool, np.bool_)):
        return False
    if isinstance(v, (int, np.integer)):
        return True
    return isinstance(v, (float, np.floating)) and bool(np.isfinite(v)) and float(v).is_integer()


def _where(idx: tuple[int, ...], batched: bool) -> str:
    """Human-readable location of a context entry: ``[b=..,] example l=.., position h=..``."""
    if batched:
        b, l, h = idx
        return f"context[b={b}] example l={l}, position h={h}"
    l, h = idx
    return f"context example l={l}, position h={h}"


def _validate_context(context, d: int, *, allow_batch: bool, name: str = "context") -> tuple[np.ndarray, bool]:
    """Return ``(int64 array, batched)``; shape ``(L, H)`` or, if allowed, ``(B, L, H)``."""
    try:
        arr = np.asarray(context)
    except Exception as exc:  # ragged nested lists
        raise TheoryError(f"{name} could not be read as an array: {exc}") from None
    if arr.dtype == object:
        raise TheoryError(f"{name} could not be read as a rectangular integer array (ragged or mixed types)")
    ok_ndim = (2, 3) if allow_batch else (2,)
    if arr.ndim not in ok_ndim:
        want = "(L, H) or a batch (B, L, H)" if allow_batch else "(L, H)"
        raise TheoryError(f"{name} must have shape {want}, got shape {arr.shape}")
    if 0 in arr.shape:
        raise TheoryError(f"{name} is empty (shape {arr.shape}); it needs L >= 1 examples of length H >= 2")
    batched = arr.ndim == 3
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise TheoryError(f"{name} must hold integer tokens, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.floating):
        bad = ~np.isfinite(arr)
        bad[~bad] = arr[~bad] != np.round(arr[~bad])
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            raise TheoryError(f"{_where(idx, batched)}: token {arr[idx].item()!r} is not an integer")
        arr = arr.astype(np.int64)
    arr = arr.astype(np.int64, copy=False)
    bad = (arr < 0) | (arr >= d)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise TheoryError(
            f"{_where(idx, batched)}: token {int(arr[idx])} is out of range 0..{d - 1} (d = {d} states)")
    return arr, batched


def _validate_h(h, H: int) -> int:
    if not _is_integer_scalar(h):
        raise TheoryError(f"h = {h!r} is not an integer position")
    h = int(h)
    if not 1 <= h <= H - 1:
        raise TheoryError(
            f"h = {h} is out of range: position h needs candidate parents 0..h-1, so h must be in 1..{H - 1} "
            f"for sequences of length H = {H}")
    return h


def _validate_prefix(prefix, d: int, h: int, name: str = "target_prefix") -> np.ndarray:
    try:
        arr = np.asarray(prefix)
    except Exception as exc:
        raise TheoryError(f"{name} could not be read as an array: {exc}") from None
    if arr.ndim != 1:
        raise TheoryError(f"{name} must be a 1-d token array x^(L+1)_0..x^(L+1)_(h-1), got shape {arr.shape}")
    if arr.size < h:
        raise TheoryError(f"{name} has length {arr.size}, but positions 0..{h - 1} (h = {h} tokens) are needed")
    arr = arr[:h]
    for k, v in enumerate(arr.tolist()):
        if not _is_integer_scalar(v):
            raise TheoryError(f"{name} position {k}: token {v!r} is not an integer")
        if not 0 <= int(v) < d:
            raise TheoryError(f"{name} position {k}: token {int(v)} is out of range 0..{d - 1} (d = {d} states)")
    return arr.astype(np.int64)


def _log(x: np.ndarray) -> np.ndarray:
    """Elementwise log with ``log 0 = -inf`` (no warning)."""
    with np.errstate(divide="ignore"):
        return np.log(x)


def _softmax_last(scores: np.ndarray, what) -> np.ndarray:
    """Stable softmax over the last axis; ``what(index)`` words the error for an all ``-inf`` row."""
    top = scores.max(axis=-1, keepdims=True)
    dead = ~np.isfinite(top[..., 0])
    if dead.any():
        raise TheoryError(what(tuple(int(i) for i in np.argwhere(np.atleast_1d(dead))[0])))
    w = np.exp(scores - top)
    return w / w.sum(axis=-1, keepdims=True)


# -- closed form (W Lemma 1) ---------------------------------------------------------------
def bma_log_scores(context, pi, h: int) -> np.ndarray:
    """BMA log-scores ``s_h' = sum_l log pi[x^l_h', x^l_h]`` for ``h' = 0..h-1`` (W Lemma 1).

    ``pi[s, t] = P(child = t | parent = s)``; the score of candidate ``h'`` is the
    log-likelihood of the ``L`` observed edges ``x^l_h' -> x^l_h`` (W's ``p_hat_{h,L}``).

    Parameters
    ----------
    context : array_like of int, shape (L, H) or (B, L, H)
        Example sequences, tokens in ``0..d-1``.
    pi : array_like, shape (d, d), row-stochastic
    h : int, ``1 <= h <= H-1`` (0-indexed target position)

    Returns
    -------
    ndarray, shape (h,) (or (B, h) for a batch); ``-inf`` where an observed edge has
    probability 0 under ``pi``.
    """
    pi = validate_stochastic(pi)
    ctx, _ = _validate_context(context, pi.shape[0], allow_batch=True)
    h = _validate_h(h, ctx.shape[-1])
    logpi = _log(pi)
    # (..., L, h): log pi[x_h', x_h] for every example and candidate, summed over examples.
    return logpi[ctx[..., :h], ctx[..., h:h + 1]].sum(axis=-2)


def bma_posterior(context, pi, h: int) -> np.ndarray:
    """W Lemma 1: ``P(pa(h) = h' | context) = softmax_{h' < h}( sum_l log pi[x^l_h', x^l_h] )``.

    Exact Bayes posterior of the parent of ``h`` under W's prior (``pa(h) ~ Unif{0..h-1}``
    independently), computed in log space (``softmax(s - max s)``), so tiny entries
    such as ``1e-300`` and exact zeros of ``pi`` are handled. Independent of the root law.

    Parameters
    ----------
    context : array_like of int, shape (L, H) or a batch (B, L, H)
    pi : array_like, shape (d, d), row-stochastic
    h : int, ``1 <= h <= H-1``

    Returns
    -------
    ndarray, shape (h,) or (B, h); rows sum to 1.

    Raises
    ------
    TheoryError
        If every candidate parent gives the context probability 0 (all scores ``-inf``):
        the posterior is then undefined. The message names the batch index.
    """
    scores = bma_log_scores(context, pi, h)
    batched = scores.ndim == 2

    def what(idx):
        where = f"context[b={idx[0]}]" if batched else "the context"
        return (f"{where} has probability 0 under pi for every candidate parent of h = {h} "
                f"(all log-scores are -inf), so the posterior of pa({h}) is undefined")

    return _softmax_last(scores, what)


def bma_posterior_matrix(context, pi) -> np.ndarray:
    """All posteriors at once: ``M[h, h'] = P(pa(h) = h' | context)`` for ``h' < h``, else 0.

    Row ``h`` is :func:`bma_posterior` ``(context, pi, h)`` (W Lemma 1); row 0 is all
    zeros (position 0 is the root). Lower-triangular, strictly below the diagonal.

    Parameters
    ----------
    context : array_like of int, shape (L, H) or (B, L, H)
    pi : array_like, shape (d, d), row-stochastic

    Returns
    -------
    ndarray, shape (H, H) or (B, H, H).

    Raises
    ------
    TheoryError
        Naming the position (and batch index) whose context has probability 0 under
        every candidate parent.
    """
    pi = validate_stochastic(pi)
    ctx, batched = _validate_context(context, pi.shape[0], allow_batch=True)
    if not batched:
        ctx = ctx[None]
    B, L, H = ctx.shape
    if H < 2:
        raise TheoryError(f"context has H = {H} positions; the posterior matrix needs H >= 2")
    logpi = _log(pi)
    out = np.zeros((B, H, H))
    below = np.tril(np.ones((H, H), dtype=bool), -1)  # (H, H): h' < h
    chunk = max(1, _CHUNK_ENTRIES // (L * H * H))
    for start in range(0, B, chunk):
        c = ctx[start:start + chunk]  # (b, L, H)
        # scores[b, h, h'] = sum_l log pi[x_h', x_h]
        scores = logpi[c[:, :, None, :], c[:, :, :, None]].sum(axis=1)  # (b, H, H)
        scores = np.where(below, scores, -np.inf)
        top = scores[:, 1:].max(axis=-1)  # (b, H-1)
        dead = ~np.isfinite(top)
        if dead.any():
            b, hh = (int(i) for i in np.argwhere(dead)[0])
            where = f"context[b={start + b}]" if batched else "the context"
            raise TheoryError(
                f"{where} has probability 0 under pi for every candidate parent of h = {hh + 1} "
                f"(all log-scores are -inf), so the posterior of pa({hh + 1}) is undefined")
        w = np.exp(scores[:, 1:] - top[..., None])
        out[start:start + chunk, 1:] = w / w.sum(axis=-1, keepdims=True)
    return out if batched else out[0]


def bma_predictive(context, target_prefix, pi, h: int) -> np.ndarray:
    """BMA predictive ``P(x^{L+1}_h = . | context, prefix) = sum_h' post[h'] pi[x^{L+1}_h', .]``.

    ``post`` is the W Lemma 1 posterior of ``pa(h)`` (the prefix does not change it);
    this is the "mixture" reading of W Theorem 1's prediction.

    Parameters
    ----------
    context : array_like of int, shape (L, H)
    target_prefix : array_like of int, length ``>= h``
        The target sequence ``x^{L+1}``; only positions ``0..h-1`` are read.
    pi : array_like, shape (d, d), row-stochastic
    h : int, ``1 <= h <= H-1``

    Returns
    -------
    ndarray, shape (d,), a probability vector.
    """
    pi = validate_stochastic(pi)
    ctx, _ = _validate_context(context, pi.shape[0], allow_batch=False)
    h = _validate_h(h, ctx.shape[1])
    prefix = _validate_prefix(target_prefix, pi.shape[0], h)
    post = bma_posterior(ctx, pi, h)
    return post @ pi[prefix]


# -- brute-force oracle ------------------------------------------------------------------
def recursive_trees(H: int) -> Iterator[tuple[int, ...]]:
    """Every recursive tree on ``H`` nodes as a parent tuple: ``parents[0] = -1``, ``parents[h] in 0..h-1``.

    There are ``(H-1)!`` of them, each with prior probability ``1/(H-1)!`` under W's
    ``pa(h) ~ Unif{0..h-1}``. Yields in lexicographic order.
    """
    if not _is_integer_scalar(H) or int(H) < 1:
        raise TheoryError(f"H = {H!r} must be a positive integer number of nodes")
    H = int(H)
    for rest in itertools.product(*(range(h) for h in range(1, H))):
        yield (-1,) + rest


def _logsumexp(a: np.ndarray) -> float:
    top = a.max()
    if not np.isfinite(top):
        return -math.inf
    return float(top + np.log(np.exp(a - top).sum()))


def bma_posterior_bruteforce(context, pi, h: int, root=None, target_prefix=None, parent_prior=None) -> np.ndarray:
    """Exact Bayes posterior of ``pa(h)`` by summing over every recursive tree (oracle for W Lemma 1).

    ``P(pa(h) = h' | data) = sum_{G: pa_G(h) = h'} P(data | G) / sum_G P(data | G)`` with a
    uniform prior over the ``(H-1)!`` recursive trees ``G`` and

        P(context | G) = prod_l nu(x^l_0) prod_{k >= 1} pi[x^l_pa(k), x^l_k],

    times, if ``target_prefix`` is given, the prefix likelihood
    ``nu(x_0) prod_{1 <= k < h} pi[x_pa(k), x_k]`` of the target ``x^{L+1}_{0..h-1}``.
    Sums are done with log-sum-exp, so the result is accurate to ~1e-12 with entries far
    below 1e-8. Deliberately does not use the per-node factorisation behind the closed form.

    Parameters
    ----------
    context : array_like of int, shape (L, H), ``H <= MAX_BRUTEFORCE_H`` (7)
    pi : array_like, shape (d, d), row-stochastic
    h : int, ``1 <= h <= H-1``
    root : None or array_like, shape (d,)
        Root law ``nu``; ``None`` = stationary law of ``pi``.
    target_prefix : None or array_like of int, length ``>= h``
    parent_prior : None or array_like, shape (H, H)
        Independent parent priors ``q[k, j] = P(pa(k) = j)`` (rows ``k >= 1`` summing to 1 over
        ``j < k``); ``None`` is W's uniform prior. A non-uniform prior is how a test breaks
        W Lemma 1's assumption: the closed form then no longer equals the posterior.

    Returns
    -------
    ndarray, shape (h,).

    Raises
    ------
    TheoryError
        If ``H > 7``, or if the data have probability 0 under every tree.
    """
    pi = validate_stochastic(pi)
    d = pi.shape[0]
    ctx, _ = _validate_context(context, d, allow_batch=False)
    L, H = ctx.shape
    if H > MAX_BRUTEFORCE_H:
        raise TheoryError(
            f"brute force enumerates (H-1)! trees; H = {H} exceeds the limit H <= {MAX_BRUTEFORCE_H}")
    h = _validate_h(h, H)
    nu = _root_law(pi, root)
    logpi, lognu = _log(pi), _log(nu)
    trees = np.array(list(recursive_trees(H)), dtype=np.int64)  # (G, H)
    # Full-tree log-likelihood of every example under every tree: (L, G, H-1) -> (G,)
    child = ctx[:, None, 1:]  # (L, 1, H-1)
    par_tok = ctx[:, trees[:, 1:]]  # (L, G, H-1)
    loglik = logpi[par_tok, child].sum(axis=(0, 2)) + lognu[ctx[:, 0]].sum()
    if parent_prior is not None:
        loglik = loglik + _tree_log_prior(parent_prior, trees, H)
    if target_prefix is not None:
        pre = _validate_prefix(target_prefix, d, h)
        loglik = loglik + lognu[pre[0]]
        if h > 1:
            loglik = loglik + logpi[pre[trees[:, 1:h]], pre[1:h]].sum(axis=1)
    total = _logsumexp(loglik)
    if not np.isfinite(total):
        raise TheoryError(
            f"the data have probability 0 under pi for every recursive tree on {H} nodes, "
            f"so the posterior of pa({h}) is undefined")
    return np.array([math.exp(_logsumexp(loglik[trees[:, h] == c]) - total) for c in range(h)])


def _tree_log_prior(parent_prior, trees: np.ndarray, H: int) -> np.ndarray:
    """``sum_k log q[k, pa(k)]`` for every tree, from a validated independent parent prior."""
    q = np.asarray(parent_prior, dtype=np.float64)
    if q.shape != (H, H):
        raise TheoryError(f"parent_prior must have shape ({H}, {H}), got {q.shape}")
    for k in range(1, H):
        row = q[k, :k]
        if not np.all(np.isfinite(row)) or np.any(row < 0) or abs(row.sum() - 1) > 1e-8:
            raise TheoryError(f"parent_prior row {k} must be a probability vector over 0..{k - 1}, got {row.tolist()}")
        if np.any(q[k, k:] != 0):
            raise TheoryError(f"parent_prior row {k} puts mass on positions >= {k}")
    with np.errstate(divide="ignore"):
        logq = np.log(q)
    return logq[np.arange(1, H)[None, :], trees[:, 1:]].sum(axis=1)


# -- W Lemma 4 ------------------------------------------------------------------------------
def expected_loglik(pi, tree, cand: int, h: int, root=None) -> float:
    """``E[log pi(x_h | x_cand)] = sum_{a,b} P(x_cand = a, x_h = b) log pi[a, b]`` (W Lemma 4).

    The expected log-score of candidate ``cand`` for position ``h`` on the tree. W Lemma 4:
    it is largest at ``cand = pa(h)`` (``>=`` always; ``>`` under W Lemma 3's conditions
    when ``I(x_h; x_pa(h)) > 0``). Convention ``0 log 0 = 0``.

    Parameters
    ----------
    pi : array_like, shape (d, d), row-stochastic
    tree : CausalTree or parent array
    cand : int, ``0 <= cand < h``
    h : int, a node of the tree, ``h >= 1``
    root : None or array_like, shape (d,); ``None`` = stationary law of ``pi``.

    Returns
    -------
    float, ``<= 0``; ``-inf`` if the joint puts mass where ``pi`` is 0.
    """
    pi = validate_stochastic(pi)
    tree = as_tree(tree)
    for name, v in (("h", h), ("cand", cand)):
        if not _is_integer_scalar(v):
            raise TheoryError(f"{name} = {v!r} is not an integer position")
    h, cand = int(h), int(cand)
    if not 1 <= h < tree.n:
        raise TheoryError(f"h = {h} is out of range 1..{tree.n - 1} for a tree with {tree.n} nodes")
    if not 0 <= cand < h:
        raise TheoryError(f"cand = {cand} is not a candidate parent of h = {h} (candidates are 0..{h - 1})")
    joint = pairwise_joint(pi, tree, cand, h, root=root)
    mass = joint > 0
    if np.any(mass & (pi == 0)):
        return -math.inf
    return float(np.sum(joint[mass] * np.log(pi[mass])))
