"""W's information-theoretic lemmas: DPI (W.L2), strong DPI (W.L3), expected
log-likelihood ordering (W.L4). Positions are 0-based (W writes h = 2..H)."""
from __future__ import annotations

import itertools

import numpy as np

from theory import (channel, dobrushin, eta_chi2, eta_kl, expected_loglik, marginals, mutual_information,
                    pairwise_joint)
from theory.information import KINDS

from sim.verdict import Finding, FindingKind, Number, Outcome, TierResult, Verdict, compare, tier_verdict
from sim.claims.base import (Claim, Context, InstanceCheck, PrimaryReading, Source, certified_tier, matrices_strategy,
                             per_case, property_tier, summarize_instances)
from sim.priors import Dirichlet, Sparse
from sim.claims.inputs import default_root, record_matrix, w_instances
from sim.papers.wei.extremes import RATIO_FLOOR, TIGHT_SETTINGS, root_vector, tight_optima, w_polish
from sim.papers.wei.certificates import bracket_inequalities, loglik_inequality, sdpi_inequality
from sim.tightness import (Tightness, floored_rows, floored_rows_inverse, optimise, report_certified_bracket,
                           report_tightness)

__all__ = ["ROUNDOFF", "W_L2", "W_L3", "W_L4", "CLAIMS"]

ROUNDOFF = 1e-12

# Instances per profile, shared by W.L2-W.L4 (W.L2 adds its symbolic tier); tightness settings in
# :data:`.extremes.TIGHT_SETTINGS`.
# The certified tier of W.L3 and W.L4 (d = 2, sim.papers.wei.certificates): W's lemmas at each floor of
# certified_floors on pi's entries, over every tree of certified_nodes nodes; W.L3 also certifies the upper
# end of the contraction bracket at each floor of bracket_floors (eta_chi2 for every input law; eta_KL at the
# floors of bracket_kl_floors, for input laws with entries >= bracket_input_floor); certified_max_boxes
# boxes per certificate; W.L3's lemma certificates close their bracket on the supremum to certified_rel_gap.
_CERTIFIED = {
    "quick": dict(certified_floors=(0.05, 0.01, 0.001), certified_nodes=(3, 4), bracket_floors=(0.05, 0.01),
                  bracket_kl_floors=(), bracket_input_floor=0.1, certified_max_boxes=40000, certified_rel_gap=1e-3),
    "standard": dict(certified_floors=(0.05, 0.01, 0.001), certified_nodes=(3, 4), bracket_floors=(0.05, 0.01),
                     bracket_kl_floors=(0.05,), bracket_input_floor=0.1, certified_max_boxes=200000,
                     certified_rel_gap=1e-3),
    "paper": dict(certified_floors=(0.05, 0.01, 0.001), certified_nodes=(3, 4, 5), bracket_floors=(0.05, 0.01, 0.001),
                  bracket_kl_floors=(0.05,), bracket_input_floor=0.1, certified_max_boxes=400000,
                  certified_rel_gap=1e-4),
}
_SIZES = {"quick": dict(n_matrices=4, dims=(2, 3, 5), H=7, max_d=4, max_H=7, max_examples=150, **TIGHT_SETTINGS["quick"]),
          "standard": dict(n_matrices=10, dims=(2, 3, 5, 8), H=9, max_d=5, max_H=8, max_examples=600,
                           **TIGHT_SETTINGS["standard"]),
          "paper": dict(n_matrices=20, dims=(2, 3, 5, 10), H=10, max_d=6, max_H=10, max_examples=2000,
                        **TIGHT_SETTINGS["paper"])}
_SETTINGS = {p: {"tiers": ("exact", "property", "certified"), **v, **_CERTIFIED[p]} for p, v in _SIZES.items()}


def _pair_record(pi, tree, h, hp) -> dict:
    return {"pi": pi.tolist(), "parents": tree.parents.tolist(), "h": h, "parent": tree.parent(h), "h_prime": hp,
            "root_law": _root_name(pi)}


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
                      note=f"over {n_pairs} (tree, h, h') triples: a sample maximum, only a lower bound on the "
                           "supremum") for k in KINDS]
    res = summarize_instances("exact", checks, ["Markov chain x_h' -> x_pa(h) -> x_h"],
                              what=f"DPI for {', '.join(KINDS)} on every h' < h, h' != pa(h)", numbers=numbers)
    # Tightness is the lemma's: not under a user's prior (its draws are on trial) nor a broken mechanism (no Markov chain)
    for kind in s["tight_kinds"] if ctx.prior is None and mechanism == "tree" else ():
        report_tightness(ctx, res, tight_optima(ctx, _l2_ratio(kind, mechanism), sense="sup", purpose=f"W.L2/{kind}",
                                                 describe=_l2_witness(kind, mechanism)),
                         quantity=f"sup I_{kind}(x_h;x_h') / I_{kind}(x_h;x_pa)", parameter="min entry of pi",
                         claimed=factor, name=f"dpi-{kind}",
                         reading=f"tightness of the DPI for I_{kind}: the supremum of I(x_h;x_h') / I(x_h;x_pa) at each "
                                 "floor on pi's entries (the DPI holds iff it is <= 1; W.L2 has no floor)",
                         closer="it approaches 1 as the floor goes to 0 (a permutation pi keeps every bit): the DPI is "
                                "tight")
    return res


def _l2_ratio(kind: str, mechanism: str):
    """``I_kind(x_h; x_h') / I_kind(x_h; x_pa)`` on one pair; NaN (no value) below :data:`RATIO_FLOOR`."""
    def value(pi, tree, h, hp, root):
        P = _triple_joint(pi, tree, h, hp, root, mechanism)
        i_hp, i_pa = mutual_information(P.sum(axis=1), kind), mutual_information(P.sum(axis=0), kind)
        return i_hp / i_pa if i_pa > RATIO_FLOOR else float("nan")

    return value


def _l2_witness(kind: str, mechanism: str):
    def describe(pi, tree, h, hp):
        i_hp, i_pa = _dpi_values(_triple_joint(pi, tree, h, hp, default_root(pi), mechanism))[kind]
        return {**_pair_record(pi, tree, h, hp), "kind": kind, "mechanism": mechanism,
                f"I_{kind}(x_h; x_h')": i_hp, f"I_{kind}(x_h; x_pa)": i_pa,
                "ratio": i_hp / i_pa if i_pa > 0 else float("nan")}

    return describe


def _w_l2_property(ctx: Context) -> TierResult:
    from hypothesis import strategies as st

    from theory.strategies import causal_trees

    s = ctx.settings
    factor = ctx.params["factor"]

    @st.composite
    def cases(draw):
        pi = draw(matrices_strategy(ctx, st.integers(2, s["max_d"])))
        tree = draw(causal_trees(draw(st.integers(3, s["max_H"]))))
        h = draw(st.integers(2, tree.n - 1))
        hp = draw(st.integers(0, h - 1).filter(lambda j: j != tree.parent(h)))
        kind = draw(st.sampled_from(KINDS))
        return pi, tree, h, hp, kind

    @per_case
    def values(case):
        pi, tree, h, hp, kind = case
        return _dpi_values(_triple_joint(pi, tree, h, hp, root_vector(pi)))[kind]

    def violates(case):
        i_hp, i_pa = values(case)
        return i_hp > factor * i_pa + ROUNDOFF * max(1.0, i_pa)

    def record(case):
        pi, tree, h, hp, kind = case
        i_hp, i_pa = values(case)
        return {"pi": record_matrix(pi), "parents": tree.parents.tolist(), "h": h, "h_prime": hp, "kind": kind,
                "root_law": _root_name(pi), f"I_{kind}(x_h; x_h')": i_hp, f"I_{kind}(x_h; x_pa)": i_pa,
                "claimed": f"I(x_h; x_h') <= {factor} * I(x_h; x_pa)"}

    def margin(case):  # factor - I(x_h;x_h')/I(x_h;x_pa): < 0 iff the DPI is violated
        i_hp, i_pa = values(case)
        return factor - i_hp / i_pa if i_pa > RATIO_FLOOR else factor

    return property_tier(ctx, cases(), violates, record, what="DPI on the tree", margin=margin,
                         polish=w_polish(0.0))


def _root_name(pi) -> str:
    return "stationary" if default_root(pi) is None else "uniform (stationary law not unique)"


def _w_l2_symbolic(ctx: Context) -> TierResult:
    """Binary x -> y -> z: chi-square and TV DPI proved in sympy; KL and Hellinger are left to the
    exact and property tiers (sympy finds no proof; said so rather than claimed)."""
    from theory.symbolic import derive_dpi_binary

    factor = ctx.params["factor"]
    readings, outcomes, refuted = [], [], []
    for kind in ctx.settings.get("sym_kinds", ("chi2", "tv", "kl", "hellinger")):
        res = derive_dpi_binary(kind, factor=factor)
        verdict = {True: "PASS", False: "FAIL", None: "not proved symbolically"}[res.holds]
        readings.append({"name": f"binary DPI, {kind}", "verdict": verdict, "detail": res.detail})
        if res.holds is not None:
            outcomes.append(Outcome.HELD if res.holds else Outcome.VIOLATED)
        if res.holds is False:
            refuted.append({"kind": kind, "residual I(x;z) - factor I(y;z)": res.residual, **res.constants})
    out = Outcome.VIOLATED if Outcome.VIOLATED in outcomes else Outcome.HELD if outcomes else Outcome.UNDECIDED
    proved = [r["name"].split(", ")[1] for r in readings if r["verdict"] == "PASS"]
    summary = (f"binary x -> y -> z: DPI with factor {factor} refuted symbolically for "
               f"{', '.join(r['kind'] for r in refuted)}" if refuted else
               f"binary x -> y -> z: DPI proved symbolically for {', '.join(proved) or 'no kind'}; "
               "the other kinds are checked by the exact and property tiers")
    return TierResult("symbolic", tier_verdict([], out), out, summary, readings=readings,
                      counterexample=refuted[0] if refuted else None,
                      numbers=[Number("kinds proved symbolically", len(proved), kind="symbolic")])


W_L2 = Claim(
    id="W.L2",
    title="Data processing inequality on the causal tree",
    source=Source("W", "Lemma 2", "x -> y -> z Markov => I_f(y; z) >= I_f(x; z)"),
    primary=PrimaryReading(
        statement=("Lemma 2: if x -> y -> z is a Markov chain, I_f(y; z) >= I_f(x; z); in W's setting "
                   "x_h' -> x_pa(h) -> x_h is a Markov chain, so the DPI holds."),
        seed="000", lines="189-193",
        setting="W's tree (random recursive, pa(h) < h), any f-mutual information; W names no f and no root law.",
        review=("A non-strict inequality stated as one: checked as >= within float64 round-off for the four "
                "f-informations of the catalogue (KL, chi2, TV, squared Hellinger), every h' < h, h' != pa(h), "
                "stationary and uniform roots (W leaves both open). No reading is stricter than the lemma.")),
    statement=("Primary reading: W Lemma 2 as stated, the non-strict DPI (seed 000, lines 189-193); reported as "
               "findings: none. "
"For x -> y -> z Markov, I_f(y;z) >= I_f(x;z) for f in {KL, chi2, TV, squared Hellinger}; on W's "
               "tree (x_h' -> x_pa(h) -> x_h for h' < h, h' != pa(h)): I_f(x_h; x_h') <= I_f(x_h; x_pa(h)), "
               "checked exactly for every position pair, stationary and uniform root laws."),
    assumptions=("Markov chain x_h' -> x_pa(h) -> x_h",),
    checks={"symbolic": _w_l2_symbolic, "exact": _w_l2_exact, "property": _w_l2_property},
    settings={p: {"tiers": ("symbolic", "exact", "property"), **v} for p, v in _SIZES.items()},
    params={"factor": 1.0},
    prior_dependent=True,
)


# ------------------------------------------------------------------------- W.L3 (strong DPI) --
def _sdpi_terms(pi, tree, h, hp, root):
    """``(I(x_h; x_h'), I(x_h; x_pa), gamma, delta)`` for one pair, KL mutual information.

    ``gamma = d * min pi`` (the largest gamma with ``min pi >= gamma / d``) and ``delta`` the
    smallest marginal probability over all positions (W Lemma 3 asks ``P(x_h = s) > delta``).
    """
    pa = tree.parent(h)
    i_hp = mutual_information(pairwise_joint(pi, tree, h, hp, root=root), "kl")
    i_pa = mutual_information(pairwise_joint(pi, tree, h, pa, root=root), "kl")
    gamma = pi.shape[0] * float(pi.min())
    delta = float(marginals(pi, tree, root=root).min())
    return i_hp, i_pa, gamma, delta


def _sdpi_check(params, i_hp, i_pa, gamma, delta):
    """Outcome and margin of W Lemma 3 on one pair.

    With ``gamma, delta > 0``: ``I(x_h; x_h') <= bound(delta, gamma) * I(x_h; x_pa)``. When an
    assumption fails the bound degenerates to 1 (plain DPI); what is then worth knowing is
    whether *some* contraction still holds, so the check becomes ``ratio < 1`` strictly.
    """
    tol = ROUNDOFF * max(1.0, i_pa)
    if gamma > 0 and delta > 0:
        alpha = params["bound"](delta, gamma)
        out = compare(alpha * i_pa, i_hp, tol=tol)
        return (Outcome.HELD if out is Outcome.UNDECIDED else out), alpha * i_pa - i_hp, alpha
    if i_pa <= tol:
        return Outcome.HELD, 0.0, 1.0
    gap = i_pa - i_hp  # strict contraction means a gap well above round-off
    return (Outcome.HELD if gap > 1e-9 * i_pa else Outcome.VIOLATED), gap, 1.0


_L3_ASSUMPTIONS = ("min pi >= gamma/d with gamma > 0", "every marginal >= delta > 0")


def _w_l3_exact(ctx: Context) -> TierResult:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = ctx.settings
    checks, pts = [], []
    for inst in w_instances(ctx, n_matrices=s["n_matrices"], dims=s["dims"], H=s["H"]):
        for h in range(1, inst.tree.n):
            pa = inst.tree.parent(h)
            for hp in range(h):
                if hp == pa:
                    continue
                i_hp, i_pa, gamma, delta = _sdpi_terms(inst.pi, inst.tree, h, hp, inst.root)
                out, margin, alpha = _sdpi_check(ctx.params, i_hp, i_pa, gamma, delta)
                ratio = i_hp / i_pa if i_pa > 0 else 0.0
                pts.append((alpha, ratio, gamma > 0 and delta > 0))
                checks.append(InstanceCheck(
                    assumptions={_L3_ASSUMPTIONS[0]: gamma > 0, _L3_ASSUMPTIONS[1]: delta > 0},
                    outcome=out, margin=margin,
                    record={**inst.record(), "h": h, "parent": pa, "h_prime": hp, "gamma": gamma, "delta": delta,
                            "I(x_h; x_h')": i_hp, "I(x_h; x_pa)": i_pa, "ratio": ratio, "claimed bound": alpha,
                            "_inst": inst}))
    # Sharp SDPI reading: the ratio never exceeds Dobrushin's coefficient of the channel pa(h) -> h'
    # (eta_KL <= eta_TV), for every pair; and the contraction coefficients of the tightest pairs.
    dob_viol, local_viol, n_local = 0, 0, 0
    for c in checks:
        r = c.record
        K, p = channel(r["_inst"].pi, r["_inst"].tree, r["parent"], r["h_prime"], root=r["_inst"].root)
        r["Dobrushin(pa->h')"] = dobrushin(K[p > 0])
        dob_viol += r["ratio"] > r["Dobrushin(pa->h')"] + _ratio_roundoff(r["I(x_h; x_pa)"])
        # delta read from x_h's own marginal (larger than the smallest over all positions)
        d_h = float(marginals(r["_inst"].pi, r["_inst"].tree, root=r["_inst"].root)[r["h"]].min())
        if r["gamma"] > 0 and d_h > 0:
            n_local += 1
            local_viol += r["ratio"] > ctx.params["bound"](d_h, r["gamma"]) + _ratio_roundoff(r["I(x_h; x_pa)"])
    valid = [c for c in checks if c.record["gamma"] > 0 and c.record["delta"] > 0]
    numbers = [Number("max ratio I(x_h;x_h')/I(x_h;x_pa)", max(c.record["ratio"] for c in checks),
                      tolerance=ROUNDOFF, note=f"over {len(checks)} pairs"),
               Number("max ratio / bound over the sampled pairs",
                      max((c.record["ratio"] / c.record["claimed bound"] for c in valid), default=0.0),
                      note=f"a sample maximum over {len(valid)} pairs, only a lower bound on the supremum; the "
                           "tightness rows give the optimum"),
               Number("pairs with ratio > Dobrushin(pa->h')", dob_viol, note="sharp SDPI (a finding)")]
    seen, tight = set(), []
    for c in sorted(checks, key=lambda c: c.record["claimed bound"] - c.record["ratio"]):
        key = (round(c.record["ratio"], 9), round(c.record["claimed bound"], 9))
        if key not in seen:
            seen.add(key)
            tight.append(c)
        if len(tight) == s.get("n_contraction", 3):
            break
    for k, c in enumerate(tight, 1):
        r = c.record
        K, p = channel(r["_inst"].pi, r["_inst"].tree, r["parent"], r["h_prime"], root=r["_inst"].root)
        ekl = eta_kl(K, p, seed=ctx.seed_for(f"eta_kl/{k}"))
        note = f"tight pair #{k}: d={len(r['pi'])}, h={r['h']}, pa={r['parent']}, h'={r['h_prime']}"
        numbers += [Number(f"#{k} ratio", r["ratio"], tolerance=ROUNDOFF, note=note),
                    Number(f"#{k} bound 1 - delta*gamma", r["claimed bound"]),
                    Number(f"#{k} eta_chi2(pa->h')", eta_chi2(K, p)),
                    Number(f"#{k} eta_KL(pa->h') in [lower, upper]: lower", ekl.lower,
                           note="best KL ratio found (multistart BFGS); a guaranteed lower bound"),
                    Number(f"#{k} eta_KL(pa->h') upper = Dobrushin on the support", ekl.upper)]
    for c in checks:
        c.record.pop("_inst")
    res = summarize_instances("exact", checks, _L3_ASSUMPTIONS, what="I(x_h;x_h') <= (1 - delta*gamma) I(x_h;x_pa)",
                              numbers=numbers)
    res.findings += [
        Finding(FindingKind.STRICTER, "sharp SDPI: the ratio is at most Dobrushin's coefficient of the channel "
                "x_pa(h) -> x_h' (eta_KL <= eta_TV), a tighter bound than W's 1 - delta*gamma",
                Verdict.PASS if dob_viol == 0 else Verdict.FAIL,
                f"{dob_viol} of {len(checks)} pairs exceed Dobrushin's coefficient of pa(h) -> h'",
                numbers=(Number("pairs with ratio > Dobrushin(pa->h')", dob_viol, n=len(checks)),)),
        Finding(FindingKind.STRICTER, "delta read from x_h's own marginal, min_s P(x_h = s), instead of the smallest "
                "marginal over all positions (equal under a stationary root)",
                Verdict.PASS if local_viol == 0 else Verdict.FAIL,
                f"{local_viol} of {n_local} pairs exceed 1 - delta_h*gamma with delta_h from x_h alone",
                numbers=(Number("pairs with ratio > 1 - delta_h*gamma", local_viol, n=n_local),))]
    pts = np.array(pts, dtype=float)
    fig, ax = plt.subplots(figsize=(4.8, 4.2))
    ok = pts[:, 2] > 0
    ax.scatter(pts[ok, 0], pts[ok, 1], s=8, alpha=0.5, label="pairs (h, h' != pa(h))")
    if (~ok).any():
        ax.scatter(pts[~ok, 0], pts[~ok, 1], s=10, marker="x", color="C3", label="assumption broken")
    lo = min(pts[:, 0].min(), 0.8)
    ax.plot([lo, 1], [lo, 1], "k--", lw=1, label="ratio = bound")
    ax.set_xlabel("bound 1 - delta*gamma (W Lemma 3)")
    ax.set_ylabel("I(x_h; x_h') / I(x_h; x_pa(h))")
    ax.set_title("W.L3: actual ratio vs bound")
    ax.legend(fontsize=7)
    res.figures.append(ctx.save_figure(fig, "ratio-vs-bound"))
    if ctx.prior is not None:  # a user's prior is judged on its own draws; the optimiser would leave them
        return res
    _report_bracket_tightness(ctx, res)
    report_tightness(ctx, res, tight_optima(ctx, _l3_ratio_to_bound(ctx.params), sense="sup", purpose="W.L3",
                                             describe=_l3_witness(ctx.params)),
                     quantity="sup I(x_h;x_h') / ((1 - delta*gamma) I(x_h;x_pa))", parameter="min entry of pi",
                     claimed=1.0, name="ratio-to-bound",
                     reading="tightness: how close I(x_h;x_h') / I(x_h;x_pa) comes to W's bound 1 - delta*gamma "
                             "(supremum of ratio / bound at each floor on pi's entries; 1 = tight)",
                     closer="the supremum approaches 1 as the floor goes to 0: W's bound is tight at the boundary of "
                            "its assumptions")
    return res


# ------------------------------------------------ tightness of the bracket eta_chi2 <= eta_KL <= eta_TV --
def _channel_and_input(d: int, z, floor: float) -> tuple[np.ndarray, np.ndarray]:
    """``(K, p)`` from ``d*d + d`` reals: ``K = floored_rows(z[:d*d], d, floor)`` (every entry >= floor),
    ``p = softmax(z[d*d:])`` (any input law with full support; logits clipped to +-60)."""
    z = np.asarray(z, dtype=np.float64)
    K = floored_rows(z[:d * d], d, floor)
    logits = np.clip(z[d * d:], -60.0, 60.0)
    p = np.exp(logits - logits.max())
    return K, p / p.sum()


def _bracket_ratio(end: str, K, p) -> float:
    """``eta_chi2(K, p) / dobrushin(K)`` (``end="chi2"``) or ``eta_kl(K, p).lower / dobrushin(K)``
    (``end="kl"``; no random restarts: its singular-direction and vertex starts only) for one channel
    and input law; <= 1 is the upper end of the bracket. NaN when Dobrushin is 0 (identical rows)."""
    dob = dobrushin(K)
    if dob <= 1e-12:
        return float("nan")
    return (eta_chi2(K, p) if end == "chi2" else eta_kl(K, p, restarts=0).lower) / dob


def _bracket_witness(K, p) -> dict:
    ekl = eta_kl(K, p, restarts=0)
    return {"K": K.tolist(), "p": p.tolist(), "d": int(K.shape[0]), "dobrushin(K)": dobrushin(K),
            "eta_chi2(K, p)": eta_chi2(K, p), "eta_KL(K, p) lower": ekl.lower, "eta_KL(K, p) upper": ekl.upper}


def _bracket_optima(ctx: Context, end: str, start_from: list[Tightness] | None = None) -> list[Tightness]:
    """The supremum of :func:`_bracket_ratio` over channels ``K`` (d in ``tight_dims``, every entry >=
    each floor of ``tight_levels``) and input laws ``p``, by :func:`sim.tightness.optimise` over
    :func:`_channel_and_input`. ``chi2``: ``tight_starts`` random starts (standard-normal logits times 2,
    the dimensions in turn) of ``tight_budget`` evaluations, plus the previous floor's optimum. ``kl``
    (each evaluation runs :func:`theory.eta_kl`'s own search): only from the chi2 optimum of the same
    floor (``start_from``), ``bracket_kl_budget`` evaluations; since ``eta_KL >= eta_chi2`` it is never
    below the chi2 table."""
    s = ctx.settings
    table = []
    for k, floor in enumerate(s["tight_levels"]):
        turn = itertools.count()

        def sampler(rng, turn=turn):
            d = s["tight_dims"][next(turn) % len(s["tight_dims"])]
            return d, 2.0 * rng.standard_normal(d * d + d)

        def lift(t: Tightness, floor=floor):  # an optimum found at a floor >= this one is feasible here
            K, p = t.point
            return K.shape[0], np.concatenate([floored_rows_inverse(K, floor), np.log(np.maximum(p, 1e-300))])

        if end == "kl":
            initial, starts, budget = [lift(start_from[k])], 0, int(s["bracket_kl_budget"])
        else:
            initial, starts, budget = [lift(table[-1])] if table else [], int(s["tight_starts"]), int(s["tight_budget"])
        table.append(optimise(lambda x: _bracket_ratio(end, *x), sampler,
                              lambda d, z, floor=floor: _channel_and_input(d, z, floor), sense="sup", starts=starts,
                              budget=budget, seed=ctx.seed_for(f"tightness/bracket-{end}/{k}"),
                              describe=lambda x: _bracket_witness(*x), level={"min entry of K": floor},
                              initial=initial))
    return table


def _report_bracket_tightness(ctx: Context, res: TierResult) -> None:
    """How tight the upper end of ``eta_chi2(K, p) <= eta_KL(K, p) <= dobrushin(K)`` (the bracket W.L3's
    contraction numbers come from) is: :func:`_bracket_optima` for both ends, by :func:`report_tightness`."""
    chi2 = _bracket_optima(ctx, "chi2")
    for end, table, name in (("chi2", chi2, "eta_chi2(K,p)"), ("kl", _bracket_optima(ctx, "kl", chi2),
                                                                "eta_KL(K,p) lower")):
        report_tightness(ctx, res, table, quantity=f"sup {name} / dobrushin(K)", parameter="min entry of K",
                         claimed=float(ctx.params["bracket"]), name=f"bracket-{end}",
                         reading=f"tightness of the bracket's upper end: the supremum of {name} / dobrushin(K) over "
                                 "channels K and input laws p at each floor on K's entries (the bracket holds iff it "
                                 "is <= 1)" + ("; eta_KL has no closed form: its lower end, the best KL ratio found"
                                               if end == "kl" else ""),
                         closer="it approaches 1 as the floor goes to 0 (binary symmetric channel with crossover e "
                                "and uniform p: (1 - 2e)^2 / |1 - 2e|): Dobrushin's end of the bracket is tight")


def _l3_ratio_to_bound(params):
    """``I(x_h;x_h') / (bound(delta, gamma) I(x_h;x_pa))`` on one pair: <= 1 is W Lemma 3. NaN (no
    value) where I(x_h;x_pa) <= :data:`RATIO_FLOOR`, since there the ratio is mostly round-off."""
    def value(pi, tree, h, hp, root):
        i_hp, i_pa, gamma, delta = _sdpi_terms(pi, tree, h, hp, root)
        return i_hp / (params["bound"](delta, gamma) * i_pa) if i_pa > RATIO_FLOOR else float("nan")

    return value


def _l3_witness(params):
    def describe(pi, tree, h, hp):
        i_hp, i_pa, gamma, delta = _sdpi_terms(pi, tree, h, hp, default_root(pi))
        bound = params["bound"](delta, gamma)
        return {**_pair_record(pi, tree, h, hp), "gamma": gamma, "delta": delta, "I(x_h; x_h')": i_hp,
                "I(x_h; x_pa)": i_pa, "ratio": i_hp / i_pa, "bound": bound, "ratio / bound": i_hp / i_pa / bound}

    return describe


def _ratio_roundoff(i_pa: float) -> float:
    """Float64 round-off of a ratio of two mutual informations, each summed from d^2 terms of size
    about 1 with relative error about 1e-16: ``ROUNDOFF / I(x_h; x_pa)`` bounds it comfortably."""
    return ROUNDOFF / max(i_pa, ROUNDOFF)


def _w_l3_property(ctx: Context) -> TierResult:
    from hypothesis import strategies as st

    from theory.strategies import causal_trees

    s = ctx.settings

    @st.composite
    def cases(draw):
        pi = draw(matrices_strategy(ctx, st.integers(2, s["max_d"]),
                                    min_entry_fraction=st.floats(0.05, 1.0)))
        tree = draw(causal_trees(draw(st.integers(3, s["max_H"]))))
        h = draw(st.integers(2, tree.n - 1))
        hp = draw(st.integers(0, h - 1).filter(lambda j: j != tree.parent(h)))
        return pi, tree, h, hp

    @per_case
    def terms(case):
        pi, tree, h, hp = case
        return _sdpi_terms(pi, tree, h, hp, root_vector(pi))

    def violates(case):  # on assumption-breaking draws (a user's prior) this tests strict contraction
        return _sdpi_check(ctx.params, *terms(case))[0] is Outcome.VIOLATED

    def assumptions_of(case):
        _, _, gamma, delta = terms(case)
        return {_L3_ASSUMPTIONS[0]: gamma > 0, _L3_ASSUMPTIONS[1]: delta > 0}

    def record(case):
        pi, tree, h, hp = case
        i_hp, i_pa, gamma, delta = terms(case)
        return {"pi": record_matrix(pi), "parents": tree.parents.tolist(), "root_law": _root_name(pi), "h": h,
                "parent": tree.parent(h), "h_prime": hp, "gamma": gamma, "delta": delta, "I(x_h; x_h')": i_hp,
                "I(x_h; x_pa)": i_pa, "claimed bound": ctx.params["bound"](delta, gamma)}

    def margin(case):  # alpha - I(x_h;x_h')/I(x_h;x_pa): < 0 iff the bound is violated
        i_hp, i_pa, gamma, delta = terms(case)
        alpha = ctx.params["bound"](delta, gamma) if gamma > 0 and delta > 0 else 1.0
        return alpha - i_hp / i_pa if i_pa > RATIO_FLOOR else alpha

    return property_tier(ctx, cases(), violates, record, what="strong DPI with alpha = 1 - delta*gamma",
                         assumptions_of=assumptions_of, margin=margin, polish=w_polish(s["polish_floor"]))


def _w_l3_certified(ctx: Context) -> TierResult:
    """W Lemma 3 and the contraction bracket's upper end, certified at d = 2 (sim.papers.wei.certificates),
    and the tightness table as a bracket: the supremum of ratio / bound found by optimisation at d = 2
    (a lower end) beside the certified upper bound, with an independent check that the first is below the
    second at every floor."""
    import dataclasses

    s, params = ctx.settings, ctx.params
    lemma = [sdpi_inequality(f, s["certified_nodes"], params["bound"]) for f in s["certified_floors"]]
    bracket = [q for f in s["bracket_floors"] for q in bracket_inequalities(
        f, float(params["bracket"]), kl=f in s["bracket_kl_floors"], input_floor=s["bracket_input_floor"])]
    res = certified_tier(ctx, lemma + bracket, what="W Lemma 3 and the contraction bracket's upper end at d = 2",
                         tight=[q.name for q in lemma])
    certs = {c["inequality"]: c for c in res.certificates}
    if not lemma or ctx.prior is not None or any("bracket on the extreme" not in certs[q.name] for q in lemma):
        return res
    # the optimiser's best on the same domain: d = 2, the certified floors and trees (tight_optima's search)
    at_d2 = dataclasses.replace(ctx, overrides={**ctx.overrides, "tight_levels": tuple(s["certified_floors"]),
                                                "tight_dims": (2,), "tight_nodes": tuple(s["certified_nodes"])})
    table = tight_optima(at_d2, _l3_ratio_to_bound(params), sense="sup", purpose="W.L3/certified",
                         describe=_l3_witness(params))
    report_certified_bracket(ctx, res, table, [tuple(certs[q.name]["bracket on the extreme"]) for q in lemma],
                             quantity="sup I(x_h;x_h') / ((1 - delta*gamma) I(x_h;x_pa)), d = 2",
                             parameter="min entry of pi", claimed=1.0, name="ratio-to-bound",
                             reading="certified tightness of W Lemma 3 at d = 2: the supremum of ratio / bound at each "
                                     "floor, bracketed by the best value an optimiser finds (below) and the certified "
                                     "upper bound of the branch-and-bound (above)")
    return res


W_L3 = Claim(
    id="W.L3",
    title="Strong data processing: non-parents carry strictly less information",
    source=Source("W", "Lemma 3", "min pi >= gamma/|V|, min_s P(x_h = s) > delta => I(x_h; x_h') <= alpha "
                  "I(x_h; x_pa(h)), alpha <= 1 - delta*gamma"),
    primary=PrimaryReading(
        statement=("Lemma 3: if min_{s,s'} pi(s'|s) >= gamma/|V| and min_s P(x_h = s) > delta, there is alpha <= "
                   "1 - delta*gamma < 1 with I(x_h; x_h') <= alpha I(x_h; x_pa(h)) for all h' < h, h' != pa(h)."),
        seed="000", lines="195-199",
        setting="W's tree, KL mutual information (W writes I); delta bounds the marginals of every position; "
                "W leaves the root law open (stationary and uniform checked).",
        review=("The bound 1 - delta*gamma with delta the smallest marginal over all positions is the weakest "
                "delta the lemma's hypothesis allows for every h at once, so it is W's bound, not a tighter one. "
                "Two stricter readings are findings: Dobrushin's coefficient of the channel pa(h) -> h' (a sharper "
                "SDPI W does not claim) and delta taken from x_h's marginal alone (they coincide under a "
                "stationary root).")),
    statement=("Primary reading: W Lemma 3 with W's bound 1 - delta*gamma (seed 000, lines 195-199); reported as "
               "findings (stricter criteria): the sharp SDPI ratio <= Dobrushin(pa(h) -> h'), and delta read from "
               "x_h's own marginal. "
"KL mutual information. With gamma = d * min pi > 0 and delta = the smallest marginal probability over "
               "all positions > 0: I(x_h; x_h') <= (1 - delta*gamma) I(x_h; x_pa(h)) for every h' < h, h' != pa(h), "
               "stationary and uniform root laws. Reported with the contraction coefficients (eta_chi2, eta_KL "
               "bracket, Dobrushin) of the channel x_pa(h) -> x_h'. Where gamma = 0 or delta = 0 the lemma gives only "
               "alpha <= 1; there the engine checks whether any strict contraction (ratio < 1) survives."),
    assumptions=_L3_ASSUMPTIONS,
    checks={"exact": _w_l3_exact, "property": _w_l3_property, "certified": _w_l3_certified},
    settings=_SETTINGS,
    # bound: W's alpha(delta, gamma); bracket: the constant c of the contraction bracket's upper end
    # eta_chi2 <= eta_KL <= c * Dobrushin that W.L3 reports beside it (1 in the literature)
    params={"bound": lambda delta, gamma: 1.0 - delta * gamma, "bracket": 1.0},
    prior_dependent=True,
)


# --------------------------------------------------------------- W.L4 (expected log-likelihood) --
_SPARSE_PRIOR = Sparse(Dirichlet(0.3), threshold=0.05)
_L4_ASSUMPTIONS = ("min pi >= gamma/d with gamma > 0", "every marginal >= delta > 0", "I(x_h; x_pa(h)) > 0")


def _l4_terms(pi, tree, h, hp, root):
    pa = tree.parent(h)
    diff = expected_loglik(pi, tree, pa, h, root=root) - expected_loglik(pi, tree, hp, h, root=root)
    i_pa = mutual_information(pairwise_joint(pi, tree, h, pa, root=root), "kl")
    gamma = pi.shape[0] * float(pi.min())
    delta = float(marginals(pi, tree, root=root).min())
    return diff, i_pa, gamma, delta


def _l4_outcome(params, diff, strict):
    """Strict: ``diff > 0`` beyond round-off. Non-strict: ``diff >= 0`` within round-off."""
    shift = params["shift"]
    diff = diff - shift
    if diff == float("inf"):
        return Outcome.HELD, float("inf")
    out = compare(diff, 0.0, tol=1e-12)
    if out is Outcome.UNDECIDED:
        out = Outcome.VIOLATED if strict else Outcome.HELD
    return out, diff


def _w_l4_exact(ctx: Context) -> TierResult:
    s = ctx.settings
    checks = []
    for inst in w_instances(ctx, n_matrices=s["n_matrices"], dims=s["dims"], H=s["H"]):
        for h in range(1, inst.tree.n):
            for hp in range(h):
                if hp == inst.tree.parent(h):
                    continue
                diff, i_pa, gamma, delta = _l4_terms(inst.pi, inst.tree, h, hp, inst.root)
                out, margin = _l4_outcome(ctx.params, diff, strict=True)
                checks.append(InstanceCheck(
                    assumptions={_L4_ASSUMPTIONS[0]: gamma > 0, _L4_ASSUMPTIONS[1]: delta > 0,
                                 _L4_ASSUMPTIONS[2]: i_pa > 1e-12},
                    outcome=out, margin=margin,
                    record={**inst.record(), "h": h, "parent": inst.tree.parent(h), "h_prime": hp,
                            "E log pi(x_h|x_pa) - E log pi(x_h|x_h')": diff, "I(x_h; x_pa)": i_pa,
                            "gamma": gamma, "delta": delta}))
    res = summarize_instances("exact", checks, _L4_ASSUMPTIONS,
                              what="E[log pi(x_h|x_pa)] > E[log pi(x_h|x_h')] (strict)")
    if ctx.prior is None:  # a user's prior is judged on its own draws; the optimiser would leave them
        report_tightness(ctx, res, tight_optima(ctx, _l4_relative_gap(ctx.params), sense="inf", purpose="W.L4",
                                                 describe=_l4_witness(ctx.params)),
                         quantity="inf (E log pi(x_h|x_pa) - E log pi(x_h|x_h')) / I(x_h;x_pa)",
                         parameter="min entry of pi", claimed=0.0, name="relative-gap",
                         reading="tightness of the strict gap: the infimum of the gap relative to I(x_h;x_pa) at each "
                                 "floor on pi's entries (the lemma holds iff it is > 0; W.L3 puts it at >= delta*gamma, "
                                 "since the gap is >= I(x_h;x_pa) - I(x_h;x_h'))",
                         closer="it goes to 0 with the floor: no fixed fraction of I(x_h;x_pa) survives at the boundary")
    res.findings.append(_literal_all_positions(ctx, s))
    # Outside W's setting: the non-strict form for every pi, zeros included (sparse Dirichlet rows, no floor).
    n_bad, n_eq, n_all, worst = 0, 0, 0, None
    for inst in w_instances(ctx, n_matrices=s["n_matrices"], dims=s["dims"], H=s["H"], default=_SPARSE_PRIOR):
        for h in range(1, inst.tree.n):
            for hp in range(h):
                if hp == inst.tree.parent(h):
                    continue
                diff = _l4_terms(inst.pi, inst.tree, h, hp, inst.root)[0]
                out, margin = _l4_outcome(ctx.params, diff, strict=False)
                n_all += 1
                n_eq += abs(diff) <= 1e-12
                if out is Outcome.VIOLATED and (worst is None or margin < worst[0]):
                    worst = (margin, {**inst.record(), "h": h, "h_prime": hp, "difference": diff})
                n_bad += out is Outcome.VIOLATED
    res.findings.append(Finding(
        FindingKind.OUTSIDE, "the non-strict form E[log pi(x_h|x_pa)] >= E[log pi(x_h|x_h')] for every pi, zeros "
        "included (outside Lemma 3's conditions, which Lemma 4 assumes)",
        Verdict.PASS if n_bad == 0 else Verdict.FAIL,
        f"{n_bad} of {n_all} pairs violate the non-strict form on sparse pi ({n_eq} exact equalities)",
        numbers=(Number("pairs violating the non-strict form", n_bad, n=n_all, note=_SPARSE_PRIOR.spec()),
                 Number("pairs with exact equality (non-strict reading)", n_eq, n=n_all)),
        counterexample=None if worst is None else worst[1]))
    return res


def _l4_relative_gap(params):
    """``(E log pi(x_h|x_pa) - E log pi(x_h|x_h') - shift) / I(x_h; x_pa)`` on one pair: > 0 is W Lemma 4.
    NaN (no value) where I(x_h;x_pa) <= :data:`RATIO_FLOOR`, since there the quotient is mostly round-off."""
    def value(pi, tree, h, hp, root):
        diff, i_pa, _, _ = _l4_terms(pi, tree, h, hp, root)
        return (diff - params["shift"]) / i_pa if i_pa > RATIO_FLOOR else float("nan")

    return value


def _l4_witness(params):
    def describe(pi, tree, h, hp):
        diff, i_pa, gamma, delta = _l4_terms(pi, tree, h, hp, default_root(pi))
        return {**_pair_record(pi, tree, h, hp), "gamma": gamma, "delta": delta,
                "E log pi(x_h|x_pa) - E log pi(x_h|x_h')": diff, "I(x_h; x_pa)": i_pa,
                "relative gap": (diff - params["shift"]) / i_pa}

    return describe


def _literal_all_positions(ctx: Context, s) -> Finding:
    """Lemma 4 read literally: "for all h' != pa(h)", every position of the tree, h' >= h included.

    W's candidates are h' < h (Lemma 3 and Theorem 2's attention), which is the primary reading.
    Literally, h' = h gives E[log pi(x_h|x_h)] = sum_a P(x_h=a) log pi(a, a), which beats the parent
    when pi's diagonal is heavy, and a child c of h with a symmetric pi ties it exactly."""
    n_bad, n_all, worst = 0, 0, None
    for inst in w_instances(ctx, n_matrices=s["n_matrices"], dims=s["dims"], H=s["H"]):
        pi, tree, root = inst.pi, inst.tree, inst.root
        with np.errstate(divide="ignore"):
            logpi = np.where(pi > 0, np.log(np.where(pi > 0, pi, 1.0)), -np.inf)
        for h in range(1, tree.n):
            pa = tree.parent(h)
            e_pa = expected_loglik(pi, tree, pa, h, root=root)
            for c in range(h, tree.n):
                joint = pairwise_joint(pi, tree, c, h, root=root)  # P(x_c = a, x_h = b)
                mass = joint > 0
                e_c = float((joint[mass] * logpi[mass]).sum())
                diff = e_pa - e_c
                n_all += 1
                if not diff > 1e-12:
                    n_bad += 1
                    if worst is None or diff < worst[0]:
                        worst = (diff, {**inst.record(), "h": h, "parent": pa, "h_prime": c,
                                        "E log pi(x_h|x_pa) - E log pi(x_h|x_h')": diff})
    return Finding(FindingKind.LITERAL, "'for all h' != pa(h)' read literally: every position of the tree, "
                   "h' >= h included (W's candidates are h' < h)",
                   Verdict.PASS if n_bad == 0 else Verdict.FAIL,
                   f"the strict gap fails for {n_bad} of {n_all} pairs with h' >= h (h' = h or a later position)",
                   numbers=(Number("pairs h' >= h without a strict gap", n_bad, n=n_all),),
                   counterexample=None if worst is None else worst[1])


def _w_l4_property(ctx: Context) -> TierResult:
    from hypothesis import strategies as st

    from theory.strategies import causal_trees

    s = ctx.settings

    @st.composite
    def cases(draw):
        pi = draw(matrices_strategy(ctx, st.integers(2, s["max_d"]), min_entry_fraction=st.floats(0.05, 1.0)))
        tree = draw(causal_trees(draw(st.integers(3, s["max_H"]))))
        h = draw(st.integers(2, tree.n - 1))
        hp = draw(st.integers(0, h - 1).filter(lambda j: j != tree.parent(h)))
        return pi, tree, h, hp

    @per_case
    def terms(case):
        pi, tree, h, hp = case
        return _l4_terms(pi, tree, h, hp, root_vector(pi))

    def violates(case):
        return _l4_outcome(ctx.params, terms(case)[0], strict=True)[0] is Outcome.VIOLATED

    def assumptions_of(case):
        _, i_pa, gamma, delta = terms(case)
        return {_L4_ASSUMPTIONS[0]: gamma > 0, _L4_ASSUMPTIONS[1]: delta > 0, _L4_ASSUMPTIONS[2]: i_pa > 1e-12}

    def record(case):
        pi, tree, h, hp = case
        diff, i_pa, gamma, delta = terms(case)
        return {"pi": record_matrix(pi), "parents": tree.parents.tolist(), "root_law": _root_name(pi), "h": h,
                "h_prime": hp, "E log pi(x_h|x_pa) - E log pi(x_h|x_h')": diff, "I(x_h; x_pa)": i_pa}

    def margin(case):
        """The gap relative to I(x_h;x_pa), < 0 iff violated. Below RATIO_FLOOR the relative gap is
        round-off, so there the margin only keeps the sign: 1 if the gap holds, else the gap."""
        diff, i_pa, _, _ = terms(case)
        held = _l4_outcome(ctx.params, diff, strict=True)[1]
        if i_pa > RATIO_FLOOR:
            return held / i_pa
        return 1.0 if held > 0 else held

    return property_tier(ctx, cases(), violates, record, what="strict expected log-likelihood gap",
                         assumptions_of=assumptions_of, margin=margin, polish=w_polish(s["polish_floor"]))


def _w_l4_certified(ctx: Context) -> TierResult:
    """W Lemma 4's strict gap, certified at d = 2 on every tree of certified_nodes nodes and every floor of
    certified_floors (sim.papers.wei.certificates.loglik_inequality)."""
    s = ctx.settings
    return certified_tier(ctx, [loglik_inequality(f, s["certified_nodes"], float(ctx.params["shift"]))
                                for f in s["certified_floors"]],
                          what="W Lemma 4's strict gap at d = 2")


W_L4 = Claim(
    id="W.L4",
    title="The true parent has the largest expected log-likelihood",
    source=Source("W", "Lemma 4", "E[log pi(x_h | x_pa(h))] > E[log pi(x_h | x_h')] for h' != pa(h)"),
    primary=PrimaryReading(
        statement=("Lemma 4: under Lemma 3's conditions, if I(x_h; x_pa(h)) > 0 then E_X[log pi(x_h|x_pa(h))] > "
                   "E_X[log pi(x_h|x_h')] for all h' != pa(h)."),
        seed="000", lines="203-207",
        setting="W's tree; the candidates are the earlier positions h' < h (Lemma 3, line 199; Theorem 2's "
                "attention over h' < h, line 213); pi with min pi >= gamma/|V| > 0.",
        review=("The strict inequality under Lemma 3's conditions, for W's candidates h' < h, is the paper's "
                "statement in its scope. Two other readings are findings: 'for all h' != pa(h)' taken literally "
                "(positions h' >= h, which W never attends to: h' = h beats the parent for a heavy diagonal), and "
                "the catalogue's non-strict form for every pi, zeros included (outside Lemma 3's conditions).")),
    statement=("Primary reading: W Lemma 4, strict, for h' < h under Lemma 3's conditions (seed 000, lines 203-207); "
               "reported as findings: the literal 'every h' != pa(h)' (h' >= h included) and the non-strict form for "
               "every pi (outside the lemma's conditions). "
               "Under W Lemma 3's conditions (gamma = d min pi > 0, every marginal > 0) and I(x_h; x_pa(h)) > 0: "
               "E[log pi(x_h|x_pa(h))] - E[log pi(x_h|x_h')] > 0 for every h' < h, h' != pa(h) (exact expectations "
               "over the tree's joint law, stationary and uniform roots). Equality cases of the non-strict form "
               "are counted."),
    assumptions=_L4_ASSUMPTIONS,
    checks={"exact": _w_l4_exact, "property": _w_l4_property, "certified": _w_l4_certified},
    settings=_SETTINGS,
    params={"shift": 0.0},
    prior_dependent=True,
)

CLAIMS = [W_L2, W_L3, W_L4]
