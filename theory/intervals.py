"""Rigorous enclosures of the quantities the certified tier bounds (python-flint ``arb`` balls).

An *enclosure* of a real quantity ``q`` on a box of inputs is an ``arb`` ball that contains
``q(x)`` for every ``x`` in the box: arb tracks the rounding error of every operation in the
ball's radius, so an enclosure never misses (Johansson, *Arb: efficient arbitrary-precision
midpoint-radius interval arithmetic*, IEEE Trans. Comput. 2017). Everything here takes balls
and returns balls; :func:`interval` makes a ball from two floats, and :func:`lower` /
:func:`upper` read a ball's ends back as floats rounded outward.

Functions whose natural formula divides 0 by 0 on a set where the claims are *singular* (both
sides of an inequality vanish) are enclosed in a reduced form with the vanishing factor divided
out exactly, using two monotone kernels:

- ``psi_ratio(x) = ((1 + x) log(1 + x) - x) / x^2 = int_0^1 (1 - s) / (1 + s x) ds``, decreasing on
  ``[-1, inf)``, ``psi_ratio(0) = 1/2``, ``psi_ratio(-1) = 1``;
- ``log1p_ratio(y) = log(1 + y) / y = int_0^1 1 / (1 + s y) ds``, decreasing on ``(-1, inf)``,
  ``log1p_ratio(0) = 1``.

A monotone kernel is enclosed by its values at the ends of the input ball, each evaluated at an
exact float: by its closed form away from 0 and by its Taylor series with a rigorous remainder
near 0 (``|x| <= 1/4``), where the closed form cancels.

Two-state chains (``d = 2``) are written ``pi = [[1 - a, a], [b, 1 - b]]`` with ``a, b`` in
``(0, 1)``: second eigenvalue ``lam = 1 - a - b``, stationary law ``mu = (b, a) / (a + b)``, and
``pi^k = 1 mu^T + lam^k (I - 1 mu^T)``. Every 2x2 joint pmf ``P`` with marginals ``p, q`` is
``P = p q^T + c sigma`` with ``sigma = [[1, -1], [-1, 1]]`` and ``c = P[0,0] - p_0 q_0``, so

    I(X; Y) = sum_ij p_i q_j psi(x_ij),  x_ij = sigma_ij c / (p_i q_j),  psi(x) = (1 + x) log(1 + x) - x,
            = c^2 sum_ij psi_ratio(x_ij) / (p_i q_j)                                  (:func:`mi_over_c2`)

and two positions of a tree at distance ``k`` (through their lowest common ancestor ``w``) have
``c = lam^k m_w(0) m_w(1)``, ``m_w`` the law of ``x_w`` (``mu`` under a stationary root). Shared
conventions: ``shared/CLAIMS.md`` (nats, ``0 log 0 = 0``, ``pi[s, t] = P(child = t | parent = s)``).
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Sequence

from flint import arb

from .errors import TheoryError

__all__ = [
    "interval",
    "exact",
    "lower",
    "upper",
    "bounds",
    "nonnegative",
    "imin",
    "imax",
    "Jet",
    "sqrt",
    "positive_product",
    "xlogx",
    "entropy",
    "mutual_information",
    "psi_ratio",
    "log1p_ratio",
    "mi_over_c2",
    "kl_over_t2",
    "two_state",
    "two_state_joint",
    "mi_over_lam2",
    "sdpi_ratio",
    "sdpi_ratio_at",
    "expected_loglik_gap_over_lam2",
    "eta_chi2_over_dobrushin",
    "kl_contraction_over_dobrushin",
    "wei_gradient_polynomials",
    "wei_gradient_over_lam2",
    "wei_gradient_leads",
    "wei_gradient_leads_at",
    "wei_lead_signature",
    "minus_quotient",
    "nichani_signal",
    "nichani_signal_closed_form",
    "SERIES_RADIUS",
]

#: Where the monotone kernels switch from the closed form to the Taylor series (``|x| <= 1/4``).
SERIES_RADIUS = 0.25
#: Terms of the series: the tail after them is below ``4^-24 / 600``, under 1e-17.
_SERIES_TERMS = 24


# -- balls and their ends -------------------------------------------------------------------------
def interval(lo, hi=None) -> arb:
    """The ball ``[lo, hi]`` (``hi = lo`` when omitted) for floats or ints ``lo <= hi``: every float
    is exact in arb, so the ball contains the whole interval (its radius is rounded up)."""
    hi = lo if hi is None else hi
    lo, hi = float(lo), float(hi)
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise TheoryError(f"interval needs finite ends lo <= hi, got [{lo!r}, {hi!r}]")
    return arb(lo) if lo == hi else arb(lo).union(arb(hi))


def exact(value) -> arb:
    """A ball containing ``value`` exactly: an int, a float, a :class:`fractions.Fraction` or an
    arb. A decimal literal like ``0.05`` is not a float's value: pass ``Fraction(1, 20)``."""
    if isinstance(value, arb):
        return value
    if isinstance(value, Fraction):
        return arb(value.numerator) / arb(value.denominator)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return arb(value)
    raise TheoryError(f"cannot make an exact ball from {value!r} ({type(value).__name__})")


def _float_below(x: arb) -> float:
    """The largest float ``<=`` the exact arb ``x`` (``x`` has radius 0)."""
    f = float(x)
    if arb(f) > x:  # float() rounds to nearest: step down once
        f = math.nextafter(f, -math.inf)
    return f


def _float_above(x: arb) -> float:
    f = float(x)
    if arb(f) < x:
        f = math.nextafter(f, math.inf)
    return f


def lower(x: arb) -> float:
    """The largest float at or below every point of ``x`` (``-inf`` for a ball that is not finite)."""
    if not x.is_finite():
        return -math.inf
    return _float_below(x.lower())


def upper(x: arb) -> float:
    """The smallest float at or above every point of ``x`` (``inf`` for a ball that is not finite)."""
    if not x.is_finite():
        return math.inf
    return _float_above(x.upper())


def bounds(x) -> tuple[float, float]:
    """``(lower(x), upper(x))`` for a ball, or a pair of floats ``(lo, hi)`` passed through (an
    enclosure with an infinite end, which a ball cannot carry)."""
    if isinstance(x, arb):
        return lower(x), upper(x)
    lo, hi = (float(v) for v in x)
    if math.isnan(lo) or math.isnan(hi) or lo > hi:
        raise TheoryError(f"an enclosure must be (lo, hi) with lo <= hi, got {x!r}")
    return lo, hi


def nonnegative(x: arb) -> arb:
    """``x`` with its negative part cut off: for a quantity known to be ``>= 0`` (a probability, a
    sum of squares) whose ball reaches below 0 only through rounding."""
    lo, hi = lower(x), upper(x)
    if hi < 0:
        raise TheoryError(f"a quantity said to be >= 0 has the enclosure [{lo!r}, {hi!r}]")
    return x if lo >= 0 else interval(0.0, hi)


def imin(*xs):
    """A ball containing ``min(x_1, ..., x_n)``: ``[min of the lower ends, min of the upper ends]``.
    For :class:`Jet` arguments, a jet whose gradient is the hull of the gradients of the arguments
    that may be the smallest (Clarke's generalised gradient of a minimum)."""
    if any(isinstance(x, Jet) for x in xs):
        return Jet._extreme(xs, smallest=True)
    return interval(min(lower(x) for x in xs), min(upper(x) for x in xs))


def imax(*xs):
    """A ball containing ``max(x_1, ..., x_n)`` (and for :class:`Jet` arguments as :func:`imin`)."""
    if any(isinstance(x, Jet) for x in xs):
        return Jet._extreme(xs, smallest=False)
    return interval(max(lower(x) for x in xs), max(upper(x) for x in xs))


def _ball(x) -> arb:
    return x if isinstance(x, arb) else arb(x)


def positive_product(*xs):
    """``x_1 x_2 ... x_n`` of quantities known to be ``>= 0``, from the ends: ``[prod of lower ends, prod of
    upper ends]``. arb's midpoint-radius product of wide positive balls reaches below 0 (``[m +/- m]^2``
    has lower end ``-2 m^2``); the ends keep the sign. :class:`Jet` arguments get the product rule's
    gradient."""
    if any(isinstance(x, Jet) for x in xs):
        n = len(next(x for x in xs if isinstance(x, Jet)).g)
        js = [x if isinstance(x, Jet) else Jet(_ball(x), [_ZERO] * n) for x in xs]
        plain = js[0]
        for j in js[1:]:
            plain = plain * j
        return Jet(positive_product(*(j.v for j in js)), plain.g)
    lo, hi = arb(1), arb(1)
    for x in xs:
        x = nonnegative(_ball(x))
        lo, hi = lo * arb(lower(x)), hi * arb(upper(x))
    return interval(lower(lo), upper(hi))


def sqrt(x):
    """``sqrt(x)`` of a ball (cut at 0: the quantity is ``>= 0``) or of a :class:`Jet` (slope ``1 / (2 sqrt x)``,
    unbounded where the ball reaches 0)."""
    if isinstance(x, Jet):
        root = sqrt(x.v)
        slope = _UNBOUNDED if lower(root) <= 0 else 1 / (2 * root)
        return x.apply(root, slope)
    return nonnegative(x).sqrt()


def _abs(x):
    """``|x|`` of a ball (cut at 0: arb's ``abs`` of a ball around 0 reaches below it) or of a jet."""
    return abs(x) if isinstance(x, Jet) else nonnegative(abs(x))


_UNBOUNDED = arb(0, math.inf)
_ZERO = arb(0)


class Jet:
    """A quantity on a box with its partial derivatives: ``v`` encloses the value and ``g[i]`` the
    derivative along coordinate ``i``, each over the whole box (first-order forward differentiation
    in interval arithmetic). The arithmetic operators, ``abs``, :func:`imin`, :func:`imax`,
    :func:`psi_ratio` and :func:`log1p_ratio` take jets, so a quantity written with them is
    differentiated by evaluating it on :meth:`variables`; :mod:`theory.certified` uses the gradient
    for the mean-value enclosure ``f(c) + sum_i g[i] (x_i - c_i)``, which narrows with the box
    squared where the naive enclosure narrows only with the box. Where ``f`` has kinks (a minimum,
    ``|x|``) the gradient encloses Clarke's generalised gradient, which keeps the mean-value
    enclosure valid for Lipschitz functions."""

    __slots__ = ("v", "g")

    def __init__(self, v: arb, g: Sequence[arb]):
        self.v, self.g = v, g

    @staticmethod
    def variables(balls: Sequence[arb]) -> list["Jet"]:
        """The coordinates of a box as jets: ``x_i`` with gradient ``e_i``."""
        n = len(balls)
        return [Jet(b, [arb(1) if j == i else arb(0) for j in range(n)]) for i, b in enumerate(balls)]

    def _lift(self, other) -> "Jet":
        return other if isinstance(other, Jet) else Jet(_ball(other), [_ZERO] * len(self.g))

    def __add__(self, other):
        if isinstance(other, Jet):
            return Jet(self.v + other.v, [x + y for x, y in zip(self.g, other.g)])
        return Jet(self.v + other, self.g)

    __radd__ = __add__

    def __neg__(self):
        return Jet(-self.v, [-x for x in self.g])

    def __sub__(self, other):
        if isinstance(other, Jet):
            return Jet(self.v - other.v, [x - y for x, y in zip(self.g, other.g)])
        return Jet(self.v - other, self.g)

    def __rsub__(self, other):
        return Jet(other - self.v, [-x for x in self.g])

    def __mul__(self, other):
        if isinstance(other, Jet):
            return Jet(self.v * other.v, [self.v * y + other.v * x for x, y in zip(self.g, other.g)])
        return Jet(self.v * other, [x * other for x in self.g])

    __rmul__ = __mul__

    def __truediv__(self, other):
        if isinstance(other, Jet):
            q = self.v / other.v
            return Jet(q, [(x - q * y) / other.v for x, y in zip(self.g, other.g)])
        return Jet(self.v / other, [x / other for x in self.g])

    def __rtruediv__(self, other):
        q = other / self.v
        return Jet(q, [-q * x / self.v for x in self.g])

    def __pow__(self, n: int):
        if not isinstance(n, int) or n < 0:
            raise TheoryError(f"a jet takes only non-negative integer powers, got {n!r}")
        if n == 0:
            return self._lift(1)
        scale = n * self.v ** (n - 1)
        return Jet(self.v ** n, [scale * x for x in self.g])

    def __abs__(self):
        if lower(self.v) > 0:
            return self
        if upper(self.v) < 0:
            return -self
        return Jet(nonnegative(abs(self.v)), [arb(0, upper(abs(x))) for x in self.g])

    def apply(self, value, slope) -> "Jet":
        """``f(self)`` given ``value``, an enclosure of ``f`` on ``self.v``, and ``slope``, of ``f'`` there."""
        return Jet(value, [slope * x for x in self.g])

    @staticmethod
    def _extreme(xs, smallest: bool) -> "Jet":
        n = len(next(x for x in xs if isinstance(x, Jet)).g)
        js = [x if isinstance(x, Jet) else Jet(_ball(x), [_ZERO] * n) for x in xs]
        if smallest:
            cut = min(upper(j.v) for j in js)
            live = [j for j in js if lower(j.v) <= cut]
            value = interval(min(lower(j.v) for j in js), cut)
        else:
            cut = max(lower(j.v) for j in js)
            live = [j for j in js if upper(j.v) >= cut]
            value = interval(cut, max(upper(j.v) for j in js))
        grad = [interval(min(lower(j.g[i]) for j in live), max(upper(j.g[i]) for j in live)) if all(
            j.g[i].is_finite() for j in live) else _UNBOUNDED for i in range(n)]
        return Jet(value, grad)


# -- entropy terms --------------------------------------------------------------------------------
_INV_E = arb(-1).exp()  # 1/e, a ball


def _xlogx_point(t: float) -> arb:
    return arb(0) if t == 0.0 else arb(t) * arb(t).log()


def xlogx(x: arb) -> arb:
    """``x log x`` on ``x >= 0`` with ``0 log 0 = 0``, for a ball that may contain 0.

    ``x log x`` decreases on ``[0, 1/e]`` and increases after, with minimum ``-1/e`` at ``1/e``; the
    enclosure is the hull of its values at the ball's ends (cut at 0: the quantity is ``>= 0``) and
    ``-1/e`` when the ball straddles ``1/e``."""
    x = nonnegative(x)
    lo, hi = lower(x), upper(x)
    lo = max(lo, 0.0)
    f_lo, f_hi = _xlogx_point(lo), _xlogx_point(hi)
    top = upper(imax(f_lo, f_hi))
    if arb(hi) <= _INV_E:  # decreasing on the whole ball
        bottom = lower(f_hi)
    elif arb(lo) >= _INV_E:  # increasing
        bottom = lower(f_lo)
    else:
        bottom = lower(-_INV_E)
    return interval(bottom, top)


def entropy(p: Sequence[arb]) -> arb:
    """``H(p) = -sum_i p_i log p_i`` (nats, ``0 log 0 = 0``) for balls ``p_i`` (a pmf's entries)."""
    return -sum((xlogx(x) for x in p), arb(0))


def mutual_information(joint: Sequence[Sequence[arb]]) -> arb:
    """``I(X; Y) = H(X) + H(Y) - H(X, Y)`` (nats) of a joint pmf given as rows of balls.

    The plain enclosure: it does not close where ``I`` vanishes (independent ``X, Y``), since the
    three entropies cancel there; :func:`mi_over_c2` is the reduced form that does."""
    rows = [list(r) for r in joint]
    px = [sum(r, arb(0)) for r in rows]
    py = [sum((r[j] for r in rows), arb(0)) for j in range(len(rows[0]))]
    return entropy(px) + entropy(py) - entropy([x for r in rows for x in r])


# -- monotone kernels -----------------------------------------------------------------------------
def _coefficients(coefficient) -> tuple[arb, ...]:
    return tuple(coefficient(n) for n in range(_SERIES_TERMS))


def _series(t: arb, coefficients: Sequence[arb], tail_factor: float) -> arb:
    """``sum_{n < N} coefficients[n] (-t)^n`` (Horner) plus a ball for the tail, at an exact ``t`` with
    ``|t| <= SERIES_RADIUS``: the ``n``-th tail term is at most ``tail_factor |t|^n``, so the tail is
    at most ``tail_factor |t|^N / (1 - |t|)``."""
    minus_t = -t
    total = coefficients[-1]
    for c in reversed(coefficients[:-1]):
        total = total * minus_t + c
    a = abs(float(t))
    tail = tail_factor * a ** _SERIES_TERMS / (1.0 - a)
    return total + arb(0, 2.0 * tail)  # twice the bound: covers the float rounding of ``tail``


# Taylor coefficients at 0 (in powers of -t) of the kernels and their slopes, and the tail factors
# that bound every coefficient from the N-th on.
_PSI = _coefficients(lambda n: arb(1) / ((n + 1) * (n + 2)))
_PSI_SLOPE = _coefficients(lambda m: arb(-(m + 1)) / ((m + 2) * (m + 3)))
_LOG1P = _coefficients(lambda n: arb(1) / (n + 1))
_LOG1P_SLOPE = _coefficients(lambda m: arb(-(m + 1)) / (m + 2))
_TAILS = {"psi": 1.0 / ((_SERIES_TERMS + 1) * (_SERIES_TERMS + 2)), "psi slope": 1.0 / (_SERIES_TERMS + 3),
          "log1p": 1.0 / (_SERIES_TERMS + 1), "log1p slope": 1.0}


def _psi_ratio_point(t: float) -> arb:
    """``psi_ratio`` at one float ``t >= -1``."""
    if t == -1.0:
        return arb(1)
    x = arb(t)
    if abs(t) <= SERIES_RADIUS:  # sum_n (-t)^n / ((n + 1)(n + 2))
        return _series(x, _PSI, _TAILS["psi"])
    return ((1 + x) * x.log1p() - x) / (x * x)


def _psi_ratio_slope_point(t: float) -> arb:
    """``psi_ratio'(t) = (2t - (2 + t) log(1 + t)) / t^3`` at one float ``t > -1`` (``-1/6`` at 0)."""
    x = arb(t)
    if abs(t) <= SERIES_RADIUS:  # -sum_m (m + 1) / ((m + 2)(m + 3)) (-t)^m
        return _series(x, _PSI_SLOPE, _TAILS["psi slope"])
    return (2 * x - (2 + x) * x.log1p()) / (x * x * x)


def psi_ratio(x):
    """``((1 + x) log(1 + x) - x) / x^2`` (``1/2`` at 0, ``1`` at ``-1``) on a ball ``x >= -1``.

    Decreasing, so enclosed by its values at the ball's ends (the lower end cut at ``-1``, which the
    quantity never goes below: ``1 + x`` is a ratio of probabilities). It is convex, so its slope is
    enclosed by the slopes at the ends too (``-inf`` at ``-1``); a :class:`Jet` gets both."""
    ball = x.v if isinstance(x, Jet) else x
    lo, hi = lower(ball), upper(ball)
    if hi < -1.0:
        raise TheoryError(f"psi_ratio needs x >= -1, got the enclosure [{lo!r}, {hi!r}]")
    lo = max(lo, -1.0)
    if not math.isfinite(hi):
        raise TheoryError("psi_ratio got a ball with no finite upper end")
    if lo == hi:
        value = _psi_ratio_point(lo)
    else:
        value = interval(lower(_psi_ratio_point(hi)), upper(_psi_ratio_point(lo)))
    if not isinstance(x, Jet):
        return value
    slope = _UNBOUNDED if lo == -1.0 else interval(lower(_psi_ratio_slope_point(lo)), upper(_psi_ratio_slope_point(hi)))
    return x.apply(value, slope)


def _log1p_ratio_point(t: float) -> arb:
    x = arb(t)
    if abs(t) <= SERIES_RADIUS:  # sum_n (-t)^n / (n + 1)
        return _series(x, _LOG1P, _TAILS["log1p"])
    return x.log1p() / x


def _log1p_ratio_slope_point(t: float) -> arb:
    """``log1p_ratio'(t) = (t / (1 + t) - log(1 + t)) / t^2`` at one float ``t > -1`` (``-1/2`` at 0)."""
    x = arb(t)
    if abs(t) <= SERIES_RADIUS:  # -sum_m (m + 1) / (m + 2) (-t)^m
        return _series(x, _LOG1P_SLOPE, _TAILS["log1p slope"])
    return (x / (1 + x) - x.log1p()) / (x * x)


def log1p_ratio(y):
    """``log(1 + y) / y`` (``1`` at 0) on a ball ``y > -1``; decreasing and convex, so it and its slope
    are enclosed by their values at the ball's ends (a :class:`Jet` gets both)."""
    ball = y.v if isinstance(y, Jet) else y
    lo, hi = lower(ball), upper(ball)
    if lo <= -1.0 or not math.isfinite(hi):
        raise TheoryError(f"log1p_ratio needs y > -1 and finite, got the enclosure [{lo!r}, {hi!r}]")
    value = _log1p_ratio_point(lo) if lo == hi else interval(lower(_log1p_ratio_point(hi)),
                                                             upper(_log1p_ratio_point(lo)))
    if not isinstance(y, Jet):
        return value
    return y.apply(value, interval(lower(_log1p_ratio_slope_point(lo)), upper(_log1p_ratio_slope_point(hi))))


# -- two-by-two joints ----------------------------------------------------------------------------
_SIGMA = ((1, -1), (-1, 1))


def mi_over_c2(c: arb, p: Sequence[arb], q: Sequence[arb]) -> arb:
    """``I(X; Y) / c^2 = sum_ij psi_ratio(sigma_ij c / (p_i q_j)) / (p_i q_j)`` for the 2x2 joint
    ``P = p q^T + c sigma`` (marginals ``p, q`` with positive entries; ``c = P[0,0] - p_0 q_0``).

    Finite and positive at ``c = 0``, where ``I`` itself vanishes to second order."""
    total = arb(0)
    for i in range(2):
        for j in range(2):
            w = p[i] * q[j]
            total += psi_ratio(_SIGMA[i][j] * c / w) / w
    return total


def kl_over_t2(t: arb, p: Sequence[arb]) -> arb:
    """``KL(p + t (1, -1) || p) / t^2 = sum_i psi_ratio(s_i t / p_i) / p_i``, ``s = (1, -1)``, for a
    two-point law ``p`` with positive entries and ``p + t (1, -1)`` a law (``t`` in ``[-p_0, p_1]``)."""
    return psi_ratio(t / p[0]) / p[0] + psi_ratio(-t / p[1]) / p[1]


def two_state(a: arb, b: arb) -> tuple[arb, arb, arb]:
    """``(lam, mu_0, mu_1)`` of ``pi = [[1 - a, a], [b, 1 - b]]``: ``lam = 1 - a - b`` and the
    stationary law ``mu = (b, a) / (a + b)`` (``a + b > 0``)."""
    s = a + b
    return 1 - s, b / s, a / s


def two_state_joint(a: arb, b: arb, k: int, root: Sequence[arb] | None = None, depth: int = 0,
                    k_other: int = 0) -> list[list[arb]]:
    """The joint pmf ``P[s, t] = P(x_u = s, x_v = t)`` of two positions of a tree with lowest common
    ancestor ``w`` at depth ``depth``, ``u`` at distance ``k_other`` below ``w`` and ``v`` at ``k``:
    ``P = sum_c m_w(c) pi^k_other[c, s] pi^k[c, t]`` with ``m_w = root pi^depth`` (stationary root when
    ``root`` is None), by plain interval matrix products: the definition, for cross-checks."""
    pi = [[1 - a, a], [b, 1 - b]]

    def power(n):
        out = [[arb(1), arb(0)], [arb(0), arb(1)]]
        for _ in range(n):
            out = [[sum((out[i][m] * pi[m][j] for m in range(2)), arb(0)) for j in range(2)] for i in range(2)]
        return out

    if root is None:
        _, m0, m1 = two_state(a, b)
        m = [m0, m1]
    else:
        pd = power(depth)
        m = [sum((root[c] * pd[c][j] for c in range(2)), arb(0)) for j in range(2)]
    pu, pv = power(k_other), power(k)
    return [[sum((m[c] * pu[c][s] * pv[c][t] for c in range(2)), arb(0)) for t in range(2)] for s in range(2)]


def mi_over_lam2(a: arb, b: arb, k: int) -> arb:
    """``I(x_u; x_v) / (lam^2 (mu_0 mu_1)^2) = lam^(2k - 2) mi_over_c2(lam^k mu_0 mu_1, mu, mu)`` for two
    positions at tree distance ``k >= 1`` under a stationary root (``c = lam^k mu_0 mu_1``): the KL
    mutual information with the factor that vanishes on rank-one ``pi`` (``lam = 0``) divided out."""
    lam, m0, m1 = two_state(a, b)
    mu = (m0, m1)
    return lam ** (2 * k - 2) * mi_over_c2(lam ** k * m0 * m1, mu, mu)


def _two_state_s(lam_k: arb, rho: arb) -> arb:
    """``mu_0 mu_1 mi_over_c2(c, mu, mu)`` at ``c = lam_k mu_0 mu_1``, written with ``rho = a / b =
    mu_1 / mu_0`` alone: ``rho psi_ratio(lam_k rho) + 2 psi_ratio(-lam_k) + psi_ratio(lam_k / rho) / rho``."""
    return rho * psi_ratio(lam_k * rho) + 2 * psi_ratio(-lam_k) + psi_ratio(lam_k / rho) / rho


def sdpi_ratio(a, b, k: int, alpha):
    """``I(x_h; x_h') / (alpha I(x_h; x_pa(h)))`` for ``h'`` at tree distance ``k >= 2`` from ``h``
    (stationary root, ``d = 2``). W Lemma 3 holds on the input iff it is ``<= 1`` with ``alpha = 1 -
    delta gamma``; the ratio is defined (by continuity) on rank-one ``pi`` too, where both informations
    vanish.

    :func:`mi_over_lam2` for ``k`` over the same for 1, with ``mu_0 mu_1`` cancelled: ``lam^(2k-2)
    S_k / (alpha S_1)``, ``S_k = rho psi_ratio(lam^k rho) + 2 psi_ratio(-lam^k) + psi_ratio(lam^k / rho) /
    rho`` and ``rho = a / b`` (the balls of ``mu`` never meet, which keeps the enclosure tight)."""
    return sdpi_ratio_at(1 - a - b, a / b, k, alpha)


def sdpi_ratio_at(lam, rho, k: int, alpha):
    """:func:`sdpi_ratio` with the chain given by ``lam = 1 - a - b`` and ``rho = a / b`` directly."""
    return lam ** (2 * k - 2) * _two_state_s(lam ** k, rho) / (alpha * _two_state_s(lam, rho))


def expected_loglik_gap_over_lam2(a, b, k: int):
    """``(E log pi(x_h|x_pa(h)) - E log pi(x_h|x_h')) / lam^2`` for ``h'`` at tree distance ``k >= 2``
    (stationary root, ``d = 2``; W Lemma 4's gap).

    Both joints have the marginals ``mu``, so their difference is ``(c_1 - c_k) sigma`` with
    ``c_k = lam^k mu_0 mu_1``, and ``sum sigma log pi = log(pi_00 pi_11 / (pi_01 pi_10)) =
    log(1 + lam / (a b))``. With ``mu_0 mu_1 = a b / (a + b)^2`` the gap is ``lam^2 (1 - lam^(k-1))
    log1p_ratio(lam / (a b)) / (a + b)^2``: three positive factors (for ``|lam| < 1``), multiplied from
    their ends (:func:`positive_product`)."""
    lam = 1 - a - b
    s = a + b
    odds = positive_product(1 - a, 1 - b, 1 / a, 1 / b)  # 1 + lam / (a b) = (1 - a)(1 - b) / (a b) > 0
    return positive_product(1 - lam ** (k - 1), log1p_ratio(odds - 1), 1 / (s * s))


def eta_chi2_over_dobrushin(a: arb, b: arb, p0: arb) -> arb:
    """``eta_chi2(K, p) / eta_TV(K)`` for the binary channel ``K = [[1 - a, a], [b, 1 - b]]`` and input
    law ``p = (p0, 1 - p0)``: ``eta_chi2 = lam^2 p_0 p_1 / ((pK)_0 (pK)_1)`` and ``eta_TV = |lam|``, so
    the ratio is ``|lam| p_0 p_1 / ((pK)_0 (pK)_1)``, defined at ``lam = 0`` too (both vanish there)."""
    lam, p1 = 1 - a - b, 1 - p0
    r0, r1 = p0 * (1 - a) + p1 * b, p0 * a + p1 * (1 - b)  # sums of non-negative terms: no cancellation
    return _abs(lam) * p0 * p1 / (r0 * r1)


def kl_contraction_over_dobrushin(a: arb, b: arb, p0: arb, q0: arb) -> arb:
    """``KL(qK || pK) / (eta_TV(K) KL(q || p))`` for the binary channel ``K`` of
    :func:`eta_chi2_over_dobrushin` and laws ``p = (p0, 1 - p0)``, ``q = (q0, 1 - q0)``.

    With ``t = q0 - p0``, ``qK - pK = t lam (1, -1)``, so ``KL(qK || pK) = t^2 lam^2 kl_over_t2(t lam,
    pK)`` and ``KL(q || p) = t^2 kl_over_t2(t, p)``: the ratio is ``|lam| kl_over_t2(t lam, pK) /
    kl_over_t2(t, p)``, defined on ``q = p`` and ``lam = 0`` too. Its supremum over ``q`` is
    ``eta_KL(K, p) / eta_TV(K)``; at ``t = 0`` it is ``eta_chi2(K, p) / eta_TV(K)``."""
    lam, p1 = 1 - a - b, 1 - p0
    r = (p0 * (1 - a) + p1 * b, p0 * a + p1 * (1 - b))
    t = q0 - p0
    return _abs(lam) * kl_over_t2(t * lam, r) / kl_over_t2(t, (p0, p1))


# -- gradients at initialisation ------------------------------------------------------------------
# A polynomial in lam and rho (negative powers of rho allowed) with exact rational coefficients:
# {(power of lam, power of rho): Fraction}.
_Poly = dict


def _poly_mul(p: _Poly, q: _Poly) -> _Poly:
    out: _Poly = {}
    for (i, j), c in p.items():
        for (k, m), d in q.items():
            out[i + k, j + m] = out.get((i + k, j + m), 0) + c * d
    return {key: c for key, c in out.items() if c != 0}


def _poly_add(*ps: _Poly) -> _Poly:
    out: _Poly = {}
    for p in ps:
        for key, c in p.items():
            out[key] = out.get(key, 0) + c
    return {key: c for key, c in out.items() if c != 0}


def _poly_scale(p: _Poly, c) -> _Poly:
    return {key: v * c for key, v in p.items() if v * c != 0}


@functools.lru_cache(maxsize=None)
def wei_gradient_polynomials(parents: tuple[int, ...], h: int) -> tuple[tuple[tuple[int, int], _Poly, tuple[_Poly, ...]], ...]:
    """W Theorem 3's gradient at ``W = 0`` (``d = 2``, stationary root) on the tree ``parents`` (nodes
    ``0..h``, one root at 0), as exact polynomials: one entry ``((t, n), D, (P_0, ..., P_{h-1}))`` per
    group of target sequences with ``x_h = t`` and ``n`` of the ``h`` candidates equal to ``x_h``, such
    that, with ``rho = a / b = mu_1 / mu_0`` and ``lam = 1 - a - b``::

        G_k = lam^2 / (1 + rho)^(h+1) * sum over groups P_k(lam, rho) / D(lam, rho)      (k = 0..h-1).

    Derivation. Write ``pi[s, t] / mu_t = 1 + lam e(s, t)``, ``e(s, t) = [s = t] / mu_t - 1``: ``rho``
    for a match in state 0, ``1 / rho`` in state 1, ``-1`` for a mismatch. A target sequence has
    probability ``w(x) prod_j (1 + lam e_j)`` with ``w = prod_j mu_{x_j} = rho^(n1) / (1 + rho)^(h+1)``
    (``n1`` ones) and ``e_j = e(x_pa(j), x_j)``; candidate ``k`` has ``pi[x_k, x_h] / mu_{x_h} = 1 + lam
    c_k`` and the mixture output ``f(x_h) = mu_{x_h} (1 + lam cbar)``, so ``h G_k = E[(1 + lam c_k) / (1 +
    lam cbar)] - 1``. As ``sum_x w (c_k - cbar) = 0`` and ``prod_j (1 + lam e_j) - 1 = lam sum_j e_j
    prod_{i<j} (1 + lam e_i)``, ``h G_k (1 + rho)^(h+1) / lam^2 = sum_x rho^(n1) (c_k - cbar) (A_x - cbar)
    / (1 + lam cbar)`` with ``A_x = sum_j e_j prod_{i<j} (1 + lam e_i)``. Within a group ``cbar = (n e_t -
    (h - n)) / h`` is the same, so its sequences share the denominator ``D = h (1 + lam cbar)`` and their
    numerators are added exactly here (``P_k = sum_x rho^(n1) (c_k - cbar) (A_x - cbar)``): the
    cancellation between sequences happens in exact arithmetic, not in the enclosure."""
    e_t = {0: {(0, 1): Fraction(1)}, 1: {(0, -1): Fraction(1)}}
    minus_one = {(0, 0): Fraction(-1)}
    groups: dict[tuple[int, int], list] = {}
    for code in range(2 ** (h + 1)):
        x = [(code >> j) & 1 for j in range(h + 1)]
        t = x[h]
        n = sum(1 for k in range(h) if x[k] == t)
        cbar = _poly_add(_poly_scale(e_t[t], Fraction(n, h)), {(0, 0): Fraction(-(h - n), h)})
        acc, prefix = {}, {(0, 0): Fraction(1)}
        for j in range(1, h + 1):
            e = e_t[x[j]] if x[parents[j]] == x[j] else minus_one
            acc = _poly_add(acc, _poly_mul(e, prefix))
            prefix = _poly_mul(prefix, _poly_add({(0, 0): Fraction(1)}, {(i + 1, m): c for (i, m), c in e.items()}))
        tail = _poly_mul({(0, sum(x)): Fraction(1)}, _poly_add(acc, _poly_scale(cbar, -1)))
        entry = groups.setdefault((t, n), [cbar, [{} for _ in range(h)]])
        for k in range(h):
            c_k = e_t[t] if x[k] == t else minus_one
            entry[1][k] = _poly_add(entry[1][k], _poly_mul(_poly_add(c_k, _poly_scale(cbar, -1)), tail))
    out = []
    for key in sorted(groups):
        cbar, polys = groups[key]
        D = _poly_add({(0, 0): Fraction(h)}, {(1, m): c * h for (_, m), c in cbar.items()})
        out.append((key, D, tuple(polys)))
    return tuple(out)


def _poly_derivative(p: _Poly, axis: int) -> _Poly:
    """``dp/dlam`` (``axis`` 0) or ``dp/drho`` (``axis`` 1)."""
    out: _Poly = {}
    for (i, j), c in p.items():
        power = (i, j)[axis]
        if power:
            key = (i - 1, j) if axis == 0 else (i, j - 1)
            out[key] = out.get(key, 0) + c * power
    return out


def _compiled(p: _Poly) -> tuple[tuple[tuple[int, int, arb], ...], ...]:
    """``p`` and its two partial derivatives as tuples of ``(power of lam, power of rho, arb coefficient)``."""
    return tuple(tuple((i, j, exact(Fraction(c))) for (i, j), c in sorted(q.items()))
                 for q in (p, _poly_derivative(p, 0), _poly_derivative(p, 1)))


def _poly_eval(terms, lam_powers, rho_powers):
    total = 0
    for i, j, c in terms:
        total = total + c * lam_powers[i] * rho_powers[j]
    return total


@functools.lru_cache(maxsize=None)
def _wei_compiled(parents: tuple[int, ...], h: int, claimed: int | None):
    """The groups of :func:`wei_gradient_polynomials` with arb coefficients: ``(D, entries)`` per group
    with a nonzero numerator, ``entries`` the ``h`` entries' numerators (``claimed`` None) or the
    differences ``P_claimed - P_k`` for ``k != claimed``; each with its derivatives (:func:`_compiled`)."""
    out = []
    for _, D, polys in wei_gradient_polynomials(parents, h):
        if not any(polys):
            continue
        if claimed is None:
            entries = polys
        else:
            entries = tuple(_poly_add(polys[claimed], _poly_scale(polys[k], -1)) for k in range(h) if k != claimed)
        out.append((_compiled(D), tuple(_compiled(P) for P in entries)))
    return tuple(out)


def _powers(lam: arb, rho: arb, h: int):
    inv = 1 / rho
    lam_powers = [arb(1), lam] + [lam ** i for i in range(2, h + 2)]
    rho_powers = {0: arb(1), 1: rho, -1: inv}
    for i in range(2, 2 * h + 3):
        rho_powers[i], rho_powers[-i] = rho_powers[i - 1] * rho, rho_powers[-i + 1] * inv
    return lam_powers, rho_powers


def _wei_at(lam, rho, parents: Sequence[int], h: int, claimed: int | None) -> list:
    """The entries (or, with ``claimed``, the leads) of :func:`wei_gradient_over_lam2` at balls ``lam, rho``.
    At jets, the gradients come from the polynomials' exact derivatives, by the chain rule through
    ``lam`` and ``rho`` (cheaper, and no wider, than differentiating the evaluation)."""
    if not 1 <= h < len(parents) or parents[0] != -1 or any(not 0 <= parents[j] < j for j in range(1, h + 1)):
        raise TheoryError(f"W's gradient needs a tree rooted at 0 on nodes 0..h, got parents {list(parents)} and h = {h}")
    if claimed is not None and not 0 <= claimed < h:
        raise TheoryError(f"the claimed entry {claimed} is not a candidate 0..{h - 1}")
    groups = _wei_compiled(tuple(int(p) for p in parents[:h + 1]), h, claimed)
    jets = isinstance(lam, Jet) or isinstance(rho, Jet)
    if jets:
        n = len(next(x for x in (lam, rho) if isinstance(x, Jet)).g)
        lam, rho = (x if isinstance(x, Jet) else Jet(_ball(x), [_ZERO] * n) for x in (lam, rho))
    lp, rp = _powers(lam.v if jets else lam, rho.v if jets else rho, h)
    n = h if claimed is None else h - 1
    values = [arb(0)] * n
    d_lam, d_rho = [arb(0)] * n, [arb(0)] * n
    for D, entries in groups:
        d = _poly_eval(D[0], lp, rp)
        if jets:
            dl, dr = _poly_eval(D[1], lp, rp), _poly_eval(D[2], lp, rp)
        for m, P in enumerate(entries):
            q = _poly_eval(P[0], lp, rp) / d
            values[m] += q
            if jets:  # d(P/D) = (dP - q dD) / D
                d_lam[m] += (_poly_eval(P[1], lp, rp) - q * dl) / d
                d_rho[m] += (_poly_eval(P[2], lp, rp) - q * dr) / d
    if not jets:
        return values
    return [Jet(v, [x * gl + y * gr for gl, gr in zip(lam.g, rho.g)]) for v, x, y in zip(values, d_lam, d_rho)]


def wei_gradient_leads_at(lam, rho, parents: Sequence[int], h: int, claimed: int) -> list:
    """:func:`wei_gradient_leads` with the chain given by ``lam = 1 - a - b`` and ``rho = a / b`` directly
    (coordinates in which both are boxes' sides, so their balls carry no dependency)."""
    return _wei_at(lam, rho, parents, h, claimed)


def wei_lead_signature(parents: Sequence[int], h: int, claimed: int) -> tuple:
    """The exact lead polynomials ``P_claimed - P_k`` (``k != claimed``) of every group of
    :func:`wei_gradient_polynomials`, as a sorted hashable tuple: two trees with equal signatures have
    the same margin ``min_k (G_claimed - G_k)`` as a function of ``pi`` (one certificate covers both)."""
    groups = wei_gradient_polynomials(tuple(int(p) for p in parents[:h + 1]), h)
    return tuple(sorted(tuple(sorted((key, tuple(sorted(_poly_add(P[claimed], _poly_scale(P[k], -1)).items())))
                                     for key, _, P in groups)) for k in range(h) if k != claimed))


def minus_quotient(x: arb, s, y: arb) -> tuple[float, float]:
    """An enclosure ``(lo, hi)`` of ``x - s / y`` for an exact number ``s`` and a ball ``y >= 0`` that may
    reach 0, where the quotient is unbounded: one end is then infinite (``s != 0``)."""
    s, y = exact(Fraction(s) if isinstance(s, float) else s), nonnegative(y)
    if lower(y) > 0:
        return bounds(x - s / y)
    if s == 0:
        return bounds(x)
    at_top = x - s / arb(upper(y))  # the quotient's finite end, at y's upper end
    return (-math.inf, upper(at_top)) if s > 0 else (lower(at_top), math.inf)


def wei_gradient_over_lam2(a, b, parents: Sequence[int], h: int) -> list:
    """``G_h' (1 + rho)^(h+1) / lam^2`` for ``h' = 0..h-1``: W Theorem 3's expected negative gradient at
    ``W = 0`` (mixture output, uniform layer-2 attention ``1/h``, stationary root;
    :func:`theory.wei_gradient_at_zero`) on the tree ``parents`` with ``d = 2``, divided by the positive
    factor ``lam^2 / (1 + rho)^(h+1)`` (``rho = a / b = mu_1 / mu_0``), from :func:`wei_gradient_polynomials`.
    The ordering of the entries (the claim: ``G[pa] > G[h']``) off rank-one ``pi`` is theirs."""
    return _wei_at(1 - a - b, a / b, parents, h, None)


def wei_gradient_leads(a, b, parents: Sequence[int], h: int, claimed: int) -> list:
    """``(G_claimed - G_h') (1 + rho)^(h+1) / lam^2`` for every ``h' != claimed`` (in order), each from the
    exact difference of the two entries' polynomials (:func:`wei_gradient_polynomials`), so that the
    entries' common part cancels before any enclosure is taken."""
    return _wei_at(1 - a - b, a / b, parents, h, claimed)


def nichani_signal(a: arb, b: arb, k: int | None) -> arb:
    """N Knowl 3's signal ``g[i, j](pi) = sum_{s,s'} P(s_j = s, s_i = s') pi(s, s') / mu(s') - 1`` at
    ``S = 2`` for one ``pi``, by its definition with interval matrix products: ``s_j`` and ``s_i`` at
    tree distance ``k`` (stationary roots, so every marginal is ``mu``), ``k = None`` for two
    positions in different trees (independent: ``P = mu mu^T``) and ``k = 0`` for ``j = i``
    (``P = diag mu``)."""
    lam, m0, m1 = two_state(a, b)
    mu = (m0, m1)
    pi = [[1 - a, a], [b, 1 - b]]
    if k is None:
        joint = [[mu[s] * mu[t] for t in range(2)] for s in range(2)]
    else:
        joint = two_state_joint(a, b, k)
    return sum((joint[s][t] * pi[s][t] / mu[t] for s in range(2) for t in range(2)), arb(0)) - 1


def nichani_signal_closed_form(a: arb, b: arb, k: int | None) -> arb:
    """:func:`nichani_signal` in closed form: ``lam^(k+1)`` at distance ``k`` (``pi^k = 1 mu^T + lam^k
    (I - 1 mu^T)`` and ``trace pi - 1 = lam``), ``0`` for positions in different trees."""
    if k is None:
        return arb(0)
    return (1 - a - b) ** (k + 1)
