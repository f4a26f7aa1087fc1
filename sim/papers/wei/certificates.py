"""W's lemmas at ``d = 2`` as certified inequalities (:mod:`theory.certified`): the domains, stated
whole, and the reduced forms bounded on them (:mod:`theory.intervals`).

Every certificate here is on the two-state chains ``pi = [[1 - a, a], [b, 1 - b]]`` with every entry
at or above a floor, stationary root law (the catalogue's default; W leaves the root law open), and
W's trees: every recursive tree on a few nodes. Where both sides vanish (``lam = 1 - a - b = 0``, pi of
rank one) the reduced forms divide the vanishing factor out exactly, and each certificate says how.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Callable, Sequence

from theory import CausalTree
from theory import intervals as iv
from theory.bma import recursive_trees
from theory.certified import Inequality, two_state_domain

__all__ = ["exact_decimal", "describe_pi", "describe_lam_m", "pair_distances", "sdpi_inequality", "loglik_inequality",
           "bracket_inequalities", "gradient_classes", "gradient_inequalities", "STATIONARY"]

STATIONARY = "stationary mu_pi = (b, a) / (a + b) (the catalogue's default; W leaves the root law open)"


def exact_decimal(x) -> Fraction:
    """A setting's number as the decimal it is written as (``0.05`` is ``1/20``, not the float's value)."""
    return Fraction(repr(x)) if isinstance(x, float) else Fraction(x)


def describe_pi(point: Sequence[float]) -> dict:
    """A two-state point ``(a, b, ...)`` in the claim's own terms: the matrix, its eigenvalue and root law."""
    a, b = point[0], point[1]
    return {"pi": [[1 - a, a], [b, 1 - b]], "lam = 1 - a - b": 1 - a - b, "root law": [b / (a + b), a / (a + b)]}


def describe_lam_m(point: Sequence[float]) -> dict:
    """A point ``(lam, m)`` of a two-state domain in ``lam, m`` coordinates, in the claim's own terms."""
    lam, m = point[0], point[1]
    return describe_pi(((1 - lam) * (1 - m), (1 - lam) * m))


def pair_distances(nodes: Sequence[int]) -> dict[int, list[tuple[tuple[int, ...], int, int]]]:
    """Every pair ``(h, h')`` with ``h' < h``, ``h' != pa(h)`` of every recursive tree on ``nodes`` nodes,
    by their tree distance: ``{k: [(parents, h, h'), ...]}``."""
    out: dict[int, list] = {}
    for n in nodes:
        for par in recursive_trees(n):
            tree = CausalTree(par)
            for h in range(2, n):
                for hp in range(h):
                    if hp != par[h]:
                        k = tree.depth(h) + tree.depth(hp) - 2 * tree.depth(tree.lca(h, hp))
                        out.setdefault(k, []).append((par, h, hp))
    return out


def _trees_text(nodes: Sequence[int]) -> str:
    return f"every recursive tree on {', '.join(map(str, nodes))} nodes ({sum(len(list(recursive_trees(n))) for n in nodes)} trees)"


def _pairs_text(by_k: dict) -> str:
    n = sum(len(v) for v in by_k.values())
    return (f"every pair h' < h, h' != pa(h): {n} pairs, at tree distances {sorted(by_k)}; with d = 2 and a stationary "
            "root a pair's joint law depends on it only through its distance k (P = mu mu^T + c sigma, "
            "c = lam^k mu_0 mu_1)")


_LAM_DIVIDED = ("handled: both informations are lam^2 (mu_0 mu_1)^2 times a positive factor (I = c^2 sum_ij "
                "psi_ratio(x_ij) / (p_i q_j), c = lam^k mu_0 mu_1), which is divided out exactly; on the set both "
                "sides are 0 and the inequality holds with equality")


def _chain(x, y, coordinates: str):
    """``(a, b, lam, rho, mu_0)`` of a two-state point in either coordinates of
    :func:`theory.certified.two_state_domain`."""
    if coordinates == "lam, m":
        a, b = (1 - x) * (1 - y), (1 - x) * y
        return a, b, x, (1 - y) / y, y
    return x, y, 1 - x - y, x / y, y / (x + y)


def sdpi_inequality(floor, nodes: Sequence[int], bound: Callable, coordinates: str = "lam, m") -> Inequality:
    """W Lemma 3 at ``d = 2``: ``sup I(x_h; x_h') / (bound(delta, gamma) I(x_h; x_pa(h))) <= 1`` over the
    domain, the sup over every pair of every tree on ``nodes`` nodes (``gamma = 2 min pi``, ``delta`` the
    smallest marginal, ``min mu`` under the stationary root): :func:`theory.intervals.sdpi_ratio_at`.

    That reading needs ``alpha = bound(delta, gamma) > 0``, as W's ``1 - delta gamma`` always is. Where a
    variant's ``alpha`` is negative, ``I(x_h; x_h') <= alpha I(x_h; x_pa)`` fails wherever ``lam != 0``,
    and the value there is ``1 + I(x_h; x_h') / I(x_h; x_pa) - alpha > 1``, so such boxes are certified
    counterexamples; a box where ``alpha`` changes sign is split."""
    floor = exact_decimal(floor)
    by_k = pair_distances(nodes)
    dom = two_state_domain(floor, {"root law": STATIONARY, "trees": _trees_text(nodes), "pairs": _pairs_text(by_k),
                                   "gamma, delta": "gamma = d min pi = 2 min(a, b, 1 - a, 1 - b); delta = the "
                                                   "smallest marginal over all positions = min(mu)"},
                           handling=_LAM_DIVIDED, coordinates=coordinates)

    def ratio(x, y):
        a, b, lam, rho, m0 = _chain(x, y, coordinates)
        alpha = bound(iv.imin(m0, 1 - m0), 2 * iv.imin(a, b, 1 - a, 1 - b))
        if isinstance(alpha, (int, float)):  # a variant's constant bound
            alpha = iv.exact(float(alpha))
        alpha_lo, alpha_hi = iv.bounds(alpha.v if isinstance(alpha, iv.Jet) else alpha)
        if alpha_lo > 0:  # W's alpha = 1 - delta gamma >= 1/2 always; a variant's may not be
            return iv.imax(*(iv.sdpi_ratio_at(lam, rho, k, alpha) for k in sorted(by_k)))
        unit = iv.interval(1.0)
        ratios = [iv.sdpi_ratio_at(lam, rho, k, unit) for k in sorted(by_k)]  # I(x_h; x_h') / I(x_h; x_pa) >= 0
        if alpha_hi < 0:  # I(x_h; x_h') <= alpha I(x_h; x_pa) < 0 fails wherever lam != 0: report 1 + ratio - alpha > 1
            return iv.imax(*(1 + r - alpha for r in ratios))
        return -float("inf"), float("inf")  # alpha changes sign inside the box: split it

    return Inequality(f"W Lemma 3, floor {floor}", "I(x_h; x_h') / (alpha I(x_h; x_pa(h))) <= 1, alpha = the claimed "
                      "bound (1 - delta gamma)", dom, ratio, limit=1, sense="<=", centred=True,
                      describe=describe_pi if coordinates == "a, b" else describe_lam_m)


def loglik_inequality(floor, nodes: Sequence[int], shift: float) -> Inequality:
    """W Lemma 4 at ``d = 2``: ``E log pi(x_h|x_pa(h)) - E log pi(x_h|x_h') - shift > 0`` for every pair of
    every tree on ``nodes`` nodes where ``I(x_h; x_pa(h)) > 0`` (``lam != 0``): the gap over ``lam^2``
    (:func:`theory.intervals.expected_loglik_gap_over_lam2`) minus ``shift / lam^2``."""
    floor = exact_decimal(floor)
    by_k = pair_distances(nodes)
    dom = two_state_domain(floor, {"root law": STATIONARY, "trees": _trees_text(nodes), "pairs": _pairs_text(by_k),
                                   "assumption": "I(x_h; x_pa(h)) > 0, i.e. lam != 0"},
                           handling="handled: the gap is lam^2 times a positive factor, divided out exactly (the gap is "
                                    "mu_0 mu_1 lam^2 (1 - lam^(k-1)) log(1 + lam / (a b)) / lam); the set itself is "
                                    "outside the lemma's assumption I(x_h; x_pa) > 0")

    def reduced(a, b):
        gap = iv.imin(*(iv.expected_loglik_gap_over_lam2(a, b, k) for k in sorted(by_k)))
        return gap if shift == 0 else iv.minus_quotient(gap, shift, (1 - a - b) ** 2)

    return Inequality(f"W Lemma 4, floor {floor}", "(E log pi(x_h|x_pa(h)) - E log pi(x_h|x_h') - shift) / lam^2 > 0",
                      dom, reduced, limit=0, sense=">=", strict=True, describe=describe_pi, centred=shift == 0)


def bracket_inequalities(floor, factor: float, *, kl: bool, input_floor=None, coordinates: str = "a, b") -> list[Inequality]:
    """The upper end of the contraction bracket ``eta_chi2(K, p) <= eta_KL(K, p) <= factor * eta_TV(K)`` for
    the binary channels ``K`` with every entry ``>= floor``: ``eta_chi2 / eta_TV <= factor`` for every input
    law ``p``, and (``kl``) ``KL(qK || pK) <= factor eta_TV(K) KL(q || p)`` for every ``q`` and every ``p``
    with entries ``>= input_floor`` (so ``eta_KL <= factor eta_TV``). The lower end ``eta_chi2 <= eta_KL`` is
    the ``q -> p`` limit of the same reduced KL ratio (continuous at ``q = p``, where it equals ``eta_chi2 /
    eta_TV``): a limit, which no finite box certifies, so it is said and not certified."""
    floor = exact_decimal(floor)
    handling = ("handled: eta_chi2 and eta_TV are |lam| times positive factors, divided out exactly (eta_chi2 / eta_TV "
                "= |lam| p_0 p_1 / ((pK)_0 (pK)_1)); on the set both are 0")

    def channel(point):
        a, b = (point[0], point[1]) if coordinates == "a, b" else ((1 - point[0]) * (1 - point[1]), (1 - point[0]) * point[1])
        return {"K": [[1 - a, a], [b, 1 - b]]}

    def chi2(x, y, p0):
        a, b, _, _, _ = _chain(x, y, coordinates)
        return iv.eta_chi2_over_dobrushin(a, b, p0)

    out = [Inequality(
        f"contraction bracket eta_chi2 <= {factor:g} Dobrushin, floor {floor}",
        f"eta_chi2(K, p) / eta_TV(K) <= {factor:g} for every input law p",
        two_state_domain(floor, {"channel": "K = [[1 - a, a], [b, 1 - b]], the binary channels with every entry >= "
                                            f"{floor}", "input law": "p = (p0, 1 - p0), any"}, handling=handling,
                         extra=(("p0", 0, 1, False),), coordinates=coordinates),
        chi2, limit=exact_decimal(factor), sense="<=", centred=True,
        describe=lambda x: {**channel(x), "p": [x[2], 1 - x[2]]})]
    if kl:
        pf = exact_decimal(input_floor)
        kl_handling = ("handled: KL(qK || pK) = t^2 lam^2 kl_over_t2(t lam, pK) and KL(q || p) = t^2 kl_over_t2(t, p) "
                       "with t = q0 - p0; t^2 |lam| is divided out exactly (both sides vanish at q = p and at lam = 0)")
        dom = two_state_domain(floor, {"channel": f"K = [[1 - a, a], [b, 1 - b]], every entry >= {floor}",
                                       "laws": f"p = (p0, 1 - p0) with every entry >= {pf}; q = (q0, 1 - q0), any",
                                       "q = p": "the second singular set, t = q0 - p0 = 0: " + kl_handling},
                               handling=kl_handling, extra=(("p0", pf, 1 - pf, True), ("q0", 0, 1, False)),
                               coordinates=coordinates)

        def kl_ratio(x, y, p0, q0):
            a, b, _, _, _ = _chain(x, y, coordinates)
            return iv.kl_contraction_over_dobrushin(a, b, p0, q0)

        out.append(Inequality(
            f"contraction bracket eta_KL <= {factor:g} Dobrushin, floor {floor}, input floor {pf}",
            f"KL(qK || pK) / (eta_TV(K) KL(q || p)) <= {factor:g} for every q (so eta_KL(K, p) <= {factor:g} eta_TV(K))",
            dom, kl_ratio, limit=exact_decimal(factor), sense="<=", centred=True,
            describe=lambda x: {**channel(x), "p": [x[2], 1 - x[2]], "q": [x[3], 1 - x[3]]}))
    return out


def gradient_classes(h_max: int, claimed: Callable) -> list[tuple[tuple[int, ...], int, list[tuple[int, ...]]]]:
    """The trees on ``3..h_max + 1`` nodes (``h`` = the last node) grouped by their exact lead
    polynomials (:func:`theory.intervals.wei_gradient_polynomials`): two trees with the same multiset of
    ``P_claimed - P_k`` have the same margin function, so one certificate covers both. Returns
    ``(parents, claimed index, every tree of the class)`` per class."""
    classes: dict = {}
    for n in range(3, h_max + 2):
        for par in recursive_trees(n):
            h = n - 1
            c = int(claimed(CausalTree(par), h))
            entry = classes.setdefault((h, iv.wei_lead_signature(par, h, c)), (par, c, []))
            entry[2].append(par)
    return list(classes.values())


def gradient_inequalities(floor, h_max: int, claimed: Callable, sign: float, lead: float,
                          coordinates: str = "lam, m") -> list[Inequality]:
    """W Theorem 3 at ``d = 2``: at ``W = 0`` (mixture output, stationary root) the claimed entry of the
    expected negative gradient leads every other by more than ``lead`` ``I_chi2(x_h; x_pa(h)) / h``, for
    every tree on up to ``h_max + 1`` nodes and ``h = `` its last node; one certificate per class of trees
    with the same margin (:func:`gradient_classes`). With the factor ``lam^2 / (1 + rho)^(h+1) > 0``
    divided out (``I_chi2(x_h; x_pa) = lam^2`` at ``d = 2``) the margin is ``min_{k != c} sign (G_c - G_k)
    - lead (1 + rho)^(h+1) / h`` in the units of :func:`theory.intervals.wei_gradient_leads`."""
    floor = exact_decimal(floor)
    out = []
    for par, c, trees in gradient_classes(h_max, claimed):
        h = len(par) - 1
        dom = two_state_domain(floor, {
            "root law": STATIONARY, "model": "W's Theorem-1 model at W = 0: uniform layer-2 attention 1/h, mixture "
                                             "output sum_h' A_h' pi(.|x_h')",
            "trees": f"{len(trees)} recursive trees on {h + 1} nodes with the same margin (equal exact lead "
                     f"polynomials), h = {h}: {', '.join(str(list(t)) for t in trees)}"},
            handling="handled: every G_k is lam^2 / (1 + rho)^(h+1) times a rational function of (lam, rho) with a "
                     "positive denominator (theory.intervals.wei_gradient_polynomials), divided out exactly; on the "
                     "set G = 0 (x_h is independent of its past)", coordinates=coordinates)

        def margin(x, y, par=par, h=h, c=c):
            lam, rho = (x, (1 - y) / y) if coordinates == "lam, m" else (1 - x - y, x / y)  # rho = a / b
            m = iv.imin(*(sign * v for v in iv.wei_gradient_leads_at(lam, rho, par, h, c)))
            if lead:
                m = m - lead * (1 + rho) ** (h + 1) / h
            return m

        out.append(Inequality(f"W Theorem 3, h = {h}, trees like {list(par)}, floor {floor}",
                              f"G[{c}] leads every other entry by more than {lead:g} I_chi2(x_h; x_pa)/h (strictly)",
                              dom, margin, limit=0, sense=">=", strict=True, centred=True,
                              describe=describe_pi if coordinates == "a, b" else describe_lam_m))
    return out
