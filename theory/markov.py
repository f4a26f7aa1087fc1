"""Transition matrices: validation, stationary laws, matrix powers.

Convention: ``pi[s, t] = P(child = t | parent = s)``; rows are the conditioning state,
so ``pi`` is row-stochastic and a law ``p`` (a row vector) moves one step as ``p @ pi``.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.sparse.csgraph import connected_components

from .errors import TheoryError, as_real_array

__all__ = [
    "validate_stochastic",
    "validate_prob_vector",
    "stationary",
    "stationary_batch",
    "stationary_positive",
    "closed_classes",
    "chain_structure_batch",
    "matrix_powers",
    "ROW_SUM_ATOL",
]

#: Largest accepted deviation of a row sum (or a law's total) from 1.
ROW_SUM_ATOL = 1e-8


def validate_stochastic(pi, *, name: str = "pi", atol: float = ROW_SUM_ATOL, square: bool = True) -> np.ndarray:
    """Check that ``pi`` is a square row-stochastic matrix and return it as float64.

    With ``square=False`` a rectangular channel ``K[x, y] = P(y | x)`` is accepted too.

    ``pi[s, t] = P(child = t | parent = s)``: entries finite and ``>= 0``, every row
    summing to 1 within ``atol``. Zero entries are allowed (reducible or periodic chains
    are valid transition matrices; functions that need a unique stationary law say so).

    Parameters
    ----------
    pi : array_like, shape (d, d)

    Returns
    -------
    ndarray, shape (d, d), float64 (a fresh copy).

    Raises
    ------
    TheoryError
        Naming the bad shape, the first NaN/inf or negative entry by ``[row, col]``, or
        the first row whose sum is off, with the sum.
    """
    arr = as_real_array(pi, name)
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0 or (square and arr.shape[0] != arr.shape[1]):
        want = "square (d, d)" if square else "2-d (d_in, d_out)"
        raise TheoryError(f"{name} must be a non-empty {want} matrix, got shape {arr.shape}")
    bad = np.argwhere(~np.isfinite(arr))
    if bad.size:
        r, c = bad[0]
        raise TheoryError(f"{name}[{r}, {c}] = {arr[r, c]} is not finite (row {r})")
    bad = np.argwhere(arr < 0)
    if bad.size:
        r, c = bad[0]
        raise TheoryError(f"{name}[{r}, {c}] = {arr[r, c]:.6g} is negative (row {r})")
    sums = arr.sum(axis=1)
    off = np.flatnonzero(np.abs(sums - 1.0) > atol)
    if off.size:
        r = off[0]
        raise TheoryError(
            f"{name} row {r} sums to {sums[r]:.12g} (off by {sums[r] - 1:+.3g}); every row must sum to 1 "
            f"(pi[s, t] = P(child = t | parent = s))")
    return arr


def validate_prob_vector(p, *, d: int | None = None, name: str = "p", atol: float = ROW_SUM_ATOL) -> np.ndarray:
    """Check that ``p`` is a probability vector (of length ``d`` if given); return float64."""
    arr = as_real_array(p, name)
    if arr.ndim != 1 or arr.size == 0:
        raise TheoryError(f"{name} must be a non-empty 1-d probability vector, got shape {arr.shape}")
    if d is not None and arr.size != d:
        raise TheoryError(f"{name} has length {arr.size}, expected {d} (one entry per state)")
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        raise TheoryError(f"{name}[{bad[0]}] = {arr[bad[0]]} is not finite")
    bad = np.flatnonzero(arr < 0)
    if bad.size:
        raise TheoryError(f"{name}[{bad[0]}] = {arr[bad[0]]:.6g} is negative")
    s = arr.sum()
    if abs(s - 1.0) > atol:
        raise TheoryError(f"{name} sums to {s:.12g} (off by {s - 1:+.3g}); a probability vector must sum to 1")
    return arr


def closed_classes(pi) -> list[list[int]]:
    """The closed communicating classes of the chain (recurrent classes), each sorted.

    Computed from the support of ``pi`` (entries ``> 0``), so an entry of ``1e-300``
    still connects two states.
    """
    pi = validate_stochastic(pi)
    n_comp, labels = connected_components(pi > 0, directed=True, connection="strong")
    classes = []
    for c in range(n_comp):
        members = np.flatnonzero(labels == c)
        outside = np.setdiff1d(np.arange(pi.shape[0]), members)
        if not np.any(pi[np.ix_(members, outside)] > 0):
            classes.append(members.tolist())
    return classes


def _bool_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.matmul(a.astype(np.int64), b.astype(np.int64)) > 0


def chain_structure_batch(pis: np.ndarray) -> dict[str, np.ndarray]:
    """N Knowl 2's conditions on a batch ``pis`` ``(n, d, d)``, each a boolean array ``(n,)``:

    - ``"unique stationary law"``: one closed class (transient states allowed);
    - ``"irreducible"``: one communicating class holding every state (``mu_pi`` unique, positive);
    - ``"aperiodic"``: every closed class has period 1.

    Vectorised on the zero pattern: reachability ``R`` by repeated squaring of ``(pi > 0) | I``;
    state ``i`` is recurrent iff everything it reaches reaches it back; a closed class is
    aperiodic iff its block of ``A^m`` is positive for Wielandt's ``m = (d - 1)^2 + 1``.
    """
    pis = np.asarray(pis, dtype=float)
    n, d, _ = pis.shape
    adj = pis > 0
    R = adj | np.eye(d, dtype=bool)[None]
    for _ in range(max(1, math.ceil(math.log2(max(d, 2))))):
        R = _bool_matmul(R, R)
    recurrent = np.all(~R | np.swapaxes(R, 1, 2), axis=2)  # (n, d): i -> j implies j -> i
    both = recurrent[:, :, None] & recurrent[:, None, :]
    unique = np.all(~both | R, axis=(1, 2))  # recurrent states all communicate
    irreducible = R.all(axis=(1, 2))
    power, base, m = np.broadcast_to(np.eye(d, dtype=bool), (n, d, d)).copy(), adj.copy(), (d - 1) ** 2 + 1
    while m:
        if m & 1:
            power = _bool_matmul(power, base)
        base = _bool_matmul(base, base)
        m >>= 1
    same_class = both & R & np.swapaxes(R, 1, 2)
    aperiodic = np.all(~same_class | power, axis=(1, 2))
    return {"unique stationary law": unique, "irreducible": irreducible, "aperiodic": aperiodic}


def _gth(P: np.ndarray) -> np.ndarray:
    """Stationary law of an irreducible stochastic matrix by Grassmann-Taksar-Heyman.

    GTH state reduction uses no subtractions, so it stays accurate for entries far
    below machine epsilon (Grassmann, Taksar & Heyman, Oper. Res. 33, 1985). States are
    eliminated from the one most likely to be left (largest exit probability) to the
    one least likely to be left, which becomes the reference with weight 1: the ratios
    the reduction forms then stay below 1/(smallest exit probability of the others),
    so entries down to the subnormal range do not overflow.

    That reference can still hold far less mass than another state (a state that is
    easy to leave but hard to reach, e.g. reached only through an entry of 1e-308): the
    ratio to it then overflows. The reduction is then repeated with each other state as
    the reference, and the first whose weights are all finite is kept; a reference
    with the largest mass always is, since every ratio to it is at most 1.
    """
    n = P.shape[0]
    exit_prob = P.sum(axis=1) - np.diag(P)  # computed from off-diagonals: no cancellation
    order = np.argsort(exit_prob, kind="stable")  # reference state first
    for ref in range(n):
        trial = order if ref == 0 else np.concatenate(([order[ref]], np.delete(order, ref)))
        x = _gth_reduce(P[np.ix_(trial, trial)][None].copy())[0]
        if np.all(np.isfinite(x)):
            out = np.empty(n)
            out[trial] = x
            return out
    raise TheoryError("the stationary law of pi over/underflows double precision (transition "
                      "probabilities span more than ~1e300); rescale or pass an explicit root law")


def _gth_reduce(A: np.ndarray) -> np.ndarray:
    """GTH on a stack ``A`` ``(n, d, d)`` (irreducible, stochastic; modified in place) with state 0
    as the reference: the stationary laws ``(n, d)``, normalised, with non-finite entries where a
    ratio overflowed."""
    n, d, _ = A.shape
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for k in range(d - 1, 0, -1):
            s = A[:, k, :k].sum(axis=1)  # = 1 - A[k, k] on the reduced chain, without cancellation
            A[:, :k, k] /= s[:, None]
            A[:, :k, :k] += A[:, :k, k][:, :, None] * A[:, k, :k][:, None, :]
        x = np.zeros((n, d))
        x[:, 0] = 1.0
        for j in range(1, d):
            x[:, j] = np.einsum("ki,ki->k", x[:, :j], A[:, :j, j])
        total = x.sum(axis=1, keepdims=True)
        ok = np.isfinite(total) & (total > 0)
        return np.where(ok, x / np.where(ok, total, 1.0), np.nan)


def stationary(pi) -> np.ndarray:
    """The unique stationary law ``mu`` of ``pi``: ``mu @ pi = mu``, ``sum(mu) = 1``.

    The law is unique exactly when the chain has one closed class (it may also have
    transient states, which get mass 0, and it may be periodic). Computed on the closed
    class by the GTH algorithm, which is accurate for tiny entries.

    Parameters
    ----------
    pi : array_like, shape (d, d), row-stochastic

    Returns
    -------
    ndarray, shape (d,)

    Raises
    ------
    TheoryError
        If the chain has several closed classes (then every mixture of their laws is
        stationary): the message lists them; pass an explicit root law instead.
    """
    pi = validate_stochastic(pi)
    classes = closed_classes(pi)
    if len(classes) != 1:
        raise TheoryError(
            f"pi has {len(classes)} closed classes {classes}, so its stationary law is not unique; "
            "pass an explicit root law (root=...) instead of the stationary one")
    cls = classes[0]
    mu = np.zeros(pi.shape[0])
    sub = pi[np.ix_(cls, cls)]
    sub = sub / sub.sum(axis=1, keepdims=True)  # exact already; guards round-off drift
    mu[cls] = _gth(sub)
    return mu


#: Up to this many states :func:`stationary_positive` reduces on Python floats (a few microseconds);
#: above it the per-entry loop costs more than numpy's overhead, and ``_gth`` runs instead.
_SCALAR_GTH_MAX_D = 8


def stationary_positive(pi) -> np.ndarray:
    """The stationary law of a transition matrix with every entry ``> 0``, for inner loops.

    A matrix with every entry positive is irreducible, so its law is unique and the closed-class
    analysis of :func:`stationary` (and the support check of :func:`stationary_batch`) can be
    skipped: this is the fast path an optimiser's inner loop calls thousands of times. It is the
    same GTH reduction (``mu @ pi = mu``, ``sum(mu) = 1``, solved without subtractions, so entries
    far below machine epsilon stay accurate): for ``d <= 8`` on Python floats, the last state
    eliminated first, state 0 the reference; should a ratio over/underflow (probabilities spanning
    ~1e300), or for larger ``d``, ``_gth`` with its ordering of the states.

    Parameters
    ----------
    pi : array_like, shape (d, d), row-stochastic, every entry > 0

    Returns
    -------
    ndarray, shape (d,)

    Raises
    ------
    TheoryError
        If ``pi`` is not square, or has an entry that is not ``> 0`` (NaN included): then
        :func:`stationary` is the function to call. Row sums are not checked (the callers build
        ``pi`` row-stochastic; :func:`validate_stochastic` checks them).
    """
    P = np.asarray(pi, dtype=np.float64)
    if P.ndim != 2 or P.shape[0] != P.shape[1] or P.shape[0] == 0:
        raise TheoryError(f"pi must be a non-empty square matrix, got shape {P.shape}")
    if not (P > 0).all():  # NaN fails this too
        r, c = np.argwhere(~(P > 0))[0]
        raise TheoryError(f"pi[{r}, {c}] = {P[r, c]} is not > 0: stationary_positive needs every entry positive; "
                          "use stationary() for a general chain")
    d = P.shape[0]
    if d > _SCALAR_GTH_MAX_D:
        return _gth(P)
    A = P.tolist()
    for k in range(d - 1, 0, -1):  # eliminate state k: censor the chain on states 0..k-1
        row_k = A[k]
        exit_k = sum(row_k[:k])  # = 1 - A[k][k] on the reduced chain, without cancellation
        for i in range(k):
            row_i = A[i]
            ratio = row_i[k] / exit_k
            row_i[k] = ratio
            for j in range(k):
                row_i[j] += ratio * row_k[j]
    x = [1.0]
    for j in range(1, d):
        x.append(math.fsum(x[i] * A[i][j] for i in range(j)))
    total = math.fsum(x)
    if not (math.isfinite(total) and total > 0):
        return _gth(P)
    return np.array([v / total for v in x])


def stationary_batch(P) -> np.ndarray:
    """Stationary laws of a stack of row-stochastic matrices, ``(..., d, d) -> (..., d)``.

    The batched form of :func:`stationary`: on every irreducible matrix the same GTH reduction,
    with the states eliminated in the same order (largest exit probability first) and ``mu @ P =
    mu`` solved without subtractions, so tiny entries stay accurate. Irreducibility is checked
    on the support: the reachability ``R = (I + [P > 0])^(2^k)``, ``2^k >= d``, is all true. A
    matrix that is not irreducible, or whose reduction over/underflows, gets :func:`stationary`
    on its own (a unique law on one closed class, or :class:`~theory.TheoryError` naming the classes).
    """
    P = np.asarray(P, dtype=np.float64)
    if P.ndim < 2 or P.shape[-1] != P.shape[-2]:
        raise TheoryError(f"expected a stack of square matrices (..., d, d), got shape {P.shape}")
    batch, d = P.shape[:-2], P.shape[-1]
    flat = P.reshape(-1, d, d)
    n = len(flat)
    out = np.full((n, d), np.nan)
    if n == 0:
        return out.reshape(batch + (d,))
    irreducible = (flat > 0).all(axis=(1, 2))  # a positive matrix is irreducible: no paths to count
    rest = np.flatnonzero(~irreducible)
    if len(rest):
        reach = (flat[rest] > 0) | np.eye(d, dtype=bool)
        steps = 1
        while steps < d:  # boolean squaring: paths of length up to 2^k
            reach = np.einsum("bij,bjk->bik", reach.astype(np.int64), reach.astype(np.int64)) > 0
            steps *= 2
        irreducible[rest] = reach.all(axis=(1, 2))
    idx = np.flatnonzero(irreducible)
    if len(idx):
        A = flat[idx] / flat[idx].sum(axis=2, keepdims=True)  # as stationary() does: round-off drift
        m = np.arange(len(idx))
        exit_prob = A.sum(axis=2) - np.einsum("kii->ki", A)  # off-diagonal sums: no cancellation
        order = np.argsort(exit_prob, axis=1, kind="stable")  # reference state first
        A = A[m[:, None, None], order[:, :, None], order[:, None, :]]  # a copy: reduced in place
        out[idx[:, None], order] = _gth_reduce(A)
    bad = ~np.isfinite(out).all(axis=1)  # not irreducible, or a ratio over/underflowed
    for b in np.flatnonzero(bad):
        out[b] = stationary(flat[b])
    return out.reshape(batch + (d,))


def matrix_powers(pi: np.ndarray, k_max: int) -> np.ndarray:
    """``pi^0 .. pi^k_max`` stacked, shape ``(k_max + 1, d, d)``; ``pi`` must be validated."""
    d = pi.shape[0]
    out = np.empty((k_max + 1, d, d))
    out[0] = np.eye(d)
    for k in range(1, k_max + 1):
        out[k] = out[k - 1] @ pi
    return out
