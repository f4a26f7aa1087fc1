"""W's trained claims: the mechanism a trained two-layer transformer learns (W.E1) and how it
generalises across the number of examples (W.E2), next to their Bayes baselines with error
bars across seeds. The task and the process pool are in :mod:`sim.papers.wei.training`, the training
recipe in :mod:`sim.papers.wei.recipes`.
"""
from __future__ import annotations

import math
import time

import numpy as np

from theory.graphs import from_parents

from sim.graphs import draw_graph
from sim.verdict import Control, Finding, FindingKind, Number, Outcome, TierResult, Verdict, compare, tier_verdict
from sim.claims.base import Claim, Context, PrimaryReading, Source
from sim.claims.inputs import prior_for, record_matrix
from sim.papers.wei.recipes import WRecipe
from sim.claims.jobs import planned_jobs
from sim.papers.wei.training import (OUTCOME_VERDICT, WRun, WTask, combine_outcomes, evaluate_wei, init_wei_model,
                       job_args, run_jobs, run_record, seed_job_args, seed_number, strictly_above, task_assumptions,
                       threads_for, train_seeds)

__all__ = ["extend_to_L", "example_heads", "copies_one_example_each", "decide_w_e1", "row_error_gauge_prediction",
           "COPIER_MAJORITY", "LAYER2_CRITERIA", "E1_CONTROLS", "W_E1", "W_E2", "CLAIMS"]

FALLS = "loss falls as test L' grows"


# ============================================================================= W.E1 ==
#: A head copies a token when that token holds the majority of its attention: its output is then
#: nearer that token than any mixture of the others. How sharp the copies must be for W's BMA is
#: judged by their consequence (the layer-2 and loss criteria), not by this threshold.
COPIER_MAJORITY = 0.5
#: The criteria read on the runs whose copier heads formed (layer 2 and what it drives).
LAYER2_CRITERIA = ("layer-2 attention ≈ BMA", "σ(W_OV) ≈ pi", "block-diagonal W_KQ", "loss near BMA")
#: W Theorem 1's beta for the hand-built controls: copies exact to about (L + H) e^-20.
CONTROL_BETA = 10.0

#: Negative controls of W.E1: (key, what the model is, why it is the wrong mechanism).
E1_CONTROLS = (
    ("untrained", "the recipe's init at step 0 (w_L one-to-one preference +2, w_H offset 0 +8)",
     "no learning: soft copies, W_KQ and W_OV at N(0, 0.02^2) noise"),
    ("iid-start", "an i.i.d. w_L init at step 0 (no one-to-one preference)",
     "the heads spread over (and collide on) the examples; nothing maps head k to one example"),
    ("reversed edges",
     "W's construction (beta 10) with layer 2 wired to the reversed edges: W_KQ = blockdiag(log pi^T)",
     "scores h' as the child of h, so layer 2 picks the wrong parent"),
    ("uniform layer 2", "W's construction (beta 10) with W_KQ = 0",
     "uniform attention over h' < h: the structure-blind predictor with the true pi"),
)


def _w_e1_trained(ctx: Context) -> TierResult:
    with threads_for(ctx):
        return _w_e1(ctx)


def _control_model(kind: str, run: WRun):
    """The control ``kind`` of :data:`E1_CONTROLS` for the seed of ``run`` (same pi, L, H, init seed), with
    layer 1's positions as the run's model has them (W's RPE, or absolute for W.E4: the construction's
    scores then written in absolute positions, :meth:`~sim.papers.wei.model.WeiAbsolute.from_relative`)."""
    import dataclasses

    import torch

    from sim.papers.wei.model import WeiAbsolute, wei_construction
    from sim.train import make_generator

    task, dev = run.task, str(run.model.W_OV.device)
    absolute = isinstance(run.model, WeiAbsolute)
    if kind in ("untrained", "iid-start"):
        recipe = run.recipe if kind == "untrained" else dataclasses.replace(run.recipe, wL_init="iid")
        return init_wei_model(task.d, task.L, task.H, recipe, generator=make_generator(run.seeds["init"], dev),
                              K=run.model.K, positions="absolute" if absolute else "relative")
    model = wei_construction(task.pi, task.L, task.H, CONTROL_BETA, device=dev)
    with torch.no_grad():
        if kind == "reversed edges":
            model.W_KQ.copy_(torch.block_diag(*([model.W_OV.detach().T] * task.L)))  # W_OV = log pi
        elif kind == "uniform layer 2":
            model.W_KQ.zero_()
        else:
            raise ValueError(f"unknown W.E1 control {kind!r}")
    return WeiAbsolute.from_relative(model) if absolute else model


def _init_block_ratio(run: WRun) -> float:
    """W_KQ's off-/diagonal block ratio at the run's own init: the scale of 'no block structure'."""
    from sim.papers.wei.probes import block_structure

    return block_structure(_control_model("untrained", run)).ratio


def _measure(run: WRun, model=None) -> dict:
    """W.E1's measurements of ``model`` (default: the run's trained model) on the run's evaluation
    prompts of W's task, with the block-diagonal closure against the run's init."""
    import dataclasses

    e = run.eval
    if model is not None:
        probe = dataclasses.replace(run, model=model, eval={})
        e = evaluate_wei(probe, e["n_eval"], e["eval_seed"],
                         eval_task=WTask(run.task.pi, run.task.L, run.task.H, device=str(model.W_OV.device)))
    ratio, ref = e["block"].ratio, e.setdefault("block_init_ratio", _init_block_ratio(run))
    e["block_closed"] = max(1.0 - ratio / ref, -1.0) if math.isfinite(ratio) else -1.0
    e["ov_closed"] = max(1.0 - e["ov_error"] / e["ov_error_uniform"], -1.0)
    return e


def decide_w_e1(mech: list[dict], col: list[dict] | None, mseeds, cseeds, p, z: float,
                coverage: list[int] | None, L: int):
    """W.E1's deciding check on the measurements of one model per seed (trained or control).

    Criteria, each on the mean over seeds beyond its margin (the seeds' standard error, or the
    Monte Carlo error when larger, times the Student-t quantile on ``n - 1`` degrees of freedom at
    the level of ``z``):

    - copier: every head's mass on its example's same-position token, at the worst query
      position, > 1/2 (:data:`COPIER_MAJORITY`);
    - column: ``(1/d)||σ_col(W_tf) - σ_col(log pi)||_1 < col_threshold`` (W's 0.05), W's column setting
      (not decided when ``col`` is None: W.E4 reads the attention pattern, not W_tf);
    - layer-2 attention ≈ BMA, σ(W_OV) ≈ pi, block-diagonal W_KQ, loss near BMA
      (:data:`LAYER2_CRITERIA`): each distance to W's mechanism (0 there) is compared with the same
      distance of the wrong mechanism on the same seed (structure-blind attention and loss; uniform
      σ(W_OV); the seed's random init of W_KQ): ``closed = 1 - dist / dist_wrong >= gap_threshold``,
      on the runs whose copier heads formed (copier score > 1/2). Layer 2's target, the BMA
      posterior over the copied tokens, presumes layer 1's copies; a run with a head left uncopied
      counts against the copier criterion (all runs) and the stricter every-run finding, not twice.
      With fewer than 2 such runs these criteria are UNDECIDED;
    - coverage (only where a start that does not plant it is trained): every seed's heads copy
      all ``L`` examples.

    Returns ``(outcomes, numbers, details)``: criterion -> Outcome, criterion -> Number, criterion -> line.
    """
    thr = p["gap_threshold"]
    # Layer 2 reads what layer 1 copies: criteria (3)-(6) are read on the runs whose copier heads formed,
    # each failure counted once (a stuck layer 1 in the copier criterion, over all runs, and in the
    # stricter finding on every run).
    formed = [k for k, e in enumerate(mech) if e["copier"].min_score > COPIER_MAJORITY]
    fm, fseeds = [mech[k] for k in formed], [mseeds[k] for k in formed]
    given = f" (runs whose copier heads formed: {len(fm)} of {len(mech)})"
    nums = {
        "copier": seed_number("copier score: min over heads and query positions of the mass on its example's "
                              "same-position token", [e["copier"].min_score for e in mech], mseeds,
                              tolerance=COPIER_MAJORITY),
    }
    if col is not None:
        nums["column"] = seed_number("column-softmax error (1/d)||σ_col(W_tf) - σ_col(log pi)||_1 (W_tf = mean "
                                     "diagonal block)", [e["col_error"] for e in col], cseeds,
                                     tolerance=p["col_threshold"], note="W reports 0.0278")
    if len(fm) >= 2:
        nums.update({
            "layer-2 attention ≈ BMA": seed_number(
                "layer-2 attention: fraction of the structure-blind attention's TV from the BMA posterior closed, "
                "1 - TV(model, BMA) / TV(blind, BMA)" + given, [e["tv_closed"] for e in fm], fseeds,
                mc_se=[e["tv_closed_se"] for e in fm], tolerance=thr),
            "σ(W_OV) ≈ pi": seed_number(
                "σ(W_OV): fraction of the uniform output's distance from pi closed, 1 - ||σ(W_OV) - pi|| / ||U - pi||"
                + given, [e["ov_closed"] for e in fm], fseeds, tolerance=thr),
            "block-diagonal W_KQ": seed_number(
                "W_KQ: fraction of the init's off-/diagonal block ratio closed, 1 - ratio / ratio(init)" + given,
                [e["block_closed"] for e in fm], fseeds, tolerance=thr),
            "loss near BMA": seed_number("loss: fraction of the structure-blind-to-BMA gap closed" + given,
                                         [e["gap_closed"] for e in fm], fseeds,
                                         mc_se=[e["gap_closed_se"] for e in fm], tolerance=thr),
        })
    outs = {k: compare(n.value, n.tolerance, stderr=n.stderr, z=z, df=n.df, direction="<=" if k == "column" else ">=")
            for k, n in nums.items()}
    details = {k: f"{k}: {n.value:.4f} ± {n.stderr:.2g} vs {'<' if k == 'column' else '>'} {n.tolerance:g}"
               + (given if k in LAYER2_CRITERIA else "") for k, n in nums.items()}
    for k in LAYER2_CRITERIA:
        if k not in nums:
            outs[k] = Outcome.UNDECIDED
            details[k] = f"{k}: not measured, fewer than 2 runs formed the copier heads ({len(fm)} of {len(mech)})"
    if coverage is not None:
        outs["coverage"] = Outcome.HELD if all(c == L for c in coverage) else Outcome.VIOLATED
        details["coverage"] = f"coverage: examples covered per seed {list(coverage)} of L = {L}"
    return outs, nums, details


def _closed_text(crit, n_runs: int) -> str:
    """The layer-2 criteria's fractions closed in one phrase, with how many runs formed their copier heads."""
    if not all(k in crit for k in LAYER2_CRITERIA):
        return "not measured (fewer than 2 runs formed the copier heads)"
    return (f"on the {crit['loss near BMA'].n} of {n_runs} runs whose copier heads formed: layer-2 attention "
            f"{crit['layer-2 attention ≈ BMA'].value:.3f}, σ(W_OV) {crit['σ(W_OV) ≈ pi'].value:.3f}, "
            f"W_KQ blocks {crit['block-diagonal W_KQ'].value:.3f}, loss {crit['loss near BMA'].value:.3f}")


def _decided_line(outs, details) -> str:
    """The deciding line: the violated (else undecided, else all) criteria with their numbers."""
    for want in (Outcome.VIOLATED, Outcome.UNDECIDED):
        keys = [k for k, o in outs.items() if o is want]
        if keys:
            return f"{want.value}: " + "; ".join(details[k] for k in keys)
    return "held: " + "; ".join(details.values())


def _e1_controls(ctx: Context, mech: list[WRun], col: list[WRun], mseeds, cseeds, coverage_decided: bool, *,
                 column: bool = True, claim: str = "W.E1"):
    """Every control of :data:`E1_CONTROLS` through :func:`decide_w_e1` (same seeds, pis and prompts), built with
    the positions of the runs' models; without ``column`` the column criterion is not decided (W.E4)."""
    if any(np.any(r.task.pi <= 0) for r in mech + col):
        return []  # W's construction needs log pi; the assumption "pi > 0" already fails

    def measured(kind, r):
        # the looks of a sequential decision share their seeds: measure each seed's control once
        key = (f"{claim} control", kind, type(r.model).__name__, tuple(sorted(r.seeds.items())), r.task.L, r.task.H,
               r.task.pi.tobytes(), r.recipe, r.eval["n_eval"], r.eval["eval_seed"], ctx.device)
        return ctx.memo(key, lambda: _measure(r, _control_model(kind, r)))

    controls = []
    for kind, name, why in E1_CONTROLS:
        cm = [measured(kind, r) for r in mech]
        cc = ([measured(kind, r) for r in col] if col else cm) if column else None
        covered = [e["copier"].n_covered for e in cm]
        outs, nums, details = decide_w_e1(cm, cc, mseeds, cseeds, ctx.params, ctx.z,
                                          covered if coverage_decided else None, mech[0].task.L)
        line = _decided_line(outs, details)
        if not coverage_decided:
            line += f" (coverage {covered} of L = {mech[0].task.L}, not decided in this profile)"
        controls.append(Control(name, why, tier_verdict([], combine_outcomes(list(outs.values()))), line,
                                numbers=tuple(nums.values())))
    return controls


def _every_run_forms_copiers(ev: list[dict], seeds, z: float) -> Finding:
    """The stricter reading "every training run forms W's copier heads", not only the mean over runs.

    A run's copier score (its worst head's mass on its example's same-position token, at the worst
    query position) is exact for the trained model: layer 1's attention depends on positions only.
    So one run at or below 1/2 refutes "every run" outright (FAIL), while no such run among ``n``
    cannot show it (INCONCLUSIVE). Beside it, the rate of runs that keep a head uncopied with its
    two-sided Clopper-Pearson interval at the level of ``z``: ``Beta(k, n - k + 1)`` and
    ``Beta(k + 1, n - k)`` quantiles at ``Phi(-z)`` and ``1 - Phi(-z)``."""
    from scipy import stats

    scores = [float(e["copier"].min_score) for e in ev]
    stuck = [(int(sd), round(sc, 3)) for sd, sc in zip(seeds, scores) if sc <= COPIER_MAJORITY]
    k, n = len(stuck), len(scores)
    a = float(stats.norm.sf(z))
    lo = float(stats.beta.ppf(a, k, n - k + 1)) if k else 0.0
    hi = float(stats.beta.ppf(1 - a, k + 1, n - k)) if k < n else 1.0
    rate = Number("training runs that keep a layer-1 head uncopied (copier score <= 1/2)", k / n, n=n,
                  seed=int(seeds[0]), kind="trained",
                  note=f"{k} of {n}; Clopper-Pearson interval at z = {z:g}: [{lo:.3f}, {hi:.3f}]"
                       + (f"; runs (data seed, score): {stuck}" if stuck else ""))
    return Finding(
        FindingKind.STRICTER,
        "every training run forms W's copier heads (each run's worst head puts > 1/2 of its attention on its "
        "example's same-position token), not only the mean over runs",
        Verdict.FAIL if stuck else Verdict.INCONCLUSIVE,
        (f"{k} of {n} runs keep a head at or below 1/2: {stuck}" if stuck else
         f"no run of {n} keeps a head at or below 1/2, which sampling cannot show for every run")
        + f"; rate {k / n:.3f}, interval [{lo:.3f}, {hi:.3f}]",
        numbers=(rate,))


def row_error_gauge_prediction(pi) -> float:
    """The row error that log pi shows in the column gauge the training leaves W_tf in.

    Layer 2 cannot see a column shift ``W + 1 a^T`` (W Prop. 1), so training never moves W_tf along
    it: from a zero-mean init and under weight decay that component stays near 0, i.e. W_tf ≈ the
    column-centred ``log pi - 1 mean_s(log pi[s, :])``. Its row error
    ``(1/d)||σ_row(centred log pi) - pi||_1`` is what the trained row error should be if W_tf ≈ log pi
    up to that free gauge; it is a property of pi, not of learning."""
    from sim.papers.wei.probes import row_softmax_error

    with np.errstate(divide="ignore"):
        lp = np.log(np.asarray(pi, dtype=np.float64))
    return row_softmax_error(lp - lp.mean(axis=0, keepdims=True), lp)


def _w_e1_parts(ctx: Context) -> dict[str, tuple]:
    """W.E1's parts that train: part -> (settings, prefix, seeds) of :func:`train_seeds`."""
    s = ctx.settings
    parts = {"mechanism": (s, "", s["seeds"])}
    if s.get("col_seeds", 0):
        parts["column"] = (s, "col_", s["col_seeds"])
    # Coverage is decided only on a start that does not plant it (the i.i.d. w_L start); profiles
    # that cannot afford training it report coverage as NOT_RUN and name the profile that decides it.
    if s.get("coverage_iid_seeds", 0):
        parts["iid-start"] = ({**s, "wL_init": "iid", "steps1": s["iid_steps1"]}, "", s["coverage_iid_seeds"])
    return parts


def _w_e1_jobs(ctx: Context) -> list:
    """W.E1's models as the cost plan sees them, part by part."""
    return [job for part, args in _w_e1_parts(ctx).items()
            for job in planned_jobs(**seed_job_args(ctx, part, *args))]


def _w_e1(ctx: Context) -> TierResult:
    s, p = ctx.settings, ctx.params
    t0 = time.perf_counter()
    parts = _w_e1_parts(ctx)
    mech = train_seeds(ctx, "mechanism", *parts["mechanism"], share=True)  # W.E3 and W.E4 read them too
    col = train_seeds(ctx, "column", *parts["column"]) if "column" in parts else []
    iid = train_seeds(ctx, "iid-start", *parts["iid-start"]) if "iid-start" in parts else []
    kind = s.get("task", "w")
    assumptions = task_assumptions([r.task.pi for r in mech + col], kind)
    mseeds = [r.seeds["data"] for r in mech]
    cseeds = [r.seeds["data"] for r in (col or mech)]
    ev = [_measure(r) for r in mech]
    cev = [_measure(r) for r in col] if col else ev
    L, d, H = mech[0].task.L, mech[0].task.d, mech[0].task.H
    coverage = [r.eval["copier"].n_covered for r in iid] if iid else None
    outs, crit, details = decide_w_e1(ev, cev, mseeds, cseeds, p, ctx.z, coverage, L)
    conclusion = combine_outcomes(list(outs.values()))
    covered = [e["copier"].n_covered for e in ev]
    planted = [_control_model("untrained", r) for r in mech]
    from sim.papers.wei.probes import copier_report

    planted_cov = [copier_report(m).n_covered for m in planted]
    crun = col or mech
    gauge = [row_error_gauge_prediction(r.task.pi) for r in crun]
    prior_gauge = [row_error_gauge_prediction(pi) for pi in prior_for(ctx, crun[0].task.d).sample(
        ctx.rng("row-gauge/prior"), s.get("gauge_prior_draws", 1000))]
    lo, hi = np.quantile(prior_gauge, [0.05, 0.95])
    rowerr = seed_number("row-softmax error (1/d)||σ_row(W_tf) - pi||_1 (reported, never deciding: W Prop. 1's "
                         "free gauge)", [e["row_error"] for e in cev], cseeds, note="W reports 0.350")
    gauge_num = seed_number("row-softmax error predicted by the gauge alone: column-centred log pi on the same pis",
                            gauge, cseeds, note=f"the prior's 5-95% range {lo:.3f}-{hi:.3f} "
                                                f"({len(prior_gauge)} draws of pi, d={crun[0].task.d})")
    numbers = [crit["copier"],
               Number("examples covered by the heads, permutation start (per seed; planted by the init)",
                      float(min(covered)), n=len(covered), kind="trained",
                      note=f"per seed {covered} of L = {L}; at step 0 already {planted_cov}"),
               crit["column"], rowerr, gauge_num, *(crit[k] for k in LAYER2_CRITERIA if k in crit)]
    if iid:
        numbers.append(Number("examples covered by the heads, i.i.d. w_L start (deciding coverage)",
                              float(min(coverage)), n=len(coverage), kind="trained", seed=iid[0].seeds["data"],
                              note=f"per seed {coverage} of L = {L}, after {iid[0].recipe.steps1} + "
                                   f"{iid[0].recipe.steps2} steps; copier "
                                   + ", ".join(f"{r.eval['copier'].min_score:.3f}" for r in iid)))
    for name, key in (("model", "loss_model"), ("BMA (Bayes-optimal)", "loss_bma"), ("structure-blind", "loss_blind")):
        numbers.append(seed_number(f"eval loss, {name} (nats)", [e[key].value for e in ev], mseeds,
                                    mc_se=[e[key].stderr for e in ev]))
    numbers += [
        seed_number("layer-2 attention vs BMA posterior: mean total variation", [e["tv_bma"].value for e in ev],
                     mseeds, mc_se=[e["tv_bma"].stderr for e in ev]),
        seed_number("structure-blind attention vs BMA posterior: mean total variation (the wrong mechanism's)",
                     [e["tv_blind"].value for e in ev], mseeds, mc_se=[e["tv_blind"].stderr for e in ev]),
        seed_number("σ(W_OV) vs pi: (1/d)||softmax_row(W_OV) - pi||_1", [e["ov_error"] for e in ev], mseeds),
        seed_number("uniform output vs pi: (1/d)||U - pi||_1 (the wrong mechanism's)",
                     [e["ov_error_uniform"] for e in ev], mseeds),
        seed_number("W_KQ off-diagonal / diagonal block norm (column-centred)", [e["block"].ratio for e in ev],
                     mseeds, note="0 for W's block-diagonal W_KQ"),
        seed_number("W_KQ off-diagonal / diagonal block norm at the init (the wrong mechanism's)",
                     [e["block_init_ratio"] for e in ev], mseeds),
        seed_number(f"column-softmax error of the d={d} mechanism model (not W's column setting)",
                     [e["col_error"] for e in ev], mseeds),
        Number("training seconds (all seeds, all settings)", round(sum(r.seconds for r in mech + col + iid), 1),
               kind="trained", note=f"device {ctx.device}; process CPU seconds "
                                    f"{sum(r.cpu_seconds for r in mech + col + iid):.1f}"),
    ]
    readings = [{"name": f"criterion: {k}", "verdict": OUTCOME_VERDICT[o], "detail": details[k]}
                for k, o in outs.items()]
    if coverage is None:
        readings.append({"name": "criterion: coverage", "verdict": "NOT_RUN",
                         "detail": f"decided by the paper profile (an i.i.d. w_L start, which does not plant it); "
                                   f"here the permutation init plants it: {planted_cov} of L = {L} at step 0"})
    readings.append({"name": "reported: row-softmax error vs its gauge prediction", "verdict": "NOT_RUN",
                     "detail": f"row error {rowerr.value:.3f} ± {rowerr.stderr:.2g}; column-centred log pi alone "
                               f"predicts {gauge_num.value:.3f} (prior 5-95% {lo:.3f}-{hi:.3f}); never deciding"})
    head_err = max(max(e["col_error_heads"]) for e in cev)
    findings = [
        _every_run_forms_copiers(ev, mseeds, ctx.z),
        Finding(FindingKind.STRICTER, "W_tf read per head (each head's diagonal block) instead of their mean: "
                f"every block's column-softmax error < {p['col_threshold']:g}",
                Verdict.PASS if head_err < p["col_threshold"] else Verdict.FAIL,
                f"largest per-head column-softmax error {head_err:.4f} against < {p['col_threshold']:g}",
                numbers=(seed_number("largest per-head column-softmax error", [max(e["col_error_heads"]) for e in cev],
                                     cseeds),))]
    cex = None
    if conclusion is Outcome.VIOLATED:
        cex = {"failed criteria": [k for k, o in outs.items() if o is Outcome.VIOLATED],
               "thresholds": {**dict(p), "copier": COPIER_MAJORITY}, "mechanism runs": [run_record(r) for r in mech],
               "column runs": [run_record(r) for r in col], "i.i.d.-start runs": [run_record(r) for r in iid]}
    res = TierResult(
        "trained", tier_verdict(assumptions, conclusion), conclusion,
        (f"d={d}, L={L}, H={H}, {len(mech)} seeds: copier {crit['copier'].value:.3f}±{crit['copier'].stderr:.2g} "
         f"(init {np.mean([r.initial_copier for r in mech]):.2f}), fractions closed toward W's mechanism "
         f"{_closed_text(crit, len(mech))}; "
         + (f"coverage (i.i.d. start) {coverage}/{L}" if iid else f"coverage not decided here (planted: {covered}/{L})")
         + "; column check"
         + (f" at d={col[0].task.d}, L={col[0].task.L}, H={col[0].task.H}, {len(col)} seeds" if col else "")
         + f": col error {crit['column'].value:.4f}±{crit['column'].stderr:.2g}, row error "
           f"{rowerr.value:.3f}±{rowerr.stderr:.2g} (gauge alone predicts {gauge_num.value:.3f})"
         + f"; {conclusion.value}"),
        assumptions=assumptions, numbers=numbers, counterexample=cex, readings=readings, findings=findings,
        budget=("the paper profile (more seeds and steps): " + ", ".join(k for k, o in outs.items()
                                                                       if o is Outcome.UNDECIDED))
        if conclusion is Outcome.UNDECIDED else "")
    res.controls = _e1_controls(ctx, mech, col, mseeds, cseeds, coverage is not None)
    if kind != "w" or not all(a.holds for a in assumptions):
        broken = [k for k, o in outs.items() if o is Outcome.VIOLATED]
        res.conclusion_without_assumptions = (
            f"{conclusion.value} on inputs that break an assumption"
            + (f" (failed: {', '.join(broken)}; the assumption looks necessary)" if broken else
               " (the assumption did not look necessary here)"))
        if cex is None and broken:
            res.counterexample = {"failed criteria": broken, "mechanism runs": [run_record(r) for r in mech]}
    res.figures += _w_e1_figures(ctx, mech, col)
    ctx.progress(f"W.E1 done in {time.perf_counter() - t0:.0f}s")
    return res


def _w_e1_figures(ctx: Context, mech: list[WRun], col: list[WRun]) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sim.papers.wei.probes import column_softmax, row_softmax, tree_pattern

    out = []

    # 1. Attention maps: copier map, layer-2 attention, BMA posterior with the true tree.
    run = mech[0]
    e = run.eval
    from sim.papers.wei.probes import bma_posterior_torch
    import torch

    with np.errstate(divide="ignore"):
        post = bma_posterior_torch(torch.as_tensor(e["example_tokens"][:1, :run.task.L]),
                                   torch.as_tensor(np.log(run.task.pi)))[0].numpy()
    tree = tree_pattern(e["example_parents"][0])
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.8), gridspec_kw={"width_ratios": [1, 1, 1, 1.1]})
    par = np.asarray(e["example_parents"][0])
    draw_graph(axes[3], from_parents(par, name=f"the example's random recursive tree (H={len(par)})"))
    im = axes[0].imshow(e["copier"].mass.mean(axis=2), vmin=0, vmax=1, cmap="viridis")
    axes[0].set(xlabel="context example l", ylabel="layer-1 head k", title="mass on x^l_h (mean over h)")
    fig.colorbar(im, ax=axes[0], fraction=0.046)
    for ax, M, title in ((axes[1], e["example_attn"][0], "layer-2 attention (trained)"),
                         (axes[2], post, "BMA posterior; o = true parent")):
        im = ax.imshow(M, vmin=0, vmax=1, cmap="magma")
        ax.set(xlabel="candidate parent h'", ylabel="target position h", title=title)
        fig.colorbar(im, ax=ax, fraction=0.046)
    hh, pp = np.nonzero(tree)
    for ax in axes[1:3]:
        ax.scatter(pp, hh, s=30, facecolors="none", edgecolors="cyan", linewidths=1.0)
    fig.suptitle(f"W.E1: trained attention vs theory (d={run.task.d}, L={run.task.L}, H={run.task.H}, seed 0)")
    out.append(ctx.save_figure(fig, "attention-maps"))

    # 2. sigma_col(W_tf) next to sigma_col(log pi) (and the row softmax, for contrast).
    crun = (col or mech)[0]
    W = crun.eval["W"]
    with np.errstate(divide="ignore"):
        lp = np.log(crun.task.pi)
    fig, axes = plt.subplots(2, 2, figsize=(7.5, 7), layout="constrained")
    panels = ((column_softmax(W), "σ_col(W_tf)"), (column_softmax(lp), "σ_col(log pi)"),
              (row_softmax(W), "σ_row(W_tf)"), (crun.task.pi, "σ_row(log pi) = pi"))
    vmax = max(float(m.max()) for m, _ in panels)
    for ax, (M, title) in zip(axes.ravel(), panels):
        im = ax.imshow(M, vmin=0, vmax=vmax, cmap="viridis")
        ax.set(title=title, xlabel="target token t", ylabel="candidate token s")
    fig.colorbar(im, ax=axes.ravel().tolist(), fraction=0.03)
    fig.suptitle(f"W.E1: learned W vs log pi (d={crun.task.d}, L={crun.task.L}, H={crun.task.H}); "
                 f"col err {crun.eval['col_error']:.3f}, row err {crun.eval['row_error']:.3f}")
    out.append(ctx.save_figure(fig, "column-softmax", tight=False))

    # 3. Loss curves: excess over the Bayes loss of the same batches, with the structure-blind excess.
    groups = [g for g in ((mech, "mechanism model"), (col, "column-check model")) if g[0]]
    fig, axes = plt.subplots(1, len(groups), figsize=(5.2 * len(groups), 4), squeeze=False)
    for ax, (runs, label) in zip(axes[0], groups):
        for i, r in enumerate(runs):
            steps = r.log.column("step")
            bl = np.asarray(r.log.column("bayes_loss"))
            ex = np.asarray(r.log.column("loss")) - bl
            blind = np.asarray(r.blind_curve[-len(steps):]) - bl
            ax.plot(steps, np.maximum(ex, 1e-5), color=f"C{i}", lw=1, label=f"model - BMA, seed {i}")
            ax.plot(steps, np.maximum(blind, 1e-5), color=f"C{i}", lw=0.8, ls=":",
                    label="structure-blind - BMA" if i == 0 else None)
        ax.axvline(runs[0].recipe.steps1, color="k", lw=0.6, ls="--")
        ax.set_yscale("log")
        ax.set(xlabel="training step (dashed line: stage 1 | stage 2)",
               ylabel="loss - BMA loss, same batch (nats; clipped at 1e-5)",
               title=f"{label}: d={runs[0].task.d}, L={runs[0].task.L}, H={runs[0].task.H}")
        ax.legend(fontsize=6)
    fig.suptitle("W.E1: training loss against the Bayes and structure-blind losses")
    out.append(ctx.save_figure(fig, "loss-curves"))
    return out


W_E1 = Claim(
    id="W.E1",
    title="Trained model: copier heads, block-diagonal W_KQ, W ≈ log pi by column softmax",
    source=Source("W", "Figs. 2-3, 6; section 5", "trained at L=10, H=10, d=5 (and d=20, H=50, L=3); "
                  "(1/d)||σ_col(W_tf) - σ_col(log pi)||_1 = 0.0278 vs row 0.350"),
    primary=PrimaryReading(
        statement=("Trained, the model learns the construction: K = L layer-1 heads, each copying one example; "
                   "W_KQ becomes block-diagonal (off-diagonal blocks -> 0); the column softmax of W_OV approximates "
                   "pi; layer-2 attention approximates the BMA posterior; and W_tf matches log pi by column softmax "
                   "(Prop. 1), with column-softmax error < 0.05 in the experiments."),
        seed="000", lines="183, 253-258",
        setting="W's two-layer disentangled transformer with RPE on W's task (fixed pi, a fresh random recursive "
                "tree per prompt); W gives no training recipe beyond the initialisation notes of lines 253-255.",
        review=("Decided by the mechanism W describes, each part against a wrong mechanism measured on the same "
                "seed: copier heads (majority of each head's mass on its copy), the column-softmax error < 0.05 (W's "
                "own number, line 183), and layer-2 attention ≈ BMA, σ(W_OV) ≈ pi, block-diagonal W_KQ and the loss "
                "near BMA, each closing >= 80% of the distance from the wrong mechanism (structure-blind attention "
                "and loss, uniform output, the random init of W_KQ) to W's (our reading of '≈'). Coverage of all L "
                "examples is decided only from an i.i.d. w_L start (paper profile): the recipe's one-to-one init "
                "plants it. The row-softmax error is W Prop. 1's free gauge: reported beside the value the "
                "column-centred log pi alone predicts, never deciding. W_tf read per head is stricter (a finding). "
                "W shows what its trained model learns, not that every run of a recipe gets there: each criterion "
                "is decided on the mean over training runs, the copier criterion over all runs and the layer-2 "
                "criteria (attention, σ(W_OV), W_KQ, loss) over the runs whose copier heads formed, since layer 2 "
                "reads the copies; that every run forms the copier heads is a stricter finding (about 1 run in "
                "6-12 of the recipe here keeps one head uncopied). "
                "Negative controls (the init, an i.i.d. start, layer 2 wired to reversed edges, uniform layer 2) "
                "go through the same check and must FAIL.")),
    statement=("Primary reading: W's trained mechanism, seed 000 lines 183 and 253-258 (copier heads, column-softmax "
               "error < 0.05, layer-2 attention ≈ BMA, σ(W_OV) ≈ pi, block-diagonal W_KQ, loss near BMA's, and "
               "coverage of every example from a start that does not plant it); reported as findings: W_tf read per "
               "head (stricter), every run forming the copier heads (stricter); reported, never deciding: the "
               "row-softmax error beside its gauge prediction. "
        "W's model (K = L copier heads, disentangled residual, one bilinear layer-2 head, mixture output "
        "sum_h' A(h,h') softmax(W_OV)[x_h']) trained on W's task with pi drawn once from the prior (default: "
        "Dirichlet(1) rows floored at 0.2/d) and fixed, a fresh random recursive tree per prompt, stationary root "
        "law. Recipe: sim.papers.wei.recipes (offset-0 entry of w_H starts +8, w_L a random one-to-one "
        "preference +2; stage 1 all parameters with weight decay on W_KQ, stage 2 W_KQ and W_OV). Mechanism model "
        "at d=5, L=10, H=10 (quick, standard, paper); column check at W's d=20, H=50, L=3. Conclusion "
        "(sim.papers.wei.claims.trained.decide_w_e1), each criterion on the mean over seeds beyond z s.e.: (1) every "
        "layer-1 head puts > 1/2 of its attention on the same-position token of one context example at every "
        "target position; (2) column-softmax error of W_tf (mean of W_KQ's diagonal blocks) < col_threshold "
        "(0.05); (3)-(6) with closed = 1 - dist(model) / dist(wrong mechanism) on the same seed (and prompts): "
        "layer-2 attention's mean TV from the BMA posterior against the structure-blind attention's, "
        "(1/d)||σ(W_OV) - pi||_1 against the uniform output's, W_KQ's centred off-/diagonal block norm ratio "
        "against the init's, and the loss excess over BMA against the structure-blind predictor's: closed >= "
        "gap_threshold (0.8), on the runs whose copier heads formed (copier score > 1/2; a stuck run counts in (1) "
        "and the finding below); (7) paper profile only: the heads of every i.i.d.-start seed cover all L examples "
        "(elsewhere NOT_RUN: the permutation init covers them at step 0). Stricter finding: every run forms the copier "
        "heads (one run at or below 1/2 refutes it; the rate of such runs with its Clopper-Pearson interval). "
        "Reported beside them: the row-softmax "
        "error with the value column-centred log pi alone gives (W Prop. 1's free gauge, the prior's 5-95% "
        "range), the raw distances, losses of model, BMA and structure-blind predictor. Negative controls through "
        "the same check: the untrained init, an i.i.d. w_L init, W's construction with W_KQ = blockdiag(log pi^T) "
        "(reversed edges) and with W_KQ = 0 (uniform layer 2)."),
    assumptions=("W's task: one random recursive tree per prompt, shared by the L examples and the target",
                 "pi > 0 entrywise (log pi finite)"),
    checks={"trained": _w_e1_trained},
    jobs={"trained": _w_e1_jobs},
    settings={
        # Seeds decided sequentially (sim.sequential). About 1 run in 6-12 keeps a layer-1 head uncopied (a
        # local minimum more steps do not leave: 2 of 24 runs at 400 and at 800 stage-1 steps), so the
        # mean over runs needs up to ~30 seeds at a random master seed; a mechanism model is cheap. The
        # column criterion sits 20-50 s.e. inside its line on 4 seeds and a column model costs ~5 mechanism
        # models, so the column models follow "seeds" only up to col_seeds_cap.
        "quick": {"tiers": ("trained",), "d": 5, "L": 10, "H": 10, "seeds": 34, "seeds_start": 4, "seeds_step": 6,
                  "seeds_also": ("col_seeds",), "col_seeds_cap": 6, "n_eval": 4096,
                  "steps1": 400, "batch1": 256, "steps2": 500, "batch2": 512,
                  "col_d": 20, "col_L": 3, "col_H": 50, "col_seeds": 4, "col_n_eval": 1024,
                  "col_steps1": 300, "col_batch1": 256, "col_steps2": 800, "col_batch2": 256},
        "standard": {"tiers": ("trained",), "d": 5, "L": 10, "H": 10, "seeds": 40, "seeds_start": 8, "seeds_step": 8,
                     "seeds_also": ("col_seeds",), "col_seeds_cap": 16, "n_eval": 8192,
                     "steps1": 800, "batch1": 256, "steps2": 1000, "batch2": 512,
                     "col_d": 20, "col_L": 3, "col_H": 50, "col_seeds": 16, "col_n_eval": 2048,
                     "col_steps1": 400, "col_batch1": 256, "col_steps2": 1500, "col_batch2": 256},
        "paper": {"tiers": ("trained",), "d": 5, "L": 10, "H": 10, "seeds": 40, "seeds_start": 8, "seeds_step": 8,
                  "seeds_also": ("col_seeds",), "col_seeds_cap": 24, "n_eval": 16384,
                  "steps1": 1500, "batch1": 256, "steps2": 3000, "batch2": 1024,
                  "col_d": 20, "col_L": 3, "col_H": 50, "col_seeds": 24, "col_n_eval": 4096,
                  "col_steps1": 600, "col_batch1": 256, "col_steps2": 4000, "col_batch2": 512,
                  "coverage_iid_seeds": 1, "iid_steps1": 6000},
    },
    params={"col_threshold": 0.05, "gap_threshold": 0.8},
    prior_dependent=True,
)


# ============================================================================= W.E2 ==
def copies_one_example_each(rep) -> bool:
    """Whether the heads of a copier report copy the examples one each (W's copier heads)."""
    return len(rep.example) == rep.L and sorted(int(e) for e in rep.example) == list(range(rep.L))


def example_heads(rep) -> np.ndarray:
    """``example -> head`` for a copier report with as many heads as examples.

    Each head's own example (``example`` of a :class:`~sim.papers.wei.probes.CopierReport`) when
    they are distinct; otherwise the one-to-one matching that maximises the total mean copy mass
    ``sum_k mean_h mass[k, sigma(k), h]`` (``scipy.optimize.linear_sum_assignment``). The two
    agree whenever the heads' own examples are distinct: each head then gets its largest mass,
    the largest total there is."""
    from scipy.optimize import linear_sum_assignment

    head_of = np.empty(rep.L, dtype=int)
    if copies_one_example_each(rep):
        head_of[rep.example] = np.arange(rep.L)
        return head_of
    heads, examples = linear_sum_assignment(rep.mass.mean(axis=2), maximize=True)
    head_of[examples] = heads
    return head_of


def extend_to_L(model, L_new: int, copier=None):
    """The reading W.E2 checks: run a model trained with ``L`` examples on ``L_new`` examples.

    ``w_L`` indexes absolute examples, so a model trained at ``L`` cannot read ``L' != L``
    examples as it is. The rule ("clone"), built from the trained parameters only:

    - heads are matched to examples by the copier probe (head ``k`` copies ``sigma(k)``); where
      two heads copy the same example (a run that did not form one copier per example), by the
      one-to-one matching of largest total copy mass (:func:`example_heads`);
    - for ``L' <= L`` the heads of examples ``0..L'-1`` are kept with their trained ``w_H``
      row, their ``w_L`` entries on the examples present, their ``W_KQ`` blocks and
      ``W_OV``: the trained model with the missing examples removed;
    - for ``L' > L`` example ``j >= L`` gets a clone of the head of example ``j mod L``:
      the same ``w_H`` row, its trained score on its own example at ``j`` and the mean of
      its scores on the other examples everywhere else; ``W_KQ`` block ``(i, j)`` is the
      trained block of the two heads' originals, except 0 between two clones of one head
      (a head never met itself on another example in training).

    At ``L' = L`` the model is returned unchanged (up to the head order). A model trained at
    ``L = 1`` has no score on another example; its clones score other examples ``10`` below
    their own (near-hard copying). Returns a new model.
    """
    import torch

    from sim.papers.wei.probes import copier_report

    rep = copier_report(model) if copier is None else copier
    L, K, d = model.L, model.K, model.d
    if K != L:
        raise ValueError(f"extend_to_L needs one head per example (K = L), got K = {K} heads for L = {L}")
    head_of = example_heads(rep)
    src = [int(head_of[j % L]) for j in range(L_new)]  # head cloned for new example j
    w_H = model.w_H.detach()[src].clone()
    w_L_old = model.w_L.detach()
    w_L = torch.empty(L_new, L_new, dtype=w_L_old.dtype, device=w_L_old.device)
    for j, k in enumerate(src):
        own = w_L_old[k, j % L]
        others = torch.cat([w_L_old[k, :j % L], w_L_old[k, j % L + 1:]])
        w_L[j] = others.mean() if others.numel() else own - 10.0
        if j < L:  # a head on its own example: keep its trained scores on the examples present
            n = min(L, L_new)
            w_L[j, :n] = w_L_old[k, :n]
        w_L[j, j] = own
    blocks = model.W_KQ.detach().reshape(K, d, K, d)
    W_KQ = torch.zeros(L_new, d, L_new, d, dtype=blocks.dtype, device=blocks.device)
    for i, ki in enumerate(src):
        for j, kj in enumerate(src):
            if i == j or ki != kj:
                W_KQ[i, :, j, :] = blocks[ki, :, kj, :]
    kwargs = {"output": model.output} if hasattr(model, "output") else {}
    return type(model)(w_H, w_L, W_KQ.reshape(L_new * d, L_new * d), model.W_OV.detach().clone(), **kwargs)


#: W's construction sharp (near-exact copies, W_KQ = blockdiag(log pi)) and blurred (copies spread
#: over the examples, so layer 2 barely sees the structure): the reversed-generalisation control.
CONTROL_BETA_SHARP, E2_BLUR_BETA = 12.0, 0.3

#: Negative controls of W.E2: (what the model is, why it is the wrong mechanism).
E2_CONTROLS = (
    ("one model for every training L: the model trained at L={large} stands in for L={small}",
     "its output does not depend on the training L, so neither L can generalise better"),
    ("W's construction, blurred (beta 0.3) at the small training L={small} and sharp (beta 12) at L={large}",
     "training at the large L generalises better: the opposite of W's statement"),
)


def decide_w_e2(loss, bma, train_Ls, test_Ls, seeds, z: float):
    """W.E2's deciding check on per-prompt losses ``loss[seed][L_train][L_test]`` and BMA's
    ``bma[seed][L_test]`` (same prompts).

    ``G(L) = mean over the test L' that are no training L of mean(loss - BMA loss)`` per seed; the
    conclusion is ``G(L_max) - G(L_min) > 0`` strictly, beyond ``z`` s.e. across seeds
    (:func:`strictly_above`). Returns ``(outcome, G, diff Number, common test L', line)``."""
    common = [Lp for Lp in test_Ls if Lp not in train_Ls]
    if not common:
        raise ValueError(f"test_L {test_Ls} needs a value that is not a training L {train_Ls}")
    n = len(seeds)
    G = {Lt: [float(np.mean([(loss[i][Lt][Lp] - bma[i][Lp]).mean() for Lp in common])) for i in range(n)]
         for Lt in train_Ls}
    small, large = train_Ls[0], train_Ls[-1]
    diff = seed_number(f"generalisation: excess(trained at L={large}) - excess(trained at L={small}) (paired by seed)",
                       [G[large][i] - G[small][i] for i in range(n)], seeds, tolerance=0.0)
    out = strictly_above(diff, 0.0, z)
    line = (f"excess(L={large}) - excess(L={small}) at test L' in {common}: {diff.value:.4g} ± {diff.stderr:.2g} "
            f"nats ({out.value}, needs > 0)")
    return out, G, diff, common, line


def _w_e2_train_jobs(ctx: Context) -> tuple[list, list[dict]]:
    """W.E2's matrices (one per seed) and its jobs: one model per seed and training L."""
    s = ctx.settings
    recipe, kind = WRecipe.from_settings(s), s.get("task", "w")
    pis = [prior_for(ctx, s["d"]).sample(ctx.rng(f"pi/{i}"), 1)[0] for i in range(s["seeds"])]
    jobs = [{"pi": pis[i], "L": Lt, "H": s["H"], "kind": kind, "fixed_seed": ctx.seed_for(f"fixed-tree/{i}"),
             "recipe": recipe, "device": ctx.device, "init_seed": ctx.seed_for(f"init/{i}/{Lt}"),
             "data_seed": ctx.seed_for(f"data/{i}/{Lt}")} for i in range(s["seeds"]) for Lt in sorted(s["train_L"])]
    return pis, jobs


def _w_e2_jobs(ctx: Context) -> list:
    """W.E2's models as the cost plan sees them."""
    return planned_jobs(**job_args(_w_e2_train_jobs(ctx)[1], "W.E2 model"))


def _w_e2_trained(ctx: Context) -> TierResult:
    with threads_for(ctx):
        return _w_e2(ctx)


def _w_e2(ctx: Context) -> TierResult:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sim.montecarlo import mean_estimate
    from sim.papers.wei.model import wei_construction
    from sim.papers.wei.probes import prompt_losses
    from sim.train import make_generator

    s = ctx.settings
    d, H = s["d"], s["H"]
    train_Ls, test_Ls = sorted(s["train_L"]), sorted(s["test_L"])
    n_seeds, n_eval = s["seeds"], s["n_eval"]
    # loss[seed][L_train][L_test] = per-prompt arrays; bma/blind[seed][L_test]
    seeds = []
    recipe, kind = WRecipe.from_settings(s), s.get("task", "w")
    pis, jobs = _w_e2_train_jobs(ctx)
    runs = run_jobs(ctx, jobs, "W.E2 model")
    trained = {(i, Lt): r.model for (i, Lt), r in zip(((i, Lt) for i in range(n_seeds) for Lt in train_Ls), runs)}
    secs, cpu = sum(r.seconds for r in runs), sum(r.cpu_seconds for r in runs)
    # Runs whose heads did not form one copier per example: the clone rule matches them by copy mass.
    from sim.papers.wei.probes import copier_report

    copiers = {key: copier_report(m) for key, m in trained.items()}  # one probe per trained model
    matched = [key for key, rep in copiers.items() if not copies_one_example_each(rep)]
    tokens = []
    for i in range(n_seeds):
        eval_seed = ctx.seed_for(f"eval/{i}")
        seeds.append(eval_seed)
        # Nested evaluation prompts: the first L' examples of one set of prompts with max(L') examples.
        big = WTask(pis[i], max(test_Ls), H, device=ctx.device)
        tokens.append(big.draw(make_generator(eval_seed, ctx.device), n_eval)[0])

    def loss_table(model_at, copier_at=None):
        """Per-prompt losses ``[seed][L_train][L_test]`` of ``model_at(seed, L_train)`` run at each test L'
        (the copier probe that matches its heads to examples from ``copier_at``, else read once per model)."""
        table = []
        for i in range(n_seeds):
            table.append({})
            for Lt in train_Ls:
                table[i][Lt] = {}
                m = model_at(i, Lt)
                rep = copier_at(i, Lt) if copier_at is not None else None
                if rep is None and any(Lp != Lt for Lp in test_Ls):
                    rep = copier_report(m)
                for Lp in test_Ls:
                    out = prompt_losses(m if Lp == Lt else extend_to_L(m, Lp, copier=rep),
                                        torch_cat_examples(tokens[i], Lp), pis[i])
                    table[i][Lt][Lp] = out["model"]
                    bma[i][Lp], blind[i][Lp] = out["bma"], out["blind"]
        return table

    bma, blind = [{} for _ in range(n_seeds)], [{} for _ in range(n_seeds)]
    loss = loss_table(lambda i, Lt: trained[i, Lt], lambda i, Lt: copiers[i, Lt])
    outcome, G, diff, common, line = decide_w_e2(loss, bma, train_Ls, test_Ls, seeds, ctx.z)
    small, large = train_Ls[0], train_Ls[-1]
    # Controls through the same check. One model for every training L (the one trained at the largest):
    # its table is the trained table's column for that L, so it costs nothing.
    controls = []
    tables = [[{Lt: loss[i][large] for Lt in train_Ls} for i in range(n_seeds)]]
    if all(np.all(pi > 0) for pi in pis):  # W's construction needs log pi
        tables.append(loss_table(lambda i, Lt: wei_construction(pis[i], Lt, H, E2_BLUR_BETA if Lt == small
                                                                else CONTROL_BETA_SHARP)))
    for (name, why), table in zip(E2_CONTROLS, tables):
        c_out, _, c_diff, _, c_line = decide_w_e2(table, bma, train_Ls, test_Ls, seeds, ctx.z)
        controls.append(Control(name.format(small=small, large=large), why, tier_verdict([], c_out), c_line,
                                numbers=(c_diff,)))
    numbers, readings, outs = [], [], {"small L generalises better": outcome}
    for Lt in train_Ls:
        numbers.append(seed_number(f"trained at L={Lt}: mean excess loss over BMA (nats) at test L' in {common}",
                                    G[Lt], seeds))
    numbers.append(diff)

    def excess(i, Lt, Lp):
        return float((loss[i][Lt][Lp] - bma[i][Lp]).mean())

    # For each training L: loss at the largest test L' below the loss at the smallest (paired per prompt).
    falls, fall_nums, all_rises = [], [], []
    for Lt in train_Ls:
        drops = [mean_estimate(loss[i][Lt][test_Ls[0]] - loss[i][Lt][test_Ls[-1]], seeds[i]) for i in range(n_seeds)]
        num = seed_number(f"trained at L={Lt}: loss(L'={test_Ls[0]}) - loss(L'={test_Ls[-1]})",
                           [e.value for e in drops], seeds, mc_se=[e.stderr for e in drops], tolerance=0.0)
        numbers.append(num)
        fall_nums.append(num)
        o = compare(num.value, 0.0, stderr=num.stderr, z=ctx.z, df=num.df)
        falls.append(o)
        # Monotone reading: no significant rise between consecutive test L'.
        rises = []
        for a, b in zip(test_Ls[:-1], test_Ls[1:]):
            st = [mean_estimate(loss[i][Lt][b] - loss[i][Lt][a], seeds[i]) for i in range(n_seeds)]
            nb = seed_number("rise", [e.value for e in st], seeds, mc_se=[e.stderr for e in st])
            if compare(nb.value, 0.0, stderr=nb.stderr, z=ctx.z, df=nb.df) is Outcome.HELD:
                rises.append(f"{a}->{b}: +{nb.value:.4f}±{nb.stderr:.2g}")
        all_rises.append((Lt, rises))
    # Not in the seed (the catalogue adds it): the loss falls as the test L' grows, for every training L.
    falls_out = combine_outcomes(falls)
    findings = [
        Finding(FindingKind.STRICTER, "the catalogue's second criterion, not in the seed: for every training L the "
                "loss at the largest test L' is below the loss at the smallest", Verdict(OUTCOME_VERDICT[falls_out]),
                f"{FALLS}: {falls_out.value} for training L in {train_Ls}", numbers=tuple(fall_nums)),
        Finding(FindingKind.STRICTER, "the loss is non-increasing between consecutive test L', for every training L",
                Verdict.PASS if not any(r for _, r in all_rises) else Verdict.FAIL,
                "no significant rise between consecutive test L'" if not any(r for _, r in all_rises) else
                f"{sum(len(r) for _, r in all_rises)} significant rises between consecutive test L', e.g. trained at "
                + next(f"L={Lt}: {r[0]}" for Lt, r in all_rises if r),
                counterexample={f"trained at L={Lt}": r for Lt, r in all_rises if r} or None),
        Finding(FindingKind.UNSTATED, "how a model trained at L runs at L' != L (W's w_L indexes absolute examples): "
                "read by the clone rule extend_to_L; truncation would make loss(L' > L) = loss(L) by construction",
                Verdict.NOT_RUN, "W does not say how its w_L extends to L' != L; the clone rule is ours; "
                f"{len(matched)} of {len(trained)} trained models have heads that do not copy one example each and "
                "are matched to examples by the largest total copy mass")]
    conclusion = combine_outcomes(list(outs.values()))
    assumptions = task_assumptions(pis, kind)
    for Lp in test_Ls:
        numbers.append(seed_number(f"BMA loss at test L'={Lp}", [bma[i][Lp].mean() for i in range(n_seeds)], seeds))
    numbers.append(seed_number("structure-blind loss", [blind[i][test_Ls[0]].mean() for i in range(n_seeds)],
                                seeds))
    numbers.append(Number("trained models whose heads do not copy one example each (matched to examples by the "
                          "largest total copy mass)", len(matched), n=len(trained), kind="trained",
                          note=", ".join(f"seed {i}, L={Lt}" for i, Lt in matched)))
    numbers.append(Number("training seconds (all models)", round(secs, 1), kind="trained",
                          note=f"device {ctx.device}; process CPU seconds {cpu:.1f}; recipe: {recipe.describe()}"))
    for k, o in outs.items():
        readings.insert(0, {"name": f"criterion: {k}", "verdict": OUTCOME_VERDICT[o], "detail": line})
    cex = None
    if conclusion is Outcome.VIOLATED:
        cex = {"failed criteria": [k for k, o in outs.items() if o is Outcome.VIOLATED],
               "pis": [record_matrix(pi) for pi in pis], "d": d, "H": H, "train_L": train_Ls, "test_L": test_Ls,
               "eval_seeds": seeds, "recipe": recipe.describe(),
               "mean loss [seed][L_train][L_test]": [{Lt: {Lp: float(loss[i][Lt][Lp].mean()) for Lp in test_Ls}
                                                      for Lt in train_Ls} for i in range(n_seeds)],
               "BMA loss [seed][L_test]": [{Lp: float(bma[i][Lp].mean()) for Lp in test_Ls} for i in range(n_seeds)],
               "structure-blind loss [seed]": [float(blind[i][test_Ls[0]].mean()) for i in range(n_seeds)]}
    res = TierResult(
        "trained", tier_verdict(assumptions, conclusion), conclusion,
        (f"d={d}, H={H}, train L {train_Ls}, test L' {test_Ls}, {n_seeds} seeds: excess loss over BMA at test "
         f"L' in {common}: " + ", ".join(f"trained at L={Lt}: {np.mean(G[Lt]):.4f}" for Lt in train_Ls)
         + f"; small L generalises better: {conclusion.value} (loss falls with L', a finding: {falls_out.value})"),
        assumptions=assumptions, numbers=numbers, counterexample=cex, readings=readings, findings=findings,
        controls=controls, budget="more seeds (paper profile)" if conclusion is Outcome.UNDECIDED else "")
    if not all(a.holds for a in assumptions):
        res.conclusion_without_assumptions = f"{conclusion.value} on inputs that break an assumption"
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    ax = axes[0]
    for c, Lt in enumerate(train_Ls):
        m = [np.mean([loss[i][Lt][Lp].mean() for i in range(n_seeds)]) for Lp in test_Ls]
        ax.plot(test_Ls, m, "o-", color=f"C{c}", ms=4, label=f"trained at L={Lt}")
    ax.plot(test_Ls, [np.mean([bma[i][Lp].mean() for i in range(n_seeds)]) for Lp in test_Ls], "k--", label="BMA")
    ax.axhline(np.mean([blind[i][test_Ls[0]].mean() for i in range(n_seeds)]), color="gray", ls=":",
               label="structure-blind")
    ax.set(xlabel="test L' (context examples)", ylabel="eval loss (nats, mean over seeds)", title="loss")
    ax.set_xscale("log")
    ax.legend(fontsize=7)
    ax = axes[1]
    for c, Lt in enumerate(train_Ls):
        ex = np.array([[excess(i, Lt, Lp) for Lp in test_Ls] for i in range(n_seeds)])  # (seeds, L')
        se = ex.std(axis=0, ddof=1) / math.sqrt(n_seeds) if n_seeds > 1 else np.zeros(len(test_Ls))
        ax.errorbar(test_Ls, ex.mean(axis=0), yerr=se, fmt="o-", color=f"C{c}", ms=4, capsize=3,
                    label=f"trained at L={Lt} (± 1 s.e. over seeds)")
        ax.axvline(Lt, color=f"C{c}", lw=0.6, ls=":")
    ax.axhline(0, color="k", lw=0.6)
    ax.set(xlabel="test L' (dotted: training L)", ylabel="loss - BMA loss (nats)", title="excess over Bayes")
    ax.set_xscale("log")
    ax.legend(fontsize=7)
    fig.suptitle(f"W.E2: generalisation across L (d={d}, H={H}, {n_seeds} seeds)")
    res.figures.append(ctx.save_figure(fig, "loss-vs-test-L"))
    return res


def torch_cat_examples(tokens, L: int):
    """Prompts with the first ``L`` context examples of ``tokens`` and its target (last example)."""
    import torch

    return torch.cat([tokens[:, :L], tokens[:, -1:]], dim=1)


W_E2 = Claim(
    id="W.E2",
    title="Generalisation across the number of examples L",
    source=Source("W", "Fig. 5", "L in 1..20, d=10, H=15"),
    primary=PrimaryReading(
        statement=("Models trained with small L generalise better (Fig. 5), perhaps because they must learn the BMA "
                   "algorithm more firmly rather than lean on more statistics."),
        seed="001", lines="53",
        setting="W's trained model and task (as W.E1), tested at numbers of examples L' other than the training L "
                "(CLAIMS.md: L in 1..20, d = 10, H = 15).",
        review=("The seed states only that small-L training generalises better; that is what decides, as the excess "
                "loss over BMA at held-out L', paired by seed. The catalogue's second criterion (the loss falls as "
                "the test L' grows) is not in the seed: a finding. W does not say how a model with absolute w_L "
                "runs at L' != L; the clone rule used here is an unstated assumption, named as a finding. 'Better' "
                "is strict: a tie within round-off (a model that does not depend on the training L) FAILs. Negative "
                "controls go through the same check: one model standing in for every training L, and W's "
                "construction blurred at the small L and sharp at the large.")),
    statement=("Primary reading: 'training at small L generalises better' (seed 001, line 53); reported as findings: "
               "the loss falling as the test L' grows (the catalogue's addition, not in the seed) and the clone rule "
               "that runs a model at L' != L (an assumption W leaves unstated). "
        "Models trained as in W.E1 (same recipe) at several training L (d=10, H=15), each tested on fresh prompts "
        "with L' examples, the prompts nested across L' (the first L' examples of one set). A model trained at L "
        "runs at L' != L by the clone rule (sim.papers.wei.claims.trained.extend_to_L: drop the heads of absent examples "
        "for L' < L; for L' > L clone the head of example j mod L onto example j) — the reading checked, since "
        "W's w_L indexes absolute examples. Conclusion: (1) training at the smallest L generalises better: the "
        "mean excess loss over BMA (nats) at the test L' that are no training L (one set for all models) is "
        "smaller for the smallest training L than for the largest (paired by seed, strictly and beyond z s.e.; "
        "sim.papers.wei.claims.trained.decide_w_e2). Negative controls through the same check: the model trained at the "
        "largest L standing in for every training L, and W's construction blurred (beta 0.3) at the smallest "
        "training L and sharp (beta 12) at the largest. Findings: (2) for "
        "every training L the loss at the largest test L' is below the loss at the smallest (beyond z s.e.); "
        "consecutive rises."),
    assumptions=("W's task: one random recursive tree per prompt, shared by the L examples and the target",
                 "pi > 0 entrywise (log pi finite)"),
    checks={"trained": _w_e2_trained},
    jobs={"trained": _w_e2_jobs},
    settings={
        # Not run in quick: its short recipe is not W's setting, and there the difference sits within a few
        # of its Student-t margins (-0.0015 ± 0.00035 nats on 12 seeds at master seed 0, the large L ahead), so
        # the verdict would depend on the master seed. The settings stay for `--claims W.E2` runs and tests.
        "quick": {"tiers": (), "d": 10, "H": 15, "train_L": (2, 8), "test_L": (1, 2, 4, 8, 16),
                  "seeds": 12, "seeds_start": 4, "seeds_step": 4, "n_eval": 2048, "steps1": 300, "batch1": 256,
                  "steps2": 300, "batch2": 512},
        "standard": {"tiers": ("trained",), "d": 10, "H": 15, "train_L": (1, 2, 5, 10, 20),
                     "test_L": (1, 2, 3, 5, 10, 15, 20), "seeds": 24, "seeds_start": 8, "seeds_step": 8, "n_eval": 4096,
                     "steps1": 500, "batch1": 256, "steps2": 500, "batch2": 512},
        "paper": {"tiers": ("trained",), "d": 10, "H": 15, "train_L": (1, 2, 3, 5, 10, 15, 20),
                  "test_L": tuple(range(1, 21)), "seeds": 32, "seeds_start": 8, "seeds_step": 8, "n_eval": 8192,
                  "steps1": 1500, "batch1": 256, "steps2": 2000, "batch2": 512},
    },
    params={},
    prior_dependent=True,
    decided_by="standard",
    pending=("decided by the standard profile (W's training L 1..20, sequential over up to 24 seeds): quick's short "
             "recipe is not W's setting, and there the generalisation difference is within a few Student-t margins "
             "of 0, so its verdict would change with the master seed (`icl-verify run --profile standard --claims "
             "W.E2`)"),
)


CLAIMS = [W_E1, W_E2]
