"""The W lemmas' search space for tightness (:mod:`sim.tightness`): every tree of a few nodes, every
pair of positions, transition matrices with a floor on their entries. Shared by W.L2-W.L4 and the
contraction bracket (:mod:`~sim.papers.wei.claims.information`) and W.T3 (:mod:`~sim.papers.wei.claims.dynamics`)."""
from __future__ import annotations

import numpy as np

from theory import CausalTree, stationary, stationary_positive
from theory.bma import recursive_trees
from theory.information import KINDS

from sim.tightness import Polish, Tightness, floored_rows, floored_rows_inverse, optimise, starts_by_dimension
from sim.claims.base import Context
from sim.claims.inputs import default_root

__all__ = ["RATIO_FLOOR", "TIGHT_SETTINGS", "tight_cases", "tight_optima", "w_polish", "root_vector"]

#: Below this I(x_h; x_pa) a ratio of informations is mostly round-off (``claims.information._ratio_roundoff`` is
#: 1e-6 there): margins and tightness objectives do not read it (they would climb toward rank-one pi).
RATIO_FLOOR = 1e-6

# Tightness settings per profile (sim.tightness), merged into W.L2-W.L4's settings: optima at each
# floor of tight_levels on pi's entries, over every tree of tight_nodes nodes, every pair
# (h, h' != pa(h)) and d in tight_dims (W.L2: for each f-information of tight_kinds); tight_starts
# random starts per floor, tight_budget evaluations each. The property tier keeps the polish_keep
# closest examples and polishes them (polish_budget evaluations each) with entries >= polish_floor.
# W.L3's contraction bracket uses the same floors, dimensions, starts and budget for
# eta_chi2 / Dobrushin, then bracket_kl_budget evaluations of eta_KL / Dobrushin (each a multistart
# search of its own) from that optimum.
TIGHT_SETTINGS = {
    "quick": dict(tight_levels=(0.05, 0.01, 0.001), tight_dims=(2, 3), tight_nodes=(3, 4), tight_starts=4,
                       tight_kinds=("kl", "chi2"), bracket_kl_budget=6,
                       tight_budget=200, polish_keep=3, polish_budget=200, polish_floor=1e-6),
    "standard": dict(tight_levels=(0.05, 0.02, 0.01, 0.003, 0.001), tight_dims=(2, 3), tight_nodes=(3, 4),
                     tight_kinds=KINDS, bracket_kl_budget=60,
                     tight_starts=12, tight_budget=600, polish_keep=4, polish_budget=400, polish_floor=1e-6),
    "paper": dict(tight_levels=(0.1, 0.05, 0.02, 0.01, 0.003, 0.001, 3e-4), tight_dims=(2, 3), tight_nodes=(3, 4),
                  tight_kinds=KINDS, bracket_kl_budget=200,
                  tight_starts=24, tight_budget=1000, polish_keep=6, polish_budget=800, polish_floor=1e-6),
}


def tight_cases(s) -> list[tuple[int, tuple[int, ...], int, int]]:
    """``(d, parents, h, h')`` for every tree on ``tight_nodes`` nodes, ``h' < h``, ``h' != pa(h)``."""
    return [(d, par, h, hp) for d in s["tight_dims"] for n in s["tight_nodes"] for par in recursive_trees(n)
            for h in range(2, n) for hp in range(h) if hp != par[h]]


def tight_optima(ctx: Context, value, *, sense: str, purpose: str, describe, cases=None) -> list[Tightness]:
    """One :func:`sim.tightness.optimise` per floor in ``tight_levels``: ``value(pi, tree, *positions,
    root)`` over ``pi = floored_rows(z, d, floor)`` (every entry >= floor; the root the stationary
    law, unique since pi > 0), from random ``cases`` ``(d, parents, *positions)`` (default
    :func:`tight_cases`' ``(d, parents, h, h')``; W.T3 passes ``(d, parents, h)``) and standard-normal
    logits times 2; the starts take the dimensions of ``tight_dims`` in turn, so each is searched,
    and each end point steps to the best tree and pair of its dimension; each floor also starts
    from the previous (higher) floor's optimum, which is feasible at a lower floor.
    ``describe(pi, tree, *positions)`` is the witness, recomputed with the claim's own root law
    (:func:`~sim.claims.inputs.default_root`)."""
    s = ctx.settings
    cases = tight_cases(s) if cases is None else cases
    by_dim = {d: [c for c in cases if c[0] == d] for d in s["tight_dims"]}

    table = []
    for k, floor in enumerate(s["tight_levels"]):
        def project(case, z, floor=floor):
            d, par, *positions = case
            return floored_rows(z, d, floor), CausalTree(np.array(par)), *positions

        # the previous (higher) floor's optimum is feasible here too: a start, so the table is monotone
        previous = [] if not table or table[-1].level["min entry of pi"] < floor else [
            ((table[-1].point[0].shape[0], tuple(table[-1].point[1].parents.tolist()), *table[-1].point[2:]),
             floored_rows_inverse(table[-1].point[0], floor))]
        table.append(optimise(lambda x: value(*x, stationary_positive(x[0])), starts_by_dimension(by_dim), project, sense=sense,
                              starts=int(s["tight_starts"]), budget=int(s["tight_budget"]),
                              seed=ctx.seed_for(f"tightness/{purpose}/{k}"), describe=lambda x: describe(*x),
                              level={"min entry of pi": floor}, neighbours=lambda case: by_dim[case[0]],
                              initial=previous))
    return table


def w_polish(floor: float) -> Polish:
    """Polish for the W lemmas' property cases ``(pi, tree, h, h', *rest)``: pi moves through
    :func:`~sim.tightness.floored_rows` with every entry >= ``floor``; the tree, positions and the rest stay."""
    def lift(x):
        pi, tree, *rest = x
        return (pi.shape[0], tuple(tree.parents.tolist()), *rest), floored_rows_inverse(np.maximum(pi, floor), floor)

    def project(case, z):
        d, par, *rest = case
        return (floored_rows(z, d, floor), CausalTree(np.array(par)), *rest)

    return Polish(lift=lift, project=project)


def root_vector(pi) -> np.ndarray:
    """:func:`~sim.claims.inputs.default_root` as an explicit law (the stationary one computed once, not per position)."""
    root = default_root(pi)
    return stationary(pi) if root is None else root
