"""Claims G.6 and G.8 of Gibson, Cui & Reddy (seed 004), decided on G's minimal model of the
task-recognition head (:mod:`sim.papers.markov.task_head`: encoder MLP1 of adjacent pairs, pooling
into a task vector phi of dimension D_phi, decoder MLP2 from phi and the current state).

- **G.6**, the representational bottleneck at K2* (lines 148-152): above K2* the model never enters
  M2; K2* is limited by the decoder and by D_phi; the time to enter M2 diverges as
  ``Delta tau_K ~ (K2* - K)^-gamma``, gamma ≈ 2.
- **G.8**, the task-recognition head generalises with capacity (line 170): with D_phi and the
  decoder large enough, the same circuit reaches the in-context bigram (G2) on chains it never saw.

Every run trains through :func:`sim.papers.markov.task_head.train_task_heads` (the one loop,
:func:`sim.train.train`, with the runs of one architecture batched on the model axis) on the K-chain
task of :mod:`sim.papers.markov.task`, and is placed among the strategies by G.1's reading
(:func:`sim.papers.markov.placement.absolute_placement`).
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from sim.claims.base import Claim, PrimaryReading, Source
from sim.claims.jobs import planned_jobs, run_jobs
from sim.papers.markov import runs as mr
from sim.papers.markov.claims.gibson import fit_divergence, k1_bracket, search_k2
from sim.papers.markov.placement import absolute_placement, judge_end
from sim.priors import Dirichlet
from sim.verdict import Assumption, Control, Finding, FindingKind, Number, Outcome, TierResult, Verdict, compare, \
    tier_verdict

__all__ = ["G_6", "G_8", "CLAIMS", "entry_step", "first_step", "delay_of", "decide_growth", "judge_exponent",
           "fit_delays", "wrong_gamma_delays", "judge_at", "decide_generalisation", "refine_ks", "control_k2",
           "seeds_to_tell", "profile_sse", "censored_runs", "judge_delay_law", "shrunk_bracket"]

_VERDICT_OF = {Outcome.HELD: Verdict.PASS, Outcome.VIOLATED: Verdict.FAIL, Outcome.UNDECIDED: Verdict.INCONCLUSIVE}
MEMORY = ("uniform", "G1", "G2", "M1", "M2")  # the phases a model trained on K chains is placed among
FRESH = ("uniform", "G1", "G2")  # ... and one trained on a fresh chain per sequence (no training chains to recall)


def _worst(outcomes: Sequence[Outcome]) -> Outcome:
    return (Outcome.VIOLATED if Outcome.VIOLATED in outcomes else
            Outcome.UNDECIDED if Outcome.UNDECIDED in outcomes or not outcomes else Outcome.HELD)


def _prior_assumption(ctx, s) -> Assumption:
    if ctx.prior is None:
        return Assumption("rows i.i.d. symmetric Dirichlet", True, f"Dirichlet({s['alpha']}) rows")
    return Assumption("rows i.i.d. symmetric Dirichlet", isinstance(ctx.prior, Dirichlet), f"user prior {ctx.prior.spec()}")


def _arch_text(arm: Mapping[str, Any], s) -> str:
    return f"D_phi={arm['d_phi']}, decoder {arm['decoder_width']}"


def _arm_job_args(ctx, s, arm: Mapping[str, Any], runs: Sequence[Mapping[str, Any]], *, strategies,
                  stop=None) -> dict[str, Any]:
    """:func:`sim.claims.jobs.run_jobs`'s arguments for every run of one architecture ``arm`` (``{"d_phi",
    "decoder_width"}``) trained at once: one job (:func:`sim.papers.markov.task_head.task_heads_job`)."""
    from sim.papers.markov.task_head import TaskHeadConfig, task_heads_cost, task_heads_job, task_heads_key

    cfg = TaskHeadConfig(vocab=s["C"], max_len=s["N"], d_phi=int(arm["d_phi"]), encoder_width=int(s["encoder_width"]),
                         decoder_width=int(arm["decoder_width"]))
    job = {"config": cfg.as_dict(), "runs": [dict(r) for r in runs], "N": s["N"], "C": s["C"], "alpha": s["alpha"],
           "lr": s["lr"], "batch": s["batch"], "steps": s["steps"], "eval_every": s["eval_every"], "n_eval": s["n_eval"],
           "strategies": list(strategies), "stop_when_placed": stop, "stop_margin_z": float(ctx.z),
           "stop_patience": int(s.get("stop_patience", 3)), "prior": None if ctx.prior is None else ctx.prior.spec(),
           "device": ctx.device}
    return {"fn": task_heads_job, "jobs": [job], "key": task_heads_key, "cost": task_heads_cost,
            "label": f"{ctx.claim.id} task heads {_arch_text(arm, s)}: {len(runs)} runs batched"}


def _train_arm(ctx, s, arm: Mapping[str, Any], runs: Sequence[Mapping[str, Any]], *, strategies, stop=None):
    """Every run of one architecture ``arm`` at once (:func:`_arm_job_args`, on the grid runner: memoised for
    the claim's evaluation and recorded in the run folder)."""
    return _train_arms(ctx, s, [arm], runs, strategies=strategies, stop=stop)[0]


def _train_arms(ctx, s, arms: Sequence[Mapping[str, Any]], runs: Sequence[Mapping[str, Any]], *, strategies,
                stop=None) -> list:
    """The runs of each architecture of ``arms``, one job per architecture, handed to the grid runner
    together so that its workers train them side by side (the records are those of one arm at a
    time: the same jobs, the same ids)."""
    args = [_arm_job_args(ctx, s, arm, runs, strategies=strategies, stop=stop) for arm in arms]
    label = args[0]["label"] if len(args) == 1 else (f"{ctx.claim.id} task heads: {len(args)} architectures, "
                                                     f"{len(runs)} runs each")
    return run_jobs(ctx, args[0]["fn"], [job for a in args for job in a["jobs"]], key=args[0]["key"],
                    cost=args[0]["cost"], label=label)


def _g6_jobs(ctx) -> list:
    """G.6's training jobs as the cost plan sees them: one per architecture of ``arms``, and the delay
    arm's refinement (its K are placed by the first stage's K2* bracket, unknown before it runs: it is
    listed at the grid's last ``refine_points`` K, which cost the same steps)."""
    s = ctx.settings
    grid = _runs_grid(ctx, s)
    jobs = [job for arm in s["arms"]
            for job in planned_jobs(**_arm_job_args(ctx, s, dict(arm), grid, strategies=MEMORY, stop="M2"))]
    if int(s.get("refine_points", 0)) > 0:
        nominal = sorted(s["K_grid"])[-int(s["refine_points"]):]
        jobs += planned_jobs(**_arm_job_args(ctx, {**s, "steps": s["refine_steps"]}, dict(s["arms"][s["delay_arm"]]),
                                             _refine_runs(ctx, s, nominal), strategies=MEMORY, stop="M2"))
    return jobs


def refine_ks(bracket: Mapping[str, Any], points: int) -> list[int]:
    """The refinement's K: the grid continued one K at a time from the last K of the first stage's K2*
    bracket ``(lower, upper]`` where the runs entered M2 (:func:`~sim.papers.markov.claims.gibson.k1_bracket`),
    ``lower + 1, ..., lower + points``, up to ``upper``; none without a bracket or with ``points`` = 0.
    A divergence's curvature lives in the last K before K2*, and a longer budget moves the last K the
    runs enter M2 at only a few K past the grid's (the delays grow about exponentially in K), so the
    refinement looks there at the finest resolution K has."""
    lo, hi = bracket.get("lower"), bracket.get("upper")
    if points <= 0 or lo is None or hi is None or hi - lo < 2:
        return []
    return list(range(int(lo) + 1, min(int(lo) + points, int(hi)) + 1))


def _refine_runs(ctx, s, Ks: Sequence[int]) -> list[dict[str, Any]]:
    """The refinement's runs: seeds and chains of their own (``refine-...``), independent of the first
    stage's, so no run's trajectory is counted twice."""
    return [{"K": int(K), "seed": ctx.seed_for(f"refine-train-{i}"), "chain_seed": ctx.seed_for(f"refine-chains-{i}")}
            for K in Ks for i in range(int(s["refine_seeds"]))]


def _g8_runs(ctx, s) -> list[dict[str, Any]]:
    return [{"K": s["train_K"], "seed": ctx.seed_for(f"train-{i}"), "chain_seed": ctx.seed_for(f"chains-{i}")}
            for i in range(int(s["seeds"]))]


def _g8_jobs(ctx) -> list:
    """G.8's training jobs as the cost plan sees them: the large circuit and the small one (its control)."""
    s = ctx.settings
    runs, strategies = _g8_runs(ctx, s), (FRESH if s["train_K"] == "inf" else MEMORY)
    return [job for arm in (s["large"], s["small"])
            for job in planned_jobs(**_arm_job_args(ctx, s, dict(arm), runs, strategies=strategies))]


# ------------------------------------------------------------------------------- G.6 ---
def _lead(rec: Mapping[str, Any], phase: str, which: str) -> np.ndarray:
    """Per evaluation, how much nearer ``phase`` is than the nearest other strategy: ``min_{s != phase} KL(s ||
    model) - KL(phase || model)`` (> 0 exactly when ``phase`` is the nearest)."""
    ev = rec["eval"][which]
    others = np.min([ev[s] for s in rec["pair_order"] if s != phase], axis=0)
    return others - np.asarray(ev[phase], float)


def _crossing(rec, lead: np.ndarray, i: int) -> float:
    """The step between evaluations ``i - 1`` and ``i`` where ``lead`` crosses 0 (linear interpolation; the
    evaluation step itself at ``i = 0``)."""
    steps = rec["steps"]
    if i == 0:
        return float(steps[0])
    a, b = lead[i - 1], lead[i]
    return float(steps[i - 1] + (steps[i] - steps[i - 1]) * (-a) / (b - a)) if b != a else float(steps[i])


def entry_step(rec: Mapping[str, Any], phase: str, which: str) -> float | None:
    """The step at which a run entered ``phase`` for good on set ``which``: where ``phase`` became the
    nearest strategy (KL to the model) for the final streak of evaluations, interpolated between the
    evaluations around it; ``None`` if it is not the nearest at the last evaluation."""
    lead = _lead(rec, phase, which)
    if not len(lead) or lead[-1] <= 0:
        return None
    i = len(lead) - 1
    while i > 0 and lead[i - 1] > 0:
        i -= 1
    return _crossing(rec, lead, i)


def first_step(rec: Mapping[str, Any], phase: str, which: str) -> float | None:
    """The step at which ``phase`` first became the nearest strategy on set ``which`` (interpolated as in
    :func:`entry_step`; ``None``: never)."""
    lead = _lead(rec, phase, which)
    hit = np.flatnonzero(lead > 0)
    return None if not len(hit) else _crossing(rec, lead, int(hit[0]))


def delay_of(rec: Mapping[str, Any]) -> float | None:
    """The G2 -> M2 delay on the training chains: the entry into M2 for good (:func:`entry_step`) minus
    the first evaluation at which G2 was the nearest strategy; ``None`` without both, in that order."""
    t2m, t12 = entry_step(rec, "M2", "id"), first_step(rec, "G2", "id")
    return None if t2m is None or t12 is None or t2m <= t12 else t2m - t12


def decide_growth(small: Mapping[str, Any], large: Mapping[str, Any]) -> tuple[Outcome, str]:
    """K2* of the larger architecture above the smaller's beyond the grid's resolution.

    ``small``, ``large``: :func:`~sim.papers.markov.claims.gibson.k1_bracket` of the fraction of seeds that
    entered M2 along the K grid (``lower`` the largest K before the fraction falls below 1/2, ``upper``
    the first K where it has). HELD when ``upper(small) <= lower(large)`` (a K the smaller one fails
    at and the larger one passes); VIOLATED when ``upper(large) <= lower(small)`` (the reverse);
    UNDECIDED otherwise (the brackets overlap, or one runs off the grid)."""
    text = f"[{small['lower']}, {small['upper']}] -> [{large['lower']}, {large['upper']}]"
    if small["upper"] is not None and large["lower"] is not None and small["upper"] <= large["lower"]:
        return Outcome.HELD, text
    if large["upper"] is not None and small["lower"] is not None and large["upper"] <= small["lower"]:
        return Outcome.VIOLATED, text
    return Outcome.UNDECIDED, text


#: The delay law ``A (K2* - K)^-gamma`` has three parameters: with delays at only three distinct K its
#: mean curve passes through them exactly whatever the law, so the fit identifies nothing. One more K
#: than parameters is the least that can test it.
MIN_DELAY_KS = 4


def fit_delays(points: Sequence[tuple[float, int, float]], rng: np.random.Generator, n_boot: int,
               k_max: float | None = None) -> dict[str, Any]:
    """``Delta tau = A (K2* - K)^-gamma`` (:func:`~sim.papers.markov.claims.gibson.fit_divergence`) on
    ``points`` ``[(K, seed, delay)]``, with the standard error of gamma and K2*'s 16-84% range from a
    bootstrap over the runs (resamples with fewer than ``MIN_DELAY_KS`` distinct K are skipped;
    ``gamma_se`` is infinite with fewer than 2 usable resamples). ``at_bound`` (from the fit): K2* sits
    in the top step of the search's range (``k_max``, default 100 max K). ``identified``: the data
    identify a finite K2*, the fit short of its bound and so are more than 84% of the resamples (else
    K2*'s 16-84% range reaches the bound, and a point fit short of it says nothing)."""
    K = [k for k, _, _ in points]
    d = [t for _, _, t in points]
    fit = fit_divergence(K, d, k_max=k_max)
    boots = []
    for _ in range(int(n_boot)):
        idx = rng.integers(0, len(points), len(points))
        if len({K[i] for i in idx}) >= MIN_DELAY_KS:
            boots.append(fit_divergence([K[i] for i in idx], [d[i] for i in idx], k_max=k_max))
    g_se = float(np.std([b["gamma"] for b in boots], ddof=1)) if len(boots) > 1 else math.inf
    lo, hi = (np.percentile([b["K2"] for b in boots], [16, 84]) if boots else (math.nan, math.nan))
    bound_share = float(np.mean([b["at_bound"] for b in boots])) if boots else 1.0
    return {**fit, "gamma_se": g_se, "K2_lo": float(lo), "K2_hi": float(hi), "n_boot": len(boots),
            "bound_share": bound_share, "identified": not fit["at_bound"] and bound_share < 0.16}


def judge_exponent(gamma: float, se: float, want: float, rivals: Sequence[float], z: float) -> tuple[Outcome, str]:
    """``gamma ≈ want`` read as: ``want`` inside ``gamma ± z se`` and every rival outside it (HELD);
    VIOLATED when ``want`` lies outside; UNDECIDED when a rival lies inside too (the data cannot tell
    them apart)."""
    text = f"gamma = {gamma:.2f} ± {se:.2f} (interval ± {z:g} se); claim {want:g}, rivals {', '.join(f'{r:g}' for r in rivals)}"
    if not math.isfinite(se):
        return Outcome.UNDECIDED, text + "; no error estimate"
    if abs(gamma - want) > z * se:
        return Outcome.VIOLATED, text
    inside = [r for r in rivals if abs(gamma - r) <= z * se]
    if inside:
        return Outcome.UNDECIDED, text + f"; {', '.join(f'{r:g}' for r in inside)} also inside"
    return Outcome.HELD, text


def profile_sse(K: Sequence[float], log_delay: Sequence[float], gamma: float, k_max: float | None = None) -> float:
    """The least sum of squares of ``log_delay - logA + gamma log(K2* - K)`` over ``logA`` and ``K2*``
    in ``(max K, k_max]`` (default ``100 max K``) at a fixed exponent
    (:func:`~sim.papers.markov.claims.gibson.search_k2`, finer than the
    free fit's: 2,000 candidates from ``max K (1 + 1e-4)``)."""
    K, ly = np.asarray(K, float), np.asarray(log_delay, float)

    def sse(K2):
        r = ly[None, :] + gamma * np.log(np.asarray(K2, float)[:, None] - K[None, :])
        return ((r - r.mean(1, keepdims=True)) ** 2).sum(1)

    K2, _ = search_k2(sse, K.max(), k_max, n=2000, start=1e-4)
    return float(sse([K2])[0])


def seeds_to_tell(Ks: Sequence[float], K2: float, want: float, rivals: Sequence[float], sd: float,
                  z: float) -> dict[str, Any]:
    """How many seeds per K the delay law needs, on this grid and at this run-to-run scatter, to tell
    the claim's exponent from each rival, both ways: the law of exponent ``want`` diverging at
    ``K2`` must be refuted as a rival's (the primary reading's power), and a rival's law must be
    refuted as ``want``'s (the wrong-exponent controls' power).

    For a true law ``a`` and a fitted one ``b``, ``S`` is :func:`profile_sse` of ``b`` on the exact
    mean curve of ``a`` at the grid's ``Ks`` (one point per K, ``K2`` fixed for ``a``, free for
    ``b``). With ``m`` seeds per K of scatter ``sd`` (in log delay) the likelihood-ratio statistic
    is about ``m S / sd^2``, and ``b`` is refuted at ``z`` when it exceeds ``z^2``: ``m = ceil(z^2 sd^2 / S)``.
    An approximation (the deciding code uses a bootstrap over the runs): it sizes a design, it
    decides nothing."""
    Ks = sorted({float(k) for k in Ks if k < K2})
    out = {}
    for a, b, key in [(want, r, f"{want:g} against {r:g}") for r in rivals] + [(r, want, f"{r:g} against {want:g}")
                                                                               for r in rivals]:
        ly = [-a * math.log(K2 - k) for k in Ks]
        S = profile_sse(Ks, ly, b)
        out[key] = math.inf if S <= 0 else max(1, math.ceil(z * z * sd * sd / S))
    primary = max(v for k, v in out.items() if k.startswith(f"{want:g} against"))
    control = max(v for k, v in out.items() if not k.startswith(f"{want:g} against"))
    return {"pairs": out, "primary": primary, "control": control, "Ks": Ks, "K2": float(K2), "sd": float(sd)}


def censored_runs(grid: Sequence[Mapping[str, Any]], recs: Sequence[Mapping[str, Any]], below: float) -> dict[int, int]:
    """Per K below ``below``: the runs that reached G2 but had not entered M2 by the end of their
    budget. Their delays exceed what the budget left them and are not in the fit, so near K2* the
    fitted delays lean low (toward no divergence)."""
    out: dict[int, int] = {}
    for r, rec in zip(grid, recs):
        if r["K"] < below and first_step(rec, "G2", "id") is not None and entry_step(rec, "M2", "id") is None:
            out[int(r["K"])] = out.get(int(r["K"]), 0) + 1
    return out


def judge_delay_law(fit: Mapping[str, Any], want: float, rivals: Sequence[float], z: float) -> tuple[Outcome, str]:
    """The delay law's reading of a :func:`fit_delays` fit, the same for the runs and the controls:
    :func:`judge_exponent` on gamma, UNDECIDED whenever the delays identify no finite K2* (the fit at
    the search's bound, or its bootstrap there in 16% of resamples or more: then gamma is the slope
    of a delay growing exponentially in K, not an exponent)."""
    out, text = judge_exponent(fit["gamma"], fit["gamma_se"], want, rivals, z)
    if fit["at_bound"]:
        return Outcome.UNDECIDED, (f"the delays identify no finite K2*: the fit runs to the search's bound K2* = "
                                   f"{fit['K2']:.0f} ({text})")
    if not fit["identified"]:
        return Outcome.UNDECIDED, (f"the delays identify no finite K2*: the fit stops at K2* = {fit['K2']:.1f}, but "
                                   f"{fit['bound_share']:.0%} of the bootstrap's resamples run to the search's bound "
                                   f"({text})")
    return out, text


def wrong_gamma_delays(points: Sequence[tuple[float, int, float]], K2: float, gamma: float) -> list[tuple[float, int, float]]:
    """The measured delays with their mean at each K replaced by ``(K2 - K)^-gamma`` through the measured
    mean at the smallest K, each run keeping its own deviation from its K's mean (as a factor): the same
    noise on a law with another exponent."""
    Ks = sorted({k for k, _, _ in points})
    logmean = {k: float(np.mean([math.log(t) for kk, _, t in points if kk == k])) for k in Ks}
    anchor = Ks[0]
    target = {k: logmean[anchor] - gamma * (math.log(K2 - k) - math.log(K2 - anchor)) for k in Ks}
    return [(k, sd, math.exp(target[k] + math.log(t) - logmean[k])) for k, sd, t in points]


def _runs_grid(ctx, s) -> list[dict[str, Any]]:
    """One run per (K, seed index): the seed index's chains and training seed are shared by every
    architecture (paired comparisons: the same chains, the same batches)."""
    return [{"K": int(K), "seed": ctx.seed_for(f"train-{i}"), "chain_seed": ctx.seed_for(f"chains-{i}")}
            for K in s["K_grid"] for i in range(int(s["seeds"]))]


def _check_g6(ctx) -> TierResult:
    s, z = ctx.settings, ctx.z
    arms = [dict(a) for a in s["arms"]]
    grid = _runs_grid(ctx, s)
    Ks = sorted({int(K) for K in s["K_grid"]})
    numbers, readings, figures = [], [], []
    entries, delays, brackets, arm_recs = [], [], [], []
    for a, (arm, recs) in enumerate(zip(arms, _train_arms(ctx, s, arms, grid, strategies=MEMORY, stop="M2"))):
        arm_recs.append(recs)
        t = [entry_step(rec, "M2", "id") for rec in recs]
        entries.append(t)
        delays.append([delay_of(rec) for rec in recs])
        frac = [float(np.mean([tt is not None for r, tt in zip(grid, t) if r["K"] == K])) for K in Ks]
        br = k1_bracket(Ks, frac)
        brackets.append(br)
        for K, f in zip(Ks, frac):
            numbers.append(Number(f"{_arch_text(arm, s)}: K={K}: fraction of seeds in M2 within {s['steps']} steps", f,
                                  n=int(s["seeds"]), kind="trained",
                                  note="entry steps (G2 -> M2 delays): " + ", ".join(
                                      "-" if tt is None else f"{tt:.0f} ({'-' if dd is None else f'{dd:.0f}'})"
                                      for r, tt, dd in zip(grid, t, delays[a]) if r["K"] == K)))
        numbers.append(Number(f"{_arch_text(arm, s)}: K2* bracket on the grid (budget {s['steps']} steps)",
                              br["estimate"] if br["estimate"] is not None else math.nan, kind="trained",
                              note=f"[{br['lower']}, {br['upper']}] (the fraction entering M2 falls through 1/2)"))
    # (a) K2* grows with capacity
    growth_outs = []
    for small, large, what in s["growth_pairs"]:
        out, text = decide_growth(brackets[small], brackets[large])
        growth_outs.append(out)
        readings.append({"name": f"K2* grows with {what} ({_arch_text(arms[small], s)} -> {_arch_text(arms[large], s)})",
                         "verdict": out.value, "detail": f"K2* brackets {text} on K = {Ks}"})
    # (b) the delay law on the designated arm, with the refinement inside its K2* bracket
    d_arm = int(s["delay_arm"])
    pts = [(r["K"], i, t) for i, (r, t) in enumerate(zip(grid, delays[d_arm])) if t is not None and t > 0]
    fine_Ks = refine_ks(brackets[d_arm], int(s.get("refine_points", 0)))
    d_runs, d_recs = list(grid), list(arm_recs[d_arm])  # the delay arm's runs, both stages
    refined = []  # (K, fraction of the refinement's seeds in M2)
    if fine_Ks:
        fine = _refine_runs(ctx, s, fine_Ks)
        fine_recs = _train_arm(ctx, {**s, "steps": s["refine_steps"]}, arms[d_arm], fine, strategies=MEMORY, stop="M2")
        fine_delays = [delay_of(rec) for rec in fine_recs]
        pts += [(r["K"], len(grid) + i, t) for i, (r, t) in enumerate(zip(fine, fine_delays))
                if t is not None and t > 0]
        d_runs += fine
        d_recs += list(fine_recs)
        for K in fine_Ks:
            here = [(rec, t) for r, rec, t in zip(fine, fine_recs, fine_delays) if r["K"] == K]
            refined.append((K, float(np.mean([entry_step(rec, "M2", "id") is not None for rec, _ in here]))))
            numbers.append(Number(f"{_arch_text(arms[d_arm], s)}: refinement K={K}: fraction of seeds in M2 within "
                                  f"{s['refine_steps']} steps", refined[-1][1], n=len(here), kind="trained",
                                  note="G2 -> M2 delays: " + ", ".join("-" if t is None else f"{t:.0f}"
                                                                       for _, t in here)))
    readings.append({"name": "refinement past the last K of the grid's K2* bracket where the runs entered M2",
                     "verdict": "INFO",
                     "detail": (f"K = {fine_Ks} inside [{brackets[d_arm]['lower']}, {brackets[d_arm]['upper']}], "
                                f"{s['refine_seeds']} seeds of their own, up to {s['refine_steps']} steps"
                                if fine_Ks else "none: " + ("no K2* bracket on the grid" if int(s.get("refine_points", 0))
                                                            > 0 else "refine_points = 0"))})
    tried = sorted({int(K) for K in s["K_grid"]} | set(fine_Ks))
    rng = ctx.rng("bootstrap")
    delay_out, delay_text, fit, power, k2_seen = Outcome.UNDECIDED, "", None, None, None
    want, rivals = float(ctx.params["gamma"]), tuple(ctx.params["gamma_rivals"])
    if len({k for k, _, _ in pts}) >= MIN_DELAY_KS:
        fit = fit_delays(pts, rng, s["bootstrap"])
        delay_out, delay_text = judge_delay_law(fit, want, rivals, z)
        numbers.append(Number(f"{_arch_text(arms[d_arm], s)}: gamma in Delta tau_K = A (K2* - K)^-gamma", fit["gamma"],
                              stderr=fit["gamma_se"] if math.isfinite(fit["gamma_se"]) else 0.0, n=len(pts),
                              kind="trained", note=f"bootstrap over the runs ({fit['n_boot']} resamples); claim {want:g}"))
        numbers.append(Number(f"{_arch_text(arms[d_arm], s)}: K2* fitted from the delays", fit["K2"], kind="trained",
                              note=f"bootstrap 16-84%: [{fit['K2_lo']:.1f}, {fit['K2_hi']:.1f}]"))
        k2_seen = control_k2(fit, pts, tried)  # where the runs stop entering M2, as the design resolves it
        power = seeds_to_tell([k for k, _, _ in pts], k2_seen, want, rivals, fit["resid_sd"], z)
        numbers.append(Number(f"{_arch_text(arms[d_arm], s)}: seeds per K this grid needs to tell gamma = {want:g} "
                              f"from {', '.join(f'{r:g}' for r in rivals)} (and the controls' laws from {want:g})",
                              max(power["primary"], power["control"]), kind="trained",
                              note=_power_text(power, int(s["seeds"]))))
        cens = censored_runs(d_runs, d_recs, k2_seen)
        if cens:
            numbers.append(Number(f"{_arch_text(arms[d_arm], s)}: runs with a G2 phase and no M2 by the budget, below "
                                  "the K2* the grid sees", sum(cens.values()), kind="trained",
                                  note="per K: " + ", ".join(f"K={k}: {n}" for k, n in sorted(cens.items())) +
                                  f"; their delays exceed what their budget ({s['steps']} steps, "
                                  f"{s.get('refine_steps', s['steps'])} in the refinement) left them and are not in "
                                  "the fit (the fitted delays near K2* lean low)"))
    else:
        delay_text = (f"entry into M2 at fewer than {MIN_DELAY_KS} values of K for {_arch_text(arms[d_arm], s)} "
                      f"({len(pts)} runs); needs a denser K grid below K2* or longer runs")
    readings.append({"name": f"Delta tau_K ~ (K2* - K)^-gamma, gamma ≈ {want:g} ({_arch_text(arms[d_arm], s)})",
                     "verdict": delay_out.value, "detail": delay_text})
    readings.append({"name": "settings the paper leaves open (chosen here)", "verdict": "INFO",
                     "detail": _settings_text(s)})
    conclusion = _worst(growth_outs + [delay_out])
    controls = _g6_controls(ctx, s, brackets, pts, fit, want, rivals, k2_seen)
    figures.append(_g6_figure(ctx, s, arms, Ks, grid, entries, pts, fit, d_arm, refined))
    assumptions = [_prior_assumption(ctx, s)]
    verdict = tier_verdict(assumptions, conclusion)
    budget = ""
    if conclusion is Outcome.UNDECIDED:
        seeds_needed = (f"seeds={max(power['primary'], power['control'])} per K (the delay law's power on this "
                        f"grid, {_power_text(power, int(s['seeds']))})" if power else f"seeds={2 * int(s['seeds'])}")
        budget = (f"{delay_text if delay_out is Outcome.UNDECIDED else 'the K2* brackets overlap'}; rerun with "
                  f"{seeds_needed}, steps={2 * int(s['steps'])} and a denser K grid near K2*")
    cex = None
    if conclusion is Outcome.VIOLATED:
        cex = {"brackets": [{**_arch_dict(a), **b} for a, b in zip(arms, brackets)],
               "delays": [{"K": k, "run": i, "delay": t} for k, i, t in pts], "fit": fit}
    summary = "; ".join(f"{r['name']}: {r['verdict']}" for r in readings if r["verdict"] != "INFO")
    return TierResult("trained", verdict, conclusion, summary, assumptions=assumptions, numbers=numbers,
                      counterexample=cex, figures=figures, budget=budget, readings=readings,
                      findings=[_full_transformer_finding()], controls=controls)


def _power_text(power: Mapping[str, Any], seeds: int) -> str:
    ks = power["Ks"]
    return (f"now {seeds}; K = {ks[0]:g}-{ks[-1]:g} below K2* = {power['K2']:g}, scatter {power['sd']:.2f} in log delay; "
            + ", ".join(f"{k}: {v}" for k, v in power["pairs"].items())
            + "; a likelihood-ratio approximation that sizes the design and decides nothing")


def _arch_dict(arm) -> dict[str, int]:
    return {"d_phi": int(arm["d_phi"]), "decoder_width": int(arm["decoder_width"])}


def _settings_text(s) -> str:
    return (f"C={s['C']}, alpha={s['alpha']}, N={s['N']}, encoder width {s['encoder_width']}, Adam lr {s['lr']}, "
            f"batch {s['batch']}, up to {s['steps']} steps, evaluation every {s['eval_every']} steps on {s['n_eval']} "
            f"sequences, {s['seeds']} seeds")


def _g6_controls(ctx, s, brackets, pts, fit, want, rivals, K2) -> list[Control]:
    """Wrong laws through the same deciding code: more capacity that moves K2* below the grid
    (:func:`shrunk_bracket`, against the smaller model's own bracket), and the delays with their means
    on a law of exponent 1 or 3 diverging at ``K2`` (:func:`control_k2`, :func:`wrong_gamma_delays`).
    The arms swapped are no such control: their answer is the real comparison's reversed, undecided
    wherever the real one is."""
    out = []
    Ks = sorted({int(K) for K in s["K_grid"]})
    for small, large, what in s["growth_pairs"]:
        o, text = decide_growth(brackets[small], shrunk_bracket(Ks))
        out.append(Control(f"K2* shrinking with {what}: the larger model's K2* below the grid",
                           "capacity that lowers K2* (no run of the larger model enters M2 at any K), against the "
                           "smaller model's own bracket", _VERDICT_OF[o], f"K2* brackets {text}"))
    for g in rivals:
        if fit is None:
            out.append(Control(f"delays on a law with gamma = {g:g}", "the same runs' noise on a wrong divergence",
                               Verdict.INCONCLUSIVE, "no delay law fitted (too few K entered M2)"))
            continue
        fake = wrong_gamma_delays(pts, K2, g)
        f = fit_delays(fake, ctx.rng(f"bootstrap-wrong-{g:g}"), s["bootstrap"])
        o, text = judge_delay_law(f, want, rivals, ctx.z)
        out.append(Control(f"delays on a law with gamma = {g:g}", "the measured delays' noise on a divergence with "
                           f"another exponent at K2* = {K2:g}, through the same fit and judgement", _VERDICT_OF[o], text))
    return out


def shrunk_bracket(Ks: Sequence[int]) -> dict[str, Any]:
    """The K2* bracket of a model that enters M2 at no K of the grid ``Ks`` (its K2* below the grid)."""
    return {"lower": None, "upper": min(Ks), "estimate": None}


def control_k2(fit: Mapping[str, Any], points: Sequence[tuple[float, int, float]], K_tried: Sequence[int]) -> float:
    """Where the wrong-exponent controls put their divergence: the fitted K2* when the delays identify one
    (:func:`fit_delays`' ``identified``).
    Otherwise where the runs stop entering M2 as the design resolves it: one step past the highest K with
    a delay, the step being the spacing of the two highest such K (the grid's resolution there), and no
    further than the next K tried (whose runs gave no delay). So a control's law diverges where the data
    allow a divergence, and the fit can tell its exponent from the claim's whatever the real delays do."""
    if fit.get("identified", not fit.get("at_bound")):
        return float(fit["K2"])
    ks = sorted({float(k) for k, _, _ in points})
    top = ks[-1]
    step = top - ks[-2] if len(ks) > 1 else top
    above = sorted(float(k) for k in K_tried if k > top)
    return min([top + step, *above[:1]])


def _full_transformer_finding() -> Finding:
    return Finding(FindingKind.OUTSIDE, "the bottleneck in G's full 2-layer transformer near K2* ≈ 7000 (width 64, "
                   "third-party notes)", Verdict.NOT_RUN,
                   "the paper profile's: K grid 500-6000, 5 seeds, 20,000 steps per run (35 full-transformer runs: a GPU "
                   "or a Dask cluster)")


def _g6_figure(ctx, s, arms, Ks, grid, entries, pts, fit, d_arm, refined=()) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax3, ax2) = plt.subplots(1, 3, figsize=(14, 4), dpi=110)
    if pts:  # the same delays against K itself: a divergence bends up, a delay exponential in K is a line
        ax3.scatter([k for k, _, _ in pts], [t for _, _, t in pts], s=14, color="#08519c")
        ax3.set_yscale("log")
    ax3.set_xlabel("training chains K")
    ax3.set_ylabel("G2 -> M2 delay (steps)")
    ax3.set_title("G.6: delay against K (log delay: exponential growth is a line)", fontsize=9)
    if fit is not None:
        x = np.array([fit["K2"] - k for k, _, _ in pts])
        ax.scatter(x, [t for _, _, t in pts], s=14, color="#08519c", label="runs (G2 first nearest -> M2 for good)")
        g = np.geomspace(x.min(), x.max(), 50)
        # in logs: a fit at its bound has exp(logA) and g^-gamma far outside float range, their product not
        ax.plot(g, np.exp(fit["logA"] - fit["gamma"] * np.log(g)), color="#08519c", lw=1,
                label=f"fit: gamma = {fit['gamma']:.2f} ± {fit['gamma_se']:.2f}, K2* = {fit['K2']:.1f}")
        ref = np.exp(fit["logA"] + (2.0 - fit["gamma"]) * np.log(np.median(x)) - 2.0 * np.log(g))
        ax.plot(g, ref, color="#d94801", lw=1, ls="--", label="gamma = 2 (through the median)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.legend(fontsize=6)
    ax.set_xlabel("K2* - K (fitted K2*)")
    ax.set_ylabel("G2 -> M2 delay (steps)")
    ax.set_title(f"G.6: delay against K2* - K ({_arch_text(arms[d_arm], s)})", fontsize=9)
    for a, arm in enumerate(arms):
        frac = [np.mean([tt is not None for r, tt in zip(grid, entries[a]) if r["K"] == K]) for K in Ks]
        line, = ax2.plot(Ks, frac, marker="o", label=_arch_text(arm, s))
        if a == d_arm and refined:
            ax2.plot([k for k, _ in refined], [f for _, f in refined], marker="s", ls="none", mfc="none",
                     color=line.get_color(), label=f"{_arch_text(arm, s)}: refinement, within {s['refine_steps']} steps")
    ax2.set_xscale("log", base=2)
    ax2.set_xlabel("training chains K")
    ax2.set_ylabel("fraction of seeds in M2")
    ax2.set_title(f"G.6: K2* per architecture (grid: within {s['steps']} steps)", fontsize=9)
    ax2.legend(fontsize=6)
    fig.tight_layout()
    path = ctx.figure_path("bottleneck")
    fig.savefig(path)
    plt.close(fig)
    return mr.rel(ctx, path)


# ------------------------------------------------------------------------------- G.8 ---
def judge_at(rec: Mapping[str, Any], target: str, which: str, z: float, index: int = -1) -> tuple[Outcome, dict]:
    """Whether a run is placed at ``target`` on set ``which``. Nearest at ``target``: G.1's reading
    (:func:`~sim.papers.markov.placement.judge_end`: within the none-of-the-above radius and ahead of the
    runner-up, beyond the error). Nearest elsewhere: VIOLATED when ``target`` trails the nearest
    strategy by more than ``z`` paired standard errors (whichever of the others the model is at, it is
    not at ``target``), UNDECIDED otherwise."""
    pl = absolute_placement(rec, which, rec["separations"], index=index, z=z)
    if pl["phase"] == target:
        return judge_end(pl, (target,), z), pl
    order = rec["pair_order"]
    se = float(rec["eval"][which]["pair_se"][index][order.index(target)][order.index(pl["phase"])])
    behind = pl["kl"][target] - pl["kl"][pl["phase"]]
    return (Outcome.VIOLATED if compare(behind, 0.0, stderr=se, z=z) is Outcome.HELD else Outcome.UNDECIDED), pl


def decide_generalisation(recs: Sequence[Mapping[str, Any]], z: float, index: int = -1, target: str = "G2"
                          ) -> tuple[Outcome, str, list[dict[str, Any]]]:
    """Every run placed at ``target`` (G2) on held-out chains (the ``ood`` set) at evaluation ``index``
    (:func:`judge_at`): HELD when every run is, VIOLATED when one is not beyond the error (placed nowhere,
    or ``target`` trailing the nearest strategy), UNDECIDED otherwise."""
    rows = []
    for rec in recs:
        out, pl = judge_at(rec, target, "ood", z, index)
        rows.append({**pl, "outcome": out})
    line = ", ".join(("none" if r["close"] is Outcome.VIOLATED else r["phase"]) + f" {r['d']:.3f}/{r['radius']:.3f}"
                     for r in rows) + " (nearest on held-out chains, KL/radius)"
    return _worst([r["outcome"] for r in rows]), line, rows


def _loss_gap(rec) -> tuple[float, float, float]:
    """Held-out cross-entropy of the model minus G2's, its paired standard error, and the fraction of
    G1's excess over G2 that the model has closed."""
    m = np.asarray(rec["final_nll"]["ood"])
    g2 = np.asarray(rec["strategy_nll"]["ood"]["G2"])
    g1 = np.asarray(rec["strategy_nll"]["ood"]["G1"])
    d = m - g2
    return float(d.mean()), float(d.std(ddof=1) / math.sqrt(len(d))), float((g1.mean() - m.mean()) / (g1.mean() - g2.mean()))


def _check_g8(ctx) -> TierResult:
    s, z = ctx.settings, ctx.z
    runs = _g8_runs(ctx, s)
    strategies = FRESH if s["train_K"] == "inf" else MEMORY
    large, small = dict(s["large"]), dict(s["small"])
    recs, small_recs = _train_arms(ctx, s, [large, small], runs, strategies=strategies)
    target = ctx.params["reaches"]
    conclusion, line, rows = decide_generalisation(recs, z, target=target)
    numbers = []
    for r, rec in zip(rows, recs):
        gap, gap_se, closed = _loss_gap(rec)
        sd = rec["spec"]["seed"]
        numbers.append(Number(f"{_arch_text(large, s)}, seed {sd}: KL(G2 || model) on held-out chains", r["d"],
                              stderr=r["d_se"], n=s["n_eval"], seed=sd, kind="trained", tolerance=r["radius"],
                              note=f"none-of-the-above radius {r['radius']:.3f} ± {r['radius_se']:.3f}; runner-up "
                                   f"{r['runner_up']} by {r['margin']:.3f} ± {r['se']:.3f}; {r['outcome'].value}"))
        numbers.append(Number(f"{_arch_text(large, s)}, seed {sd}: held-out loss minus G2's (nats)", gap, stderr=gap_se,
                              n=s["n_eval"], seed=sd, kind="trained",
                              note=f"{closed:.1%} of G1's excess over G2 closed"))
    readings = [{"name": "placed at G2 on held-out chains (never trained on), every seed", "verdict": conclusion.value,
                 "detail": line},
                {"name": "settings the paper leaves open (chosen here)", "verdict": "INFO",
                 "detail": f"trained on K = {s['train_K']} chains; " + _settings_text(s)}]
    controls = []
    o, l2, _ = decide_generalisation(small_recs, z, target=target)
    controls.append(Control(f"the same circuit at small capacity ({_arch_text(small, s)})", "too small a task vector "
                            "and decoder to hold the transition counts", _VERDICT_OF[o], l2))
    o, l3, _ = decide_generalisation(recs, z, index=0, target=target)
    controls.append(Control("the untrained model (each run at step 0)", "random initialisation: no mechanism learned",
                            _VERDICT_OF[o], l3))
    findings = [_strict_loss_finding(recs, s, z)]
    assumptions = [_prior_assumption(ctx, s),
                   Assumption("the large model's task vector can hold the transition counts (D_phi >= C^2)",
                              int(large["d_phi"]) >= s["C"] ** 2, f"D_phi = {large['d_phi']}, C^2 = {s['C'] ** 2}")]
    verdict = tier_verdict(assumptions, conclusion)
    figures = [_g8_figure(ctx, s, recs, small_recs, large, small)]
    budget = "" if conclusion is not Outcome.UNDECIDED else f"rerun with steps={2 * int(s['steps'])}, n_eval={2 * int(s['n_eval'])}"
    cex = None
    if conclusion is Outcome.VIOLATED:
        cex = {"placements": line, "settings": recs[0]["spec"]}
    without = None if all(a.holds for a in assumptions) else f"{conclusion.value} on these inputs"
    return TierResult("trained", verdict, conclusion, line, assumptions=assumptions, numbers=numbers, counterexample=cex,
                      conclusion_without_assumptions=without, figures=figures, budget=budget, readings=readings,
                      findings=findings, controls=controls)


def _strict_loss_finding(recs, s, z) -> Finding:
    """Stricter than the seed's "generalises optimally" read as placement: the held-out loss equal to G2's
    within z paired standard errors."""
    gaps = [_loss_gap(r) for r in recs]
    outs = [compare(g, 0.0, stderr=se, z=z, direction="<=") for g, se, _ in gaps]
    out = Outcome.VIOLATED if Outcome.VIOLATED in outs else Outcome.HELD if all(o is Outcome.HELD for o in outs) \
        else Outcome.UNDECIDED
    return Finding(FindingKind.STRICTER, "the held-out loss equal to G2's (the in-context bigram's) within the error",
                   _VERDICT_OF[out], "; ".join(f"{g:+.4f} ± {se:.4f} nats ({c:.0%} of G1's excess closed)"
                                               for g, se, c in gaps))


def _g8_figure(ctx, s, recs, small_recs, large, small) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.6, 3.8), dpi=110)
    for group, arm, ls in ((recs, large, "-"), (small_recs, small, "--")):
        for i, rec in enumerate(group):
            steps = np.maximum(np.asarray(rec["steps"], float), 1.0)
            for st, col in (("G2", mr.COLORS["G2"]), ("G1", mr.COLORS["G1"])):
                ax.plot(steps, rec["eval"]["ood"][st], color=col, ls=ls, lw=1,
                        label=f"KL({st} || model), {_arch_text(arm, s)}" if i == 0 else None)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel("KL(strategy || model), held-out chains")
    ax.set_title("G.8: the task-recognition head on chains it never saw", fontsize=9)
    ax.legend(fontsize=6)
    fig.tight_layout()
    path = ctx.figure_path("generalisation")
    fig.savefig(path)
    plt.close(fig)
    return mr.rel(ctx, path)


# ------------------------------------------------------------------------- the claims ---
_MINIMAL = dict(C=10, alpha=0.1, N=64, encoder_width=64, lr=3e-3, batch=32, n_eval=128, stop_patience=3)
# the arms: a small circuit, the same with 8 times the task vector, the same with 4 times the decoder;
# K2* of the small one near 32 within 4000 steps (measured here), so the grid runs from 8 to 64, in steps of 4
# below 32: the delay law has three parameters and needs entries into M2 at >= 4 K below K2* (a grid of
# 12, 16, 24 there gave three at master seeds 0 and 1). The grid alone cannot tell gamma's 2 from 1 or 3: its
# top delays stop 4 or 16 K short of where the runs stop entering M2, and a divergence's curvature lives in
# the last few K (seeds_to_tell: 13 and 251 seeds per K at master seeds 0 and 1). So the delay arm adds a
# refinement one K at a time past its bracket's lower end, with seeds of their own and 3 times the budget
_ARMS = ({"d_phi": 2, "decoder_width": 64}, {"d_phi": 16, "decoder_width": 64}, {"d_phi": 2, "decoder_width": 256})
_G6_STANDARD = {"tiers": ("trained",), **_MINIMAL, "seeds": 2, "steps": 4000, "eval_every": 50, "bootstrap": 300,
                "K_grid": (8, 12, 16, 20, 24, 28, 32, 48, 64), "arms": _ARMS,
                "growth_pairs": ((0, 1, "D_phi"), (0, 2, "the decoder's width")), "delay_arm": 0,
                "refine_points": 4, "refine_seeds": 4, "refine_steps": 12000}
_G8_STANDARD = {"tiers": ("trained",), **_MINIMAL, "train_K": "inf", "seeds": 2, "steps": 3000, "eval_every": 250,
                "n_eval": 256, "large": {"d_phi": 128, "decoder_width": 256}, "small": {"d_phi": 4, "decoder_width": 32}}
_NOT_IN_QUICK = ("decided by the standard profile: the minimal model's runs near K2* (and, for G.8, the large task "
                 "vector's) do not fit in quick's minutes")

G_6 = Claim(
    id="G.6",
    title="Representational bottleneck at K2* on G's minimal task-recognition head: K2* grows with D_phi and the "
          "decoder; Delta tau_K ~ (K2* - K)^-2",
    source=Source("G", "§B (K2*: representational bottleneck; minimal model of the task-recognition head)",
                  "Delta tau_K ~ (K2* - K)^-gamma, gamma ≈ 2; K2* limited by MLP2 and D_phi"),
    statement=(
        "Decides: the paper's statements on its own minimal model of the task-recognition head "
        "(sim.papers.markov.task_head; the seed describes it in words only, the form is this project's: encoder MLP1 "
        "of the one-hot pair (x_{t-1}, x_t) into R^D_phi, a causal pooling attention with no query (scores w . u_t) "
        "into the task vector phi_n, decoder MLP2 from phi_n ⊕ e_{x_n} to the next-state logits), trained with Adam "
        "on the K-chain task (C = 10, Dirichlet(0.1) rows, N = 64, loss at every position). On its training chains "
        "the minimal model passes uniform -> M1 -> G2 -> M2 (nearest strategy by KL), as the seed's full transformer "
        "passes G2 -> M2. A run enters M2 at the first evaluation from which M2 stays the nearest strategy to the end; "
        "its delay Delta tau_K is that step minus the first at which G2 was the nearest (runs with no G2 phase give "
        "no delay). (a) K2* grows with D_phi and with the decoder's width: per architecture, K2* is bracketed on the "
        "K grid where the fraction of seeds in M2 within the step budget falls through 1/2; HELD when the smaller "
        "model fails at a K the larger one passes (beyond the grid's resolution), VIOLATED for the reverse. (b) "
        "Delta tau_K = A (K2* - K)^-gamma fitted (K2*, A, gamma by least squares in log delay) on the runs of one "
        "architecture, "
        "gamma's error from a bootstrap over the runs (seeds and K); gamma ≈ 2 read as 2 inside gamma ± z se and "
        "1 and 3 outside it; VIOLATED when 2 lies outside. The delays are those of the grid and of a refinement: "
        "the same architecture one K at a time past the last K of its own K2* bracket where the runs entered M2 "
        "(up to 'refine_points' K), with 'refine_seeds' seeds of their own and a budget of 'refine_steps' (a "
        "divergence's curvature lives in the last K before K2*, which the grid alone does not reach); the report "
        "gives the seeds per K the design needs to tell 2 from 1 and 3 (a likelihood-ratio approximation) and the "
        "runs the budget censored. Negative controls through the same code, each must FAIL: more capacity that "
        "moves K2* below the grid (no run of the larger model entering M2), against the smaller model's bracket, "
        "and the measured delays' noise on laws with gamma = 1 and 3, diverging at the fitted K2* or, where the delays identify none, one step (the "
        "spacing of the two highest K with delays) past the last delay. The full transformer near K2* ≈ 7000 "
        "(third-party notes, width 64) is a finding for the paper profile."),
    assumptions=("rows i.i.d. symmetric Dirichlet",),
    checks={"trained": _check_g6},
    jobs={"trained": _g6_jobs},
    settings={
        "quick": {**_G6_STANDARD, "tiers": ()},
        "standard": _G6_STANDARD,
        "paper": {**_G6_STANDARD, "seeds": 8, "steps": 20000, "eval_every": 25, "bootstrap": 500,
                  "refine_points": 6, "refine_seeds": 8, "refine_steps": 60000,
                  "K_grid": (8, 12, 16, 20, 24, 28, 32, 40, 48, 64, 96, 128)},
    },
    decided_by="standard",
    pending=_NOT_IN_QUICK,
    params={"gamma": 2.0, "gamma_rivals": (1.0, 3.0)},
    primary=PrimaryReading(
        statement=("K2*, the representational bottleneck: for K > K2* the model does not enter M2 even after long "
                   "training; the time of the G2 -> M2 transition diverges as K approaches K2*, Delta tau_K ~ "
                   "(K2* - K)^-gamma with gamma ≈ 2; in the minimal model K2* is limited mainly by the decoder "
                   "(MLP2)'s expressivity and the task vector's dimension D_phi."),
        seed="004", lines="148-152",
        setting=("the minimal model of the task-recognition head (line 119: encoder MLP1 on adjacent pairs, Att2 "
                 "pooling into phi, decoder MLP2; lines 135-137), trained on K chains of C = 10 states (line 106)"),
        review=("A law derived for a minimal model is checked on that model: K2* against D_phi and the decoder's "
                "width, and the delay exponent with its error from seeds and the fit, 2 told from 1 and 3. The "
                "minimal model passes through a G2-nearest phase on its training chains before M2, so the delay is "
                "read as the seed writes it, from G2 to M2. The full transformer near K2* ≈ 7000 is a finding for "
                "the paper profile.")),
)

G_8 = Claim(
    id="G.8",
    title="The task-recognition head generalises with enough capacity: the encoder-pool-decoder reaches G2 on "
          "unseen chains",
    source=Source("G", "§4 (significance: the task-recognition head can generalise optimally)",
                  "task recognition head achieves optimal generalisation when its capacity suffices"),
    statement=(
        "Decides: the seed's remark on G's own circuit, the minimal encoder-pool-decoder model of the task-"
        "recognition head (sim.papers.markov.task_head; its form is this project's reading of the seed's words, "
        "see G.6), with a task vector large enough to hold the transition counts (D_phi >= C^2, an assumption) and "
        "a wide decoder. Trained with Adam on a fresh chain per sequence (K = inf: no chain is seen twice; C = 10, "
        "Dirichlet(0.1) rows, N = 64), each seed's model is placed among uniform, G1 and G2 on held-out chains "
        "(drawn from their own stream, never trained on) by G.1's absolute placement: nearest G2 with margin z and "
        "within half G2's distance to any other strategy. HELD when every seed is placed at G2, VIOLATED when one "
        "is placed nowhere or G2 trails its nearest strategy by more than z paired standard errors (whichever "
        "other strategy that is). Negative controls through the same check, each must "
        "FAIL: the same circuit at small capacity (D_phi and decoder small) trained the same way, and the untrained "
        "model. Reported: the held-out loss minus G2's with its paired error, and the fraction of G1's excess "
        "closed; the stricter reading (the loss equal to G2's within the error) is a finding."),
    assumptions=("rows i.i.d. symmetric Dirichlet", "the large model's task vector can hold the transition counts "
                 "(D_phi >= C^2)"),
    checks={"trained": _check_g8},
    jobs={"trained": _g8_jobs},
    settings={
        "quick": {**_G8_STANDARD, "tiers": ()},
        "standard": _G8_STANDARD,
        "paper": {"tiers": ("trained",), **_MINIMAL, "train_K": "inf", "seeds": 5, "steps": 20000,
                  "eval_every": 500, "n_eval": 512, "large": {"d_phi": 128, "decoder_width": 512},
                  "small": {"d_phi": 4, "decoder_width": 32}},
    },
    decided_by="standard",
    pending=_NOT_IN_QUICK,
    params={"reaches": "G2"},  # the strategy the large circuit reaches on unseen chains (a wrong variant: G1)
    primary=PrimaryReading(
        statement=("More importantly, the authors show that the task-recognition head can also achieve optimal "
                   "generalisation when its capacity is sufficient, breaking the view that task vectors serve "
                   "memorisation only."),
        seed="004", lines="170",
        setting=("the encoder-pool-decoder circuit of the task-recognition head (lines 133-137; the minimal model "
                 "of line 119), on chains of C = 10 states (line 106)"),
        review=("Decided on the circuit itself at large capacity, on chains it never saw, against G2 (the optimal "
                "in-context predictor, line 112) by the home's placement reading, with the small-capacity circuit "
                "as the control that must not generalise.")),
)

CLAIMS = [G_6, G_8]
