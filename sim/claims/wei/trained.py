"""W's trained claims: the mechanism a trained two-layer transformer learns (W.E1) and how it
generalises across the number of examples (W.E2), next to their Bayes baselines with error
bars across seeds. The task, the training recipe and the process pool are in :mod:`.training`.
"""
from __future__ import annotations

import math
import time

import numpy as np

from ...verdict import Finding, FindingKind, Number, Outcome, TierResult, Verdict, compare, tier_verdict
from ..base import Claim, Context, PrimaryReading, Source
from ..inputs import prior_for, record_matrix
from .training import (OUTCOME_VERDICT, WRecipe, WRun, WTask, combine_outcomes, run_jobs, run_record, seed_number,
                       task_assumptions, threads_for, train_seeds)

__all__ = ["extend_to_L", "W_E1", "W_E2", "CLAIMS"]

FALLS = "loss falls as test L' grows"


# ============================================================================= W.E1 ==
def _w_e1_trained(ctx: Context) -> TierResult:
    with threads_for(ctx):
        return _w_e1(ctx)


def _w_e1(ctx: Context) -> TierResult:
    s, p = ctx.settings, ctx.params
    t0 = time.perf_counter()
    mech = train_seeds(ctx, "mechanism", s, "", s["seeds"])
    col = train_seeds(ctx, "column", s, "col_", s["col_seeds"]) if s.get("col_seeds", 0) else []
    kind = s.get("task", "w")
    assumptions = task_assumptions([r.task.pi for r in mech + col], kind)
    mseeds = [r.seeds["data"] for r in mech]
    cseeds = [r.seeds["data"] for r in (col or mech)]
    ev = [r.eval for r in mech]
    cev = [r.eval for r in (col or mech)]
    copier = seed_number("copier score: min over heads and query positions of the mass on its example's "
                          "same-position token", [e["copier"].min_score for e in ev], mseeds,
                          tolerance=p["copier_threshold"],
                          note="initial (at init): " + ", ".join(f"{r.initial_copier:.3f}" for r in mech))
    covered = [e["copier"].n_covered for e in ev]
    colerr = seed_number("column-softmax error (1/d)||σ_col(W_tf) - σ_col(log pi)||_1 (W_tf = mean diagonal "
                          "block)", [e["col_error"] for e in cev], cseeds, tolerance=p["col_threshold"],
                          note="W reports 0.0278")
    rowerr = seed_number("row-softmax error (1/d)||σ_row(W_tf) - pi||_1", [e["row_error"] for e in cev], cseeds,
                          note="W reports 0.350")
    row_minus_col = seed_number("row-softmax error - column-softmax error",
                                 [e["row_error"] - e["col_error"] for e in cev], cseeds, tolerance=p["row_margin"])
    closed = seed_number("fraction of the structure-blind-to-BMA loss gap closed", [e["gap_closed"] for e in ev],
                          mseeds, mc_se=[e["gap_closed_se"] for e in ev], tolerance=p["gap_threshold"])
    outs = {
        "copier": compare(copier.value, p["copier_threshold"], stderr=copier.stderr, z=ctx.z),
        "coverage": Outcome.HELD if all(c == mech[0].task.L for c in covered) else Outcome.VIOLATED,
        "column": compare(colerr.value, p["col_threshold"], stderr=colerr.stderr, z=ctx.z, direction="<="),
        "gap closed": compare(closed.value, p["gap_threshold"], stderr=closed.stderr, z=ctx.z),
    }
    # Not W's statement: W says to compare by column softmax (Prop. 1), not that the row error is larger by a margin.
    row_out = compare(row_minus_col.value, p["row_margin"], stderr=row_minus_col.stderr, z=ctx.z)
    conclusion = combine_outcomes(list(outs.values()))
    L, d, H = mech[0].task.L, mech[0].task.d, mech[0].task.H
    numbers = [copier,
               Number("examples covered by the heads (per seed)", float(min(covered)), n=len(covered),
                      kind="trained", note=f"per seed {covered} of L = {L}"),
               colerr, rowerr, row_minus_col, closed]
    for name, key in (("model", "loss_model"), ("BMA (Bayes-optimal)", "loss_bma"), ("structure-blind", "loss_blind")):
        numbers.append(seed_number(f"eval loss, {name} (nats)", [e[key].value for e in ev], mseeds,
                                    mc_se=[e[key].stderr for e in ev]))
    numbers += [
        seed_number("layer-2 attention vs BMA posterior: mean total variation", [e["tv_bma"].value for e in ev],
                     mseeds, mc_se=[e["tv_bma"].stderr for e in ev]),
        seed_number("σ(W_OV) vs pi: (1/d)||softmax_row(W_OV) - pi||_1", [e["ov_error"] for e in ev], mseeds),
        seed_number("W_KQ off-diagonal / diagonal block norm (column-centred)", [e["block"].ratio for e in ev],
                     mseeds, note="0 for W's block-diagonal W_KQ"),
        seed_number(f"column-softmax error of the d={d} mechanism model (not W's column setting)",
                     [e["col_error"] for e in ev], mseeds),
        Number("training seconds (all seeds, both settings)", round(sum(r.seconds for r in mech + col), 1),
               kind="trained", note=f"device {ctx.device}; process CPU seconds "
                                    f"{sum(r.cpu_seconds for r in mech + col):.1f}"),
    ]
    readings = [{"name": f"criterion: {k}", "verdict": OUTCOME_VERDICT[o],
                 "detail": _criterion_detail(k, outs, copier, covered, L, colerr, row_minus_col, closed, p)}
                for k, o in outs.items()]
    head_err = max(max(e["col_error_heads"]) for e in cev)
    findings = [
        Finding(FindingKind.STRICTER, f"the row-softmax error exceeds the column error by >= {p['row_margin']:g} "
                "(W reports 0.350 vs 0.0278; W's point is only that the column softmax is the right comparison)",
                Verdict(OUTCOME_VERDICT[row_out]),
                f"row - column softmax error {row_minus_col.value:.4f} ± {row_minus_col.stderr:.2g} against "
                f">= {p['row_margin']:g}", numbers=(row_minus_col, rowerr)),
        Finding(FindingKind.STRICTER, "W_tf read per head (each head's diagonal block) instead of their mean: "
                f"every block's column-softmax error < {p['col_threshold']:g}",
                Verdict.PASS if head_err < p["col_threshold"] else Verdict.FAIL,
                f"largest per-head column-softmax error {head_err:.4f} against < {p['col_threshold']:g}",
                numbers=(seed_number("largest per-head column-softmax error", [max(e["col_error_heads"]) for e in cev],
                                     cseeds),))]
    if "iid_reading" in s and s["iid_reading"]:
        findings.append(_iid_reading(ctx, s))
    cex = None
    if conclusion is Outcome.VIOLATED:
        cex = {"failed criteria": [k for k, o in outs.items() if o is Outcome.VIOLATED],
               "thresholds": dict(p), "mechanism runs": [run_record(r) for r in mech],
               "column runs": [run_record(r) for r in col]}
    res = TierResult(
        "trained", tier_verdict(assumptions, conclusion), conclusion,
        (f"d={d}, L={L}, H={H}, {len(mech)} seeds: copier {copier.value:.3f}±{copier.stderr:.2g} "
         f"(init {np.mean([r.initial_copier for r in mech]):.2f}), covered {covered}/{L}, gap closed "
         f"{closed.value:.3f}±{closed.stderr:.2g}; column check"
         + (f" at d={col[0].task.d}, L={col[0].task.L}, H={col[0].task.H}, {len(col)} seeds" if col else "")
         + f": col error {colerr.value:.4f}±{colerr.stderr:.2g}, row error {rowerr.value:.3f}±{rowerr.stderr:.2g}"
         + f"; {conclusion.value}"),
        assumptions=assumptions, numbers=numbers, counterexample=cex, readings=readings, findings=findings,
        budget=("the paper profile (more seeds and steps): " + ", ".join(k for k, o in outs.items()
                                                                       if o is Outcome.UNDECIDED))
        if conclusion is Outcome.UNDECIDED else "")
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


def _criterion_detail(k, outs, copier, covered, L, colerr, rmc, closed, p) -> str:
    if k == "copier":
        return f"min head score {copier.value:.4f} ± {copier.stderr:.2g} vs >= {p['copier_threshold']}"
    if k == "coverage":
        return f"examples covered per seed {covered} of L = {L}"
    if k == "column":
        return f"{colerr.value:.4f} ± {colerr.stderr:.2g} vs < {p['col_threshold']}"
    if k == "row larger":
        return f"row - column error {rmc.value:.4f} ± {rmc.stderr:.2g} vs >= {p['row_margin']}"
    return f"{closed.value:.4f} ± {closed.stderr:.2g} vs >= {p['gap_threshold']}"


def _iid_reading(ctx: Context, s) -> Finding:
    """The same recipe with an i.i.d. ``w_L`` start (no one-to-one preference): do the heads still cover?

    Seed 000 line 255 says the diagonal preference of ``w^L`` "can be initialised at random"; read
    literally, an i.i.d. random start (our recipe reads it as a random one-to-one preference)."""
    s2 = dict(s)
    s2["wL_init"] = "iid"
    s2["steps1"] = s.get("iid_steps1", s["steps1"])
    runs = train_seeds(ctx, "iid-start", s2, "", 1)
    e = runs[0].eval
    ok = e["copier"].all_covered and e["copier"].min_score >= ctx.params["copier_threshold"]
    return Finding(FindingKind.LITERAL, "'the diagonal preference of w^L can be initialised at random' read as an "
                   "i.i.d. random start of w_L (no one-to-one preference), 1 seed",
                   Verdict.PASS if ok else Verdict.FAIL,
                   (f"i.i.d. w_L start: {e['copier'].n_covered} of {runs[0].task.L} examples covered, copier "
                    f"{e['copier'].min_score:.3f}, after {runs[0].recipe.steps1 + runs[0].recipe.steps2} steps"),
                   numbers=(Number("examples covered (i.i.d. w_L start)", e["copier"].n_covered, kind="trained",
                                   seed=runs[0].seeds["data"]),
                            Number("copier score (i.i.d. w_L start)", e["copier"].min_score, kind="trained",
                                   seed=runs[0].seeds["data"])))


def _w_e1_figures(ctx: Context, mech: list[WRun], col: list[WRun]) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ...probes.wei import column_softmax, row_softmax, tree_pattern

    out = []

    # 1. Attention maps: copier map, layer-2 attention, BMA posterior with the true tree.
    run = mech[0]
    e = run.eval
    from ...probes.wei import bma_posterior_torch
    import torch

    with np.errstate(divide="ignore"):
        post = bma_posterior_torch(torch.as_tensor(e["example_tokens"][:1, :run.task.L]),
                                   torch.as_tensor(np.log(run.task.pi)))[0].numpy()
    tree = tree_pattern(e["example_parents"][0])
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.8))
    im = axes[0].imshow(e["copier"].mass.mean(axis=2), vmin=0, vmax=1, cmap="viridis")
    axes[0].set(xlabel="context example l", ylabel="layer-1 head k", title="mass on x^l_h (mean over h)")
    fig.colorbar(im, ax=axes[0], fraction=0.046)
    for ax, M, title in ((axes[1], e["example_attn"][0], "layer-2 attention (trained)"),
                         (axes[2], post, "BMA posterior; o = true parent")):
        im = ax.imshow(M, vmin=0, vmax=1, cmap="magma")
        ax.set(xlabel="candidate parent h'", ylabel="target position h", title=title)
        fig.colorbar(im, ax=ax, fraction=0.046)
    hh, pp = np.nonzero(tree)
    for ax in axes[1:]:
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
                   "pi; and W_tf matches log pi by column softmax (Prop. 1), with column-softmax error < 0.05 in the "
                   "experiments."),
        seed="000", lines="183, 253-258",
        setting="W's two-layer disentangled transformer with RPE on W's task (fixed pi, a fresh random recursive "
                "tree per prompt); W gives no training recipe beyond the initialisation notes of lines 253-255.",
        review=("Decided by the mechanism W describes: copier heads covering all L examples, the column-softmax "
                "error < 0.05 (W's own number, line 183), and the loss closing most of the structure-blind-to-BMA "
                "gap (the model implements BMA); the copier (0.9) and loss (80%) thresholds are our reading of "
                "'copies' and 'implements BMA'. A row error larger than the column error by a margin, and W_tf read "
                "per head, are stricter than W (findings); the i.i.d. start is the literal reading of 'can be "
                "initialised at random' (a finding, paper profile).")),
    statement=("Primary reading: W's trained mechanism, seed 000 lines 183 and 253-258 (copier heads covering "
               "every example, column-softmax error < 0.05, the loss near BMA's); reported as findings: the row "
               "error exceeding the column error by a margin and W_tf read per head (stricter), and the i.i.d. "
               "w_L start (literal, paper profile). "
        "W's model (K = L copier heads, disentangled residual, one bilinear layer-2 head, mixture output "
        "sum_h' A(h,h') softmax(W_OV)[x_h']) trained on W's task with pi drawn once from the prior (default: "
        "Dirichlet(1) rows floored at 0.2/d) and fixed, a fresh random recursive tree per prompt, stationary root "
        "law. Recipe: see the module docstring (offset-0 entry of w_H starts +8, w_L a random one-to-one "
        "preference +2; stage 1 all parameters with weight decay on W_KQ, stage 2 W_KQ and W_OV). Mechanism model "
        "at d=5, L=10, H=10 (quick, standard, paper); column check at W's d=20, H=50, L=3. Conclusion, each "
        "criterion on the mean over seeds beyond z s.e.: (1) every layer-1 head puts >= copier_threshold (0.9) of "
        "its attention on the same-position token of one context example at every target position; (2) the heads "
        "together cover all L examples (every seed); (3) column-softmax error of W_tf (mean of W_KQ's diagonal "
        "blocks) < col_threshold (0.05); (4) the loss closes >= gap_threshold (0.8) of the gap between the structure-blind predictor (uniform attention over "
        "h' < h with the true pi) and the BMA loss, on fresh prompts. Reported beside them: the row-softmax error "
        "(a finding: larger than the column error by >= row_margin 0.05), layer-2 attention vs the BMA posterior "
        "(mean TV), σ(W_OV) vs pi, W_KQ's off-diagonal/diagonal block norms, losses of model, BMA and "
        "structure-blind predictor."),
    assumptions=("W's task: one random recursive tree per prompt, shared by the L examples and the target",
                 "pi > 0 entrywise (log pi finite)"),
    checks={"trained": _w_e1_trained},
    settings={
        "quick": {"tiers": ("trained",), "d": 5, "L": 10, "H": 10, "seeds": 3, "n_eval": 4096,
                  "steps1": 400, "batch1": 256, "steps2": 500, "batch2": 512,
                  "col_d": 20, "col_L": 3, "col_H": 50, "col_seeds": 2, "col_n_eval": 1024,
                  "col_steps1": 300, "col_batch1": 256, "col_steps2": 800, "col_batch2": 256},
        "standard": {"tiers": ("trained",), "d": 5, "L": 10, "H": 10, "seeds": 3, "n_eval": 8192,
                     "steps1": 800, "batch1": 256, "steps2": 1000, "batch2": 512,
                     "col_d": 20, "col_L": 3, "col_H": 50, "col_seeds": 3, "col_n_eval": 2048,
                     "col_steps1": 400, "col_batch1": 256, "col_steps2": 1500, "col_batch2": 256},
        "paper": {"tiers": ("trained",), "d": 5, "L": 10, "H": 10, "seeds": 5, "n_eval": 16384,
                  "steps1": 1500, "batch1": 256, "steps2": 3000, "batch2": 1024,
                  "col_d": 20, "col_L": 3, "col_H": 50, "col_seeds": 5, "col_n_eval": 4096,
                  "col_steps1": 600, "col_batch1": 256, "col_steps2": 4000, "col_batch2": 512,
                  "iid_reading": True, "iid_steps1": 6000},
    },
    params={"copier_threshold": 0.9, "col_threshold": 0.05, "row_margin": 0.05, "gap_threshold": 0.8},
    prior_dependent=True,
)


# ============================================================================= W.E2 ==
def extend_to_L(model, L_new: int, copier=None):
    """The reading W.E2 checks: run a model trained with ``L`` examples on ``L_new`` examples.

    ``w_L`` indexes absolute examples, so a model trained at ``L`` cannot read ``L' != L``
    examples as it is. The rule ("clone"), built from the trained parameters only:

    - heads are matched to examples by the copier probe (head ``k`` copies ``sigma(k)``);
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

    from ...probes.wei import copier_report

    rep = copier_report(model) if copier is None else copier
    L, K, d = model.L, model.K, model.d
    if sorted(int(e) for e in rep.example) != list(range(L)) or K != L:
        raise ValueError(f"extend_to_L needs one copier head per example (K = L = {L}); the heads copy "
                         f"{rep.example.tolist()}")
    head_of = np.empty(L, dtype=int)
    head_of[rep.example] = np.arange(K)  # example -> head
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


def _w_e2_trained(ctx: Context) -> TierResult:
    with threads_for(ctx):
        return _w_e2(ctx)


def _w_e2(ctx: Context) -> TierResult:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ...montecarlo import mean_estimate
    from ...probes.wei import prompt_losses
    from ...train import make_generator

    s = ctx.settings
    d, H = s["d"], s["H"]
    train_Ls, test_Ls = sorted(s["train_L"]), sorted(s["test_L"])
    recipe = WRecipe.from_settings(s)
    n_seeds, n_eval = s["seeds"], s["n_eval"]
    kind = s.get("task", "w")
    # loss[seed][L_train][L_test] = per-prompt arrays; bma/blind[seed][L_test]
    loss, bma, blind, pis, seeds, secs, cpu = [], [], [], [], [], 0.0, 0.0
    pis = [prior_for(ctx, d).sample(ctx.rng(f"pi/{i}"), 1)[0] for i in range(n_seeds)]
    jobs = [{"pi": pis[i], "L": Lt, "H": H, "kind": kind, "fixed_seed": ctx.seed_for(f"fixed-tree/{i}"),
             "recipe": recipe, "device": ctx.device, "init_seed": ctx.seed_for(f"init/{i}/{Lt}"),
             "data_seed": ctx.seed_for(f"data/{i}/{Lt}")} for i in range(n_seeds) for Lt in train_Ls]
    trained = iter(run_jobs(ctx, jobs, "W.E2 model"))
    for i in range(n_seeds):
        pi = pis[i]
        eval_seed = ctx.seed_for(f"eval/{i}")
        seeds.append(eval_seed)
        # Nested evaluation prompts: the first L' examples of one set of prompts with max(L') examples.
        big = WTask(pi, max(test_Ls), H, device=ctx.device)
        tokens, _ = big.draw(make_generator(eval_seed, ctx.device), n_eval)
        loss.append({})
        bma.append({}), blind.append({})
        for Lt in train_Ls:
            run = next(trained)
            secs += run.seconds
            cpu += run.cpu_seconds
            loss[i][Lt] = {}
            for Lp in test_Ls:
                x = torch_cat_examples(tokens, Lp)
                m = run.model if Lp == Lt else extend_to_L(run.model, Lp)
                out = prompt_losses(m, x, pi)
                loss[i][Lt][Lp] = out["model"]
                bma[i][Lp], blind[i][Lp] = out["bma"], out["blind"]
    # Excess loss over BMA (nats) at the test L' that are no training L, the same set for every model.
    common = [Lp for Lp in test_Ls if Lp not in train_Ls]
    if not common:
        raise ValueError(f"test_L {test_Ls} needs a value that is not a training L {train_Ls}")

    def excess(i, Lt, Lp):
        return float((loss[i][Lt][Lp] - bma[i][Lp]).mean())

    G = {Lt: [np.mean([excess(i, Lt, Lp) for Lp in common]) for i in range(n_seeds)] for Lt in train_Ls}
    numbers, readings, outs = [], [], {}
    for Lt in train_Ls:
        numbers.append(seed_number(f"trained at L={Lt}: mean excess loss over BMA (nats) at test L' in {common}",
                                    G[Lt], seeds))
    small, large = train_Ls[0], train_Ls[-1]
    diff = seed_number(f"generalisation: excess(trained at L={large}) - excess(trained at L={small}) (paired by seed)",
                        [G[large][i] - G[small][i] for i in range(n_seeds)], seeds, tolerance=0.0)
    numbers.append(diff)
    outs["small L generalises better"] = compare(diff.value, 0.0, stderr=diff.stderr, z=ctx.z)
    # For each training L: loss at the largest test L' below the loss at the smallest (paired per prompt).
    falls, fall_nums, all_rises = [], [], []
    for Lt in train_Ls:
        drops = [mean_estimate(loss[i][Lt][test_Ls[0]] - loss[i][Lt][test_Ls[-1]], seeds[i]) for i in range(n_seeds)]
        num = seed_number(f"trained at L={Lt}: loss(L'={test_Ls[0]}) - loss(L'={test_Ls[-1]})",
                           [e.value for e in drops], seeds, mc_se=[e.stderr for e in drops], tolerance=0.0)
        numbers.append(num)
        fall_nums.append(num)
        o = compare(num.value, 0.0, stderr=num.stderr, z=ctx.z)
        falls.append(o)
        # Monotone reading: no significant rise between consecutive test L'.
        rises = []
        for a, b in zip(test_Ls[:-1], test_Ls[1:]):
            st = [mean_estimate(loss[i][Lt][b] - loss[i][Lt][a], seeds[i]) for i in range(n_seeds)]
            nb = seed_number("rise", [e.value for e in st], seeds, mc_se=[e.stderr for e in st])
            if compare(nb.value, 0.0, stderr=nb.stderr, z=ctx.z) is Outcome.HELD:
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
                Verdict.NOT_RUN, "W does not say how its w_L extends to L' != L; the clone rule is ours")]
    conclusion = combine_outcomes(list(outs.values()))
    assumptions = task_assumptions(pis, kind)
    for Lp in test_Ls:
        numbers.append(seed_number(f"BMA loss at test L'={Lp}", [bma[i][Lp].mean() for i in range(n_seeds)], seeds))
    numbers.append(seed_number("structure-blind loss", [blind[i][test_Ls[0]].mean() for i in range(n_seeds)],
                                seeds))
    numbers.append(Number("training seconds (all models)", round(secs, 1), kind="trained",
                          note=f"device {ctx.device}; process CPU seconds {cpu:.1f}; recipe: {recipe.describe()}"))
    for k, o in outs.items():
        readings.insert(0, {"name": f"criterion: {k}", "verdict": OUTCOME_VERDICT[o], "detail": ""})
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
        budget="more seeds (paper profile)" if conclusion is Outcome.UNDECIDED else "")
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
                "runs at L' != L; the clone rule used here is an unstated assumption, named as a finding.")),
    statement=("Primary reading: 'training at small L generalises better' (seed 001, line 53); reported as findings: "
               "the loss falling as the test L' grows (the catalogue's addition, not in the seed) and the clone rule "
               "that runs a model at L' != L (an assumption W leaves unstated). "
        "Models trained as in W.E1 (same recipe) at several training L (d=10, H=15), each tested on fresh prompts "
        "with L' examples, the prompts nested across L' (the first L' examples of one set). A model trained at L "
        "runs at L' != L by the clone rule (sim.claims.wei.trained.extend_to_L: drop the heads of absent examples "
        "for L' < L; for L' > L clone the head of example j mod L onto example j) — the reading checked, since "
        "W's w_L indexes absolute examples. Conclusion: (1) training at the smallest L generalises better: the "
        "mean excess loss over BMA (nats) at the test L' that are no training L (one set for all models) is "
        "smaller for the smallest training L than for the largest (paired by seed, beyond z s.e.). Findings: (2) for "
        "every training L the loss at the largest test L' is below the loss at the smallest (beyond z s.e.); "
        "consecutive rises."),
    assumptions=("W's task: one random recursive tree per prompt, shared by the L examples and the target",
                 "pi > 0 entrywise (log pi finite)"),
    checks={"trained": _w_e2_trained},
    settings={
        "quick": {"tiers": ("trained",), "d": 10, "H": 15, "train_L": (2, 8), "test_L": (1, 2, 4, 8, 16),
                  "seeds": 2, "n_eval": 2048, "steps1": 300, "batch1": 256, "steps2": 300, "batch2": 512},
        "standard": {"tiers": ("trained",), "d": 10, "H": 15, "train_L": (1, 2, 5, 10, 20),
                     "test_L": (1, 2, 3, 5, 10, 15, 20), "seeds": 3, "n_eval": 4096,
                     "steps1": 500, "batch1": 256, "steps2": 500, "batch2": 512},
        "paper": {"tiers": ("trained",), "d": 10, "H": 15, "train_L": (1, 2, 3, 5, 10, 15, 20),
                  "test_L": tuple(range(1, 21)), "seeds": 5, "n_eval": 8192,
                  "steps1": 1500, "batch1": 256, "steps2": 2000, "batch2": 512},
    },
    params={},
    prior_dependent=True,
)


CLAIMS = [W_E1, W_E2]
