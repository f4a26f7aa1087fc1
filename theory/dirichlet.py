"""Bayes predictors for N's task with a Dirichlet prior on the rows of ``pi`` (claim N.T).

N's task (N Knowl 2, 0-indexed here): a fixed DAG on positions ``0..T-1`` (at most one
parent each, ``parents[i] < i``); position ``T-1`` is the query, a root drawn from
``Unif[S]`` independently of ``pi``. Draw ``pi`` with i.i.d. ``Dirichlet(alpha 1_S)`` rows; every
other root ``s_r ~ mu_pi`` (the stationary law); every non-root ``s_i ~ pi(s_p(i), .)``; the
target is ``y ~ pi(s_{T-1}, .)``.

Writing ``n(s, s')`` for the number of DAG edges ``j -> i`` with ``(s_j, s_i) = (s, s')``, the
prompt's likelihood given ``pi`` is

    (1/S) prod_{roots r < T-1} mu_pi(s_r) prod_{s,s'} pi(s, s')^{n(s, s')}.

Without the ``mu_pi`` factors (roots independent of ``pi``) the Dirichlet prior is conjugate
and the posterior predictive is the add-alpha estimator ``(alpha + n(q, .)) / (S alpha + n(q))``
(N Knowl 8's empirical estimator, smoothed). The ``mu_pi`` factors break conjugacy; for
``S = 2`` :func:`bayes_quadrature_s2` integrates them out to near machine precision, and
:func:`bayes_predictive_estimate` gives an importance-sampling estimate for any ``S``.

The add-alpha counts over a batch of prompts on one DAG (:func:`edge_count_rows`,
:func:`add_alpha_batch`) are the same counting as the per-prompt :func:`add_alpha_predictive`,
which calls them on a batch of one.
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np
from scipy import integrate, linalg, special

from .errors import TheoryError
from .joint import as_tree
from .markov import stationary_batch
from .structures import CausalTree

__all__ = [
    "edge_counts",
    "edge_count_rows",
    "add_alpha_batch",
    "add_alpha_predictive",
    "exact_bayes_predictive",
    "bayes_quadrature_s2",
    "BayesQuadrature",
    "bayes_predictive_estimate",
    "dirichlet_row_entropy",
    "entropy_rate_quadrature",
    "ROOT_LAWS",
    "ROOT_SOURCES",
    "MAX_QUADRATURE_COUNTS",
]

#: How non-query roots are drawn: from ``mu_pi`` (N's task) or independently of ``pi``.
ROOT_LAWS = ("stationary", "independent")
#: Largest number of edge and root counts :func:`bayes_quadrature_s2` takes. Checked against the
#: closed form it must equal under ``root_law="independent"`` (add-alpha): within 1e-15 up to 129
#: counts (alpha 0.1 to 3, 60 chains); beyond, the product Gauss-Jacobi rules lose accuracy (1.6e-9 at
#: 200 counts, 1e-7 at 240, 0.35 at 330) and the change between orders n and n + 8 (``abserr``) no
#: longer bounds the error (it can be 0 where the error is 1e-9).
MAX_QUADRATURE_COUNTS = 128
#: What :func:`edge_count_rows` reads as a non-query root's parent: nothing (the task's edges), or
#: the last context token ``s_{T-2}`` (N's reference code).
ROOT_SOURCES = ("none", "last")


# -- validation ------------------------------------------------------------------------------
def _check_alpha(alpha) -> float:
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        raise TheoryError(f"alpha = {alpha!r} is not a number") from None
    if not (np.isfinite(a) and a > 0):
        raise TheoryError(f"alpha = {alpha!r} must be a finite number > 0 (Dirichlet concentration)")
    return a


def _check_S(S) -> int:
    if isinstance(S, (bool, np.bool_)) or not isinstance(S, (int, np.integer)) or int(S) < 2:
        raise TheoryError(f"S = {S!r} must be an integer >= 2 (alphabet size)")
    return int(S)


def _check_query_root(tree: CausalTree) -> None:
    q = tree.n - 1
    if tree.parents[q] != -1:
        raise TheoryError(
            f"the query position T-1 = {q} must be a root (N's query s_T ~ Unif[S]), "
            f"but the tree gives it parent {int(tree.parents[q])}")


def _check_prompt(prompt, tree, S: int) -> tuple[np.ndarray, CausalTree]:
    tree = as_tree(tree)
    try:
        arr = np.asarray(prompt)
    except Exception as exc:
        raise TheoryError(f"prompt could not be read as an array: {exc}") from None
    if arr.ndim != 1 or arr.size == 0:
        raise TheoryError(f"prompt must be a non-empty 1-d token array s_0..s_(T-1), got shape {arr.shape}")
    if arr.size != tree.n:
        raise TheoryError(f"prompt has length {arr.size} but the tree has T = {tree.n} positions")
    for i, v in enumerate(arr.tolist()):
        if isinstance(v, bool) or not (isinstance(v, int) or (isinstance(v, float) and float(v).is_integer())):
            raise TheoryError(f"prompt position {i}: token {v!r} is not an integer")
        if not 0 <= int(v) < S:
            raise TheoryError(f"prompt position {i}: token {int(v)} is out of range 0..{S - 1} (S = {S})")
    _check_query_root(tree)
    return arr.astype(np.int64), tree


def _check_prompt_batch(tokens, tree, S: int) -> tuple[np.ndarray, CausalTree]:
    """``tokens`` as an int64 array ``(B, T)`` in ``0..S-1`` for a tree on ``T`` positions whose query ``T-1`` is a root."""
    tree = as_tree(tree)
    try:
        x = np.asarray(tokens)
    except Exception as exc:
        raise TheoryError(f"tokens could not be read as an array: {exc}") from None
    if x.ndim != 2 or x.shape[1] != tree.n:
        raise TheoryError(f"tokens must have shape (B, T) with T = {tree.n} (the tree's positions), got shape {x.shape}")
    if not np.issubdtype(x.dtype, np.integer):  # bool is not an integer dtype here
        if not np.issubdtype(x.dtype, np.floating):
            raise TheoryError(f"tokens must be integers, got dtype {x.dtype}")
        bad = np.argwhere(~(np.isfinite(x) & (x == np.round(x))))
        if bad.size:
            b, i = bad[0]
            raise TheoryError(f"tokens[{b}, {i}] = {float(x[b, i])!r} is not an integer")
    bad = np.argwhere((x < 0) | (x >= S))
    if bad.size:
        b, i = bad[0]
        raise TheoryError(f"tokens[{b}, {i}] = {x[b, i].item()} is out of range 0..{S - 1} (S = {S})")
    _check_query_root(tree)
    return x.astype(np.int64), tree


def edge_counts(prompt, tree, S: int) -> tuple[np.ndarray, np.ndarray]:
    """Transition counts along the DAG and root counts of a prompt.

    ``n[s, s'] = #{edges j -> i : (s_j, s_i) = (s, s')}`` over the edges among positions
    ``0..T-2`` (the query ``T-1`` is a root), and ``r[s] = #{roots i < T-1 : s_i = s}``.

    Returns
    -------
    (n, r) : ndarray (S, S) of int, ndarray (S,) of int
    """
    S = _check_S(S)
    arr, tree = _check_prompt(prompt, tree, S)
    par = tree.parents[:-1]
    body = arr[:-1]
    n = np.zeros((S, S), dtype=np.int64)
    nonroot = par >= 0
    np.add.at(n, (arr[par[nonroot]], body[nonroot]), 1)
    r = np.bincount(body[~nonroot], minlength=S).astype(np.int64)
    return n, r


# -- add-alpha counts over a batch of prompts on one DAG -------------------------------------------
def _query_row_counts(x: np.ndarray, parents: np.ndarray, S: int, root_source: str) -> np.ndarray:
    """The counting of :func:`edge_count_rows` on validated ``x (B, T)`` and ``parents (T,)``."""
    B, T = x.shape
    src = parents[: T - 1].copy()  # the query's own entry is -1 (checked): not an edge
    if root_source == "last":
        src[src < 0] = T - 2
    keep = np.flatnonzero(src >= 0)
    match = (x[:, src[keep]] == x[:, -1:]).astype(np.float64)  # (B, n_edges): parent token == query
    counts = np.zeros((B, S))
    np.add.at(counts, (np.repeat(np.arange(B), keep.size), x[:, keep].ravel()), match.ravel())
    return counts  # (B, S)


def edge_count_rows(tokens, tree, S: int, *, root_source: str = "none") -> np.ndarray:
    """The query's row of the edge counts for each prompt of a batch on one DAG, ``(B, S)``.

    ``n[b, y] = #{edges j -> i among positions 0..T-2 : s_j = q, s_i = y}`` with ``q = s_{T-1}``
    the query of prompt ``b``: row ``q`` of :func:`edge_counts`' ``n``, as floats.

    ``root_source="last"`` also counts every non-query root ``i`` as a child of ``s_{T-2}``:
    N's reference ``InContextTree.bayes`` indexes ``seq[dag]`` with ``dag[i] = -1`` after the
    query was split off, which reads the last context token.

    Parameters
    ----------
    tokens : array_like of int, shape (B, T), tokens in ``0..S-1``
    tree : CausalTree or parent array, length T; position ``T-1`` must be a root
    S : int >= 2
    root_source : {"none", "last"}
    """
    if root_source not in ROOT_SOURCES:
        raise TheoryError(f"root_source must be one of {', '.join(map(repr, ROOT_SOURCES))}, got {root_source!r}")
    S = _check_S(S)
    x, tree = _check_prompt_batch(tokens, tree, S)
    return _query_row_counts(x, tree.parents, S, root_source)


def _add_alpha(counts: np.ndarray, alpha: float) -> np.ndarray:
    """``(alpha + n) / (S alpha + sum n)`` along the last axis: the one home of the add-alpha formula."""
    c = counts + alpha
    return c / c.sum(axis=-1, keepdims=True)


def add_alpha_batch(tokens, tree, alpha, S: int, *, root_source: str = "none") -> np.ndarray:
    """Add-alpha predictive ``(alpha + n(q, .)) / (S alpha + n(q))`` along the DAG's edges for a batch, ``(B, S)``.

    ``n`` from :func:`edge_count_rows` (same ``tokens``, ``tree``, ``root_source``); N Knowl 8's
    estimator, smoothed; with ``root_source="last"`` N's reference code's "Bayes". Row ``b``
    equals :func:`add_alpha_predictive` of prompt ``b`` (``root_source="none"``).
    """
    a = _check_alpha(alpha)
    return _add_alpha(edge_count_rows(tokens, tree, S, root_source=root_source), a)


# -- conjugate predictor -------------------------------------------------------------------------
def add_alpha_predictive(prompt, tree, alpha, S: int) -> np.ndarray:
    """Add-alpha estimator ``(alpha + n(q, s')) / (S alpha + n(q))`` along the DAG's edges (N Knowl 8, smoothed).

    ``q = prompt[-1]`` is the query, ``n(q, s')`` counts edges ``j -> i`` among positions
    ``0..T-2`` with ``(s_j, s_i) = (q, s')`` and ``n(q) = sum_s' n(q, s')``. This is the exact
    posterior predictive ``E[pi(q, .) | prompt]`` for i.i.d. ``Dirichlet(alpha)`` rows when
    roots are independent of ``pi`` (conjugacy); with roots ``~ mu_pi`` (N's task) it is not
    exact (see :func:`exact_bayes_predictive`). Same counting as :func:`add_alpha_batch`, on a
    batch of one.

    Parameters
    ----------
    prompt : array_like of int, shape (T,), tokens in ``0..S-1``
    tree : CausalTree or parent array, length T; position ``T-1`` must be a root
    alpha : float > 0
    S : int >= 2

    Returns
    -------
    ndarray, shape (S,), a probability vector.
    """
    a = _check_alpha(alpha)
    S = _check_S(S)
    arr, tree = _check_prompt(prompt, tree, S)
    return _add_alpha(_query_row_counts(arr[None], tree.parents, S, "none"), a)[0]  # a batch of one


# -- exact Bayes for S = 2 by quadrature -------------------------------------------------------------
class BayesQuadrature(NamedTuple):
    """Result of :func:`bayes_quadrature_s2`.

    predictive : ndarray (2,), ``E[pi(q, .) | prompt]``
    prompt_probability : float, ``P(prompt)`` under the task (query factor ``1/S`` included)
    abserr : float, estimated absolute error of ``predictive`` (difference between two rule orders)
    """

    predictive: np.ndarray
    prompt_probability: float
    abserr: float


@functools.lru_cache(maxsize=512)
def _gauss_jacobi_01(n: int, left: float, right: float) -> tuple[np.ndarray, np.ndarray]:
    """Gauss rule on ``[0, 1]`` for the weight ``u^left (1-u)^right`` (``left, right > -1``).

    Golub-Welsch on the three-term recurrence of the Jacobi polynomials shifted to
    ``[0, 1]``: this keeps full accuracy for exponents near -1, where nodes crowd the
    singular end (``scipy.special.roots_jacobi`` loses ~1e-11 there at n = 32).
    """
    A, B = float(right), float(left)  # Jacobi weight (1-x)^A (1+x)^B on [-1, 1], x = 2u - 1
    k = np.arange(n, dtype=np.float64)
    s = 2.0 * k + A + B
    with np.errstate(invalid="ignore", divide="ignore"):
        diag = (B * B - A * A) / (s * (s + 2.0))
    diag[0] = (B - A) / (A + B + 2.0)
    diag = (1.0 + diag) / 2.0
    kk = np.arange(1, n, dtype=np.float64)
    s = 2.0 * kk + A + B
    with np.errstate(invalid="ignore", divide="ignore"):
        off2 = 4.0 * kk * (kk + A) * (kk + B) * (kk + A + B) / (s * s * (s + 1.0) * (s - 1.0))
    if n > 1:
        off2[0] = 4.0 * (1.0 + A) * (1.0 + B) / ((2.0 + A + B) ** 2 * (3.0 + A + B))  # k = 1 without 0/0
    nodes, vecs = linalg.eigh_tridiagonal(diag, np.sqrt(off2) / 2.0)
    weights = special.beta(B + 1.0, A + 1.0) * vecs[0] ** 2
    nodes.setflags(write=False)  # cached: shared between calls
    weights.setflags(write=False)
    return nodes, weights


def _beta_box_integrals(p1, q1, p2, q2, r0, r1, n: int) -> np.ndarray:
    """``I[psi] = int_0^1 int_0^1 a^(p1-1) (1-a)^(q1-1) b^(p2-1) (1-b)^(q2-1) w(a, b) psi(a, b) da db``.

    ``w = (b/(a+b))^r0 (a/(a+b))^r1`` = ``mu_pi(0)^r0 mu_pi(1)^r1`` for
    ``pi = [[1-a, a], [b, 1-b]]``; ``psi`` in ``(1, a, b)``. Returns the three integrals.

    ``w`` has a direction-dependent limit at the corner ``(0, 0)``, so the box is split: on
    ``[0, 1/2]^2`` the coordinates ``s = a + b``, ``t = a / s`` make ``w = t^r1 (1-t)^r0`` a
    polynomial and leave only the algebraic factors ``s^(p1+p2-1)``, ``t^(p1-1)``, ``(1-t)^(p2-1)``
    singular; elsewhere ``a + b >= 1/2`` and ``w`` is analytic. Each piece is then a product
    Gauss-Jacobi rule whose weight carries the endpoint singularities, so the smooth
    remainder converges geometrically in ``n``.
    """
    out = np.zeros(3)

    def w_of(a, b):
        s = a + b
        return (b / s) ** r0 * (a / s) ** r1

    # Piece 1: a in [1/2, 1], b in [0, 1].
    ua, wa = _gauss_jacobi_01(n, 0.0, q1 - 1.0)  # a = 1/2 + u/2, weight (1-a)^(q1-1)
    a = 0.5 + 0.5 * ua
    wa = wa * 0.5 ** q1 * a ** (p1 - 1.0)
    b, wb = _gauss_jacobi_01(n, p2 - 1.0, q2 - 1.0)
    A, B = np.meshgrid(a, b, indexing="ij")
    W = np.outer(wa, wb) * w_of(A, B)
    out += [W.sum(), (W * A).sum(), (W * B).sum()]
    # Piece 2: a in [0, 1/2], b in [1/2, 1].
    ua, wa = _gauss_jacobi_01(n, p1 - 1.0, 0.0)  # a = u/2, weight a^(p1-1)
    a = 0.5 * ua
    wa = wa * 0.5 ** p1 * (1.0 - a) ** (q1 - 1.0)
    ub, wb = _gauss_jacobi_01(n, 0.0, q2 - 1.0)
    b = 0.5 + 0.5 * ub
    wb = wb * 0.5 ** q2 * b ** (p2 - 1.0)
    A, B = np.meshgrid(a, b, indexing="ij")
    W = np.outer(wa, wb) * w_of(A, B)
    out += [W.sum(), (W * A).sum(), (W * B).sum()]
    # Piece 3: [0, 1/2]^2 in (s, t): a = s t, b = s (1 - t), da db = s ds dt.
    gam = p1 + p2 - 1.0
    us, ws = _gauss_jacobi_01(n, gam, 0.0)  # sigma in [0, 1], weight sigma^gam; s = smax(t) sigma
    for lo, left, right in ((0.0, p1 - 1.0, 0.0), (0.5, 0.0, p2 - 1.0)):
        ut, wt = _gauss_jacobi_01(n, left, right)
        t = lo + 0.5 * ut
        wt = wt * 0.5 ** (left + right + 1.0)
        # Remaining smooth factors of t^(p1-1) (1-t)^(p2-1) on this half.
        if lo == 0.0:
            wt = wt * (1.0 - t) ** (p2 - 1.0)
        else:
            wt = wt * t ** (p1 - 1.0)
        smax = 0.5 / np.maximum(t, 1.0 - t)
        S_ = smax[:, None] * us[None, :]  # (n, n)
        A, B = S_ * t[:, None], S_ * (1.0 - t)[:, None]
        W = (wt * smax ** (gam + 1.0) * t ** r1 * (1.0 - t) ** r0)[:, None] * ws[None, :]
        W = W * (1.0 - A) ** (q1 - 1.0) * (1.0 - B) ** (q2 - 1.0)
        out += [W.sum(), (W * A).sum(), (W * B).sum()]
    return out


def bayes_quadrature_s2(prompt, tree, alpha, root_law: str = "stationary") -> BayesQuadrature:
    """Exact Bayes for N's task with ``S = 2``: ``E[pi(q, .) | prompt]`` and ``P(prompt)`` by 2-D quadrature.

    ``pi = [[1-a, a], [b, 1-b]]`` with ``a, b ~ Beta(alpha, alpha)`` i.i.d. (Dirichlet rows),
    ``mu_pi = (b, a)/(a+b)``. The posterior density of ``(a, b)`` is proportional to

        a^(alpha+n01-1) (1-a)^(alpha+n00-1) b^(alpha+n10-1) (1-b)^(alpha+n11-1) * w(a, b),

    ``w = mu_pi(0)^r0 mu_pi(1)^r1`` for ``root_law="stationary"`` (``r`` = non-query root
    counts; N's task) and ``w = 1`` for ``"independent"`` (then the answer is add-alpha).
    ``P(prompt) = (1/2) int prior * likelihood``; with ``"independent"`` the roots are taken
    uniform (``2^-#roots``). Integrals by product Gauss-Jacobi rules (see
    ``_beta_box_integrals``); ``abserr`` is the change between orders ``n`` and ``n + 8``. Prompts
    with more than ``MAX_QUADRATURE_COUNTS`` edge and root counts are refused (the rules lose
    accuracy beyond it).

    Parameters
    ----------
    prompt : array_like of int, shape (T,), tokens in {0, 1}
    tree : CausalTree or parent array, length T; ``T-1`` must be a root
    alpha : float > 0
    root_law : {"stationary", "independent"}

    Returns
    -------
    BayesQuadrature(predictive (2,), prompt_probability, abserr)
    """
    a = _check_alpha(alpha)
    if root_law not in ROOT_LAWS:
        raise TheoryError(f"unknown root_law {root_law!r}; expected one of {', '.join(ROOT_LAWS)}")
    n, r = edge_counts(prompt, tree, 2)
    counts = int(n.sum() + r.sum())
    if counts > MAX_QUADRATURE_COUNTS:
        raise TheoryError(
            f"the prompt has {counts} edge and root counts, above MAX_QUADRATURE_COUNTS = {MAX_QUADRATURE_COUNTS}, "
            "where the quadrature is checked; use bayes_predictive_estimate for an importance-sampling estimate "
            "with its standard error")
    q = int(np.asarray(prompt)[-1])
    p1, q1 = a + n[0, 1], a + n[0, 0]
    p2, q2 = a + n[1, 0], a + n[1, 1]
    r0, r1 = (int(r[0]), int(r[1])) if root_law == "stationary" else (0, 0)
    order = 16 + counts // 2

    def predictive_from(I):
        p_one = I[1] / I[0] if q == 0 else I[2] / I[0]  # P(next = 1 | q=0) = E[a]; P(next = 0 | q=1) = E[b]
        return np.array([1.0 - p_one, p_one]) if q == 0 else np.array([p_one, 1.0 - p_one])

    I = _beta_box_integrals(p1, q1, p2, q2, r0, r1, order)
    I2 = _beta_box_integrals(p1, q1, p2, q2, r0, r1, order + 8)
    pred, pred2 = predictive_from(I), predictive_from(I2)
    log_prior_norm = 2.0 * special.betaln(a, a)
    prob = 0.5 * math.exp(math.log(I2[0]) - log_prior_norm)
    if root_law == "independent":
        prob *= 0.5 ** int(r.sum())
    return BayesQuadrature(pred2, prob, float(np.max(np.abs(pred2 - pred))))


def exact_bayes_predictive(prompt, tree, alpha, S: int = 2, root_law: str = "stationary") -> np.ndarray:
    """Exact posterior predictive ``E[pi(q, .) | prompt]`` of N's task (claim N.T).

    With ``root_law="stationary"`` (N's task: non-query roots ``~ mu_pi``) the likelihood
    carries ``prod_roots mu_pi(s_r)``, which breaks Dirichlet conjugacy, so this is not the
    add-alpha estimator; with ``"independent"`` it equals add-alpha. Computed for ``S = 2``
    by quadrature (:func:`~theory.dirichlet.bayes_quadrature_s2`, absolute error ~1e-15); for ``S >= 3`` use
    :func:`bayes_predictive_estimate`.

    Returns
    -------
    ndarray, shape (S,).
    """
    S = _check_S(S)
    if S != 2:
        raise TheoryError(
            f"exact_bayes_predictive integrates numerically for S = 2 only (got S = {S}); "
            "use bayes_predictive_estimate for an importance-sampling estimate with its standard error")
    return bayes_quadrature_s2(prompt, tree, alpha, root_law=root_law).predictive


# -- any S: importance sampling ------------------------------------------------------------------
def bayes_predictive_estimate(prompt, tree, alpha, S: int, n_samples: int = 200_000, *, seed=None,
                              root_law: str = "stationary") -> tuple[np.ndarray, np.ndarray]:
    """Importance-sampling estimate of ``E[pi(q, .) | prompt]`` for N's task, any ``S``, with its standard error.

    Proposal: the conjugate posterior (rows ``pi(s, .) ~ Dirichlet(alpha + n(s, .))``,
    independent); weights ``w = prod_{roots r < T-1} mu_pi(s_r)`` (``w = 1`` for
    ``root_law="independent"``). Self-normalised estimate ``sum w pi(q, .) / sum w`` with the
    delta-method standard error ``sqrt(sum w^2 (pi(q, .) - est)^2) / sum w``.

    Parameters
    ----------
    prompt, tree, alpha, S : as in :func:`add_alpha_predictive`
    n_samples : int >= 2
    seed : int or numpy Generator (required: no global random state)
    root_law : {"stationary", "independent"}

    Returns
    -------
    (estimate, stderr) : ndarray (S,), ndarray (S,)
    """
    a = _check_alpha(alpha)
    S = _check_S(S)
    if root_law not in ROOT_LAWS:
        raise TheoryError(f"unknown root_law {root_law!r}; expected one of {', '.join(ROOT_LAWS)}")
    if isinstance(n_samples, (bool, np.bool_)) or not isinstance(n_samples, (int, np.integer)) or n_samples < 2:
        raise TheoryError(f"n_samples = {n_samples!r} must be an integer >= 2")
    if seed is None:
        raise TheoryError("seed is required (an int or numpy Generator): theory/ uses no global random state")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    n, r = edge_counts(prompt, tree, S)
    q = int(np.asarray(prompt)[-1])
    # (K, S, S): one Dirichlet draw per row, via normalised gammas.
    g = rng.standard_gamma(a + n[None, :, :].astype(np.float64), size=(n_samples, S, S))
    g = np.maximum(g, np.finfo(float).tiny)  # keep every entry positive so mu_pi is unique
    P = g / g.sum(axis=2, keepdims=True)
    if root_law == "stationary" and r.sum() > 0:
        mu = stationary_batch(P)
        logw = (np.log(mu) * r[None, :]).sum(axis=1)
        w = np.exp(logw - logw.max())
    else:
        w = np.ones(n_samples)
    rows = P[:, q, :]  # (K, S)
    wsum = w.sum()
    est = (w[:, None] * rows).sum(axis=0) / wsum
    stderr = np.sqrt(((w[:, None] * (rows - est)) ** 2).sum(axis=0)) / wsum
    return est, stderr


# -- entropy ------------------------------------------------------------------------------------
def dirichlet_row_entropy(alpha, S: int) -> float:
    """``E[-sum_t p_t log p_t]`` for ``p ~ Dirichlet(alpha 1_S)``: ``psi(S alpha + 1) - psi(alpha + 1)`` (nats).

    This is N's optimal loss ``L* = -E_pi[(1/S) sum_{s,s'} pi(s'|s) log pi(s'|s)]`` (N Knowl 1)
    when the rows of ``pi`` are i.i.d. ``Dirichlet(alpha)`` (each row contributes the same).
    Derivation: ``E[p_t log p_t] = (alpha / (S alpha)) (psi(alpha + 1) - psi(S alpha + 1))``.
    """
    a = _check_alpha(alpha)
    S = _check_S(S)
    return float(special.digamma(S * a + 1.0) - special.digamma(a + 1.0))


def entropy_rate_quadrature(alpha, S: int) -> tuple[float, float]:
    """N's ``L* = -E_pi[(1/S) sum_{s,s'} pi(s'|s) log pi(s'|s)]`` (N Knowl 1) for i.i.d.
    ``Dirichlet(alpha 1_S)`` rows, by one-dimensional quadrature: ``(value, abserr)``.

    Independent of the digamma closed form (:func:`dirichlet_row_entropy`): each row
    contributes the same, and by exchangeability of its entries
    ``E[-sum_t p_t log p_t] = -S E[p_1 log p_1]`` with the marginal ``p_1 ~ Beta(alpha, beta)``,
    ``beta = (S - 1) alpha``, so

        L* = -S / B(alpha, beta) * int_0^1 p^alpha (1 - p)^(beta - 1) log p dp.

    The integral is QUADPACK's QAWS rule for the algebraic-logarithmic weight
    ``p^alpha (1-p)^(beta-1) log p`` (endpoint singularities handled exactly, integrand 1);
    ``abserr`` is QUADPACK's error estimate scaled by the prefactor.
    """
    a = _check_alpha(alpha)
    S = _check_S(S)
    b = (S - 1) * a
    val, err = integrate.quad(lambda p: 1.0, 0.0, 1.0, weight="alg-loga", wvar=(a, b - 1.0),
                              epsabs=1e-15, epsrel=1e-14, limit=200)
    scale = S * math.exp(-special.betaln(a, b))
    return float(-scale * val), float(scale * err)
