"""W's architectural claims: as many first-layer heads as examples are the key (W.E3), and absolute
positional encodings learn the same pattern as the RPE (W.E4).

Both train beside W.E1's mechanism runs: the same task and recipe, and the same ``pi``, seeds, data
and evaluation prompts (:func:`~sim.papers.wei.training.seed_jobs` with W.E1's seeds), so every
comparison is paired by seed. A run evaluates them after W.E1, in its process (``Claim.reuses``),
where W.E1's runs are kept (:func:`~sim.papers.wei.training.run_jobs` with ``share``); run alone, they
train those runs themselves.
"""
from __future__ import annotations

import math
import time

import numpy as np

from sim.verdict import Control, Finding, FindingKind, Number, Outcome, TierResult, Verdict, compare, tier_verdict
from sim.claims.base import Claim, Context, PrimaryReading, Source
from sim.claims.inputs import record_matrix
from sim.claims.jobs import planned_jobs
from sim.papers.wei.claims.trained import (COPIER_MAJORITY, W_E1, _closed_text, _decided_line, _e1_controls,
                                           _every_run_forms_copiers, _measure, decide_w_e1)
from sim.papers.wei.training import (OUTCOME_VERDICT, WRun, WTask, closed_fraction, combine_outcomes, job_args,
                                     paired_ratio, run_jobs, seed_jobs, seed_number, strictly_above, task_assumptions,
                                     threads_for)

__all__ = ["bma_examples", "heads_measurement", "same_example_heads", "decide_w_e3", "E3_CRITERIA", "E3_CONTROLS",
           "LOSS_READS", "W_E3", "W_E4", "CLAIMS"]

#: Whose per-prompt losses W.E3 reads as the K-head model's: its own (the claim), or the K = L model's (the
#: wrong variant of the acceptance test: a K-head model that would copy every example through fewer heads).
LOSS_READS = ("the K-head model", "the K = L model")

#: W.E3's criteria, for each K < L of the grid, in the order the report lists them.
E3_CRITERIA = ("K copier heads on K examples", "loss above the K = L model's", "at or above BMA on K")

#: Negative controls of W.E3: (what the model is, why it is the wrong mechanism).
E3_CONTROLS = (
    ("the K = L model read as if it had K heads (its losses and heads in place of each K-head model's)",
     "it copies all L examples: nothing is lost, so it is no K-head model and its loss is below BMA on K"),
    ("each K-head model with every head set to its first head's layer-1 scores (all heads copy one example)",
     "K heads that copy the same example read one example, not K"),
)

#: W.E1's settings of its mechanism runs, which W.E3 and W.E4 train beside (the same jobs, hence reused).
_E1_KEYS = ("d", "L", "H", "n_eval", "steps1", "batch1", "steps2", "batch2")


def _e1_settings(profile: str) -> dict:
    return {k: W_E1.settings[profile][k] for k in _E1_KEYS}


def _e1_jobs(ctx: Context, n: int) -> list[dict]:
    """W.E1's first ``n`` mechanism jobs at this master seed (its seeds, at the settings ``ctx`` gives)."""
    return seed_jobs(ctx, "mechanism", ctx.settings, "", n, seed_claim=W_E1.id)


def _e1_label(ctx: Context) -> str:
    return f"{ctx.claim.id}: W.E1's mechanism seed"


def _e1_runs(ctx: Context, n: int) -> tuple[list[dict], list[WRun]]:
    """:func:`_e1_jobs` and their runs: taken from this process where W.E1 trained them (or from W.E1's
    records in the run folder), else trained here."""
    jobs = _e1_jobs(ctx, n)
    return jobs, run_jobs(ctx, jobs, _e1_label(ctx), share=True)


def _planned(*args: dict) -> list:
    """The cost plan's jobs of several :func:`~sim.papers.wei.training.job_args`, each job once."""
    out, seen = [], set()
    for a in args:
        for job in planned_jobs(**a):
            if job.id is None or job.id not in seen:
                seen.add(job.id)
                out.append(job)
    return out


def _eval_tokens(ctx: Context, job: dict):
    """The evaluation prompts of ``job`` (those W.E1 evaluates its run on) and their trees, ``(tokens (B, L+1,
    H), parents (B, H))``, drawn once per claim evaluation."""
    from sim.train import make_generator

    def draw():
        task = WTask(job["pi"], job["L"], job["H"], device=ctx.device)
        return task.draw(make_generator(job["eval_seed"], ctx.device), job["n_eval"])

    return ctx.memo((ctx.claim.id, "eval prompts", job["eval_seed"], job["n_eval"], job["L"], job["H"],
                     np.asarray(job["pi"]).tobytes(), ctx.device), draw)


def _closed_number(name: str, pairs, seeds, threshold: float) -> Number | None:
    """The mean over seeds of fractions closed ``pairs`` (``(value, se)`` per seed, from
    :func:`~sim.papers.wei.training.closed_fraction`) against ``threshold``; None when a seed's wrong
    mechanism is not farther than W's (the fraction is undefined there)."""
    if any(math.isnan(c) for c, _ in pairs):
        return None
    return seed_number(name, [c for c, _ in pairs], seeds, mc_se=[se for _, se in pairs], tolerance=threshold)


def _closed_outcome(num: Number | None, z: float) -> Outcome:
    """``num >= its threshold`` beyond the Student-t margin; undecided when the fraction is undefined."""
    if num is None:
        return Outcome.UNDECIDED
    return compare(num.value, num.tolerance, stderr=num.stderr, z=z, df=num.df)


# ============================================================================= W.E3 ==
def bma_examples(examples, K: int, L: int) -> list[int]:
    """The ``K`` examples BMA on ``K`` reads beside a model whose heads copy ``examples`` (head order): the
    distinct copied examples, the first ``K`` of them, completed by the lowest-numbered others when the
    heads copy fewer than ``K`` distinct examples. Examples are exchangeable, so BMA's expected loss is
    the same for any ``K`` of them; reading the copied ones pairs it prompt by prompt with the model."""
    chosen = list(dict.fromkeys(int(e) for e in examples))[:K]
    chosen += [l for l in range(L) if l not in chosen][:K - len(chosen)]
    return sorted(chosen)


def heads_measurement(model, K: int, tokens, pi, full: dict) -> dict:
    """What W.E3 reads of ``model`` standing for the ``K``-head model on ``tokens``: its per-prompt loss, its
    heads (each head's example and the worst copier score), the ``K`` examples BMA on ``K`` reads
    (:func:`bma_examples`) and that BMA's per-prompt loss; ``full`` holds the K = L model's
    per-prompt losses (``"loss_full"``) and those of full BMA and the structure-blind predictor."""
    from sim.papers.wei.probes import bma_loss_on, copier_report, prompt_losses

    rep = copier_report(model)
    S = bma_examples(rep.example, K, full["L"])
    return {"K": K, "loss": prompt_losses(model, tokens, pi)["model"], "bma_K": bma_loss_on(tokens, pi, S),
            "examples": [int(e) for e in rep.example], "copier": rep.min_score, "S": S,
            "scores": [round(float(v), 4) for v in rep.score], **full}


def same_example_heads(model):
    """A copy of ``model`` whose every head has the first head's layer-1 scores: all heads copy one example
    (W.E3's second control)."""
    import copy

    import torch

    twin = copy.deepcopy(model)
    with torch.no_grad():
        for name in ("w_H", "w_L", "w_pos", "w_ex"):
            if hasattr(twin, name):
                p = getattr(twin, name)
                p.copy_(p[:1].expand_as(p))
    return twin


def decide_w_e3(per_K: dict[int, list[dict]], seeds, z: float, loss_read: str = LOSS_READS[0]):
    """W.E3's deciding check on the measurements ``per_K[K][seed]`` (:func:`heads_measurement`) of the
    K-head models of the grid, paired by seed with the K = L model on the same prompts.

    For each ``K``, with ``D = BMA_K - BMA_L`` per prompt (the evidence BMA loses with the ``L - K``
    examples the heads do not copy) as the unit, means over seeds beyond the seeds' (or the Monte Carlo)
    error at the Student-t margin of ``z``:

    - "K copier heads on K examples": the model's heads are ``K`` copiers (worst copier score > 1/2 on
      the mean over seeds, W.E1's copier criterion) of ``K`` distinct examples on every seed;
    - "loss above the K = L model's": ``(loss_K - loss_L) / D > 0``, strictly (a tie within round-off,
      e.g. the K = L model standing in, is VIOLATED);
    - "at or above BMA on K": ``(loss_K - BMA_K) / D >= 0``: VIOLATED only when it is below 0 beyond the
      margin ("at best BMA on K": reaching it within its error is at it).

    ``loss_read`` (:data:`LOSS_READS`): whose losses stand for the K-head model's (the second is the
    acceptance's wrong variant). Returns ``(outcomes, numbers, details)``, each keyed ``(K, criterion)``.
    """
    if loss_read not in LOSS_READS:
        raise ValueError(f"loss_read must be one of {LOSS_READS}, got {loss_read!r}")
    outs, nums, details = {}, {}, {}
    for K, ms in sorted(per_K.items()):
        loss = [m["loss"] if loss_read == LOSS_READS[0] else m["loss_full"] for m in ms]
        unit = [m["bma_K"] - m["bma_full"] for m in ms]
        copier = seed_number(f"K={K}: copier score (worst head and query position)", [m["copier"] for m in ms], seeds,
                             tolerance=COPIER_MAJORITY)
        n_ex = [len(set(m["examples"])) if len(m["examples"]) == K else -len(m["examples"]) for m in ms]
        distinct = all(c == K for c in n_ex)
        o_copier = compare(copier.value, COPIER_MAJORITY, stderr=copier.stderr, z=z, df=copier.df)
        outs[K, E3_CRITERIA[0]] = combine_outcomes([o_copier, Outcome.HELD if distinct else Outcome.VIOLATED])
        nums[K, E3_CRITERIA[0]] = copier
        empty = [sd for sd, u in zip(seeds, unit) if not np.mean(u) > 0]
        if empty:  # no measurable evidence in the uncopied examples on these prompts: nothing to lose, no unit
            for c in E3_CRITERIA[1:]:
                outs[K, c] = Outcome.UNDECIDED
                details[K, c] = (f"K={K}: BMA on K is not above BMA on L on the prompts of seeds {empty}: the "
                                 "uncopied examples carry no measurable evidence (more prompts, n_eval)")
        else:
            above = [paired_ratio(a - m["loss_full"], u) for a, m, u in zip(loss, ms, unit)]
            at = [paired_ratio(a - m["bma_K"], u) for a, m, u in zip(loss, ms, unit)]
            n_above = seed_number(f"K={K}: (loss - loss of the K = L model) / (BMA on K - BMA on L)",
                                  [r for r, _ in above], seeds, mc_se=[se for _, se in above], tolerance=0.0)
            n_at = seed_number(f"K={K}: (loss - BMA on K) / (BMA on K - BMA on L)", [r for r, _ in at], seeds,
                               mc_se=[se for _, se in at], tolerance=0.0)
            outs[K, E3_CRITERIA[1]] = strictly_above(n_above, 0.0, z)
            below = compare(n_at.value, 0.0, stderr=n_at.stderr, z=z, df=n_at.df) is Outcome.VIOLATED
            outs[K, E3_CRITERIA[2]] = Outcome.VIOLATED if below else Outcome.HELD
            details[K, E3_CRITERIA[1]] = f"K={K}: {n_above.value:.4f} ± {n_above.stderr:.2g} vs > 0 (strict)"
            details[K, E3_CRITERIA[2]] = (f"K={K}: {n_at.value:.4f} ± {n_at.stderr:.2g} vs >= 0 (below only beyond "
                                          "the margin refutes it)")
            nums[K, E3_CRITERIA[1]], nums[K, E3_CRITERIA[2]] = n_above, n_at
        heads = "; ".join(f"{len(m['examples'])} heads on examples {m['examples']}" for m in ms[:3])
        details[K, E3_CRITERIA[0]] = (f"K={K}: copier {copier.value:.3f} ± {copier.stderr:.2g} vs > {COPIER_MAJORITY}; "
                                      f"distinct examples per seed {n_ex} (need {K}; -n: n heads); e.g. {heads}")
    return outs, nums, details


def _w_e3_k_jobs(ctx: Context) -> tuple[tuple[int, ...], list[dict]]:
    """W.E3's grid of K and its K-head jobs: W.E1's job of each seed with K heads, all else the same (pi,
    seeds, data, prompts), K outer."""
    s = ctx.settings
    L = s["L"]
    grid = tuple(sorted({int(K) for K in s["heads"]}))
    if not grid or grid[0] < 1 or grid[-1] >= L:
        raise ValueError(f"W.E3's heads must be K in 1..L-1 = 1..{L - 1}, got {s['heads']}")
    return grid, [{**job, "K": K} for K in grid for job in _e1_jobs(ctx, s["seeds"])]


def _k_label(ctx: Context) -> str:
    return f"{ctx.claim.id} K-head models"


def _w_e3_jobs(ctx: Context) -> list:
    """W.E3's models as the cost plan sees them: W.E1's mechanism runs (reused where W.E1 trains them) and
    the K-head models, one batched group per K."""
    _, k_jobs = _w_e3_k_jobs(ctx)
    return _planned(job_args(_e1_jobs(ctx, ctx.settings["seeds"]), _e1_label(ctx)),
                    job_args(k_jobs, _k_label(ctx), batched=True))


def _w_e3_trained(ctx: Context) -> TierResult:
    with threads_for(ctx):
        return _w_e3(ctx)


def _w_e3(ctx: Context) -> TierResult:
    from sim.papers.wei.probes import bma_loss_on, prompt_losses

    s, p = ctx.settings, ctx.params
    t0, c0 = time.perf_counter(), time.process_time()
    L, n = s["L"], s["seeds"]
    grid, k_jobs = _w_e3_k_jobs(ctx)
    jobs, full = _e1_runs(ctx, n)
    # One K's models are trained as one (their steps cost little more than one's); kept for a variant's rerun.
    k_runs = run_jobs(ctx, k_jobs, _k_label(ctx), share=True, batched=True)
    runs = {K: k_runs[g * n:(g + 1) * n] for g, K in enumerate(grid)}
    seeds = [r.seeds["data"] for r in full]
    pis = [r.task.pi for r in full]

    def full_losses(i):  # the K = L model, full BMA and the structure-blind predictor on seed i's prompts
        job = jobs[i]

        def make():
            tokens = _eval_tokens(ctx, job)[0]
            pl = prompt_losses(full[i].model, tokens, job["pi"])
            return {"L": L, "loss_full": pl["model"], "bma_full": pl["bma"], "blind": pl["blind"],
                    "bma_first": [float(bma_loss_on(tokens, job["pi"], range(k)).mean()) for k in range(1, L + 1)]}

        return ctx.memo((ctx.claim.id, "K = L", i, job["init_seed"], job["data_seed"]), make)

    def measure(i, K, model, tag):  # memoised: the looks of the sequential decision share their seeds
        job = jobs[i]
        return ctx.memo((ctx.claim.id, tag, i, K, job["init_seed"], job["data_seed"]),
                        lambda: heads_measurement(model(), K, _eval_tokens(ctx, job)[0], job["pi"], full_losses(i)))

    per_K = {K: [measure(i, K, lambda i=i, K=K: runs[K][i].model, "K-head") for i in range(n)] for K in grid}
    outs, nums, details = decide_w_e3(per_K, seeds, ctx.z, p["loss_read"])
    conclusion = combine_outcomes(list(outs.values()))
    # Controls through the same check: the K = L model in every K-head model's place, and K heads on one example.
    controls = []
    stand_in = {K: [measure(i, K, lambda i=i: full[i].model, "K = L as K") for i in range(n)] for K in grid}
    same = {K: [measure(i, K, lambda i=i, K=K: same_example_heads(runs[K][i].model), "same example")
                for i in range(n)] for K in grid}
    for (name, why), per in zip(E3_CONTROLS, (stand_in, same)):
        c_outs, c_nums, c_details = decide_w_e3(per, seeds, ctx.z, p["loss_read"])
        controls.append(Control(name, why, tier_verdict([], combine_outcomes(list(c_outs.values()))),
                                _decided_line({f"{K} {c}": o for (K, c), o in c_outs.items()},
                                              {f"{K} {c}": d for (K, c), d in c_details.items()}),
                                numbers=tuple(c_nums.values())))

    def mean_number(name, key, ms, note=""):
        return seed_number(name, [float(np.mean(m[key])) for m in ms], seeds, note=note,
                           mc_se=[float(np.std(m[key], ddof=1) / math.sqrt(len(m[key]))) for m in ms])

    numbers, readings, findings = [], [], []
    any_m = per_K[grid[0]]
    for K in grid:
        ms = per_K[K]
        numbers += [nums[K, c] for c in E3_CRITERIA if (K, c) in nums]
        numbers += [mean_number(f"K={K}: eval loss of the K-head model (nats)", "loss", ms),
                    mean_number(f"K={K}: BMA on the K examples the heads copy (nats)", "bma_K", ms),
                    Number(f"K={K}: examples the heads copy (per seed, head order)", float(K), n=len(ms),
                           kind="trained", note="; ".join(f"seed {sd}: {m['examples']} (scores {m['scores']})"
                                                          for sd, m in zip(seeds, ms)))]
        for c in E3_CRITERIA:
            readings.append({"name": f"criterion: {c}, K={K}", "verdict": OUTCOME_VERDICT[outs[K, c]],
                             "detail": details[K, c]})
        # The finding: does the K-head model reach BMA on K (the best it can do) or stay short of it?
        reach = _closed_number(f"K={K}: fraction of the structure-blind-to-BMA-on-K loss gap closed",
                               [closed_fraction(m["loss"] - m["bma_K"], m["blind"] - m["bma_K"]) for m in ms], seeds,
                               p["gap_threshold"])
        o = _closed_outcome(reach, ctx.z)
        excess = float(np.mean([np.mean(m["loss"] - m["bma_K"]) for m in ms]))
        findings.append(Finding(
            FindingKind.STRICTER, f"the K={K}-head model reaches BMA on K examples (the best it can do), closing >= "
            f"{p['gap_threshold']:g} of the structure-blind predictor's gap to it (W.E1's reading of '≈'), or stays short",
            Verdict(OUTCOME_VERDICT[o]),
            (f"K={K}: closes {reach.value:.3f} ± {reach.stderr:.2g}; " if reach else
             f"K={K}: the structure-blind predictor is not above BMA on K on some seed's prompts; ")
            + f"excess over BMA on K {excess:.5f} nats "
            + ("(reaches it)" if o is Outcome.HELD else "(stays short)" if o is Outcome.VIOLATED else "(undecided)"),
            numbers=(reach,) if reach else ()))
    numbers += [mean_number(f"K=L={L}: eval loss of W.E1's model (nats)", "loss_full", any_m),
                mean_number(f"BMA on all L={L} examples (nats)", "bma_full", any_m),
                mean_number("structure-blind predictor (nats)", "blind", any_m),
                Number("training seconds (K-head models)", round(sum(r.seconds for r in k_runs), 1), kind="trained",
                       note=f"device {ctx.device}; process CPU seconds {sum(r.cpu_seconds for r in k_runs):.1f} "
                            f"(W.E1's K = L runs: {sum(r.cpu_seconds for r in full):.1f}, read from W.E1 when it ran "
                            f"in this process); recipe: {full[0].recipe.describe()}")]
    assumptions = task_assumptions(pis, full[0].task.kind)
    cex = None
    if conclusion is Outcome.VIOLATED:
        cex = {"failed criteria": [f"K={K}: {c}" for (K, c), o in outs.items() if o is Outcome.VIOLATED],
               "pis": [record_matrix(pi) for pi in pis], "d": s["d"], "L": L, "H": s["H"], "K grid": list(grid),
               "seeds (data)": seeds, "recipe": full[0].recipe.describe(), "loss read": p["loss_read"],
               "per seed [K]": {K: [{"loss": float(m["loss"].mean()), "loss K = L": float(m["loss_full"].mean()),
                                     "BMA on K": float(m["bma_K"].mean()), "BMA on K examples": m["S"],
                                     "BMA on L": float(m["bma_full"].mean()), "heads' examples": m["examples"],
                                     "copier": m["copier"]} for m in per_K[K]] for K in grid}}
    def per_K_text(K):
        if (K, E3_CRITERIA[1]) not in nums:
            return f"K={K}: {details[K, E3_CRITERIA[1]]}"
        return (f"K={K}: loss above K=L by {nums[K, E3_CRITERIA[1]].value:.3f} and above BMA on K by "
                f"{nums[K, E3_CRITERIA[2]].value:.3f} of what BMA loses with the uncopied examples, copier "
                f"{nums[K, E3_CRITERIA[0]].value:.3f}")

    summary = (f"d={s['d']}, L={L}, H={s['H']}, K in {list(grid)}, {n} seeds: " + "; ".join(map(per_K_text, grid))
               + f"; {conclusion.value}")
    res = TierResult("trained", tier_verdict(assumptions, conclusion), conclusion, summary, assumptions=assumptions,
                     numbers=numbers, counterexample=cex, readings=readings, findings=findings, controls=controls,
                     budget="more seeds (the standard profile)" if conclusion is Outcome.UNDECIDED else "")
    if not all(a.holds for a in assumptions):
        res.conclusion_without_assumptions = f"{conclusion.value} on inputs that break an assumption"
    res.figures += _w_e3_figures(ctx, per_K, full, runs, grid, seeds)
    ctx.progress(f"W.E3 done in {time.perf_counter() - t0:.0f}s ({time.process_time() - c0:.0f} CPU s here)")
    return res


def _w_e3_figures(ctx: Context, per_K, full, runs, grid, seeds) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sim.papers.wei.probes import copier_report

    L, n = full[0].task.L, len(full)
    any_m = per_K[grid[0]]

    def mean_se(values):
        v = np.asarray(values, dtype=float)
        return v.mean(axis=0), (v.std(axis=0, ddof=1) / math.sqrt(len(v)) if len(v) > 1 else np.zeros(v.shape[1:]))

    # Paired by seed: each seed's loss above its own BMA on all L examples (the seeds' pi differ, and with them
    # every absolute loss; the differences are what the claim is about).
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    ax = axes[0]
    base = [m["bma_full"].mean() for m in any_m]
    bm, bse = mean_se([np.asarray(m["bma_first"]) - b for m, b in zip(any_m, base)])
    Ks = np.arange(1, L + 1)
    ax.errorbar(Ks, bm, yerr=bse, fmt="s--", color="k", ms=3, capsize=2, label="BMA on K examples (± 1 s.e. over seeds)")
    xs = list(grid) + [L]
    ym = [mean_se([[m["loss"].mean() - b] for m, b in zip(per_K[K], base)]) for K in grid]
    ym.append(mean_se([[m["loss_full"].mean() - b] for m, b in zip(any_m, base)]))
    ax.errorbar(xs, [m[0] for m, _ in ym], yerr=[e[0] for _, e in ym], fmt="o", color="C0", ms=6, capsize=3,
                label="trained model with K heads (± 1 s.e.)")
    ax.axhline(np.mean([m["blind"].mean() - b for m, b in zip(any_m, base)]), color="gray", ls=":",
               label="structure-blind")
    ax.set(xlabel=f"first-layer heads K (L = {L} examples)", ylabel="eval loss - BMA on all L (nats, mean over seeds)",
           title="loss against K, beside BMA on K examples")
    ax.legend(fontsize=7)
    ax = axes[1]
    for K, label in [(K, "K-head model") for K in grid] + [(L, "W.E1's K = L model")]:
        ex = [float(np.mean(m["loss"] - m["bma_K"])) for m in per_K[K]] if K != L else \
            [float(np.mean(m["loss_full"] - m["bma_full"])) for m in any_m]
        ax.errorbar([K], [np.mean(ex)], yerr=[np.std(ex, ddof=1) / math.sqrt(n) if n > 1 else 0], fmt="o" if K != L
                    else "D", ms=6, capsize=3, color="C0" if K != L else "C1", label=label if K in (grid[0], L) else None)
    ax.axhline(0, color="k", lw=0.6)
    ax.set(xlabel="K", ylabel="loss - BMA on the K copied examples (nats)", title="excess over BMA on K (± 1 s.e.)")
    ax.legend(fontsize=7)
    fig.suptitle(f"W.E3: K heads against BMA on K examples (d={full[0].task.d}, L={L}, H={full[0].task.H}, {n} seeds)")
    out = [ctx.save_figure(fig, "loss-vs-K")]

    fig, axes = plt.subplots(1, len(grid) + 1, figsize=(3.4 * (len(grid) + 1), 3.8), squeeze=False,
                             layout="constrained")
    for ax, (K, model) in zip(axes[0], [(K, runs[K][0].model) for K in grid] + [(L, full[0].model)]):
        im = ax.imshow(copier_report(model).mass.mean(axis=2), vmin=0, vmax=1, cmap="viridis", aspect="auto")
        ax.set(xlabel="context example l", ylabel="head k", title=f"K={K}: mass on x^l_h (mean over h)",
               xticks=range(L), yticks=range(K))
        ax.tick_params(labelsize=7)
    fig.colorbar(im, ax=axes[0].tolist(), fraction=0.03)
    fig.suptitle(f"W.E3: which examples the heads copy (seed {seeds[0]})")
    out.append(ctx.save_figure(fig, "copied-examples", tight=False))
    return out


# ============================================================================= W.E4 ==
def _attention_readout(model, rpe, tokens, parents, pi, L: int) -> dict:
    """Per-prompt readouts of the layer-2 attention of ``model`` beside the RPE model ``rpe`` on the same
    prompts: parent-selection accuracy (argmax on ``pa(h)``, ``h >= 2``) of both, of the BMA posterior and of
    structure-blind attention; the mean TV between the two models' attention, and between structure-blind
    attention and the RPE model's; and both models' attention on the first prompt (for the figure)."""
    import torch

    from sim.papers.wei.probes import blind_attention, bma_posterior_torch, layer2_attention, parent_accuracy

    a, b = layer2_attention(model, tokens), layer2_attention(rpe, tokens)  # (B, H, H) each
    with np.errstate(divide="ignore"):
        log_pi = torch.as_tensor(np.log(np.asarray(pi, dtype=np.float64)), device=tokens.device)
    post = np.concatenate([bma_posterior_torch(tokens[k:k + 512, :L], log_pi).cpu().numpy()
                           for k in range(0, tokens.shape[0], 512)])
    par = parents.cpu().numpy()
    blind = blind_attention(tokens.shape[2]).numpy()[None]  # (1, H, H)

    def tv(x, y):
        return 0.5 * np.abs(x - y)[:, 1:].sum(-1).mean(-1)  # (B,)

    return {"acc": parent_accuracy(a, par), "acc_rpe": parent_accuracy(b, par), "acc_bma": parent_accuracy(post, par),
            "acc_blind": parent_accuracy(np.repeat(blind, len(par), 0), par), "tv": tv(a, b), "tv_blind": tv(blind, b),
            "attn0": a[0], "attn0_rpe": b[0]}


def _w_e4_position_jobs(ctx: Context, jobs: list[dict]) -> list[dict]:
    """The same jobs as W.E1's with layer 1's positions as the setting says: the models differ in nothing else."""
    positions = ctx.settings["positions"]
    return [{**job, "positions": positions} if positions != "relative" else job for job in jobs]


def _position_label(ctx: Context) -> str:
    return f"{ctx.claim.id} {ctx.settings['positions']}-position seed"


def _w_e4_jobs(ctx: Context) -> list:
    """W.E4's models as the cost plan sees them: W.E1's mechanism runs (reused where W.E1 trains them) and
    the same jobs with the setting's positions."""
    jobs = _e1_jobs(ctx, ctx.settings["seeds"])
    return _planned(job_args(jobs, _e1_label(ctx)), job_args(_w_e4_position_jobs(ctx, jobs), _position_label(ctx)))


def _w_e4_trained(ctx: Context) -> TierResult:
    with threads_for(ctx):
        return _w_e4(ctx)


def _renamed(num: Number, prefix: str) -> Number:
    import dataclasses

    return dataclasses.replace(num, name=prefix + num.name)


def _w_e4(ctx: Context) -> TierResult:
    s, p = ctx.settings, ctx.params
    t0, c0 = time.perf_counter(), time.process_time()
    positions, n, L = s["positions"], s["seeds"], s["L"]
    jobs, rpe = _e1_runs(ctx, n)
    runs = run_jobs(ctx, _w_e4_position_jobs(ctx, jobs), _position_label(ctx), share=True)
    seeds = [r.seeds["data"] for r in runs]
    ev, ev_rpe = [_measure(r) for r in runs], [_measure(r) for r in rpe]
    outs, crit, details = decide_w_e1(ev, None, seeds, seeds, p, ctx.z, None, L)
    conclusion = combine_outcomes(list(outs.values()))
    # The RPE model beside it, through the same check (reported, never deciding).
    r_outs, r_crit, r_details = decide_w_e1(ev_rpe, None, seeds, seeds, p, ctx.z, None, L)
    controls = _e1_controls(ctx, runs, [], seeds, seeds, False, column=False, claim=ctx.claim.id)

    def readout(i):
        job = jobs[i]

        def make():
            tokens, parents = _eval_tokens(ctx, job)
            return _attention_readout(runs[i].model, rpe[i].model, tokens, parents, job["pi"], L)

        return ctx.memo((ctx.claim.id, "readout", positions, i, job["init_seed"], job["data_seed"]), make)

    acc = [readout(i) for i in range(n)]
    sel = [closed_fraction(a["acc_bma"] - a["acc"], a["acc_bma"] - a["acc_blind"]) for a in acc]
    sel_rpe = [closed_fraction(a["acc_bma"] - a["acc_rpe"], a["acc_bma"] - a["acc_blind"]) for a in acc]
    tv = [a["tv"] for a in acc]
    thr = p["gap_threshold"]
    n_sel = _closed_number(f"{positions}: parent selection, fraction of the structure-blind attention's accuracy gap "
                           "to BMA closed", sel, seeds, thr)
    n_same = _closed_number(f"{positions} vs RPE: layer-2 attention, fraction of the structure-blind attention's TV "
                            "from the RPE model's closed", [closed_fraction(a["tv"], a["tv_blind"]) for a in acc],
                            seeds, thr)
    o_sel, o_same = _closed_outcome(n_sel, ctx.z), _closed_outcome(n_same, ctx.z)

    def closed_text(num):
        return f"closes {num.value:.3f} ± {num.stderr:.2g}" if num else "undefined (the wrong mechanism is not farther)"

    findings = [
        _every_run_forms_copiers(ev, seeds, ctx.z),
        Finding(FindingKind.STRICTER, f"parent selection (argmax of layer-2 attention) comparable to BMA's: closes >= "
                f"{thr:g} of the structure-blind attention's accuracy gap to BMA (the loss criterion decides)",
                Verdict(OUTCOME_VERDICT[o_sel]),
                f"{closed_text(n_sel)}; the RPE model {np.mean([c for c, _ in sel_rpe]):.3f}",
                numbers=(n_sel,) if n_sel else ()),
        Finding(FindingKind.LITERAL, "'the same pattern' read as the RPE model's own attention, seed by seed: the "
                f"{positions}-position model's layer-2 attention closes >= {thr:g} of the structure-blind attention's "
                "TV from the RPE model's (same pi, seeds and prompts)", Verdict(OUTCOME_VERDICT[o_same]),
                f"{closed_text(n_same)}; mean TV between the two models {float(np.mean([t.mean() for t in tv])):.4f}",
                numbers=(n_same,) if n_same else ())]
    numbers = [crit[k] for k in crit]
    numbers += [_renamed(r_crit[k], "RPE model beside it (W.E1's runs, same seeds), not deciding: ") for k in r_crit]
    for name, key in (("model", "loss_model"), ("BMA (Bayes-optimal)", "loss_bma"), ("structure-blind", "loss_blind")):
        numbers.append(seed_number(f"eval loss, {name} (nats)", [e[key].value for e in ev], seeds,
                                   mc_se=[e[key].stderr for e in ev]))
    numbers += [seed_number("eval loss, RPE model (nats)", [e["loss_model"].value for e in ev_rpe], seeds,
                            mc_se=[e["loss_model"].stderr for e in ev_rpe]),
                seed_number(f"{positions}: parent-selection accuracy (h >= 2)", [a["acc"].mean() for a in acc], seeds),
                seed_number("RPE: parent-selection accuracy (h >= 2)", [a["acc_rpe"].mean() for a in acc], seeds),
                seed_number("BMA: parent-selection accuracy (h >= 2)", [a["acc_bma"].mean() for a in acc], seeds),
                seed_number(f"{positions}: column-softmax error of W_tf at d={s['d']} (not W's column setting)",
                            [e["col_error"] for e in ev], seeds),
                Number("training seconds", round(sum(r.seconds for r in runs), 1), kind="trained",
                       note=f"device {ctx.device}; process CPU seconds {sum(r.cpu_seconds for r in runs):.1f} "
                            f"(the RPE runs: {sum(r.cpu_seconds for r in rpe):.1f}, read from W.E1 when it ran in this "
                            f"process); recipe: {runs[0].recipe.describe()}")]
    readings = [{"name": f"criterion: {k}", "verdict": OUTCOME_VERDICT[o], "detail": details[k]}
                for k, o in outs.items()]
    readings.append({"name": "reported: the RPE model beside it (W.E1's runs, same seeds and prompts)",
                     "verdict": "NOT_RUN", "detail": "; ".join(f"{k}: {OUTCOME_VERDICT[o]}" for k, o in r_outs.items())
                     + f" ({_closed_text(r_crit, len(rpe))})"})
    assumptions = task_assumptions([r.task.pi for r in runs], runs[0].task.kind)
    cex = None
    if conclusion is Outcome.VIOLATED:
        from sim.papers.wei.training import run_record

        cex = {"failed criteria": [k for k, o in outs.items() if o is Outcome.VIOLATED], "positions": positions,
               "thresholds": {**dict(p), "copier": COPIER_MAJORITY}, "runs": [run_record(r) for r in runs]}
    res = TierResult(
        "trained", tier_verdict(assumptions, conclusion), conclusion,
        (f"{positions} positions, d={s['d']}, L={L}, H={s['H']}, {n} seeds: copier {crit['copier'].value:.3f}"
         f"±{crit['copier'].stderr:.2g}, fractions closed toward W's mechanism {_closed_text(crit, n)}; the RPE "
         f"model beside it: copier {r_crit['copier'].value:.3f}, {_closed_text(r_crit, n)}; {conclusion.value}"),
        assumptions=assumptions, numbers=numbers, counterexample=cex, readings=readings, findings=findings,
        controls=controls, budget=("more seeds (the standard profile): " + ", ".join(
            k for k, o in outs.items() if o is Outcome.UNDECIDED)) if conclusion is Outcome.UNDECIDED else "")
    if not all(a.holds for a in assumptions):
        res.conclusion_without_assumptions = f"{conclusion.value} on inputs that break an assumption"
    res.figures += _w_e4_figures(ctx, runs, rpe, acc, positions)
    ctx.progress(f"W.E4 done in {time.perf_counter() - t0:.0f}s ({time.process_time() - c0:.0f} CPU s here)")
    return res


def _w_e4_figures(ctx: Context, runs, rpe, acc, positions) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch

    from sim.papers.wei.probes import bma_posterior_torch, copier_report, layer1_attention, tree_pattern

    run = runs[0]
    tokens, parents = _eval_tokens(ctx, {"pi": run.task.pi, "L": run.task.L, "H": run.task.H,
                                         "eval_seed": run.eval["eval_seed"], "n_eval": run.eval["n_eval"]})
    with np.errstate(divide="ignore"):
        post = bma_posterior_torch(tokens[:1, :run.task.L], torch.as_tensor(np.log(run.task.pi)))[0].cpu().numpy()
    tree = tree_pattern(parents[0].cpu().numpy())
    hh, pp = np.nonzero(tree)
    fig, axes = plt.subplots(2, 4, figsize=(17, 8), gridspec_kw={"width_ratios": [2.2, 1, 1, 1]}, layout="constrained")
    for row, (label, r, attn) in enumerate(((f"{positions} positions", run, acc[0]["attn0"]),
                                            ("RPE (W.E1's run)", rpe[0], acc[0]["attn0_rpe"]))):
        rep = copier_report(r.model)
        k0 = 0
        im = axes[row, 0].imshow(layer1_attention(r.model)[k0], vmin=0, vmax=1, cmap="viridis", aspect="auto")
        # The key axis is named once, under the lower map: above, its label ran into the title below.
        axes[row, 0].set(xlabel="context key n = l*H + h_j" if row else "", ylabel="target position h",
                         title=f"{label}: layer 1, head {k0} (copies example {int(rep.example[k0])})")
        im = axes[row, 1].imshow(rep.mass.mean(axis=2), vmin=0, vmax=1, cmap="viridis")
        axes[row, 1].set(xlabel="context example l", ylabel="head k", title="mass on x^l_h (mean over h)",
                         xticks=range(r.task.L), yticks=range(r.model.K))
        axes[row, 1].tick_params(labelsize=7)
        axes[row, 2].imshow(attn, vmin=0, vmax=1, cmap="magma")
        axes[row, 2].set(xlabel="candidate parent h'", ylabel="target position h", title="layer-2 attention")
        axes[row, 2].scatter(pp, hh, s=30, facecolors="none", edgecolors="cyan", linewidths=1.0)
    fig.colorbar(im, ax=axes[:, 1].tolist(), fraction=0.05, label="attention")
    axes[0, 3].imshow(post, vmin=0, vmax=1, cmap="magma")
    axes[0, 3].scatter(pp, hh, s=30, facecolors="none", edgecolors="cyan", linewidths=1.0)
    axes[0, 3].set(xlabel="candidate parent h'", ylabel="target position h", title="BMA posterior; o = true parent")
    if positions == "absolute":
        im = axes[1, 3].imshow(run.model.w_pos.detach().cpu().numpy()[0], cmap="coolwarm")
        axes[1, 3].set(xlabel="key position h_j", ylabel="query position h", title="absolute: w_pos, head 0")
        fig.colorbar(im, ax=axes[1, 3], fraction=0.046)
    else:
        axes[1, 3].axis("off")
    fig.suptitle(f"W.E4: {positions}-position model beside the RPE model (d={run.task.d}, L={run.task.L}, "
                 f"H={run.task.H}, same seed {run.seeds['data']} and prompt)")
    return [ctx.save_figure(fig, "attention-maps", tight=False)]


# ======================================================================== the claims ==
_E3_STATEMENT = (
    "Primary reading: with K < L first-layer heads, each head copying one example (seed 000, lines 93 and 254: "
    "'K = L: the first layer has as many heads as in-context examples L, each head copying one example'; seed "
    "001, line 49: 'K ≈ L is the key'), the trained model copies at most K examples and at best implements BMA "
    "on K of the L examples: its loss exceeds the K = L model's beyond its error and sits at or above the loss "
    "of BMA on K examples. Reported as a finding: whether the K-head model reaches BMA on K (the best it can do) "
    "or stays short of it. "
    "Models: W's discrete model (sim.papers.wei.model.WeiTransformer) with K heads for each K of a grid of K < L "
    "(quick K in {2, 5}, standard {1, 2, 3, 5, 7}), trained as W.E1's mechanism model (d=5, L=10, H=10; "
    "W.E1's recipe, sim.papers.wei.recipes; the one-to-one w_L start gives head k a preference for example "
    "sigma(k), sigma the first K entries of a random permutation), and W.E1's K = L model of the same seed: the "
    "same pi (the prior's), seeds, training batches and evaluation prompts, so the models differ in K only and "
    "every comparison is paired by seed and prompt. BMA on K: the exact BMA predictive (W Lemma 1, float64, "
    "sim.papers.wei.probes.bma_loss_on) reading only the K examples the heads copy (the first K distinct ones, "
    "completed by the lowest-numbered others when fewer are copied; examples are exchangeable, so its expected "
    "loss is that of any K), averaged over the evaluation prompts. Conclusion for every K of the grid "
    "(sim.papers.wei.claims.architecture.decide_w_e3), in units of D = BMA on K - BMA on L (the evidence of the "
    "uncopied examples), each a mean over seeds beyond the seeds' or the Monte Carlo error at the Student-t "
    "margin of z: (1) the K heads are copiers (worst copier score > 1/2, W.E1's criterion) of K distinct examples "
    "on every seed; (2) (loss_K - loss_L) / D > 0, strictly; (3) (loss_K - BMA_K) / D >= 0, refuted only below 0 "
    "beyond the margin. Negative controls through the same check: W.E1's K = L model read as if it had K heads, "
    "and each K-head model with every head set to its first head's layer-1 scores (all heads copy one example). "
    "Finding: the K-head model closes >= gap_threshold (0.8, W.E1's '≈') of the structure-blind predictor's "
    "gap to BMA on K (reaches it) or not (stays short). Reported: which examples each head copies, per seed.")

W_E3 = Claim(
    id="W.E3",
    title="K = L heads are the key: K < L first-layer heads reach at best BMA on K examples",
    source=Source("W", "section 3.3 and the implementation notes (section 9)", "K = L: one first-layer head per "
                  "in-context example, each copying one example; K ≈ L is the key"),
    primary=PrimaryReading(
        statement=("K = L: the first layer has as many heads as there are in-context examples L, each head copying "
                   "one example (seed 000, line 254; line 93: the K heads' outputs together recover all L "
                   "observations), and K ≈ L is the key (seed 001, line 49). So with K < L heads the model copies "
                   "at most K examples, and at best implements BMA on K of the L examples: the evidence of the "
                   "others is lost."),
        seed="000", lines="93, 254",
        setting=("W's two-layer disentangled transformer with RPE on W's task (fixed pi, a fresh random recursive "
                 "tree per prompt), trained as W.E1's mechanism model (d=5, L=10, H=10) with K first-layer heads; "
                 "seed 001 line 49 states the same ('K ≈ L is the key')."),
        review=("The seeds state the mechanism (each head copies one example, so K heads copy K) and its "
                "consequence (BMA on K at best). Decided: the K heads are copiers of K distinct examples (the "
                "premise: the check's negative controls, the K = L model standing in and K heads on one example, "
                "fail it), the loss exceeds the K = L model's strictly beyond its error, and it is not below "
                "BMA on K beyond its error ('at best': reaching BMA on K within the error is at it, and a model "
                "sitting exactly at it must not fail). Both loss criteria are read per seed in units of what BMA "
                "loses with the uncopied examples (each seed has its own pi, whose evidence per example differs), "
                "like W.E1's fractions closed. Whether the model reaches BMA on K or stays short is a finding; "
                "the seeds give no number for it. W's own K grid and recipe are not public: the grid and W.E1's "
                "recipe are ours.")),
    statement=_E3_STATEMENT,
    assumptions=("W's task: one random recursive tree per prompt, shared by the L examples and the target",
                 "pi > 0 entrywise (log pi finite)"),
    checks={"trained": _w_e3_trained},
    jobs={"trained": _w_e3_jobs},
    settings={
        "quick": {"tiers": ("trained",), **_e1_settings("quick"), "heads": (2, 5), "seeds": 16, "seeds_start": 4,
                  "seeds_step": 6},
        "standard": {"tiers": ("trained",), **_e1_settings("standard"), "heads": (1, 2, 3, 5, 7), "seeds": 24,
                     "seeds_start": 8, "seeds_step": 8},
        "paper": {"tiers": ("trained",), **_e1_settings("paper"), "heads": (1, 2, 3, 4, 5, 6, 7, 8, 9), "seeds": 32,
                  "seeds_start": 8, "seeds_step": 8},
    },
    params={"loss_read": LOSS_READS[0], "gap_threshold": 0.8},
    prior_dependent=True,
    reuses=("W.E1",),
)

_E4_STATEMENT = (
    "Primary reading: a model with standard absolute positional encodings in place of the RPE learns the same "
    "pattern (seed 001, line 51, W Appendix G): W.E1's mechanism (copier heads, layer-2 attention near the BMA "
    "posterior, σ(W_OV) ≈ pi, block-diagonal W_KQ) with a loss near BMA's (parent selection comparable to BMA), "
    "by W.E1's deciding code; reported as findings: every run forming the copier heads (stricter), parent-selection "
    "accuracy (stricter), and the same attention as the RPE model's seed by seed (the literal 'same'); the RPE "
    "model's numbers beside it. "
    "The model (setting positions = 'absolute'; 'relative' runs the same check on W's RPE): "
    "sim.papers.wei.model.WeiAbsolute, W's discrete model with layer 1's scores from absolute positions. Each "
    "position (l, h) is encoded by its example index and its position in the example, one-hot and concatenated, "
    "p(l, h) = [e_l; e_h], and head k scores a key bilinearly against the target's query, s^k(h; l_j, h_j) = "
    "p(L, h)^T M^k p(l_j, h_j), which (the query being in the target example) is exactly w_pos[k, h, h_j] + "
    "w_ex[k, h, l_j]: a table over (query position, key position) and one over (query position, key example). "
    "The RPE is the special case w_pos[k, h, h_j] = w_H[k, h - h_j + H - 1], w_ex[k, h, l] = w_L[k, l]. Layer 2, "
    "the disentangled residual and the output are W's. Trained as W.E1's mechanism model (d=5, L=10, H=10, "
    "W.E1's recipe with its init written in absolute positions: the same-position entries w_pos[k, h, h] start "
    "+8, and w_ex[k, :, sigma(k)] +2 for a random one-to-one sigma) on the same pi, seeds, data and evaluation "
    "prompts as W.E1's RPE runs. Conclusion (sim.papers.wei.claims.trained.decide_w_e1, each criterion on the mean "
    "over seeds beyond z s.e. at the Student-t margin): (1) every head puts > 1/2 of its attention on one example's "
    "same-position token; (2)-(5) layer-2 attention's TV from the BMA posterior, σ(W_OV)'s distance from pi, W_KQ's "
    "off-/diagonal block ratio and the loss's excess over BMA each close >= gap_threshold (0.8) of the wrong "
    "mechanism's distance (structure-blind attention and loss, uniform output, the init's W_KQ), on the runs whose "
    "copier heads formed. W.E1's column-softmax criterion is about W_tf, not the pattern, and its d = 20 setting is "
    "W.E1's own: the d = 5 column error is reported. Negative controls through the same check, built with absolute "
    "positions: the untrained init, an i.i.d. w_ex start, W's construction (beta 10) written in absolute positions "
    "with layer 2 wired to the reversed edges, and with W_KQ = 0.")

W_E4 = Claim(
    id="W.E4",
    title="Absolute positional encodings learn the same pattern as the RPE",
    source=Source("W", "Appendix G", "a model with standard absolute positional encodings also learns the same "
                  "pattern; RPE is more interpretable"),
    primary=PrimaryReading(
        statement=("Positional encoding: RPE performs well on the causal inference task and its parameters are highly "
                   "structured; a model with standard absolute positional encodings also learns the same pattern "
                   "(Appendix G), but RPE is more interpretable."),
        seed="001", lines="51",
        setting=("W's two-layer disentangled transformer on W's task with absolute positional encodings of the "
                 "example index and the position in the example in place of the RPE, otherwise the same two layers "
                 "(issue 44; W's Appendix G, whose encoding and recipe are not public)."),
        review=("'The same pattern' is W's mechanism as W.E1 decides it (copier heads, layer-2 attention near BMA, "
                "σ(W_OV) ≈ pi, block-diagonal W_KQ, loss near BMA), read by W.E1's own deciding code on the "
                "absolute-position model, its controls built with absolute positions. The column-softmax criterion "
                "is left out: it is about W_tf ≈ log pi, not the pattern, and W decides it at d = 20. How absolute "
                "positions enter layer 1 is not in the seed: one-hot example index and position, scored bilinearly "
                "per head, is the choice here (the 'positions' setting). Reading 'the same' as the RPE model's own "
                "attention seed by seed is literal (a finding); 'RPE is more interpretable' is no claim to decide.")),
    statement=_E4_STATEMENT,
    assumptions=("W's task: one random recursive tree per prompt, shared by the L examples and the target",
                 "pi > 0 entrywise (log pi finite)"),
    checks={"trained": _w_e4_trained},
    jobs={"trained": _w_e4_jobs},
    settings={
        # Not run in quick (pending says why); the settings stay for `--claims W.E4` runs and tests.
        "quick": {"tiers": (), **_e1_settings("quick"), "positions": "absolute", "seeds": 22, "seeds_start": 4,
                  "seeds_step": 6},
        "standard": {"tiers": ("trained",), **_e1_settings("standard"), "positions": "absolute", "seeds": 40,
                     "seeds_start": 8, "seeds_step": 8},
        "paper": {"tiers": ("trained",), **_e1_settings("paper"), "positions": "absolute", "seeds": 40,
                  "seeds_start": 8, "seeds_step": 8},
    },
    params={"gap_threshold": 0.8, "col_threshold": W_E1.params["col_threshold"]},
    prior_dependent=True,
    decided_by="standard",
    pending=("decided by the standard profile (W.E1's standard recipe, 8 to 40 seeds): on quick's short recipe "
             "the absolute-position model's copier scores spread widely (0.43 to 0.94 over 10 seeds at master "
             "seed 0, one run with a head uncopied), so the decision needed 10 seeds, 10 absolute-position models "
             "beside 10 RPE runs: more than the quick profile's time allows (`icl-verify run --profile standard "
             "--claims W.E4`)"),
    reuses=("W.E1",),
)

CLAIMS = [W_E3, W_E4]
