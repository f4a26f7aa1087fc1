"""Contraction coefficients of a channel (strong data-processing constants).

A channel ``K[x, y] = P(y | x)`` is row-stochastic, possibly rectangular; an input law
``p`` (a row vector) moves to ``pK``. Coefficients (CLAIMS.md conventions):

- Dobrushin ``eta_TV(K) = max_{x, x'} TV(K_x, K_x')`` (``TV`` = half the L1 distance);
- ``eta_chi2(K, p)`` = squared second singular value of ``diag(sqrt p) K diag(1/sqrt(pK))``
  (the squared maximal correlation of the pair ``(X, Y)``);
- ``eta_KL(K, p) = sup_{q != p, q << p} KL(qK || pK) / KL(q || p)``.

They are bracketed by ``eta_chi2(K, p) <= eta_KL(K, p) <= eta_TV(K)`` (Ahlswede & Gacs 1976
for the left, Cohen, Iwasa, Rautu, Ruskai, Seneta & Zbaganu 1993 for the right; Polyanskiy &
Wu, *Information Theory*, ch. 33 "strong data processing"), which is how W Lemma 3 (strong DPI)
is certified numerically: ``eta_KL`` has no closed form, so :func:`eta_kl` returns a guaranteed
bracket and the best value found.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp

from .errors import TheoryError
from .markov import validate_prob_vector, validate_stochastic

__all__ = ["dobrushin", "eta_chi2", "eta_kl", "EtaKL", "contraction_report"]

# Starting logits are clipped to this box: exp(-40) ~ 4e-18 reaches every face of the
# simplex to far below the accuracy of the ratio, while keeping the logits finite.
_LOGIT_BOUND = 40.0


def _validate_channel_and_input(K, p):
    K = validate_stochastic(K, name="K", square=False)
    p = validate_prob_vector(p, d=K.shape[0], name="p")
    return K, p


def dobrushin(K) -> float:
    """Dobrushin coefficient ``eta_TV(K) = max_{x, x'} (1/2) sum_y |K[x, y] - K[x', y]|``.

    The contraction coefficient of total variation: ``TV(qK, pK) <= eta_TV(K) TV(q, p)``
    for all laws ``p, q``, and the upper end of the bracket
    ``eta_chi2 <= eta_KL <= eta_TV`` (Polyanskiy & Wu ch. 33; W Lemma 3).

    Parameters
    ----------
    K : array_like, shape (n_in, n_out)
        Row-stochastic channel ``K[x, y] = P(y | x)``; rectangular allowed.

    Returns
    -------
    float in ``[0, 1]``; 0 for a single-row channel or one with identical rows, 1 when two
    rows have disjoint supports.
    """
    K = validate_stochastic(K, name="K", square=False)
    n = K.shape[0]
    if n == 1:
        return 0.0
    best = 0.0
    # One row against all later rows at a time: O(n * n_out) memory instead of O(n^2 n_out).
    for x in range(n - 1):
        tv = 0.5 * np.abs(K[x + 1:] - K[x]).sum(axis=1)
        best = max(best, float(tv.max()))
    return float(min(1.0, best))


def _chi2_operator(K: np.ndarray, p: np.ndarray):
    """``B = diag(sqrt p_S) K_S,T diag(1/sqrt r_T)`` on ``S = supp p``, ``T = supp pK``.

    Returns ``(B, sqrt(p_S), sqrt(r_T), S, T, r)``; ``(sqrt p_S, sqrt r_T)`` is its top singular pair (value 1).
    """
    S = np.flatnonzero(p > 0)
    r = p @ K
    T = np.flatnonzero(r > 0)
    sp_ = np.sqrt(p[S])
    sr = np.sqrt(r[T])
    B = sp_[:, None] * K[np.ix_(S, T)] / sr[None, :]
    return B, sp_, sr, S, T, r


def eta_chi2(K, p) -> float:
    """``eta_chi2(K, p)``: squared second singular value of ``diag(sqrt p) K diag(1/sqrt(pK))``.

    Equals ``sup_{q != p} chi2(qK || pK) / chi2(q || p)`` exactly (the ratio is a Rayleigh
    quotient in ``q - p``) and the squared maximal correlation of ``(X, Y)`` with ``X ~ p``,
    ``Y | X ~ K``. Rows with ``p[x] = 0`` and columns with ``(pK)[y] = 0`` are dropped (they
    carry no mass). The top singular pair ``(sqrt p, sqrt pK)`` with value 1 is removed by
    deflation rather than by sorting, so ties at 1 (e.g. the identity channel) are handled.
    Lower end of ``eta_chi2 <= eta_KL <= eta_TV`` (W Lemma 3; Polyanskiy & Wu ch. 33).

    Parameters
    ----------
    K : array_like, shape (n_in, n_out), row-stochastic
    p : array_like, shape (n_in,), input law

    Returns
    -------
    float in ``[0, 1]``; 0 when ``p`` is a point mass.
    """
    K, p = _validate_channel_and_input(K, p)
    B, sp_, sr, S, T, _ = _chi2_operator(K, p)
    if S.size == 1 or T.size == 1:
        return 0.0
    deflated = B - np.outer(sp_, sr)
    s = np.linalg.norm(deflated, ord=2)
    return float(min(1.0, s * s))


@dataclass(frozen=True)
class EtaKL:
    """Result of :func:`eta_kl`: a guaranteed bracket for ``eta_KL(K, p)`` and the best value found.

    Attributes
    ----------
    estimate : float
        Equal to ``lower``: the largest value known to be attained (or approached) by the
        KL ratio. Never above the true ``eta_KL``.
    lower : float
        ``max(eta_chi2(K, p), largest ratio KL(qK||pK)/KL(q||p) evaluated)``; a guaranteed
        lower bound (``eta_chi2`` is the limit of the ratio as ``q -> p`` along the top
        singular direction; every evaluated ratio is attained by its ``q``).
    upper : float
        ``dobrushin(K restricted to supp p)``; a guaranteed upper bound.
    method : str
        How the estimate was found (starts, optimiser, which start gave the best value).
    """

    estimate: float
    lower: float
    upper: float
    method: str


def _kl_terms(base: np.ndarray, log_ratio: np.ndarray) -> np.ndarray:
    """Per-coordinate ``base * phi(e^{log_ratio} - 1)``, ``phi(u) = (1 + u) log(1 + u) - u >= 0``.

    ``KL(q || p) = sum_x p_x phi(q_x / p_x - 1)``: each term is non-negative and of order
    ``u^2`` near ``q = p``, so there is no cancellation between terms (the plain
    ``sum q log(q/p)`` loses all digits as ``q -> p``). For ``|log_ratio| < 0.05`` a Taylor
    series ``sum_{k=2..16} (-1)^k u^k / (k (k-1))`` (truncation < 1e-19 relative) is used; beyond,
    ``q log(q/p) - q + p`` with ``q = base * e^{log_ratio}`` (never overflows: ``q <= 1``;
    ``q = 0`` gives ``base``, i.e. ``0 log 0 = 0``). ``base > 0`` (the callers' supports).
    """
    small = np.abs(log_ratio) < 0.05
    u = np.expm1(np.where(small, log_ratio, 0.0))
    poly = np.full_like(u, 1.0 / (16 * 15))
    for k in range(15, 1, -1):
        poly = poly * u + (-1) ** k / (k * (k - 1))
    series = base * u * u * poly
    q = np.exp(np.log(base) + log_ratio)  # -inf log_ratio -> q = 0
    direct = np.where(q > 0, q * np.where(q > 0, log_ratio, 0.0), 0.0) - q + base
    return np.maximum(np.where(small, series, direct), 0.0)


class _KLRatio:
    """``KL(qK || pK) / KL(q || p)`` on the support of ``p``, from logits ``z`` or from ``q``.

    ``q = softmax(log p + z)``. Both divergences are sums of non-negative terms
    (:func:`_kl_terms`) built from ``log(q/p)`` and ``log(qK/pK)``, each computed without
    cancellation: centring ``z`` by its ``p``-mean makes ``c = log sum p e^z = log1p(s)`` with
    ``s >= 0`` (Jensen), and ``qK - pK`` is formed as ``(p expm1(log q/p)) K`` near ``p``.
    Accurate down to ``q -> p`` and free of overflow for entries of ``p`` down to subnormals.
    """

    def __init__(self, K_S: np.ndarray, p_S: np.ndarray):
        r = p_S @ K_S
        keep = r > 0
        self.K = K_S[:, keep]
        self.p = p_S
        self.logp = np.log(p_S)
        self.r = r[keep]
        self.logr = np.log(self.r)

    def _output_log_ratio(self, q: np.ndarray, delta: np.ndarray):
        """``(qK, log(qK / r))``; ``delta = q - p`` (accurate near ``p``)."""
        qK = q @ self.K
        dK = delta @ self.K
        with np.errstate(divide="ignore"):
            near = np.abs(dK) < 0.5 * self.r
            lout = np.where(near, np.log1p(np.where(near, dK / self.r, 0.0)), np.log(qK) - self.logr)
        return qK, lout

    def roundoff_floor(self, log_ratio: np.ndarray) -> float:
        """The largest ``KL(q || p)`` that float64 round-off alone can produce from ``log(q/p)``.

        ``log(q/p)`` carries an absolute error of about ``(m + 2) eps (1 + max |log(q/p)|)`` (the
        centring ``z - p.z`` and ``c`` each round at the scale of the logits), and a shift ``e``
        of every entry, exact zero or not, makes ``sum p (e^2 / 2)`` of divergence on its own. Below
        four times that (``e`` taken four times over), a ratio is one rounding error over another,
        e.g. ``q`` a mixture with ``t p`` whose extra mass sits on an entry of ``p`` near 1e-308."""
        finite = np.abs(log_ratio[np.isfinite(log_ratio)])
        e = 4.0 * (self.p.size + 2) * np.finfo(float).eps * (1.0 + (finite.max() if finite.size else 0.0))
        return 0.5 * e * e

    def evaluate_z(self, z: np.ndarray):
        """``(num, den, q, log(q/p), log(qK/r))`` at logits ``z``."""
        zc = z - self.p @ z
        if zc.max() < 700:
            c = np.log1p(self.p @ np.expm1(zc))  # argument >= 0 by Jensen
        else:
            c = logsumexp(self.logp + zc)
        lqp = zc - c
        q = np.exp(self.logp + lqp)  # log q <= 0 up to round-off: no overflow
        delta = np.where(np.abs(lqp) < 0.5, self.p * np.expm1(np.minimum(lqp, 0.5)), q - self.p)
        qK, lout = self._output_log_ratio(q, delta)
        num = float(np.sum(_kl_terms(self.r, lout)))
        den = float(np.sum(_kl_terms(self.p, lqp)))
        return num, den, q, lqp, lout

    def ratio_q(self, q: np.ndarray) -> float | None:
        """The ratio at an explicit ``q`` on the support (``None`` if ``q = p``)."""
        with np.errstate(divide="ignore"):
            lqp = np.log(q) - self.logp
        _, lout = self._output_log_ratio(q, q - self.p)
        num = float(np.sum(_kl_terms(self.r, lout)))
        den = float(np.sum(_kl_terms(self.p, lqp)))
        return num / den if den > max(self.roundoff_floor(lqp), 1e-300) else None

    def ratio_and_grad(self, z: np.ndarray) -> tuple[float, np.ndarray]:
        """``(-ratio, -d ratio / dz)`` for the minimiser; ``(0, 0)`` where ``KL(q||p)`` is not above its
        round-off (:meth:`roundoff_floor`)."""
        num, den, q, lqp, lout = self.evaluate_z(z)
        if not den > max(self.roundoff_floor(z - self.p @ z), 1e-300):  # q = p to round-off: no ratio there
            return 0.0, np.zeros_like(z)
        # d/dq of each divergence up to constants (killed by the softmax Jacobian diag(q) - q q^T).
        # A column with qK = 0 has q = 0 on every row feeding it, and those rows get weight q = 0
        # below, so any finite floor for log(qK/r) gives the right limit (q log q -> 0).
        a = self.K @ np.where(np.isfinite(lout), lout, -1e3)
        b = lqp
        g_num = q * (a - q @ a)
        g_den = q * (b - q @ b)
        ratio = num / den
        grad = (g_num - ratio * g_den) / den
        return -ratio, -grad


# The start along the top singular direction moves each p_x by at most this fraction of itself
# (small enough that the KL ratio there is eta_chi2 to first order), and the vertex-p mixtures.
_SINGULAR_STEP = 1e-3
_MIXTURE_WEIGHTS = (1e-6, 0.1, 0.5, 0.9)


def _eta_kl_starts(K_S: np.ndarray, p_S: np.ndarray, S: np.ndarray, *, restarts: int, seed: int):
    """The points :func:`eta_kl` evaluates, in order, as ``(label, kind, point)``.

    ``kind = "vertex"``: ``point`` is the law ``delta_x`` itself (its ratio is evaluated exactly);
    ``kind = "logits"``: ``point`` is a start ``z`` for the optimiser, ``q = softmax(log p_S + z)``,
    clipped to ``[-_LOGIT_BOUND, _LOGIT_BOUND]``. ``S`` gives the labels' state numbers.

    1. ``z = +-_SINGULAR_STEP u``, ``u = v / sqrt(p_S)`` scaled to ``max |u| = 1``, with ``v`` the top
       left singular vector of ``diag(sqrt p) K diag(1/sqrt pK)`` once its trivial pair is deflated
       (so ``sum p u = 0`` and the chi2 ratio of ``p (1 + z)`` is ``eta_chi2`` exactly); only when
       ``pK`` has two or more outputs;
    2. per state ``x`` of ``S``: the vertex ``delta_x``, then ``z = log((1 - t) delta_x + t p) - log p``
       for ``t`` in ``_MIXTURE_WEIGHTS``;
    3. ``restarts`` draws ``q ~ Dirichlet(1)`` from ``np.random.default_rng(seed)`` (floored at 1e-300),
       ``z = log q - log p``.
    """
    starts = []

    def logits(label: str, z: np.ndarray) -> None:
        starts.append((label, "logits", np.clip(z, -_LOGIT_BOUND, _LOGIT_BOUND)))

    m = S.size
    B, sp_, sr, _, _, _ = _chi2_operator(K_S, p_S)
    if B.shape[1] > 1:
        U, _, _ = np.linalg.svd(B - np.outer(sp_, sr))
        direction = U[:, 0] / sp_  # u = (q - p)/p with sum p u = 0
        direction /= np.abs(direction).max()
        logits("singular direction (+)", _SINGULAR_STEP * direction)
        logits("singular direction (-)", -_SINGULAR_STEP * direction)
    for i in range(m):
        vertex = np.zeros(m)
        vertex[i] = 1.0
        starts.append((f"vertex delta_{int(S[i])}", "vertex", vertex))
        for t in _MIXTURE_WEIGHTS:
            q = t * p_S
            q[i] += 1.0 - t
            with np.errstate(divide="ignore"):  # t p may underflow to 0; the start is clipped
                logits(f"mixture (1-t) delta_{int(S[i])} + t p, t={t:g}", np.log(q) - np.log(p_S))
    rng = np.random.default_rng(seed)
    for k in range(restarts):
        q = np.maximum(rng.dirichlet(np.ones(m)), 1e-300)
        logits(f"Dirichlet start {k}", np.log(q) - np.log(p_S))
    return starts


def eta_kl(K, p, *, restarts: int = 16, seed: int = 0) -> EtaKL:
    """Bracket and estimate ``eta_KL(K, p) = sup_{q != p, q << p} KL(qK || pK) / KL(q || p)``.

    No closed form exists. The bracket ``eta_chi2(K, p) <= eta_KL(K, p) <= eta_TV(K_S)``
    (Ahlswede & Gacs 1976; Cohen et al. 1993; Polyanskiy & Wu ch. 33), with ``K_S`` the rows of ``K`` on
    ``S = supp p``, gives guaranteed bounds; the search below raises the lower one.

    How the estimate is found: ``q`` is parameterised on ``S`` by logits ``z``,
    ``q = softmax(log p_S + z)`` (every real ``z`` is a valid ``q << p``, so the search is
    unconstrained; starting logits are clipped to ``[-40, 40]``); the ratio (computed as sums
    of non-negative terms, accurate as ``q -> p``, never NaN) is maximised by
    ``scipy.optimize.minimize(method="BFGS")`` with its analytic gradient from:

    1. ``q = p + small step`` along ``+-`` the top non-trivial left singular vector of
       ``diag(sqrt p) K diag(1/sqrt(pK))`` (there the ratio is ``~ eta_chi2``);
    2. the vertices ``delta_x`` (evaluated exactly, ratio ``KL(K_x||pK) / log(1/p_x)``) and
       the mixtures ``(1 - t) delta_x + t p`` for ``t`` in ``{1e-6, 0.1, 0.5, 0.9}``, each ``x`` in ``S``;
    3. ``restarts`` points drawn from ``Dirichlet(1)`` on ``S`` with
       ``np.random.default_rng(seed)``.

    Every start and every optimiser end point is evaluated; ``lower`` is the maximum of
    ``eta_chi2`` and all evaluated ratios, ``estimate = lower``.

    Parameters
    ----------
    K : array_like, shape (n_in, n_out), row-stochastic
    p : array_like, shape (n_in,), input law
    restarts : int, >= 0
        Number of random Dirichlet starts.
    seed : int
        Seed of the generator for the random starts.

    Returns
    -------
    EtaKL
        ``(estimate, lower, upper, method)``; all 0 when ``p`` is a point mass (no ``q != p``
        with ``q << p`` exists, and the convention ``sup {} = 0`` matches ``eta_chi2``).
    """
    K, p = _validate_channel_and_input(K, p)
    if isinstance(restarts, (bool, np.bool_)) or not isinstance(restarts, (int, np.integer)) or restarts < 0:
        raise TheoryError(f"restarts must be a non-negative integer, got {restarts!r}")
    S = np.flatnonzero(p > 0)
    if S.size == 1:
        return EtaKL(0.0, 0.0, 0.0, "p is a point mass: no q != p with q << p; eta_KL = 0 by convention")
    K_S, p_S = K[S], p[S]
    upper = dobrushin(K_S)
    chi2 = eta_chi2(K, p)
    f = _KLRatio(K_S, p_S)
    m = S.size

    best = {"ratio": -np.inf}  # and "start", the label of the best, once a ratio is recorded

    def record(ratio: float, label: str) -> None:
        if np.isfinite(ratio) and ratio > best["ratio"]:
            best["ratio"], best["start"] = ratio, label

    starts = _eta_kl_starts(K_S, p_S, S, restarts=restarts, seed=seed)
    for label, kind, point in starts:
        if kind == "vertex":
            ratio = f.ratio_q(point)
            if ratio is not None:
                record(ratio, label)
            continue
        val0, _ = f.ratio_and_grad(point)
        record(-val0, label)
        res = minimize(f.ratio_and_grad, point, jac=True, method="BFGS", options={"maxiter": 300})
        val, _ = f.ratio_and_grad(res.x)
        record(-val, label + " + BFGS")
    n_starts = sum(kind == "logits" for _, kind, _ in starts)

    lower = max(chi2, best["ratio"])
    # A ratio can exceed the Dobrushin bound only by round-off (each term is accurate to ~1e-15).
    if lower > upper + 1e-9:
        raise TheoryError(
            f"internal error: KL ratio {lower!r} exceeds the Dobrushin bound {upper!r}; please report K and p")
    lower = min(lower, upper)
    source = "eta_chi2 (limit q -> p)" if chi2 >= best["ratio"] else best["start"]
    method = (f"max of eta_chi2 and the KL ratios at {m} vertices and {n_starts} optimiser starts "
              f"(singular direction, vertex-p mixtures, {restarts} Dirichlet(1) with seed={seed}), "
              f"each refined by BFGS on logits; best from: {source}")
    return EtaKL(estimate=float(lower), lower=float(lower), upper=float(upper), method=method)


def contraction_report(K, p, *, restarts: int = 16, seed: int = 0) -> dict[str, float]:
    """All contraction coefficients of ``K`` at input ``p`` in one dict.

    Keys: ``dobrushin`` (``eta_TV(K)`` over all rows), ``eta_chi2``, ``eta_kl_lower``,
    ``eta_kl_upper`` (Dobrushin on ``supp p``), ``eta_kl_estimate``. See :func:`eta_kl`;
    used to report the channel ``pa(h) -> h'`` next to W Lemma 3's bound ``1 - delta gamma``.
    """
    K, p = _validate_channel_and_input(K, p)
    res = eta_kl(K, p, restarts=restarts, seed=seed)
    return {
        "dobrushin": dobrushin(K),
        "eta_chi2": eta_chi2(K, p),
        "eta_kl_lower": res.lower,
        "eta_kl_upper": res.upper,
        "eta_kl_estimate": res.estimate,
    }
