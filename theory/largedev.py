"""Large deviations of the BMA parent-selection error (W Theorem 2, claim W.T2).

Setting: a fixed tree, a position ``h`` with true parent ``pa = parent(h)`` and a competitor
``h' < h``, ``h' != pa``. Given the tree, the ``L`` context sequences are iid, so the
log-likelihood ratio of the BMA scores (W Lemma 1)

    S_L = sum_{l=1..L} Z_l,   Z = log pi(x_h' , x_h) - log pi(x_pa, x_h),

is a sum of iid copies of ``Z``; the posterior puts at least as much mass on ``h'`` as on
``pa`` iff ``S_L >= 0``. Its law is exact from the triple joint
``P(x_h' = a, x_pa = b, x_h = c) = P(x_h' = a, x_pa = b) pi[b, c]`` (``h' < h`` is not a
descendant of ``h``, so ``x_h`` depends on ``x_h'`` only through ``x_pa``). Cramer/Chernoff:
``P(S_L >= 0) = exp(-L I + o(L))`` with ``I = -log inf_{t >= 0} E exp(t Z)`` when ``E Z < 0``.

Note (used in the tests): ``-E[Z] = sum_{a, b} P(x_h' = a, x_pa = b) KL(pi[b] || pi[a])``, so
``E[Z] <= 0`` for every ``pi`` (W Lemma 4), with equality iff ``pi[a] = pi[b]`` on every pair
``(a, b)`` the two positions take together.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import brentq
from scipy.special import gammaln, logsumexp

from .errors import TheoryError, as_real_array
from .joint import as_tree, pairwise_joint
from .markov import ROW_SUM_ATOL, validate_stochastic

__all__ = [
    "llr_law",
    "ChernoffResult",
    "chernoff_exponent",
    "bahadur_rao_prefactor",
    "bahadur_rao_log_error",
    "pairwise_error_exact",
    "pairwise_error_exact_path",
    "MapErrorExponent",
    "map_error_exponent",
    "MAX_COMPOSITIONS",
    "MAX_ATOMS",
    "TIE_RTOL",
]

#: Largest number of count vectors ``C(L + k - 1, k - 1)`` that the multinomial method sums.
MAX_COMPOSITIONS = 2_000_000
#: Largest number of distinct values of ``S_n`` that the convolution method keeps.
MAX_ATOMS = 2_000_000
#: ``S_L`` counts as ``>= 0`` when ``S_L >= -TIE_RTOL * L * max |finite value of Z|``: a sum of ``L``
#: terms of that size is exact to about ``L * max|Z| * 1e-16``, so mathematical ties (``+v`` and ``-v``
#: atoms, ``x_h' = x_pa``) come out as ``+-1e-16`` and must count as ties.
TIE_RTOL = 1e-9
#: Atoms of ``Z`` whose values agree within this (times the largest |value|, at least 1) are merged.
_MERGE_RTOL = 1e-12


# ----------------------------------------------------------------------------- the law of Z
def _merge_sorted(values: np.ndarray, logp: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Merge consecutive sorted values at most ``tol`` apart; log-probabilities add (log-sum-exp).
    Runs of ``-inf`` (sorted first) merge into one atom."""
    finite = np.isfinite(values)
    with np.errstate(invalid="ignore"):  # -inf - -inf
        gaps = np.diff(values)
        new_group = np.ones(values.size, dtype=bool)
        new_group[1:] = ~((gaps <= tol) | (~finite[1:] & ~finite[:-1]))
    starts = np.flatnonzero(new_group)
    m = np.maximum.reduceat(logp, starts)
    m_rep = np.repeat(m, np.diff(np.append(starts, values.size)))
    s = np.add.reduceat(np.exp(logp - m_rep), starts)  # every log-probability is finite: no -inf - -inf
    return values[starts], m + np.log(s)


def llr_law(pi, tree, h: int, competitor: int, root=None) -> tuple[np.ndarray, np.ndarray]:
    """Exact law of ``Z = log pi(x_h' , x_h) - log pi(x_pa, x_h)`` for one context example.

    ``(a, b, c) = (x_h', x_pa, x_h)`` has law ``P(x_h' = a, x_pa = b) pi[b, c]``, with the
    pairwise joint computed on the tree (``theory.joint.pairwise_joint``). W Theorem 2's
    identifiability is the statement that ``S_L = sum_l Z_l < 0`` with probability ``-> 1``.

    Parameters
    ----------
    pi : array_like, shape (d, d), row-stochastic, ``pi[s, t] = P(child = t | parent = s)``
    tree : CausalTree or parent array
    h : int
        Position with a parent (not a root).
    competitor : int
        ``h'`` with ``0 <= h' < h`` and ``h' != parent(h)``.
    root : None or array_like, shape (d,)
        Root law; ``None`` = stationary law of ``pi``.

    Returns
    -------
    values : ndarray, shape (k,)
        Distinct values of ``Z`` in increasing order; ``-inf`` (where ``pi(x_h', x_h) = 0``)
        comes first when present. Values equal within ``1e-12 * max(1, max |value|)`` are
        merged (exact ties such as ``x_h' = x_pa`` give ``Z = 0`` exactly).
    probs : ndarray, shape (k,)
        Their probabilities (all ``> 0``, summing to 1).
    """
    pi = validate_stochastic(pi)
    tree = as_tree(tree)
    h = tree._check_node(h, "h")
    competitor = tree._check_node(competitor, "competitor")
    pa = tree.parent(h)
    if pa is None:
        raise TheoryError(f"position h = {h} is a root: it has no parent to identify")
    if competitor >= h:
        raise TheoryError(f"competitor {competitor} must come before h = {h} (candidates are 0..{h - 1})")
    if competitor == pa:
        raise TheoryError(f"competitor {competitor} is the true parent of h = {h}; pick h' != parent(h)")
    joint = pairwise_joint(pi, tree, competitor, pa, root=root)  # (d, d): [a, b]
    triple = joint[:, :, None] * pi[None, :, :]  # (d, d, d): [a, b, c]
    with np.errstate(divide="ignore", invalid="ignore"):  # -inf - -inf only where the mass is 0
        logpi = np.log(pi)
        z = logpi[:, None, :] - logpi[None, :, :]  # [a, b, c] = log pi[a, c] - log pi[b, c]
    mask = triple > 0  # atoms with positive mass have pi[b, c] > 0, so z is never nan or +inf
    vals, probs = z[mask], triple[mask]  # a == b gives an exact 0: the same float minus itself
    order = np.argsort(vals, kind="stable")
    vals, logp = vals[order], np.log(probs[order])
    finite = vals[np.isfinite(vals)]
    tol = _MERGE_RTOL * max(1.0, float(np.abs(finite).max()) if finite.size else 1.0)
    vals, logp = _merge_sorted(vals, logp, tol)
    p = np.exp(logp)
    return vals, p / p.sum()


def _validate_law(values, probs) -> tuple[np.ndarray, np.ndarray]:
    """Check a finite discrete law on ``[-inf, inf)``; drop zero-probability atoms."""
    v, p = as_real_array(values, "values"), as_real_array(probs, "probs")
    if v.ndim != 1 or p.ndim != 1 or v.size == 0 or v.shape != p.shape:
        raise TheoryError(
            f"values and probs must be non-empty 1-d arrays of one length, got shapes {v.shape} and {p.shape}")
    bad = np.flatnonzero(np.isnan(v) | (v == np.inf))
    if bad.size:
        raise TheoryError(f"values[{bad[0]}] = {v[bad[0]]} is not allowed (finite values or -inf only)")
    bad = np.flatnonzero(~np.isfinite(p) | (p < 0))
    if bad.size:
        raise TheoryError(f"probs[{bad[0]}] = {p[bad[0]]} is not a probability (finite and >= 0)")
    s = p.sum()
    if abs(s - 1.0) > ROW_SUM_ATOL:
        raise TheoryError(f"probs sums to {s:.12g} (off by {s - 1:+.3g}); a law must sum to 1")
    keep = p > 0
    return v[keep], p[keep] / s


def _validate_L(L, minimum: int = 0) -> int:
    if isinstance(L, (bool, np.bool_)) or not isinstance(L, (int, np.integer)) or L < minimum:
        raise TheoryError(f"L must be an integer >= {minimum} (number of context examples), got {L!r}")
    return int(L)


# ----------------------------------------------------------------------------- Chernoff
@dataclass(frozen=True)
class ChernoffResult:
    """Cramer/Chernoff exponent of ``P(S_L >= 0)`` for ``S_L`` a sum of ``L`` iid copies of ``Z``.

    Attributes
    ----------
    rate : float
        ``I = -log inf_{t >= 0} E exp(t Z)`` (``>= 0``; ``+inf`` if ``S_L >= 0`` is impossible).
    t_star : float
        The minimiser (``0`` when ``E Z >= 0`` on the finite atoms; ``+inf`` when the
        infimum is only approached as ``t -> inf``, i.e. ``max Z <= 0``).
    log_mgf_min : float
        ``log E exp(t* Z) = -rate``.
    tilted_mean, tilted_var : float
        Mean and variance of the tilted law ``P_t*(z) ∝ P(z) e^{t* z}`` (on the finite atoms);
        the mean is ``~0`` at an interior optimum; the variance feeds Bahadur-Rao.
    """

    rate: float
    t_star: float
    log_mgf_min: float
    tilted_mean: float
    tilted_var: float


def _tilted(v: np.ndarray, logp: np.ndarray, t: float) -> tuple[float, float, float]:
    """``(log M(t), mean, var)`` of the tilt by ``t`` on finite atoms (``M(t) = sum p e^{t v}``)."""
    w = logp + t * v
    logM = float(logsumexp(w))
    q = np.exp(w - logM)
    mean = float(q @ v)
    var = float(q @ (v - mean) ** 2)
    return logM, mean, max(var, 0.0)


def chernoff_exponent(values, probs) -> ChernoffResult:
    """Chernoff exponent ``I = -log inf_{t >= 0} E exp(t Z)`` of ``P(S_L >= 0)``.

    For ``S_L`` a sum of ``L`` iid copies of ``Z`` with ``E Z < 0``,
    ``P(S_L >= 0) = exp(-L I + o(L))`` (Cramer; Chernoff's bound
    ``P(S_L >= 0) <= exp(-L I)`` holds for every ``L``). This is the identifiability rate of
    W Theorem 2 (claim W.T2) when ``Z`` has the law :func:`llr_law`.

    The minimisation runs over all ``t >= 0``, not only ``[0, 1]``: for ``Z`` from
    :func:`llr_law`, ``E e^Z <= 1`` and with a full-support ``pi`` the minimiser lies in
    ``[0, 1]``, but with zeros in ``pi`` it can lie beyond 1. ``log M(t)`` is convex; its
    derivative (the tilted mean) is increasing, and its root is found by ``brentq``.

    Conventions: a ``-inf`` atom contributes 0 to ``E e^{tZ}`` for ``t > 0`` (and makes
    ``S_L = -inf``), so the infimum is over ``t > 0`` with ``M(0+) = P(Z > -inf)``.
    ``E Z >= 0`` (no ``-inf`` atom): rate 0. ``max Z < 0``: rate ``+inf``. ``max Z = 0``:
    rate ``-log P(Z = 0)``, attained as ``t -> inf``.

    Parameters
    ----------
    values : array_like, shape (k,)
        Atoms of ``Z``: finite or ``-inf``.
    probs : array_like, shape (k,)
        Their probabilities (summing to 1).

    Returns
    -------
    ChernoffResult
    """
    v, p = _validate_law(values, probs)
    fin = np.isfinite(v)
    if not fin.any():
        return ChernoffResult(math.inf, math.inf, -math.inf, -math.inf, 0.0)
    vf, lpf = v[fin], np.log(p[fin])
    vmax = float(vf.max())
    if vmax < 0:
        return ChernoffResult(math.inf, math.inf, -math.inf, vmax, 0.0)
    if vmax == 0:
        # inf_t M(t) = P(Z = 0), approached as t -> inf (the tilt concentrates on 0).
        logM = float(logsumexp(lpf[vf == 0]))
        return ChernoffResult(-logM, math.inf, logM, 0.0, 0.0)
    # The minimiser scales as 1 / |Z| and the rate does not change when Z is rescaled, so the tilt
    # is computed for u = t * scale on Z / scale: a law on the scale 1e-300 (or 1e300) brackets in
    # as few doublings, and keeps finite moments, as one on the scale 1.
    scale = float(np.abs(vf).max())
    unit = vf / scale
    logM0, mean0, var0 = _tilted(unit, lpf, 0.0)
    if mean0 >= 0:
        # M is non-decreasing on (0, inf): the infimum is M(0+) = P(Z finite).
        return ChernoffResult(max(0.0, -logM0), 0.0, logM0, mean0 * scale, var0 * scale * scale)
    # Tilted mean is increasing from mean0 < 0 to max Z > 0: bracket and solve mean(u) = 0.
    hi = 1.0
    while _tilted(unit, lpf, hi)[1] <= 0:
        hi *= 2.0
        if hi > 1e12:  # only when max Z / max |Z| underflows to 0 (e.g. Z in {5e-324, -1e308})
            raise TheoryError(f"could not bracket the Chernoff minimiser: max Z = {vmax:.3g} is below the float64 "
                              f"resolution of the law's scale max |Z| = {scale:.3g}; the law is degenerate")
    u_star = brentq(lambda u: _tilted(unit, lpf, u)[1], 0.0, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps,
                    maxiter=500)
    logM, mean, var = _tilted(unit, lpf, u_star)
    return ChernoffResult(max(0.0, -logM), u_star / scale, logM, mean * scale, var * scale * scale)


def _interior_chernoff(values, probs) -> ChernoffResult:
    res = chernoff_exponent(values, probs)
    if not (0 < res.t_star < math.inf and res.tilted_var > 0):
        why = ("E[Z] >= 0 on the finite atoms (t* = 0): P(S_L >= 0) does not decay like exp(-L I)/sqrt(L)"
               if res.t_star == 0 else "max Z <= 0 (t* = inf): P(S_L >= 0) is P(Z = 0)^L or 0 exactly")
        raise TheoryError(f"Bahadur-Rao needs an interior Chernoff point 0 < t* < inf; here {why}")
    return res


def bahadur_rao_prefactor(values, probs, L: int) -> float:
    """Bahadur-Rao prefactor ``1 / (t* sigma* sqrt(2 pi L))`` of ``P(S_L >= 0)``.

    Non-lattice Bahadur-Rao (1960; Dembo & Zeitouni Thm 3.7.4):
    ``P(S_L >= 0) = exp(-L I) / (t* sigma* sqrt(2 pi L)) (1 + o(1))`` as ``L -> inf``, with
    ``I``, ``t*`` from :func:`chernoff_exponent` and ``sigma*^2`` the tilted variance. Only
    asymptotic, and only the non-lattice form: for a lattice law (e.g. values on ``h Z``)
    the prefactor differs by a bounded factor depending on where 0 falls on the lattice.
    Used to fit measured error rates of W Theorem 2 with the right sub-exponential factor.

    Returns
    -------
    float ``> 0``. Raises ``TheoryError`` unless ``0 < t* < inf``.
    """
    L = _validate_L(L, minimum=1)
    res = _interior_chernoff(values, probs)
    return float(1.0 / (res.t_star * math.sqrt(res.tilted_var * 2.0 * math.pi * L)))


def bahadur_rao_log_error(values, probs, L: int) -> float:
    """``log`` of the Bahadur-Rao approximation: ``-L I - log(t* sigma* sqrt(2 pi L))``.

    See :func:`bahadur_rao_prefactor` (non-lattice, asymptotic in ``L``).
    """
    L = _validate_L(L, minimum=1)
    res = _interior_chernoff(values, probs)
    return float(-L * res.rate - math.log(res.t_star * math.sqrt(res.tilted_var * 2.0 * math.pi * L)))


# ----------------------------------------------------------------------------- exact P(S_L >= 0)
def _log_error_multinomial(vf: np.ndarray, lpf: np.ndarray, L: int, threshold: float) -> float:
    """``log sum_{n: n.v >= threshold} L!/prod n_i! prod p_i^{n_i}`` over count vectors of the finite atoms."""
    k = vf.size
    n_comp = math.comb(L + k - 1, k - 1)
    if n_comp > MAX_COMPOSITIONS:
        raise TheoryError(
            f"the multinomial sum has C(L+k-1, k-1) = C({L + k - 1}, {k - 1}) = {n_comp} count vectors, above "
            f"MAX_COMPOSITIONS = {MAX_COMPOSITIONS}; use method='convolution' or a smaller L")
    # Build all count vectors atom by atom: states (remaining, partial sum, partial log-weight).
    remaining = np.array([L], dtype=np.int64)
    s = np.zeros(1)
    logw = np.array([gammaln(L + 1)])
    for i in range(k - 1):
        reps = remaining + 1
        idx = np.repeat(np.arange(remaining.size), reps)
        offs = np.arange(idx.size) - np.repeat(np.cumsum(reps) - reps, reps)  # n_i = 0..remaining
        n_i = offs
        remaining = remaining[idx] - n_i
        s = s[idx] + n_i * vf[i]
        logw = logw[idx] - gammaln(n_i + 1) + n_i * lpf[i]
    # The last atom takes the rest.
    s = s + remaining * vf[-1]
    logw = logw - gammaln(remaining + 1) + remaining * lpf[-1]
    hit = s >= threshold
    return float(logsumexp(logw[hit])) if hit.any() else -math.inf


def _convolution_steps(vf: np.ndarray, lpf: np.ndarray, L: int, scale: float):
    """Yield ``(n, values, log-probabilities)`` of the law of ``S_n`` for ``n = 1..L``, by
    convolution with the atom law, merging sums equal within ``1e-11 * scale`` (round-off)."""
    merge_tol = 1e-11 * scale
    vals, logp = np.zeros(1), np.zeros(1)
    for n in range(1, L + 1):
        # k sorted runs (one shifted copy of the sorted support per atom): the stable sort
        # (timsort) merges runs in O(N k log k).
        new_v = (vf[:, None] + vals[None, :]).ravel()
        new_lp = (lpf[:, None] + logp[None, :]).ravel()
        order = np.argsort(new_v, kind="stable")
        vals, logp = _merge_sorted(new_v[order], new_lp[order], merge_tol)
        if vals.size > MAX_ATOMS:
            raise TheoryError(
                f"the law of S_n has {vals.size} distinct values, above MAX_ATOMS = {MAX_ATOMS}; "
                f"the values of Z are too unstructured for L = {L}: use a smaller L")
        yield n, vals, logp


def _log_error_convolution(vf: np.ndarray, lpf: np.ndarray, L: int, threshold: float, scale: float) -> float:
    """Law of ``S_L`` by ``L`` convolutions with the atom law, merging equal sums (within round-off)."""
    for _, vals, logp in _convolution_steps(vf, lpf, L, scale):
        pass  # the law of S_L is the last step's (L >= 1 here)
    hit = vals >= threshold
    return float(logsumexp(logp[hit])) if hit.any() else -math.inf


def pairwise_error_exact(values, probs, L: int, *, method: str = "auto", log: bool = False) -> float:
    """Exact ``P(S_L >= 0)`` for ``S_L`` a sum of ``L`` iid copies of ``Z`` (W Theorem 2 oracle).

    ``P(S_L >= 0) = sum over count vectors n (n_1 + ... + n_k = L) of
    L! / prod n_i! * prod p_i^{n_i} * 1{sum n_i v_i >= 0}``, computed in log space. A
    ``-inf`` atom makes ``S_L = -inf``, so only the finite atoms enter (with their
    unnormalised probabilities). Ties: ``S`` counts as ``>= 0`` when
    ``S >= -TIE_RTOL * L * max |finite value|`` (``TIE_RTOL = 1e-9``; sums that are 0
    mathematically, e.g. from ``x_h' = x_pa`` or from ``+v`` and ``-v`` atoms, come out as ``+-1e-16``).

    Methods (same sum, grouped differently; they cross-check each other):

    - ``"auto"`` (default): ``"multinomial"`` when it has at most ``MAX_COMPOSITIONS`` count
      vectors, else ``"convolution"``.
    - ``"convolution"``: the law of ``S_n``, ``n = 1..L``, by convolution with
      the atom law, merging sums equal within ``1e-11 * max |v|``. Cost grows with the
      number of distinct sums: for :func:`llr_law` at ``d = 2`` (atoms ``0, +-alpha,
      +-beta``) that is ``O(L^2)``, so ``L`` in the thousands is feasible; for a law with
      no coincidences it equals the number of count vectors (then slower than
      ``"multinomial"``). Raises
      ``TheoryError`` above ``MAX_ATOMS`` distinct sums.
    - ``"multinomial"``: every count vector explicitly; raises ``TheoryError`` when
      ``C(L+k-1, k-1) > MAX_COMPOSITIONS``.

    Parameters
    ----------
    values, probs : array_like, shape (k,)
        The law of ``Z`` (e.g. from :func:`llr_law`).
    L : int, >= 0
        Number of context examples (``L = 0`` gives ``S_0 = 0``, probability 1).
    method : {"auto", "convolution", "multinomial"}
    log : bool
        Return ``log P`` (``-inf`` when ``P = 0``) instead of ``P``.
    """
    v, p = _validate_law(values, probs)
    L = _validate_L(L, minimum=0)
    if method not in ("auto", "convolution", "multinomial"):
        raise TheoryError(f"unknown method {method!r}; expected 'auto', 'convolution' or 'multinomial'")
    fin = np.isfinite(v)
    if L == 0:
        logP = 0.0
    elif not fin.any():
        logP = -math.inf
    else:
        vf, lpf = v[fin], np.log(p[fin])
        scale = max(float(np.abs(vf).max()), np.finfo(float).tiny)
        threshold = -TIE_RTOL * L * scale
        if method == "auto":
            small = math.comb(L + vf.size - 1, vf.size - 1) <= MAX_COMPOSITIONS
            method = "multinomial" if small else "convolution"
        if method == "multinomial":
            logP = _log_error_multinomial(vf, lpf, L, threshold)
        else:
            logP = _log_error_convolution(vf, lpf, L, threshold, scale)
        logP = min(logP, 0.0)
    return float(logP) if log else float(math.exp(logP))


def pairwise_error_exact_path(values, probs, Ls, *, gap_window: float | None = None):
    """Exact ``log P(S_L >= 0)`` at every ``L`` of ``Ls``, from one convolution pass.

    The same sum as :func:`pairwise_error_exact` (same tie rule:
    ``S >= -TIE_RTOL * L * max |finite value|`` counts as ``>= 0``), computed by the
    ``"convolution"`` method once up to ``max(Ls)`` and read off at each requested ``L``,
    so a decay curve costs what its largest ``L`` costs. Agrees with
    :func:`pairwise_error_exact` to round-off (its ``"multinomial"`` grouping at small ``L``
    differs in the last digits).

    With ``gap_window = w`` (a number, or a sequence of them) it also returns, for each ``L``
    (and each ``w``), the largest gap between consecutive points of
    ``{0} ∪ {x in supp(S_L): 0 <= x <= w}`` and the first support point beyond ``w`` (if any):
    how coarse the support of ``S_L`` is where ``P(S_L >= 0)`` collects its mass (a lattice of
    span ``h`` gives ``h``; ``w`` when no support point is ``>= 0``).

    Parameters
    ----------
    values, probs : array_like, shape (k,)
        The law of ``Z`` (e.g. from :func:`llr_law`).
    Ls : sequence of int, each >= 0
    gap_window : float > 0 or sequence of them, optional

    Returns
    -------
    ndarray, shape (len(Ls),): ``log P(S_L >= 0)`` (``-inf`` where it is 0), in the order of
    ``Ls``; with ``gap_window``, the pair ``(log P, gaps)``, ``gaps`` of shape ``(len(Ls),)`` for
    one window and ``(len(Ls), len(gap_window))`` for a sequence.
    """
    v, p = _validate_law(values, probs)
    Ls = [_validate_L(L) for L in Ls]
    windows = None
    if gap_window is not None:
        windows = np.atleast_1d(as_real_array(gap_window, "gap_window"))
        if windows.ndim != 1 or windows.size == 0 or not np.all(np.isfinite(windows) & (windows > 0)):
            raise TheoryError(f"gap_window must be finite numbers > 0, got {gap_window!r}")
    out = np.zeros(len(Ls))
    gaps = np.full((len(Ls), 0 if windows is None else windows.size), np.nan)
    fin = np.isfinite(v)
    want: dict[int, list[int]] = {}
    for i, L in enumerate(Ls):
        want.setdefault(L, []).append(i)

    def record_gaps(idx, x):
        if windows is None:
            return
        for j, w in enumerate(windows):
            if x.size == 0:
                gaps[idx, j] = w
                continue
            upto = int(np.searchsorted(x, w, side="right"))  # points <= w, then the first beyond
            pts = np.concatenate([[0.0], x[:min(upto + 1, x.size)]])
            gaps[idx, j] = float(np.diff(pts).max())  # pts holds 0 and at least x[0]

    def record(n, vals, logp, scale):
        hit = vals >= -TIE_RTOL * n * scale
        out[want[n]] = min(float(logsumexp(logp[hit])), 0.0) if hit.any() else -math.inf
        record_gaps(want[n], np.maximum(vals[hit], 0.0))  # ties count as 0; vals are sorted

    if 0 in want:
        out[want[0]] = 0.0
        record_gaps(want[0], np.zeros(1))  # S_0 = 0
    if Ls and max(Ls) > 0:
        if not fin.any():
            for L, idx in want.items():
                if L > 0:
                    out[idx] = -math.inf
                    record_gaps(idx, np.zeros(0))
        else:
            vf, lpf = v[fin], np.log(p[fin])
            scale = max(float(np.abs(vf).max()), np.finfo(float).tiny)
            for n, vals, logp in _convolution_steps(vf, lpf, max(Ls), scale):
                if n in want:
                    record(n, vals, logp, scale)
    if windows is not None and np.ndim(gap_window) == 0:
        gaps = gaps[:, 0]
    return (out, gaps) if gap_window is not None else out


# ----------------------------------------------------------------------------- MAP error
@dataclass(frozen=True)
class MapErrorExponent:
    """Exponent of ``P(MAP parent != pa(h))`` at position ``h`` (W Theorem 2).

    Attributes
    ----------
    rate : float
        ``min_{h'} I(h')`` over competitors (``+inf`` when ``h`` has no competitor).
    competitor : int or None
        A competitor attaining the minimum (the smallest such index).
    rates : dict[int, float]
        ``I(h')`` for every competitor ``h' < h``, ``h' != pa(h)``.
    """

    rate: float
    competitor: int | None
    rates: dict = field(default_factory=dict)


def map_error_exponent(pi, tree, h: int, root=None) -> MapErrorExponent:
    """``min_{h' < h, h' != pa(h)} I(h')``: the exponent of ``P(MAP != pa(h))`` (W Theorem 2).

    Error event: some competitor gets at least the parent's posterior mass,
    ``E = union_{h'} {S_L(h') >= 0}``. Then
    ``max_{h'} P(S_L(h') >= 0) <= P(E) <= sum_{h'} P(S_L(h') >= 0)``, and the sum has at
    most ``h - 1`` terms, so ``-(1/L) log P(E) -> min_{h'} I(h')`` with ``I(h')`` the
    Chernoff exponent (:func:`chernoff_exponent`) of :func:`llr_law` for ``h'``.

    Parameters
    ----------
    pi : array_like, shape (d, d), row-stochastic
    tree : CausalTree or parent array
    h : int, not a root
    root : None or array_like, shape (d,)

    Returns
    -------
    MapErrorExponent
    """
    pi = validate_stochastic(pi)
    tree = as_tree(tree)
    h = tree._check_node(h, "h")
    pa = tree.parent(h)
    if pa is None:
        raise TheoryError(f"position h = {h} is a root: it has no parent to identify")
    rates = {}
    for c in range(h):
        if c == pa:
            continue
        vals, probs = llr_law(pi, tree, h, c, root=root)
        rates[c] = chernoff_exponent(vals, probs).rate
    if not rates:
        return MapErrorExponent(math.inf, None, {})
    best = min(rates, key=lambda c: (rates[c], c))
    return MapErrorExponent(float(rates[best]), best, rates)
