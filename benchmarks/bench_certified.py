"""The certified tier (theory.certified, theory.intervals): cost per box, boxes per certificate and the
time to a certificate, each against the obvious baseline in the same run.

1. ``library``: one box's enclosure of W Lemma 3's reduced ratio (``d = 2``, tree distance 2), with
   python-flint's ``arb`` balls (ours) and with ``mpmath.iv`` intervals (the fallback the issue names),
   the same algorithm in both (each monotone kernel at the ends of its argument). Both enclosures must
   contain the ratio at the box's centre computed by mpmath at 50 digits.
2. ``polynomials``: one box's enclosure of W Theorem 3's margin on a 5-node tree, from the exact
   polynomials with each group's target sequences added exactly (ours) and from one target sequence at
   a time (``2^5`` terms, the plain formula); both must contain the enumerated value at the centre.
3. ``bracket``: W Lemma 3's certificate at the floor 0.01 with its supremum bracketed to 1e-3, in the
   coordinates ``(lam, mu_0)`` with the mean-value form (ours) and in ``(a, b)`` with the plain enclosure.
   Both must prove the lemma and their brackets overlap.
4. ``costs``: every certificate the quick profile's certified tiers run (W.L3 with the contraction
   bracket, W.L4, W.T3, N.K3): boxes, time to the certificate and cost per box (no baseline).

Times are process times of one thread (``time.process_time``), best of the repeats: the certificates
are single-threaded, and on a shared machine wall time measures the neighbours.
"""
from __future__ import annotations

import math
import time
from fractions import Fraction

import mpmath

from benchmarks.bench_theory import BenchRow

__all__ = ["sdpi_box_flint", "sdpi_box_iv", "wei_margin_by_sequences", "bench_library", "bench_polynomials",
           "bench_bracket", "bench_costs", "run"]

_LAM, _RHO = (0.50, 0.51), (0.90, 0.91)  # a box of (lam, rho) away from the kernels' special points


def _best_process_time(fn, repeats: int):
    best, out = math.inf, None
    for _ in range(max(1, repeats)):
        t0 = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t0)
    return best, out


# -- 1. the library -------------------------------------------------------------------------------
def sdpi_box_flint(lam=_LAM, rho=_RHO, k: int = 2):
    """W Lemma 3's ratio over ``alpha`` (here 1) on a box of ``(lam, rho)``: :func:`theory.intervals.sdpi_ratio_at`."""
    from theory import intervals as iv

    return iv.sdpi_ratio_at(iv.interval(*lam), iv.interval(*rho), k, iv.interval(1.0))


def _iv_psi_ratio(x):
    """``psi_ratio`` with mpmath.iv: decreasing, so ``[g(hi), g(lo)]`` from point intervals at the ends."""
    iv = mpmath.iv

    def at(t):
        t = iv.mpf(t)
        return ((1 + t) * iv.log(1 + t) - t) / (t * t)

    lo, hi = x.a, x.b
    return iv.mpf([at(hi).a, at(lo).b])


def sdpi_box_iv(lam=_LAM, rho=_RHO, k: int = 2):
    """The same ratio and algorithm with mpmath.iv intervals (53-bit)."""
    iv = mpmath.iv
    L, R = iv.mpf(list(lam)), iv.mpf(list(rho))

    def S(lk):
        return R * _iv_psi_ratio(lk * R) + 2 * _iv_psi_ratio(-lk) + _iv_psi_ratio(lk / R) / R

    return L ** (2 * k - 2) * S(L ** k) / S(L)


def _sdpi_reference(lam: float, rho: float, k: int = 2):
    with mpmath.workdps(50):
        lam, rho = mpmath.mpf(lam), mpmath.mpf(rho)

        def g(t):
            return ((1 + t) * mpmath.log1p(t) - t) / t ** 2

        def S(lk):
            return rho * g(lk * rho) + 2 * g(-lk) + g(lk / rho) / rho

        return lam ** (2 * k - 2) * S(lam ** k) / S(lam)


def bench_library(repeats: int = 3, boxes: int = 200) -> BenchRow:
    from theory.intervals import bounds

    ours, f = _best_process_time(lambda: [sdpi_box_flint() for _ in range(boxes)][-1], repeats)
    base, g = _best_process_time(lambda: [sdpi_box_iv() for _ in range(boxes)][-1], repeats)
    ref = _sdpi_reference(sum(_LAM) / 2, sum(_RHO) / 2)
    (flo, fhi), (glo, ghi) = bounds(f), (float(g.a), float(g.b))
    contains = flo <= ref <= fhi and glo <= ref <= ghi
    return BenchRow("one box of W Lemma 3's reduced ratio: python-flint arb vs mpmath.iv", ours / boxes, base / boxes,
                    max_abs_diff=0.0 if contains else math.inf, tolerance=0.0,
                    note=f"per box; widths {fhi - flo:.2g} (arb) and {ghi - glo:.2g} (iv); both contain the 50-digit value")


# -- 2. the polynomial form -----------------------------------------------------------------------
_TREE = (-1, 0, 0, 1, 2)


def wei_margin_by_sequences(a, b, parents=_TREE):
    """W Theorem 3's lead ``(G_pa - max_other G) (1 + rho)^(h+1) / lam^2`` summed one target sequence at a
    time (the plain formula of :func:`theory.intervals.wei_gradient_polynomials`' derivation)."""
    from theory import intervals as iv

    h = len(parents) - 1
    lam, rho = 1 - a - b, a / b
    e_of = {0: rho, 1: 1 / rho, -1: -1}
    G = [0] * h
    for code in range(2 ** (h + 1)):
        x = [(code >> j) & 1 for j in range(h + 1)]
        acc, prefix = 0, 1
        for j in range(1, h + 1):
            e = e_of[x[j]] if x[parents[j]] == x[j] else -1
            acc, prefix = acc + e * prefix, prefix * (1 + lam * e)
        c = [e_of[x[h]] if x[k] == x[h] else -1 for k in range(h)]
        cbar = sum(c[1:], c[0]) / h
        r = rho ** sum(x) * (acc - cbar) / (1 + lam * cbar)
        G = [g + (ck - cbar) * r for g, ck in zip(G, c)]
    pa = parents[h]
    return iv.imin(*(G[pa] - G[k] for k in range(h) if k != pa)) / h


def bench_polynomials(repeats: int = 3, boxes: int = 50) -> BenchRow:
    from theory import intervals as iv

    a, b = iv.interval(0.20, 0.205), iv.interval(0.30, 0.305)
    h = len(_TREE) - 1

    def ours_fn():
        return iv.imin(*iv.wei_gradient_leads(a, b, _TREE, h, _TREE[h]))

    iv.wei_gradient_leads(a, b, _TREE, h, _TREE[h])  # compile the tree's polynomials once, outside the timing
    ours, f = _best_process_time(lambda: [ours_fn() for _ in range(boxes)][-1], repeats)
    base, g = _best_process_time(lambda: [wei_margin_by_sequences(a, b) for _ in range(boxes)][-1], repeats)
    (flo, fhi), (glo, ghi) = iv.bounds(f), iv.bounds(g)
    return BenchRow("one box of W Theorem 3's margin (5-node tree): exact polynomials vs one sequence at a time",
                    ours / boxes, base / boxes, max_abs_diff=0.0 if (flo <= ghi and glo <= fhi) else math.inf,
                    tolerance=0.0, note=f"per box; enclosure widths {fhi - flo:.2g} (polynomials) and {ghi - glo:.2g} "
                                        "(sequences): the narrower enclosure is what saves boxes")


# -- 3. coordinates and the mean-value form --------------------------------------------------------
def bench_bracket(repeats: int = 1) -> BenchRow:
    from theory.certified import certify

    from sim.papers.wei.certificates import sdpi_inequality
    import dataclasses

    ours_q = sdpi_inequality(0.01, (3, 4), lambda d, g: 1 - d * g)
    base_q = dataclasses.replace(sdpi_inequality(0.01, (3, 4), lambda d, g: 1 - d * g, coordinates="a, b"),
                                 centred=False)
    ours, c1 = _best_process_time(lambda: certify(ours_q, max_boxes=100000, tight=True), repeats)
    base, c2 = _best_process_time(lambda: certify(base_q, max_boxes=100000, tight=True), repeats)
    overlap = c1.status == c2.status == "PROVED" and max(c1.bracket[0], c2.bracket[0]) <= min(c1.bracket[1], c2.bracket[1])
    return BenchRow("W Lemma 3 at floor 0.01, supremum to 1e-3: (lam, mu_0) with the mean-value form vs (a, b) plain",
                    ours, base, max_abs_diff=0.0 if overlap else math.inf, tolerance=0.0,
                    note=f"{c1.boxes} vs {c2.boxes} boxes; brackets [{c1.bracket[0]:.6f}, {c1.bracket[1]:.6f}] and "
                         f"[{c2.bracket[0]:.6f}, {c2.bracket[1]:.6f}]")


# -- 4. every certificate of the quick profile ---------------------------------------------------
def bench_costs(profile: str = "quick") -> list[BenchRow]:
    """Each certificate of the certified tiers of W.L3, W.L4, W.T3 and N.K3 in ``profile``: its boxes, its
    time to a certificate and its cost per box (process time, one evaluation of the search)."""
    from theory.certified import certify

    from sim.claims import get
    from sim.papers.nichani.certificates import gap_inequality
    from sim.papers.wei.certificates import (bracket_inequalities, gradient_inequalities, loglik_inequality,
                                             sdpi_inequality)

    rows = []
    l3, l4, t3, k3 = (get(c).settings[profile] for c in ("W.L3", "W.L4", "W.T3", "N.K3"))
    p3, p4, pt, pk = (get(c).params for c in ("W.L3", "W.L4", "W.T3", "N.K3"))
    jobs = [("W.L3", q, True) for q in (sdpi_inequality(f, l3["certified_nodes"], p3["bound"])
                                        for f in l3["certified_floors"])]
    jobs += [("W.L3", q, False) for f in l3["bracket_floors"] for q in bracket_inequalities(
        f, 1.0, kl=f in l3["bracket_kl_floors"], input_floor=l3["bracket_input_floor"])]
    jobs += [("W.L4", loglik_inequality(f, l4["certified_nodes"], 0.0), False) for f in l4["certified_floors"]]
    jobs += [("W.T3", q, False) for f, h in t3["certified_domains"]
             for q in gradient_inequalities(f, h, pt["claimed_argmax"], 1.0, 0.0)]
    jobs += [("N.K3", gap_inequality(f, k3["certified_T"], pk["gap_bound"], Fraction(repr(k3["certified_exclude"]))),
              False) for f in k3["certified_floors"]]
    for cid, q, tight in jobs:
        cert = certify(q, max_boxes=int({"W.L3": l3, "W.L4": l4, "W.T3": t3, "N.K3": k3}[cid].get(
            "certified_max_boxes", 20000)), tight=tight)
        rows.append(BenchRow(f"{cid}: {q.name}", cert.seconds, math.nan, max_abs_diff=0.0 if cert.proved else math.inf,
                             tolerance=0.0, note=f"{cert.status}, {cert.boxes} boxes, "
                                                 f"{1e3 * cert.seconds / max(cert.boxes, 1):.3f} ms per box"))
    return rows


def run(*, quick: bool = False, repeats: int = 3) -> list[BenchRow]:
    """All benchmarks of this module; ``quick`` times fewer boxes once and skips the whole-certificate rows."""
    if quick:
        return [bench_library(repeats=1, boxes=20), bench_polynomials(repeats=1, boxes=5)]
    return [bench_library(repeats=repeats), bench_polynomials(repeats=repeats), bench_bracket(), *bench_costs()]
