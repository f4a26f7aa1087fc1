"""f-divergences and f-mutual informations, in nats.

Two layers (as in dit): kernels on probability vectors / joint pmfs here, and wrappers
on ``(pi, tree)`` in :mod:`theory.joint` callers. Kinds:

- ``"kl"``: ``D(p||q) = sum p log(p/q)``  (``0 log 0 = 0``; ``+inf`` if ``p > 0 = q``)
- ``"chi2"``: ``chi2(p||q) = sum (p - q)^2 / q = sum p^2/q - 1``  (``+inf`` if ``p > 0 = q``)
- ``"tv"``: ``TV(p, q) = (1/2) sum |p - q|``
- ``"hellinger"``: squared Hellinger ``H^2(p, q) = sum (sqrt p - sqrt q)^2`` (range ``[0, 2]``;
  Polyanskiy & Wu's normalisation, the reference W cites for Lemma 2)

``I_f(X; Y) = D_f(P_XY || P_X x P_Y)``; e.g. ``I_chi2 = sum P^2/(Px Py) - 1`` (W Lemma 2,
N Lemma 5.x). Mutual informations are always finite.
"""
from __future__ import annotations

import numpy as np

from .errors import TheoryError, as_real_array
from .markov import ROW_SUM_ATOL

__all__ = ["KINDS", "f_divergence", "mutual_information", "entropy"]

KINDS = ("kl", "chi2", "tv", "hellinger")


def _check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise TheoryError(f"unknown divergence kind {kind!r}; expected one of {', '.join(KINDS)}")
    return kind


def _as_pmf(x, name: str) -> np.ndarray:
    arr = as_real_array(x, name)
    if arr.size == 0:
        raise TheoryError(f"{name} is empty")
    flat = arr.reshape(-1)
    bad = np.flatnonzero(~np.isfinite(flat))
    if bad.size:
        idx = np.unravel_index(bad[0], arr.shape)
        raise TheoryError(f"{name}{[int(i) for i in idx]} = {flat[bad[0]]} is not finite")
    bad = np.flatnonzero(flat < 0)
    if bad.size:
        idx = np.unravel_index(bad[0], arr.shape)
        raise TheoryError(f"{name}{[int(i) for i in idx]} = {flat[bad[0]]:.6g} is negative")
    s = flat.sum()
    if abs(s - 1.0) > ROW_SUM_ATOL:
        raise TheoryError(f"{name} sums to {s:.12g} (off by {s - 1:+.3g}); a pmf must sum to 1")
    return arr


def _divergence(p: np.ndarray, q: np.ndarray, kind: str) -> float:
    """Kernel on validated pmfs of one shape (every step is elementwise or a sum over all entries)."""
    if kind == "tv":
        return float(0.5 * np.abs(p - q).sum())
    if kind == "hellinger":
        return float(((np.sqrt(p) - np.sqrt(q)) ** 2).sum())
    qpos = q > 0
    if np.any(p[~qpos] > 0):
        return float("inf")
    p, q = p[qpos], q[qpos]
    if kind == "kl":
        ppos = p > 0
        # log p - log q, not log(p / q): the ratio overflows for subnormal q
        return float(max(0.0, np.sum(p[ppos] * (np.log(p[ppos]) - np.log(q[ppos])))))
    with np.errstate(over="ignore"):
        return float(np.sum((p - q) ** 2 / q))  # chi2; inf only when the true value exceeds float range


def _mutual_information(P: np.ndarray, kind: str) -> float:
    """``I_f`` from a validated 2-d joint, never forming ``P_x P_y`` where it could underflow.

    With ``lr = log P - log P_x - log P_y`` on the support of ``P``:
    KL ``= sum P lr``; chi2 ``= sum_{P>0} P (e^{lr} - 2 + e^{-lr}) + sum_{P=0} P_x P_y`` where
    ``e^{lr} - 2 + e^{-lr} = e^{|lr|} (1 - e^{-|lr|})^2`` is evaluated in log space.
    """
    a, b = P.sum(axis=1), P.sum(axis=0)
    if kind == "tv":
        return float(0.5 * np.abs(P - np.outer(a, b)).sum())
    if kind == "hellinger":
        return float(((np.sqrt(P) - np.outer(np.sqrt(a), np.sqrt(b))) ** 2).sum())
    i, j = np.nonzero(P > 0)
    p = P[i, j]
    lr = np.log(p) - np.log(a[i]) - np.log(b[j])
    if kind == "kl":
        return float(max(0.0, np.sum(p * lr)))
    x = np.abs(lr)
    # Each term is at most max(p, P_x P_y) <= 1 (p <= P_x, P_y), so exp cannot overflow.
    with np.errstate(divide="ignore"):
        terms = np.exp(np.log(p) + x + 2 * np.log(-np.expm1(-x)))  # lr = 0 gives log(0) = -inf -> 0
    zero = P <= 0
    return float(terms.sum() + (np.outer(a, b)[zero]).sum())


def f_divergence(p, q, kind: str = "kl") -> float:
    """``D_f(p || q)`` for ``kind`` in ``"kl"``, ``"chi2"``, ``"tv"``, ``"hellinger"`` (nats).

    Parameters
    ----------
    p, q : array_like, same shape, each a pmf (non-negative, summing to 1)

    Returns
    -------
    float, ``>= 0``; ``+inf`` for KL and chi-square when ``p`` puts mass where ``q`` has none.
    """
    kind = _check_kind(kind)
    p, q = _as_pmf(p, "p"), _as_pmf(q, "q")
    if p.shape != q.shape:
        raise TheoryError(f"p and q must have the same shape, got {p.shape} and {q.shape}")
    return _divergence(p, q, kind)


def mutual_information(joint, kind: str = "kl") -> float:
    """``I_f(X; Y) = D_f(P_XY || P_X P_Y)`` for a joint pmf ``joint[a, b] = P(X = a, Y = b)``.

    ``kind="chi2"`` gives ``sum P^2/(Px Py) - 1`` (W Lemma 2; N's ``I_chi2``). Always
    finite, and zero exactly when ``X`` and ``Y`` are independent.
    """
    kind = _check_kind(kind)
    P = _as_pmf(joint, "joint")
    if P.ndim != 2:
        raise TheoryError(f"joint must be a 2-d pmf P[a, b] = P(X = a, Y = b), got shape {P.shape}")
    return _mutual_information(P, kind)


def entropy(p) -> float:
    """Shannon entropy ``-sum p log p`` in nats (``0 log 0 = 0``)."""
    p = _as_pmf(p, "p")
    p = p[p > 0]
    return float(max(0.0, -np.sum(p * np.log(p))))
