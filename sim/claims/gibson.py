"""Claims of Gibson, Cui & Reddy, *Distinct mechanisms underlying in-context learning in
transformers* (arXiv 2604.12151; seed 004): G.1 (the phases against the number of training
chains K) and G.2 (the scaling of the transition times).

Task and strategies: :mod:`sim.markov_icl` (K chains on C = 10 states drawn once, first token
from the stationary law; G1, G2, M1, M2 and "uniform" for a model still at its initial
plateau). Model: :mod:`sim.models.markov_lm` (2 layers, attention + MLP in each, width 64,
relative positions). Every run goes through :mod:`sim.sweep` (local process pool, or Dask).

Settings the seed summary leaves open, chosen here and stated in every report: the rows'
Dirichlet concentration (alpha = 0.1, N's value at C = 10; with alpha = 1 and C = 10 the
bigram signal is so weak that no run left the uniform plateau within 2,000 steps here),
the context length N (64 quick), the optimiser (AdamW, lr 1e-3, betas 0.9/0.999, no weight
decay), the batch (32), the number of steps, relative positions. K1* ≈ 94 and K2* ≈ 7000 at
width 64 come from third-party notes (the catalogue), not from the paper.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..markov_icl import crossing_step
from ..priors import Dirichlet
from ..verdict import Assumption, Number, Outcome, TierResult, Verdict, compare, tier_verdict
from . import _markov_runs as mr
from .base import Claim, Source

__all__ = ["G_1", "G_2", "CLAIMS", "k1_bracket", "fit_power_law", "fit_divergence"]

PHASES = mr.PHASES
M_PHASES = ("M1", "M2")
THIRD_PARTY = {"K1*": 94, "K2*": 7000}
_OPEN = ("alpha (Dirichlet concentration of the rows)", "N (context length)", "learning rate and optimiser",
         "batch", "training steps", "positional encoding")

_G_BASE = dict(C=10, alpha=0.1, N=64, width=64, layers=2, heads=1, mlp=True, positions="relative", dropout=0.0,
               lr=1e-3, betas=(0.9, 0.999), weight_decay=0.0, batch=32, strategies=PHASES, ood=True)


def _prior_assumption(ctx) -> Assumption:
    if ctx.prior is None:
        return Assumption("rows i.i.d. symmetric Dirichlet", True, f"Dirichlet({ctx.settings['alpha']}) rows")
    ok = isinstance(ctx.prior, Dirichlet)
    return Assumption("rows i.i.d. symmetric Dirichlet", ok, f"user prior {ctx.prior.spec()}")


def _model_assumption(s) -> Assumption:
    ok = s.get("layers", 2) == 2 and bool(s.get("mlp", True))
    return Assumption("2-layer transformer, attention + MLP in each layer", ok,
                      f"layers={s.get('layers', 2)}, mlp={s.get('mlp', True)}, width={s.get('width')}")


def _settings_text(s) -> str:
    keys = ("C", "alpha", "N", "width", "lr", "batch", "steps", "n_eval")
    return ", ".join(f"{k}={s[k]}" for k in keys if k in s)


# ---------------------------------------------------------------------------------- G.1 ---
def k1_bracket(Ks: Sequence[int], m_fraction: Sequence[float]) -> dict[str, Any]:
    """Where the fraction of seeds nearest an M-strategy falls through 1/2 along the K grid.

    Returns ``{"lower", "upper", "estimate"}``: ``lower`` the largest grid K below the first
    K with fraction < 1/2 (``None`` if the first K already has it), ``upper`` that K
    (``None`` if none), ``estimate`` the log-linear interpolation of the fraction at 1/2
    between them (``None`` without a bracket)."""
    Ks, f = list(Ks), list(m_fraction)
    order = sorted(range(len(Ks)), key=lambda i: Ks[i])
    Ks, f = [Ks[i] for i in order], [f[i] for i in order]
    hi = next((i for i, v in enumerate(f) if v < 0.5), None)
    if hi is None:
        return {"lower": Ks[-1], "upper": None, "estimate": None}
    if hi == 0:
        return {"lower": None, "upper": Ks[0], "estimate": None}
    lo = hi - 1
    a, b = math.log(Ks[lo]), math.log(Ks[hi])
    w = (f[lo] - 0.5) / (f[lo] - f[hi]) if f[lo] != f[hi] else 0.5
    return {"lower": Ks[lo], "upper": Ks[hi], "estimate": math.exp(a + w * (b - a))}


def _judge_end(pl, wanted: Sequence[str], unwanted: Sequence[str], z: float) -> Outcome:
    """HELD if the nearest phase is wanted with margin; VIOLATED if unwanted with margin;
    otherwise UNDECIDED (e.g. still at the uniform / G1 plateau, or within the error)."""
    sure = compare(pl["margin"], 0.0, stderr=pl["se"], z=z) is Outcome.HELD
    if pl["phase"] in wanted and sure:
        return Outcome.HELD
    if pl["phase"] in unwanted and sure:
        return Outcome.VIOLATED
    return Outcome.UNDECIDED


def _check_g1(ctx) -> TierResult:
    s = ctx.settings
    labels = dict(ctx.params["labels"])
    mr.check_labels(labels)
    few, many = tuple(ctx.params["few_chains_phase"]), tuple(ctx.params["many_chains_phase"])
    Ks, seeds = list(s["K"]), list(s["seeds"])
    grid = [(K, seed) for K in Ks for seed in seeds]
    records = mr.sweep_records(ctx, "phases", [mr.run_params(ctx, K=K, seed=seed) for K, seed in grid])
    by = {(K, seed): rec for (K, seed), rec in zip(grid, records)}
    numbers, table = [], []
    for K in Ks:
        for seed in seeds:
            rec = by[K, seed]
            ood = mr.placement(rec, "ood", PHASES, labels=labels)
            idp = mr.placement(rec, "id", PHASES, labels=labels)
            table.append({"K": K, "seed": seed, "ood": ood["phase"], "ood_margin": ood["margin"], "ood_se": ood["se"],
                          "id": idp["phase"], "id_margin": idp["margin"], "id_se": idp["se"],
                          "kl_ood": ood["kl"], "kl_id": idp["kl"], "train_seconds": rec["timing"]["train_seconds"],
                          "chain_seed": rec["chain_seed"], "init_seed": rec["seeds"]["init"]})
        for which in ("ood", "id"):
            phases = [r[which] for r in table if r["K"] == K]
            numbers.append(Number(f"K={K}: fraction of seeds nearest an M-strategy ({which})",
                                  sum(p in M_PHASES for p in phases) / len(phases), n=len(phases), kind="trained",
                                  note="nearest per seed: " + ", ".join(phases)))
        for st in ("G2", "M2"):
            m, se = mr.seeds_spread([r["kl_ood"][st] for r in table if r["K"] == K])
            numbers.append(Number(f"K={K}: KL({st} || model), out of distribution, end of training", m, stderr=se,
                                  n=len(seeds), kind="trained", note="mean ± seeds' standard error"))
    # the conclusion, judged at the ends of the K grid
    k_few, k_many = min(Ks), max(Ks)
    outcomes, worst = [], None
    for r in table:
        if r["K"] not in (k_few, k_many):
            continue
        pl = {"phase": r["ood"], "margin": r["ood_margin"], "se": r["ood_se"]}
        out = _judge_end(pl, few, many, ctx.z) if r["K"] == k_few else _judge_end(pl, many, few, ctx.z)
        outcomes.append(out)
        if out is Outcome.VIOLATED and worst is None:
            worst = {"K": r["K"], "seed": r["seed"],
                     "expected_phase": list(few if r["K"] == k_few else many),
                     "nearest_ood": r["ood"], "margin": r["ood_margin"], "paired_se": r["ood_se"],
                     "kl_ood": r["kl_ood"], "kl_id": r["kl_id"], "chain_seed": r["chain_seed"],
                     "settings": by[r["K"], r["seed"]]["spec"]}
    conclusion = (Outcome.VIOLATED if Outcome.VIOLATED in outcomes else
                  Outcome.UNDECIDED if Outcome.UNDECIDED in outcomes else Outcome.HELD)
    fractions = [sum(r["ood"] in M_PHASES for r in table if r["K"] == K) / len(seeds) for K in Ks]
    br = k1_bracket(Ks, fractions)
    if br["lower"] is not None:
        numbers.append(Number("K1* lower bracket (largest K before the switch)", br["lower"], kind="trained"))
    if br["upper"] is not None:
        numbers.append(Number("K1* upper bracket (first K with most seeds not nearest M)", br["upper"],
                              kind="trained"))
    if br["estimate"] is not None:
        numbers.append(Number("K1* estimate (log-linear interpolation of the M fraction at 1/2)", br["estimate"],
                              kind="trained", note=f"bracket [{br['lower']}, {br['upper']}] of a grid {Ks}"))
    assumptions = [_prior_assumption(ctx), _model_assumption(s)]
    verdict = tier_verdict(assumptions, conclusion)
    without = None
    if not all(a.holds for a in assumptions):
        without = f"{conclusion.value} on these inputs (few chains nearest {'/'.join(few)}, many nearest " \
                  f"{'/'.join(many)} out of distribution)"
    third = THIRD_PARTY["K1*"]
    inside = (br["lower"] is None or br["lower"] < third) and (br["upper"] is None or third <= br["upper"])
    readings = [
        {"name": "decisive: out-of-distribution placement at the ends of the K grid", "verdict": conclusion.value,
         "detail": f"K={k_few}: nearest {[r['ood'] for r in table if r['K'] == k_few]}; "
                   f"K={k_many}: nearest {[r['ood'] for r in table if r['K'] == k_many]}"},
        {"name": "in-distribution placement (informative: M2 is the Bayes predictor in distribution)",
         "verdict": "INFO", "detail": "; ".join(f"K={r['K']} seed {r['seed']}: {r['id']}" for r in table)},
        {"name": f"K1* against the third-party figure K1* ≈ {third} at width 64 (not in the paper)",
         "verdict": "INFO", "detail": f"bracket [{br['lower']}, {br['upper']}] "
                                      f"{'contains' if inside else 'does not contain'} {third}; the threshold is "
                                      "kinetic, so it moves with the training length, lr, batch and alpha chosen here"},
        {"name": "K2*", "verdict": "NOT_RUN", "detail": "estimated by G.2's paper profile (G2 -> M2 delays near K2*)"},
        {"name": "settings the paper leaves open (chosen here)", "verdict": "INFO",
         "detail": _settings_text(s) + "; open: " + ", ".join(_OPEN)},
    ]
    figures = []
    path = ctx.figure_path("phase-diagram")
    mr.phase_diagram(path, "G.1: nearest strategy out of distribution (fresh chains)",
                     [(f"K={K} s{seed}", by[K, seed]) for K in Ks for seed in seeds], "ood", PHASES, labels)
    figures.append(mr.rel(ctx, path))
    path = ctx.figure_path("phase-diagram-id")
    mr.phase_diagram(path, "G.1: nearest strategy in distribution (training chains)",
                     [(f"K={K} s{seed}", by[K, seed]) for K in Ks for seed in seeds], "id", PHASES, labels)
    figures.append(mr.rel(ctx, path))
    path = ctx.figure_path("distance-curves")
    mr.distance_curves(path, "G.1: KL(strategy || model) out of distribution, mean and range over seeds",
                       [(f"K = {K}", [by[K, sd] for sd in seeds]) for K in (k_few, k_many)], "ood", PHASES, labels)
    figures.append(mr.rel(ctx, path))
    summary = (f"out of distribution, K={k_few}: " + ", ".join(r["ood"] for r in table if r["K"] == k_few)
               + f"; K={k_many}: " + ", ".join(r["ood"] for r in table if r["K"] == k_many)
               + f" (seeds {seeds}); K1* bracket [{br['lower']}, {br['upper']}]")
    budget = ""
    if conclusion is Outcome.UNDECIDED:
        budget = (f"a seed at the ends of the grid was not placed with margin after {s['steps']} steps (still at a "
                  f"plateau or within the error); rerun with steps={2 * s['steps']}, n_eval={2 * s['n_eval']}")
    return TierResult("trained", verdict, conclusion, summary, assumptions=assumptions, numbers=numbers,
                      counterexample=worst if verdict is Verdict.FAIL or (without and worst) else None,
                      conclusion_without_assumptions=without, figures=figures, budget=budget, readings=readings)


# ---------------------------------------------------------------------------------- G.2 ---
def fit_power_law(x: Sequence[float], y: Sequence[float]) -> dict[str, float]:
    """Least squares ``log y = a + b log x``: slope ``b`` with its standard error, intercept
    ``a``, residual standard deviation, ``n``. Needs at least 3 points and 2 distinct x."""
    lx, ly = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    n = len(lx)
    if n < 3 or np.ptp(lx) == 0:
        raise ValueError(f"a power-law fit needs >= 3 points over >= 2 distinct x, got {n}")
    A = np.stack([np.ones(n), lx], axis=1)
    coef, *_ = np.linalg.lstsq(A, ly, rcond=None)
    resid = ly - A @ coef
    s2 = float(resid @ resid) / (n - 2)
    cov = s2 * np.linalg.inv(A.T @ A)
    return {"a": float(coef[0]), "b": float(coef[1]), "b_se": float(math.sqrt(cov[1, 1])), "resid_sd": math.sqrt(s2),
            "n": n}


def fit_divergence(K: Sequence[float], delay: Sequence[float], *, k_max: float | None = None) -> dict[str, float]:
    """Fit ``delay = A (K2* - K)^(-gamma)`` (least squares in log delay): ``K2*`` by a search
    over ``(max K, k_max]`` (default ``100 max K``), then ``A, gamma`` by linear least
    squares. Returns ``{"K2", "gamma", "logA", "resid_sd", "n"}``."""
    K, d = np.asarray(K, float), np.asarray(delay, float)
    if len(K) < 3 or len(set(K.tolist())) < 3:
        raise ValueError("a divergence fit needs delays at >= 3 distinct K")
    top = K.max()
    cands = top + np.geomspace(top * 1e-3, (k_max or 100 * top) - top, 400)
    best = None
    for K2 in cands:
        f = fit_power_law(K2 - K, d)
        sse = f["resid_sd"] ** 2 * (len(K) - 2)
        if best is None or sse < best[0]:
            best = (sse, K2, f)
    _, K2, f = best
    return {"K2": float(K2), "gamma": -f["b"], "logA": f["a"], "resid_sd": f["resid_sd"], "n": len(K)}


def _tau_part(ctx, s, numbers, figures, readings):
    """tau_2Gen against N: the G1 -> G2 crossing out of distribution (fresh chains, K = inf)."""
    Ns, seeds = list(s["N_grid"]), list(s["seeds"])
    grid = [(N, seed) for N in Ns for seed in seeds]
    params = [mr.run_params(ctx, K="inf", N=N, seed=seed, strategies=["uniform", "G1", "G2"],
                            stop_when_nearest="G2", stop_patience=s.get("stop_patience", 3)) for N, seed in grid]
    records = mr.sweep_records(ctx, "tau-vs-N", params)
    taus, missing = [], []
    for (N, seed), rec in zip(grid, records):
        tau = crossing_step(rec, "ood", "G2", "G1")
        if tau is None or tau <= 0:
            missing.append((N, seed))
        else:
            taus.append((N, seed, tau))
    for N in Ns:
        v = [t for n, _, t in taus if n == N]
        if v:
            m, se = mr.seeds_spread(v)
            numbers.append(Number(f"tau_2Gen at N={N} (steps to the G1 -> G2 crossing, fresh chains)", m, stderr=se,
                                  n=len(v), kind="trained", note="mean ± seeds' standard error; per seed: "
                                  + ", ".join(f"{t:.0f}" for t in v)))
    if missing:
        return Outcome.UNDECIDED, (f"no G1 -> G2 crossing within {s['steps']} steps for (N, seed) = {missing}; "
                                   f"rerun with steps={2 * s['steps']}"), None
    if len({n for n, _, _ in taus}) < 3:
        return Outcome.UNDECIDED, "the N/log N fit needs crossings at >= 3 values of N", None
    x = [n / math.log(n) for n, _, _ in taus]
    fit = fit_power_law(x, [t for _, _, t in taus])
    alt = fit_power_law([n for n, _, _ in taus], [t for _, _, t in taus])
    want, tol = ctx.params["tau_exponent"], ctx.params["exponent_tol"]
    outcome = compare(abs(fit["b"] - want), tol, stderr=fit["b_se"], z=ctx.z, direction="<=")
    numbers.append(Number("exponent b in tau_2Gen ∝ (N / log N)^b", fit["b"], stderr=fit["b_se"], n=fit["n"],
                          kind="trained", tolerance=tol,
                          note=f"claim: b = {want} ± {tol}; least squares on log tau over every seed"))
    numbers.append(Number("exponent c in tau_2Gen ∝ N^c (alternative reading)", alt["b"], stderr=alt["b_se"],
                          n=alt["n"], kind="trained",
                          note=f"residual sd {alt['resid_sd']:.3f} vs {fit['resid_sd']:.3f} for N/log N"))
    readings.append({"name": "tau_2Gen ~ N / log N (decided in quick)", "verdict": outcome.value,
                     "detail": f"b = {fit['b']:.3f} ± {fit['b_se']:.3f} (claim {want} ± {tol}); plain power law "
                               f"c = {alt['b']:.3f} ± {alt['b_se']:.3f}"})
    path = ctx.figure_path("tau-vs-N")
    _plot_tau(path, taus, fit, alt)
    figures.append(mr.rel(ctx, path))
    cex = None
    if outcome is Outcome.VIOLATED:
        cex = {"tau_by_N_seed": [{"N": n, "seed": sd, "tau": t} for n, sd, t in taus], "fit": fit,
               "claimed_exponent": want, "tolerance": tol, "settings": records[0]["spec"]}
    return outcome, "", cex


def _plot_tau(path, taus, fit, alt):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 4), dpi=110)
    N = np.array([n for n, _, _ in taus], float)
    T = np.array([t for _, _, t in taus], float)
    ax.scatter(N, T, s=14, color="k", label="runs (seeds)")
    g = np.geomspace(N.min(), N.max(), 50)
    ax.plot(g, np.exp(fit["a"]) * (g / np.log(g)) ** fit["b"], color="#08519c",
            label=f"(N/log N)^{fit['b']:.2f}")
    ax.plot(g, np.exp(alt["a"]) * g ** alt["b"], color="#d94801", ls="--", label=f"N^{alt['b']:.2f}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("context length N")
    ax.set_ylabel("tau_2Gen (steps, G1 -> G2 crossing)")
    ax.set_title("G.2: transition time against N", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _delay_part(ctx, s, numbers, figures, readings):
    """Delta tau_K = tau(G2 -> M2) - tau(G1 -> G2) against K, fitted to A (K2* - K)^-gamma."""
    Ks, seeds = list(s["K_grid"]), list(s["seeds"])
    grid = [(K, seed) for K in Ks for seed in seeds]
    records = mr.sweep_records(ctx, "delay-vs-K", [mr.run_params(ctx, K=K, seed=seed) for K, seed in grid])
    pts, censored = [], []
    for (K, seed), rec in zip(grid, records):
        t12 = crossing_step(rec, "ood", "G2", "G1")
        t2m = crossing_step(rec, "ood", "M2", "G2")
        if t12 is not None and t2m is not None and t2m > t12:
            pts.append((K, seed, t2m - t12))
        else:
            censored.append((K, seed))
    if len({k for k, _, _ in pts}) < 3:
        return Outcome.UNDECIDED, (f"G2 -> M2 delays measured at fewer than 3 values of K (censored runs: "
                                   f"{censored}); needs longer runs"), None
    fit = fit_divergence([k for k, _, _ in pts], [d for _, _, d in pts])
    rng = ctx.rng("bootstrap")
    boots = []
    for _ in range(int(s.get("bootstrap", 200))):
        idx = rng.integers(0, len(pts), len(pts))
        sub = [pts[i] for i in idx]
        if len({k for k, _, _ in sub}) >= 3:
            boots.append(fit_divergence([k for k, _, _ in sub], [d for _, _, d in sub]))
    g_se = float(np.std([b["gamma"] for b in boots], ddof=1)) if len(boots) > 1 else float("inf")
    k_lo, k_hi = (np.percentile([b["K2"] for b in boots], [16, 84]) if boots else (float("nan"),) * 2)
    want, tol = ctx.params["gamma"], ctx.params["gamma_tol"]
    outcome = compare(abs(fit["gamma"] - want), tol, stderr=g_se, z=ctx.z, direction="<=")
    numbers.append(Number("gamma in Delta tau_K ∝ (K2* - K)^-gamma", fit["gamma"], stderr=g_se, n=len(pts),
                          kind="trained", tolerance=tol, note=f"claim {want} ± {tol}; bootstrap over runs"))
    numbers.append(Number("K2* (fitted)", fit["K2"], kind="trained",
                          note=f"bootstrap 16-84%: [{k_lo:.0f}, {k_hi:.0f}]; third-party notes: ≈ {THIRD_PARTY['K2*']}"))
    readings.append({"name": "Delta tau_K ~ (K2* - K)^-gamma, gamma ≈ 2", "verdict": outcome.value,
                     "detail": f"gamma = {fit['gamma']:.2f} ± {g_se:.2f}, K2* = {fit['K2']:.0f}; censored runs "
                               f"(no G2 -> M2 within the budget): {censored}"})
    cex = None
    if outcome is Outcome.VIOLATED:
        cex = {"delays": [{"K": k, "seed": sd, "delay": d} for k, sd, d in pts], "fit": fit, "claimed_gamma": want}
    return outcome, "", cex


def _check_g2(ctx) -> TierResult:
    s = ctx.settings
    numbers, figures, readings = [], [], []
    parts = []
    tau_out, tau_budget, tau_cex = _tau_part(ctx, s, numbers, figures, readings)
    parts.append(tau_out)
    budget = tau_budget
    cex = tau_cex
    if s.get("K_grid"):
        d_out, d_budget, d_cex = _delay_part(ctx, s, numbers, figures, readings)
        parts.append(d_out)
        budget = "; ".join(b for b in (budget, d_budget) if b)
        cex = cex or d_cex
    else:
        parts.append(Outcome.UNDECIDED)
        readings.append({"name": "Delta tau_K ~ (K2* - K)^-gamma, gamma ≈ 2", "verdict": "NOT_RUN",
                         "detail": "not run in this profile: needs K up to K2* (≈ 7000 at width 64 per third-party "
                                   "notes) and runs long enough for the G2 -> M2 switch; decided by the paper profile"})
        budget = "; ".join(b for b in (budget, "Delta tau_K needs the paper profile (K grid approaching K2* ≈ 7000, "
                                                "~10^5 steps per run: a GPU or a Dask cluster)") if b)
    readings.append({"name": "settings the paper leaves open (chosen here)", "verdict": "INFO",
                     "detail": _settings_text(s) + "; open: " + ", ".join(_OPEN)})
    conclusion = (Outcome.VIOLATED if Outcome.VIOLATED in parts else
                  Outcome.UNDECIDED if Outcome.UNDECIDED in parts else Outcome.HELD)
    assumptions = [_prior_assumption(ctx), _model_assumption(s)]
    verdict = tier_verdict(assumptions, conclusion)
    without = None if all(a.holds for a in assumptions) else f"{conclusion.value} on these inputs"
    summary = "; ".join(f"{r['name']}: {r['verdict']}" for r in readings if r["verdict"] != "INFO")
    return TierResult("trained", verdict, conclusion, summary, assumptions=assumptions, numbers=numbers,
                      counterexample=cex if conclusion is Outcome.VIOLATED else None,
                      conclusion_without_assumptions=without, figures=figures,
                      budget=budget if conclusion is Outcome.UNDECIDED else "", readings=readings)


_G_TEXT_OPEN = ("Settings the paper leaves open are chosen here and listed in the report (Dirichlet concentration "
                "alpha = 0.1, N, AdamW lr 1e-3, batch 32, steps, relative positions).")

G_1 = Claim(
    id="G.1",
    title="Four strategies: memorisation for few training chains, in-context bigram for many",
    source=Source("G", "Sec. 3 (phases G1, G2, M1, M2; thresholds K1*, K2*)",
                  "few training chains -> M-strategies; many -> G2 (2-Gen); boundary K1* (kinetic), K2* (capacity)"),
    statement=("K chains on C = 10 states with i.i.d. symmetric Dirichlet rows, drawn once and fixed (first token "
               "from each chain's stationary law); a 2-layer transformer with attention + MLP in each layer (width "
               "64, relative positions) trained on next-token prediction. Each trained model is placed at the "
               "strategy nearest by KL(strategy || model) among uniform (initial plateau), G1, G2, M1, M2, on fresh "
               "chains (out of distribution, decisive) and on the training chains. Conclusion: at the smallest K of "
               "the grid every seed sits nearest an M-strategy and at the largest K every seed nearest G2, each with "
               "a margin of z paired standard errors over the evaluation sequences; K1* is bracketed on the grid. "
               "K1* ≈ 94 and K2* ≈ 7000 at width 64 are third-party figures, not the paper's. " + _G_TEXT_OPEN),
    assumptions=("rows i.i.d. symmetric Dirichlet", "2-layer transformer, attention + MLP in each layer"),
    checks={"trained": _check_g1},
    settings={
        "quick": {"tiers": ("trained",), **_G_BASE, "K": (2, 1024), "seeds": (0, 1), "steps": 600, "n_eval": 128,
                  "eval_every": 50, "eval_log_points": 8},
        "standard": {"tiers": ("trained",), **_G_BASE, "K": (2, 16, 128, 1024), "seeds": (0, 1, 2), "steps": 1000,
                     "n_eval": 256, "eval_every": 50, "eval_log_points": 10},
        "paper": {"tiers": ("trained",), **_G_BASE, "N": 128, "K": tuple(2 ** k for k in range(0, 15)),
                  "seeds": tuple(range(5)), "steps": 30000, "n_eval": 512, "eval_every": 250, "eval_log_points": 20},
    },
    decided_by="quick",
    params={"few_chains_phase": M_PHASES, "many_chains_phase": ("G2",), "labels": {p: p for p in PHASES}},
)

G_2 = Claim(
    id="G.2",
    title="Scaling laws of the transition times",
    source=Source("G", "Sec. 4-5 (SA-transformer theory; representational bottleneck)",
                  "tau_2Gen ~ N / log N;  Delta tau_K ~ (K2* - K)^-gamma, gamma ≈ 2"),
    statement=("(a) tau_2Gen, the step at which KL(G2 || model) falls below KL(G1 || model) for good on fresh chains "
               "(K = inf, so memorisation does not compete), scales as N / log N: the exponent b of a least-squares "
               "fit tau ∝ (N/log N)^b over seeds and an N grid is 1 within ±0.35, with margin z standard errors. "
               "(b) Delta tau_K = tau(G2 -> M2) - tau(G1 -> G2) diverges as (K2* - K)^-gamma with gamma = 2 ± 0.5 "
               "(fit of K2*, gamma; bootstrap over runs). (a) is run in every profile, (b) only in the paper "
               "profile; the claim is decided there. Same task and model as G.1. " + _G_TEXT_OPEN),
    assumptions=("rows i.i.d. symmetric Dirichlet", "2-layer transformer, attention + MLP in each layer"),
    checks={"trained": _check_g2},
    settings={
        "quick": {"tiers": ("trained",), **_G_BASE, "N_grid": (16, 32, 64), "seeds": (0, 1), "steps": 1200,
                  "n_eval": 64, "eval_every": 20, "eval_log_points": 0, "stop_patience": 3},
        "standard": {"tiers": ("trained",), **_G_BASE, "N_grid": (16, 32, 64, 128), "seeds": (0, 1, 2),
                     "steps": 2000, "n_eval": 128, "eval_every": 20, "eval_log_points": 0, "stop_patience": 3},
        "paper": {"tiers": ("trained",), **_G_BASE, "N_grid": (16, 32, 64, 128, 256, 512), "seeds": tuple(range(5)),
                  "steps": 20000, "n_eval": 256, "eval_every": 20, "eval_log_points": 0, "stop_patience": 5,
                  "K_grid": (500, 1000, 2000, 3000, 4000, 5000, 6000), "bootstrap": 500},
    },
    decided_by="paper",
    params={"tau_exponent": 1.0, "exponent_tol": 0.35, "gamma": 2.0, "gamma_tol": 0.5},
)

CLAIMS = [G_1, G_2]
