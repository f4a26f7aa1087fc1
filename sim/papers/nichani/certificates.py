"""N Knowl 3's gap bound at ``S = 2`` as a certified inequality (:mod:`theory.certified`).

For one two-state chain ``pi = [[1 - a, a], [b, 1 - b]]`` with stationary roots, N's signal between
positions at tree distance ``k`` is ``g(pi) = lam^(k+1)`` (``lam = 1 - a - b``; ``pi^k = 1 mu^T + lam^k
(I - 1 mu^T)`` and ``trace pi - 1 = lam``; :func:`theory.intervals.nichani_signal_closed_form`), 0 for
positions in different trees, and ``trace pi - 1`` for ``j = i``. So the gap ``g[i, p(i)] - g[i, j]`` of
one ``pi`` is ``lam^2 - lam^(k+1)``, or ``lam^2`` when ``j`` is in another tree, or ``j = i`` under N's
uniform mean ``E[trace pi] = 1`` (Knowl 10 (3)). If every ``pi`` of a prior's support meets
``gap(pi) >= gamma(pi)^3 / (2S)`` with ``gamma(pi) = min(S min pi, sqrt(S sum_s ||pi(.|s) - mu||^2), 1 -
|R|/T)``, the prior meets Knowl 3's bound with its own ``gamma``, which is at most every atom's: the
gap is an average over the prior, and the bound increases with ``gamma``. The certificate is that
pointwise inequality, for every graph on ``T`` positions (each pair reduces to its distance and the
graph's root count).
"""
from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Callable

from theory import CausalTree
from theory import intervals as iv
from theory.certified import Inequality, two_state_domain

__all__ = ["graph_cases", "gap_inequality"]


def _graphs(T: int):
    """N's one-parent graphs on ``T`` positions: position 0 and the query ``T - 1`` roots, at least one edge."""
    for rest in itertools.product(*(range(-1, i) for i in range(1, T - 1))):
        par = (-1,) + rest + (-1,)
        if any(p >= 0 for p in par):
            yield par


def graph_cases(T: int) -> dict[tuple[int | None, int], int]:
    """``{(k, |R|): how many (graph, i, j) reduce to it}`` over every graph of ``_graphs`` (N's one-parent
    graphs on ``T`` positions, position 0 and the query roots, at least one edge), every
    non-root ``i`` and ``j <= i``, ``j != p(i)``: ``k`` the tree distance of ``j`` and ``i``, None when
    ``j = i`` or ``j`` is in another tree (the gap is then ``lam^2``), and ``|R|`` the graph's roots."""
    out: dict = {}
    for par in _graphs(T):
        tree = CausalTree(par)
        roots = sum(1 for p in par if p < 0)
        for i, p in enumerate(par):
            if p < 0:
                continue
            for j in range(i + 1):
                if j == p:
                    continue
                w = tree.lca(i, j) if j != i else None
                k = None if w is None else tree.depth(i) + tree.depth(j) - 2 * tree.depth(w)
                out[k, roots] = out.get((k, roots), 0) + 1
    return out


def gap_inequality(floor, T: int, bound: Callable, exclude_below) -> Inequality:
    """``min over the cases of (gap(pi) - bound(gamma(pi), 2)) / lam^2 > 0`` on ``S min pi >= floor``
    (every entry ``>= floor / 2``), outside ``|lam| < exclude_below`` (the module docstring): the gap
    over ``lam^2`` is exact (``1 - lam^(k-1)``, or 1), and the bound over ``lam^2`` is finite off the
    excluded neighbourhood of ``lam = 0``, where both vanish."""
    floor = Fraction(repr(floor)) if isinstance(floor, float) else Fraction(floor)
    cases = graph_cases(T)
    n_graphs = sum(1 for _ in _graphs(T))
    ks = sorted({k for k, _ in cases if k is not None})
    dom = two_state_domain(floor / 2, {
        "S min pi": f">= {floor}", "root law": "every root ~ mu_pi (N's task)",
        "graphs": f"every one-parent graph on T = {T} positions with the query a root and at least one edge "
                  f"({n_graphs} graphs), every non-root i and j <= i, j != p(i): {sum(cases.values())} triples, "
                  f"reduced to (distance k, roots |R|): k in {ks} or no path (j = i, or another tree), |R| in "
                  f"{sorted({r for _, r in cases})}",
        "prior": "any prior supported on this set of pi; j = i uses N's uniform mean E[trace pi] = 1 (Knowl 10 (3))",
        "gamma": "min(2 min pi, sqrt(2 sum_s ||pi(.|s) - mu||^2) = 2 |lam| sqrt(a^2 + b^2) / (a + b), 1 - |R|/T)"},
        exclude_below=exclude_below, coordinates="lam, m")

    def margin(lam, m):
        a, b = (1 - lam) * (1 - m), (1 - lam) * m
        lam2 = lam * lam
        t_floor = 2 * iv.imin(a, b, 1 - a, 1 - b)
        t_nondeg = 2 * abs(lam) * iv.sqrt((1 - m) * (1 - m) + m * m)  # sqrt(2 sum_s ||pi(.|s) - mu||^2)
        worst = None
        for (k, roots) in cases:
            gamma = iv.imin(t_floor, t_nondeg, iv.exact(1 - Fraction(roots, T)))
            gap = 1 if k is None else 1 - lam ** (k - 1)
            m_k = gap - bound(gamma, 2) / lam2
            worst = m_k if worst is None else iv.imin(worst, m_k)
        return worst

    return Inequality(f"N Knowl 3 gap bound, S = 2, S min pi >= {floor}, T = {T}",
                      "(g[i, p(i)] - g[i, j] - gamma^3 / (2S)) / lam^2 > 0 for one pi (the bound as claimed)", dom,
                      margin, limit=0, sense=">=", strict=True, centred=True,
                      describe=_describe)


def _describe(point) -> dict:
    lam, m = point[0], point[1]
    a, b = (1 - lam) * (1 - m), (1 - lam) * m
    return {"pi": [[1 - a, a], [b, 1 - b]], "lam": lam, "mu_pi": [m, 1 - m]}
