"""theory.intervals: every enclosure contains the quantity's value, computed by mpmath at 50 digits, at
random points and at points inside random boxes; the reduced forms agree with the float theory they
reduce; and a mutated routine (an endpoint swapped, a rounding mode dropped) is caught by these checks."""
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from flint import arb

from theory import (CausalTree, expected_loglik, mutual_information, nichani_gradient_signal, pairwise_joint, stationary,
                    wei_gradient_at_zero)
from theory import intervals as iv
from theory.bma import recursive_trees
from theory.errors import TheoryError

mp = mpmath.mp
DIGITS = 50


# -- references at 50 digits ----------------------------------------------------------------------
def _mpf(x):
    return mpmath.mpf(x) if not isinstance(x, Fraction) else mpmath.mpf(x.numerator) / x.denominator


def ref_xlogx(t):
    t = _mpf(t)
    return mpmath.mpf(0) if t == 0 else t * mpmath.log(t)


def ref_psi_ratio(t):
    t = _mpf(t)
    if t == 0:
        return mpmath.mpf(1) / 2
    if t == -1:
        return mpmath.mpf(1)
    return ((1 + t) * mpmath.log1p(t) - t) / t ** 2


def ref_log1p_ratio(t):
    t = _mpf(t)
    return mpmath.mpf(1) if t == 0 else mpmath.log1p(t) / t


def _chain(a, b):
    a, b = _mpf(a), _mpf(b)
    pi = mpmath.matrix([[1 - a, a], [b, 1 - b]])
    mu = [b / (a + b), a / (a + b)]
    return a, b, pi, mu


def _mi(P):
    px = [P[0][0] + P[0][1], P[1][0] + P[1][1]]
    py = [P[0][0] + P[1][0], P[0][1] + P[1][1]]
    return sum(P[i][j] * mpmath.log(P[i][j] / (px[i] * py[j])) for i in range(2) for j in range(2) if P[i][j] != 0)


def _joint_at(a, b, k):
    """The stationary joint of two positions at tree distance k: diag(mu) pi^k."""
    _, _, pi, mu = _chain(a, b)
    pk = pi ** k
    return [[mu[i] * pk[i, j] for j in range(2)] for i in range(2)]


def ref_sdpi_ratio(a, b, k, alpha):
    return _mi(_joint_at(a, b, k)) / (_mpf(alpha) * _mi(_joint_at(a, b, 1)))


def ref_loglik_gap_over_lam2(a, b, k):
    a_, b_, pi, _ = _chain(a, b)
    P1, Pk = _joint_at(a, b, 1), _joint_at(a, b, k)
    gap = sum((P1[i][j] - Pk[i][j]) * mpmath.log(pi[i, j]) for i in range(2) for j in range(2))
    return gap / (1 - a_ - b_) ** 2


def ref_eta_chi2_over_dobrushin(a, b, p0):
    a, b, p0 = _mpf(a), _mpf(b), _mpf(p0)
    lam, p1 = 1 - a - b, 1 - p0
    r0 = p0 * (1 - a) + p1 * b
    eta = lam ** 2 * p0 * p1 / (r0 * (1 - r0))
    return eta / abs(lam)


def ref_kl_ratio(a, b, p0, q0):
    a, b, p0, q0 = _mpf(a), _mpf(b), _mpf(p0), _mpf(q0)
    K = [[1 - a, a], [b, 1 - b]]
    p, q = [p0, 1 - p0], [q0, 1 - q0]
    pK = [p[0] * K[0][j] + p[1] * K[1][j] for j in range(2)]
    qK = [q[0] * K[0][j] + q[1] * K[1][j] for j in range(2)]

    def kl(u, v):
        return sum(u[i] * mpmath.log(u[i] / v[i]) for i in range(2) if u[i] != 0)

    return kl(qK, pK) / (abs(1 - a - b) * kl(q, p))


def ref_wei_scaled(a, b, parents, h):
    """G_k (1 + rho)^(h+1) / lam^2 by enumerating every target sequence at 50 digits."""
    a_, b_, pi, mu = _chain(a, b)
    lam, rho = 1 - a_ - b_, a_ / b_
    G = [mpmath.mpf(0)] * h
    for code in range(2 ** (h + 1)):
        x = [(code >> j) & 1 for j in range(h + 1)]
        p = mu[x[0]]
        for j in range(1, h + 1):
            p *= pi[x[parents[j]], x[j]]
        f = sum(pi[x[k], x[h]] for k in range(h)) / h
        for k in range(h):
            G[k] += p * (pi[x[k], x[h]] / f - 1) / h
    return [g * (1 + rho) ** (h + 1) / lam ** 2 for g in G]


# -- the checker ----------------------------------------------------------------------------------
def misses(enclose, reference, cases):
    """The cases ``(args, points)`` where the enclosure ``enclose(*balls)`` of a box misses the
    reference value at one of the box's ``points``: ``args`` are ``(lo, hi)`` pairs, one per coordinate."""
    out = []
    with mpmath.workdps(DIGITS):
        for args, points in cases:
            balls = [iv.interval(lo, hi) for lo, hi in args]
            got = enclose(*balls)
            values = got if isinstance(got, list) else [got]
            for pt in points:
                refs = reference(*pt)
                refs = refs if isinstance(refs, list) else [refs]
                for v, r in zip(values, refs):
                    lo, hi = iv.bounds(v)
                    if not (mpmath.mpf(lo) <= r <= mpmath.mpf(hi)):
                        out.append((args, pt, (lo, hi), r))
    return out


def box_cases(rng, lows, highs, n_boxes=25, width=0.02, points=4):
    """Random boxes inside ``[lows, highs]``, each with its corners' midpoints and random points inside;
    about a third of the boxes are points (width 0)."""
    cases = []
    lows, highs = np.asarray(lows, float), np.asarray(highs, float)
    for k in range(n_boxes):
        w = 0.0 if k % 3 == 0 else width * rng.uniform(0.1, 1.0)
        lo = rng.uniform(lows, highs - w)
        hi = lo + w
        pts = [tuple(lo)] + [tuple(float(x) for x in rng.uniform(lo, hi)) for _ in range(points if w else 0)]
        pts.append(tuple(float(x) for x in hi))
        cases.append((list(zip(lo.tolist(), hi.tolist())), pts))
    return cases


@pytest.fixture
def rng():
    return np.random.default_rng(20260)


def test_kernels_enclose_their_values_at_points_and_on_boxes(rng):
    near_zero = box_cases(rng, [-0.3], [0.3], width=0.2)  # the series branch, and boxes straddling 0
    wide = box_cases(rng, [-1.0], [6.0], width=1.0)
    assert not misses(iv.psi_ratio, ref_psi_ratio, near_zero + wide + [([(-1.0, -1.0)], [(-1.0,)]),
                                                                       ([(-1.0, -0.5)], [(-1.0,), (-0.75,)])])
    assert not misses(iv.log1p_ratio, ref_log1p_ratio, near_zero + box_cases(rng, [-0.9], [8.0], width=1.0))
    assert not misses(iv.xlogx, ref_xlogx, box_cases(rng, [0.0], [2.0], width=0.5) +
                      [([(0.0, 0.0)], [(0.0,)]), ([(0.0, 0.9)], [(0.0,), (0.3678,), (0.9,)])])


def test_kernel_slopes_enclose_the_derivatives(rng):
    """The jets' slopes of psi_ratio and log1p_ratio contain mpmath's derivatives at points in the box."""
    for kernel, ref in ((iv.psi_ratio, ref_psi_ratio), (iv.log1p_ratio, ref_log1p_ratio)):
        for args, points in box_cases(rng, [-0.8], [5.0], n_boxes=15, width=0.5):
            jet = kernel(iv.Jet.variables([iv.interval(*args[0])])[0])
            lo, hi = iv.bounds(jet.g[0])
            with mpmath.workdps(DIGITS):
                for (t,) in points:
                    d = mpmath.diff(ref, mpmath.mpf(t))
                    assert mpmath.mpf(lo) <= d <= mpmath.mpf(hi), (kernel.__name__, args, t)


def test_two_state_quantities_enclose_their_values(rng):
    ab = box_cases(rng, [0.02, 0.02], [0.98, 0.98], width=0.05)
    for k in (2, 3):
        assert not misses(lambda a, b: iv.sdpi_ratio(a, b, k, iv.interval(0.93)),
                          lambda a, b: ref_sdpi_ratio(a, b, k, 0.93), ab)
        assert not misses(lambda a, b: iv.expected_loglik_gap_over_lam2(a, b, k),
                          lambda a, b: ref_loglik_gap_over_lam2(a, b, k), [c for c in ab if _lam_apart(c)])
        assert not misses(lambda a, b: iv.mi_over_lam2(a, b, k),  # I / (lam^2 (mu_0 mu_1)^2) at distance k
                          lambda a, b: _mi(_joint_at(a, b, k)) / ((1 - _mpf(a) - _mpf(b)) * _mpf(a) * _mpf(b)
                                                                 / (_mpf(a) + _mpf(b)) ** 2) ** 2,
                          [c for c in ab if _lam_apart(c)])
    abp = box_cases(rng, [0.02, 0.02, 0.0], [0.98, 0.98, 1.0], width=0.05)
    assert not misses(iv.eta_chi2_over_dobrushin, ref_eta_chi2_over_dobrushin, [c for c in abp if _lam_apart(c)])
    abpq = box_cases(rng, [0.02, 0.02, 0.1, 0.0], [0.98, 0.98, 0.9, 1.0], width=0.05)
    assert not misses(iv.kl_contraction_over_dobrushin, ref_kl_ratio,
                      [c for c in abpq if _lam_apart(c) and all(abs(p[3] - p[2]) > 1e-9 for p in c[1])])


def _lam_apart(case):
    """Boxes whose points all have lam != 0 and a != b... (the references divide by lam)."""
    return all(abs(1 - p[0] - p[1]) > 1e-9 for p in case[1])


def test_w_gradient_polynomials_enclose_the_enumerated_gradient(rng):
    ab = [c for c in box_cases(rng, [0.03, 0.03], [0.97, 0.97], n_boxes=6, width=0.03, points=2) if _lam_apart(c)]
    for parents in ((-1, 0, 0), (-1, 0, 1, 1), (-1, 0, 0, 2, 1)):
        h = len(parents) - 1
        assert not misses(lambda a, b: iv.wei_gradient_over_lam2(a, b, parents, h),
                          lambda a, b: ref_wei_scaled(a, b, parents, h), ab)


def test_reduced_forms_agree_with_the_float_theory(rng):
    """The reduced forms times their factors are the float functions of theory at random chains."""
    for _ in range(5):
        a, b = (float(x) for x in rng.uniform(0.05, 0.95, 2))
        pi = np.array([[1 - a, a], [b, 1 - b]])
        mu, lam = stationary(pi), 1 - a - b
        for n in (3, 4, 5):
            for par in recursive_trees(n):
                h = n - 1
                G = wei_gradient_at_zero(pi, list(par), h, root=mu)
                got = [float(g.mid()) * lam ** 2 / (1 + a / b) ** (h + 1)
                       for g in iv.wei_gradient_over_lam2(arb(a), arb(b), par, h)]
                np.testing.assert_allclose(got, G, atol=1e-14)
        tree = CausalTree([-1, 0, 1, 2])
        i_pa = mutual_information(pairwise_joint(pi, tree, 3, 2, root=mu), "kl")
        for hp, k in ((1, 2), (0, 3)):
            i_hp = mutual_information(pairwise_joint(pi, tree, 3, hp, root=mu), "kl")
            assert float(iv.sdpi_ratio(arb(a), arb(b), k, arb(1)).mid()) == pytest.approx(i_hp / i_pa, rel=1e-12)
            gap = expected_loglik(pi, tree, 2, 3, root=mu) - expected_loglik(pi, tree, hp, 3, root=mu)
            assert float(iv.expected_loglik_gap_over_lam2(arb(a), arb(b), k).mid()) * lam ** 2 == pytest.approx(
                gap, rel=1e-11)
        g = nichani_gradient_signal(pi[None], [-1, 0, 1, 2, -1])
        for j, k in ((2, 1), (1, 2), (0, 3)):
            closed = iv.nichani_signal_closed_form(arb(a), arb(b), k)
            assert float(closed.mid()) == pytest.approx(g[3, j], abs=1e-14)
            assert iv.nichani_signal(arb(a), arb(b), k).overlaps(closed)
        assert float(iv.nichani_signal(arb(a), arb(b), None).mid()) == pytest.approx(0.0, abs=1e-14)


def test_the_plain_mutual_information_encloses_but_cannot_close_at_independence():
    """The entropy form is an enclosure, but it straddles 0 where I vanishes (pi of rank one); the
    reduced form mi_over_c2 stays finite and positive there."""
    P = iv.two_state_joint(iv.interval(0.49, 0.51), iv.interval(0.49, 0.51), 2)  # lam in [-0.02, 0.02]
    lo, hi = iv.bounds(iv.mutual_information(P))
    assert lo < 0 < hi
    mu = (iv.interval(0.49, 0.51), iv.interval(0.49, 0.51))
    assert iv.lower(iv.mi_over_c2(iv.interval(-1e-3, 1e-3), mu, mu)) > 0


def test_jets_carry_gradients_through_the_arithmetic():
    x, y = iv.Jet.variables([iv.interval(0.3), iv.interval(0.6)])
    f = (x * y - x / y) ** 2 + abs(x - y) + iv.sqrt(x + y) + 1 / (1 + x)
    fx = 2 * (0.18 - 0.5) * (0.6 - 1 / 0.6) - 1 + 0.5 / 0.9 ** 0.5 - 1 / 1.3 ** 2
    fy = 2 * (0.18 - 0.5) * (0.3 + 0.3 / 0.36) + 1 + 0.5 / 0.9 ** 0.5
    assert float(f.g[0].mid()) == pytest.approx(fx, rel=1e-12)
    assert float(f.g[1].mid()) == pytest.approx(fy, rel=1e-12)
    m = iv.imin(x, y, iv.interval(0.45))
    assert iv.bounds(m.v) == (0.3, 0.3) and iv.bounds(m.g[0]) == (1.0, 1.0)


def test_positive_product_keeps_the_sign_that_ball_products_lose():
    x = iv.interval(0.001, 0.5)
    assert iv.lower(x * x * x) < 0  # midpoint-radius product of wide positive balls
    lo, hi = iv.bounds(iv.positive_product(x, x, x))
    assert 0 < lo <= 1e-9 and 0.125 <= hi < 0.1251


def test_ball_ends_are_rounded_outward():
    third = arb(1) / 3
    lo, hi = iv.bounds(third)
    assert Fraction(lo) < Fraction(1, 3) < Fraction(hi)
    lo, hi = iv.bounds(iv.exact(Fraction(1, 20)))
    assert Fraction(lo) <= Fraction(1, 20) <= Fraction(hi) and hi - lo < 1e-16
    assert iv.lower(arb("[+/- inf]")) == -float("inf")
    assert iv.bounds((0.1, float("inf"))) == (0.1, float("inf"))
    with pytest.raises(TheoryError):
        iv.bounds((1.0, 0.0))
    with pytest.raises(TheoryError):
        iv.interval(1.0, 0.0)


def test_out_of_range_arguments_are_refused():
    with pytest.raises(TheoryError):
        iv.psi_ratio(iv.interval(-3.0, -2.0))
    with pytest.raises(TheoryError):
        iv.log1p_ratio(iv.interval(-1.5, 0.0))
    with pytest.raises(TheoryError):
        iv.nonnegative(iv.interval(-2.0, -1.0))
    with pytest.raises(TheoryError):
        iv.wei_gradient_over_lam2(arb(0.2), arb(0.3), (-1, 0, 3), 2)
    with pytest.raises(TheoryError):
        iv.exact("0.05")


def test_minus_quotient_has_an_infinite_end_where_the_divisor_reaches_zero():
    x, y = iv.interval(1.0, 2.0), iv.interval(0.0, 4.0)
    assert iv.minus_quotient(x, 1.0, y) == (-float("inf"), pytest.approx(1.75))
    assert iv.minus_quotient(x, -1.0, y) == (pytest.approx(1.25), float("inf"))
    assert iv.minus_quotient(x, 0.0, y) == iv.bounds(x)
    lo, hi = iv.minus_quotient(x, 1.0, iv.interval(1.0, 2.0))
    assert lo == pytest.approx(0.0, abs=1e-7) and hi == pytest.approx(1.5, abs=1e-7)


def test_isomorphic_trees_share_their_lead_polynomials():
    """Reversibility of two-state chains: a tree and its relabelling (same unrooted shape, the same
    leaf h) have equal exact lead polynomials; different shapes do not."""
    sig = iv.wei_lead_signature
    assert sig((-1, 0, 0, 1, 2), 4, 1) == sig((-1, 0, 0, 2, 1), 4, 2)
    assert sig((-1, 0, 0), 2, 0) == sig((-1, 0, 1), 2, 1)
    assert sig((-1, 0, 0, 0), 3, 0) != sig((-1, 0, 1, 2), 3, 2)


# -- mutations: each must be caught by the checks above ---------------------------------------------
def test_an_endpoint_swapped_in_xlogx_is_caught(rng, monkeypatch):
    """xlogx takes its lower end from the ball's lower end on the decreasing branch too (where the
    minimum is at the upper end): boxes in (0, 1/e) miss."""
    cases = box_cases(rng, [0.0], [0.3], width=0.1)
    assert not misses(iv.xlogx, ref_xlogx, cases)

    def swapped(x):
        lo, hi = max(iv.lower(x), 0.0), iv.upper(x)
        f_lo, f_hi = iv._xlogx_point(lo), iv._xlogx_point(hi)
        return iv.interval(iv.lower(f_lo), max(iv.upper(f_lo), iv.upper(f_hi)))

    monkeypatch.setattr(iv, "xlogx", swapped)
    assert misses(iv.xlogx, ref_xlogx, cases)


def test_an_endpoint_dropped_in_a_monotone_kernel_is_caught(rng, monkeypatch):
    """psi_ratio evaluated at one end of the ball only: every box of positive width misses."""
    cases = box_cases(rng, [-0.5], [3.0], width=0.5)
    monkeypatch.setattr(iv, "psi_ratio", lambda x: iv._psi_ratio_point(iv.upper(x)))
    assert misses(iv.psi_ratio, ref_psi_ratio, cases)


def test_a_dropped_rounding_mode_is_caught(monkeypatch):
    """Ends read back with round-to-nearest instead of outward: at a working precision above float64's,
    some lower ends land above the value (and some upper ends below it)."""
    import flint

    def check():
        bad = []
        old = flint.ctx.prec
        flint.ctx.prec = 120
        try:
            for q in range(3, 60):
                for p in range(1, q):
                    x = arb(p) / q
                    if not Fraction(iv.lower(x)) <= Fraction(p, q) <= Fraction(iv.upper(x)):
                        bad.append((p, q))
        finally:
            flint.ctx.prec = old
        return bad

    assert not check()
    monkeypatch.setattr(iv, "_float_below", lambda x: float(x))
    monkeypatch.setattr(iv, "_float_above", lambda x: float(x))
    assert check()


def test_a_dropped_series_remainder_is_caught(monkeypatch):
    """The series near 0 without its remainder ball misses at 50 digits."""
    cases = [([(t, t)], [(t,)]) for t in (0.2, -0.2, 0.25, 0.11)]
    assert not misses(iv.psi_ratio, ref_psi_ratio, cases)
    real = iv._series
    monkeypatch.setattr(iv, "_series", lambda t, c, tail: real(t, c[:6], 0.0))
    assert misses(iv.psi_ratio, ref_psi_ratio, cases)
