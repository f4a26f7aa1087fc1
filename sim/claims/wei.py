"""Claims of Wei, Chen, He & Yang, *How Transformers Learn Causal Structures In-Context*
(ICLR 2026), seeds 000/001. Positions are 0-based here (W writes h = 2..H, pa(h) in 1..h-1).
"""
from __future__ import annotations

import numpy as np

from theory import mutual_information, pairwise_joint
from theory.information import KINDS

from ..verdict import Number, Outcome, TierResult, compare, tier_verdict
from .base import Claim, Context, InstanceCheck, Source, search_counterexample, summarize_instances
from .inputs import record_matrix, w_instances

ROUNDOFF = 1e-12


# ------------------------------------------------------------------------------ W.L2 (DPI) --
def _triple_joint(pi, tree, h, hp, root, mechanism="tree", copy_weight=0.9):
    """``P[a, b, c] = P(x_h' = a, x_pa = b, x_h = c)``.

    ``mechanism="tree"`` is W's model (``x_h ~ pi(x_pa, .)``, a Markov chain
    ``x_h' -> x_pa -> x_h``). ``"two-parent"`` breaks it on purpose: ``x_h`` copies ``x_h'``
    with probability ``copy_weight`` and otherwise follows ``pi(x_pa, .)``.
    """
    pa = tree.parent(h)
    P_ab = pairwise_joint(pi, tree, hp, pa, root=root)  # (d, d)
    d = pi.shape[0]
    if mechanism == "tree":
        return P_ab[:, :, None] * pi[None, :, :]
    if mechanism == "two-parent":
        cond = copy_weight * np.eye(d)[:, None, :] + (1 - copy_weight) * pi[None, :, :]  # (a, b, c)
        return P_ab[:, :, None] * cond
    raise ValueError(f"unknown mechanism {mechanism!r}")


def _markov_defect(P):
    """``max |P(a,b,c) P(b) - P(a,b) P(b,c)|``: zero iff ``x_h' -> x_pa -> x_h`` is Markov."""
    Pb = P.sum(axis=(0, 2))
    Pab, Pbc = P.sum(axis=2), P.sum(axis=0)
    return float(np.abs(P * Pb[None, :, None] - Pab[:, :, None] * Pbc[None, :, :]).max())


def _dpi_values(P):
    """``{kind: (I_f(x_h; x_h'), I_f(x_h; x_pa))}`` from a triple joint."""
    return {k: (mutual_information(P.sum(axis=1), k), mutual_information(P.sum(axis=0), k)) for k in KINDS}


def _w_l2_exact(ctx: Context) -> TierResult:
    s = ctx.settings
    factor = ctx.params["factor"]
    mechanism = s.get("mechanism", "tree")
    checks, worst_ratio = [], {k: 0.0 for k in KINDS}
    n_pairs = 0
    for inst in w_instances(ctx, n_matrices=s["n_matrices"], dims=s["dims"], H=s["H"]):
        for h in range(1, inst.tree.n):
            pa = inst.tree.parent(h)
            for hp in range(h):
                if hp == pa:
                    continue
                P = _triple_joint(inst.pi, inst.tree, h, hp, inst.root, mechanism)
                markov = _markov_defect(P) <= ROUNDOFF
                vals = _dpi_values(P)
                n_pairs += 1
                for kind, (i_hp, i_pa) in vals.items():
                    tol = ROUNDOFF * max(1.0, i_pa)
                    out = compare(factor * i_pa, i_hp, tol=tol)
                    if out is Outcome.UNDECIDED:
                        out = Outcome.HELD  # equal within round-off: the non-strict DPI holds
                    if i_pa > 0:
                        worst_ratio[kind] = max(worst_ratio[kind], i_hp / i_pa)
                    checks.append(InstanceCheck(
                        assumptions={"Markov chain x_h' -> x_pa(h) -> x_h": markov}, outcome=out,
                        margin=factor * i_pa - i_hp,
                        record={**inst.record(), "h": h, "parent": pa, "h_prime": hp, "kind": kind,
                                f"I_{kind}(x_h; x_h')": i_hp, f"I_{kind}(x_h; x_pa)": i_pa,
                                "claimed": f"I(x_h; x_h') <= {factor} * I(x_h; x_pa)"}))
    numbers = [Number(f"max I_{k}(x_h;x_h') / I_{k}(x_h;x_pa)", worst_ratio[k], tolerance=ROUNDOFF,
                      note=f"over {n_pairs} (tree, h, h') triples") for k in KINDS]
    return summarize_instances("exact", checks, ["Markov chain x_h' -> x_pa(h) -> x_h"],
                               what=f"DPI for {', '.join(KINDS)} on every h' < h, h' != pa(h)", numbers=numbers)


def _w_l2_property(ctx: Context) -> TierResult:
    from hypothesis import strategies as st

    from theory.strategies import causal_trees, stochastic_matrices

    s = ctx.settings
    factor = ctx.params["factor"]

    @st.composite
    def cases(draw):
        d = draw(st.integers(2, s["max_d"]))
        pi = draw(ctx.prior.bind(d).strategy() if ctx.prior is not None and ctx.prior.d is None
                  else ctx.prior.strategy() if ctx.prior is not None else stochastic_matrices(d))
        tree = draw(causal_trees(draw(st.integers(3, s["max_H"]))))
        h = draw(st.integers(2, tree.n - 1))
        hp = draw(st.integers(0, h - 1).filter(lambda j: j != tree.parent(h)))
        kind = draw(st.sampled_from(KINDS))
        return pi, tree, h, hp, kind

    def violates(case):
        pi, tree, h, hp, kind = case
        i_hp, i_pa = _dpi_values(_triple_joint(pi, tree, h, hp, None if _has_stationary(pi) else _uniform(pi)))[kind]
        return i_hp > factor * i_pa + ROUNDOFF * max(1.0, i_pa)

    seed = ctx.seed_for("property")
    example, tried = search_counterexample(cases(), violates, max_examples=s["max_examples"], seed=seed)
    n = Number("examples searched", tried, kind="property", seed=seed)
    if example is None:
        return TierResult("property", tier_verdict([], Outcome.HELD), Outcome.HELD,
                          f"no counterexample to the DPI in {tried} hypothesis examples", numbers=[n])
    pi, tree, h, hp, kind = example
    root = None if _has_stationary(pi) else _uniform(pi)
    i_hp, i_pa = _dpi_values(_triple_joint(pi, tree, h, hp, root))[kind]
    cex = {"pi": record_matrix(pi), "parents": tree.parents.tolist(), "h": h, "h_prime": hp, "kind": kind,
           "root_law": "stationary" if root is None else "uniform",
           f"I_{kind}(x_h; x_h')": i_hp, f"I_{kind}(x_h; x_pa)": i_pa,
           "claimed": f"I(x_h; x_h') <= {factor} * I(x_h; x_pa)"}
    return TierResult("property", tier_verdict([], Outcome.VIOLATED), Outcome.VIOLATED,
                      f"hypothesis found a counterexample after {tried} examples (shrunk)", numbers=[n],
                      counterexample=cex)


def _has_stationary(pi) -> bool:
    from theory import closed_classes

    return len(closed_classes(pi)) == 1


def _uniform(pi):
    return np.full(pi.shape[0], 1.0 / pi.shape[0])


def _w_l2_symbolic(ctx: Context) -> TierResult:
    from theory.symbolic import derive_dpi_binary

    res = derive_dpi_binary("chi2")
    outcome = {True: Outcome.HELD, False: Outcome.VIOLATED}.get(res.holds, Outcome.UNDECIDED)
    return TierResult("symbolic", tier_verdict([], outcome), outcome,
                      f"binary x -> y -> z, chi-square: {res.detail}",
                      numbers=[Number("residual", 0.0 if res.holds else float("nan") if False else 1.0,
                                      kind="symbolic", note=res.residual[:200])] if res.holds is not None else [],
                      budget="" if res.holds is not None else "a symbolic proof sympy could not finish")


W_L2 = Claim(
    id="W.L2",
    title="Data processing inequality on the causal tree",
    source=Source("W", "Lemma 2", "x -> y -> z Markov => I_f(y; z) >= I_f(x; z)"),
    statement=("For x -> y -> z Markov, I_f(y;z) >= I_f(x;z) for f in {KL, chi2, TV, squared Hellinger}; on W's "
               "tree (x_h' -> x_pa(h) -> x_h for h' < h, h' != pa(h)): I_f(x_h; x_h') <= I_f(x_h; x_pa(h)), "
               "checked exactly for every position pair, stationary and uniform root laws."),
    assumptions=("Markov chain x_h' -> x_pa(h) -> x_h",),
    checks={"symbolic": _w_l2_symbolic, "exact": _w_l2_exact, "property": _w_l2_property},
    settings={
        "quick": {"tiers": ("symbolic", "exact", "property"), "n_matrices": 4, "dims": (2, 3, 5), "H": 7,
                  "max_d": 4, "max_H": 7, "max_examples": 150},
        "standard": {"tiers": ("symbolic", "exact", "property"), "n_matrices": 10, "dims": (2, 3, 5, 8), "H": 9,
                     "max_d": 5, "max_H": 8, "max_examples": 600},
        "paper": {"tiers": ("symbolic", "exact", "property"), "n_matrices": 20, "dims": (2, 3, 5, 10), "H": 10,
                  "max_d": 6, "max_H": 10, "max_examples": 2000},
    },
    params={"factor": 1.0},
    prior_dependent=True,
)

CLAIMS = [W_L2]
