"""The continuous (Gaussian) system of W Proposition 2 (claim W.P2).

Model: ``x_0 ~ N(0, I_d)``; for ``h >= 1``,
``x_h = rho A^T x_pa(h) + sqrt(1 - rho^2) eta_h`` with ``A`` in ``O(d)``, ``eta_h ~ N(0, I_d)``
and a uniform parent prior (W's random recursive tree, 0-indexed). As in W Lemma 1 the
parent posterior given ``L`` context examples factorises over positions, so

    P(pa(h) = h' | context) = softmax_{h' < h} sum_l log N(x_h^l; rho A^T x_h'^l, (1 - rho^2) I).

Expanding the square (``A`` orthogonal, so ``||A^T x||= ||x||``) the logit equals, up to a
term that does not depend on ``h'``,

    c1 sum_l x_h'^lT A x_h^l + c2 sum_l ||x_h'^l||^2,  c1 = rho/(1 - rho^2),  c2 = -rho^2/(2(1 - rho^2)),

and since ``c2 != 0`` for ``rho != 0`` no bilinear score ``sum_l x_h'^lT W x_h^l`` reproduces
it (W Proposition 2; :func:`theory.symbolic.derive_w_p2` derives the constants).
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

from .errors import TheoryError, as_real_array

__all__ = [
    "gaussian_bma_constants",
    "gaussian_bma_logits",
    "gaussian_bma_posterior",
    "bilinear_logits",
    "ORTHOGONALITY_ATOL",
]

#: Largest accepted ``max |A^T A - I|`` for an orthogonal ``A``.
ORTHOGONALITY_ATOL = 1e-8


def _validate_rho(rho) -> float:
    if isinstance(rho, (bool, np.bool_)):
        raise TheoryError(f"rho must be a real number with |rho| < 1, got {rho!r}")
    try:
        r = float(rho)
    except (TypeError, ValueError):
        raise TheoryError(f"rho must be a real number with |rho| < 1, got {rho!r}") from None
    if not math.isfinite(r) or abs(r) >= 1:
        raise TheoryError(f"rho = {rho!r} is outside (-1, 1): the noise scale sqrt(1 - rho^2) must be positive")
    return r


def gaussian_bma_constants(rho) -> tuple[float, float]:
    """``(c1, c2) = (rho / (1 - rho^2), -rho^2 / (2 (1 - rho^2)))`` of W Proposition 2.

    The BMA logit of candidate ``h'`` is ``c1 sum_l x_h'^T A x_h + c2 sum_l ||x_h'||^2`` up
    to a term independent of ``h'``. ``rho = 0`` gives ``(0, 0)`` (no information).

    Parameters
    ----------
    rho : float, ``|rho| < 1``
    """
    r = _validate_rho(rho)
    s = 1.0 - r * r
    return r / s, -r * r / (2.0 * s)


def _validate_context(context, name: str = "context") -> np.ndarray:
    x = as_real_array(context, name)
    if x.ndim not in (3, 4) or 0 in x.shape:
        raise TheoryError(f"{name} must have shape (L, H, d) or (B, L, H, d) with no empty axis, got {x.shape}")
    bad = np.argwhere(~np.isfinite(x))
    if bad.size:
        idx = tuple(int(i) for i in bad[0])
        raise TheoryError(f"{name}{list(idx)} = {x[idx]} is not finite")
    return x


def _validate_h(h, H: int) -> int:
    if isinstance(h, (bool, np.bool_)) or not isinstance(h, (int, np.integer)):
        raise TheoryError(f"h must be an integer position, got {h!r}")
    if not 1 <= h < H:
        raise TheoryError(f"h = {h} has no candidate parents or is out of range: need 1 <= h < H = {H}")
    return int(h)


def _validate_orthogonal(A, d: int) -> np.ndarray:
    A = as_real_array(A, "A")
    if A.shape != (d, d):
        raise TheoryError(f"A must have shape (d, d) = ({d}, {d}) to match the context, got {A.shape}")
    if not np.all(np.isfinite(A)):
        r, c = np.argwhere(~np.isfinite(A))[0]
        raise TheoryError(f"A[{r}, {c}] = {A[r, c]} is not finite")
    dev = float(np.abs(A.T @ A - np.eye(d)).max())
    if dev > ORTHOGONALITY_ATOL:
        raise TheoryError(f"A is not orthogonal: max |A^T A - I| = {dev:.3g} > {ORTHOGONALITY_ATOL:g}")
    return A


def gaussian_bma_logits(context, A, rho, h: int) -> np.ndarray:
    """Exact BMA log-posterior scores of the parent of ``h``, shifted so their max is 0.

    ``s(h') = sum_l log N(x_h^l; rho A^T x_h'^l, (1 - rho^2) I_d) - max_{h''} (same)`` for
    ``h' = 0..h-1``, computed directly from the Gaussian log densities (not from ``c1, c2``).
    ``softmax(s)`` is the posterior ``P(pa(h) = h' | context)`` under the uniform parent
    prior (W Lemma 1's factorisation; W Proposition 2).

    Parameters
    ----------
    context : array_like, shape (L, H, d) or (B, L, H, d)
        ``context[..., l, j, :] = x_j^l``, float.
    A : array_like, shape (d, d), orthogonal
    rho : float, ``|rho| < 1``
    h : int, ``1 <= h < H``

    Returns
    -------
    ndarray, shape (h,) or (B, h); max 0 along the last axis.
    """
    x = _validate_context(context)
    d = x.shape[-1]
    A = _validate_orthogonal(A, d)
    r = _validate_rho(rho)
    h = _validate_h(h, x.shape[-2])
    var = 1.0 - r * r
    target = x[..., h, :]  # (..., L, d)
    cands = x[..., :h, :]  # (..., L, h, d)
    means = r * cands @ A  # rows: (A^T x_h')^T = x_h'^T A; (..., L, h, d)
    resid = target[..., None, :] - means  # (..., L, h, d)
    # log N(x; m, var I) = -||x - m||^2 / (2 var) - (d/2) log(2 pi var); the second term is the same
    # for every candidate and cancels in the shift by the max.
    logdens = -(resid ** 2).sum(-1) / (2 * var)  # (..., L, h)
    scores = logdens.sum(-2)  # (..., h)
    return scores - scores.max(axis=-1, keepdims=True)


def gaussian_bma_posterior(context, A, rho, h: int) -> np.ndarray:
    """``P(pa(h) = h' | context)`` for ``h' = 0..h-1``: ``softmax`` of :func:`gaussian_bma_logits`.

    Shape ``(h,)`` or ``(B, h)``; rows sum to 1 (W Proposition 2's BMA).
    """
    s = gaussian_bma_logits(context, A, rho, h)
    return np.exp(s - logsumexp(s, axis=-1, keepdims=True))


def bilinear_logits(context, W, h: int) -> np.ndarray:
    """Bilinear attention scores ``sum_l x_h'^lT W x_h^l`` for ``h' = 0..h-1`` (raw, not shifted).

    What the second attention layer of W's construction can compute (W Eq. 7,
    Proposition 2): a bilinear form in the candidate and the target.

    Parameters
    ----------
    context : array_like, shape (L, H, d) or (B, L, H, d)
    W : array_like, shape (d, d)
    h : int, ``1 <= h < H``

    Returns
    -------
    ndarray, shape (h,) or (B, h)
    """
    x = _validate_context(context)
    d = x.shape[-1]
    W = as_real_array(W, "W")
    if W.shape != (d, d):
        raise TheoryError(f"W must have shape (d, d) = ({d}, {d}) to match the context, got {W.shape}")
    if not np.all(np.isfinite(W)):
        r, c = np.argwhere(~np.isfinite(W))[0]
        raise TheoryError(f"W[{r}, {c}] = {W[r, c]} is not finite")
    h = _validate_h(h, x.shape[-2])
    target = x[..., h, :]  # (..., L, d)
    cands = x[..., :h, :]  # (..., L, h, d)
    return np.einsum("...lkd,de,...le->...k", cands, W, target)
