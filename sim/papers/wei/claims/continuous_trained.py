"""The trained tier of W.P2 (continuous inputs, W section 8): W's continuous transformer
trained on Gaussian chains along random recursive trees, its parent-selection accuracy
against the Gaussian BMA posterior across L. The claim itself is in :mod:`~sim.papers.wei.claims.continuous`,
which imports this module only when the trained tier runs (torch stays unloaded otherwise).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from sim.verdict import Assumption, Control, Finding, FindingKind, Number, Outcome, TierResult, compare, tier_verdict
from sim.claims.base import Context
from sim.claims.jobs import planned_jobs, run_jobs
from sim.claims.inputs import record_matrix
from sim.papers.wei.task import ORTHO_TOL, orthogonal_matrix, rho_assumption, undefined_rho_tier
from sim.papers.wei.recipes import W_P2_RECIPE, WRecipe
from sim.papers.wei.training import (combine_outcomes, init_wei_model, recursive_parents_torch, seed_number, strictly_above,
                       threads_for)

__all__ = ["ContinuousTask", "gaussian_bma_posterior_torch", "w_p2_trained_tier", "decide_w_p2_trained", "P2_CONTROLS",
           "UNTRAINED_INITS", "TRAINED_FRACTION", "loss_gap_closed", "train_continuous_job", "timing_run", "p2_jobs"]


@dataclass
class ContinuousTask:
    """W section 8's system: ``x_0 ~ N(0, I)``, ``x_h = rho A^T x_pa(h) + sqrt(1 - rho^2) eta_h`` on a
    fresh random recursive tree per prompt shared by the ``L`` examples and the target;
    inputs ``(B, L+1, H, d)`` float32."""

    A: np.ndarray
    rho: float
    L: int
    H: int
    device: str = "cpu"

    def __post_init__(self):
        import torch

        self._A = torch.as_tensor(np.asarray(self.A, dtype=np.float64), dtype=torch.float32, device=self.device)

    @property
    def d(self) -> int:
        return self._A.shape[0]

    def draw(self, gen, B: int):
        """``B`` prompts from the torch generator ``gen``: ``(x, parents)``, ``x`` ``(B, L+1, H, d)``,
        ``parents`` ``(B, H)``."""
        import torch

        L, H, d = self.L, self.H, self.d
        par = recursive_parents_torch(gen, B, H)  # (B, H)
        noise = torch.randn((B, L + 1, H, d), generator=gen, device=gen.device)
        x = torch.empty_like(noise)
        x[:, :, 0] = noise[:, :, 0]
        b = torch.arange(B, device=gen.device)
        s = math.sqrt(1.0 - self.rho ** 2)
        for h in range(1, H):
            xp = x[b, :, par[:, h]]  # (B, L+1, d)
            x[:, :, h] = self.rho * xp @ self._A + s * noise[:, :, h]  # row form of rho A^T x_pa
        return x, par

    def sampler(self, recipe: WRecipe):
        """``sample(gen, step) -> x`` for :func:`sim.train.train`: the recipe's batch size of the stage
        that ``step`` is in."""
        def sample(gen, step):
            return self.draw(gen, recipe.batch1 if step < recipe.steps1 else recipe.batch2)[0]

        return sample


def gaussian_bma_posterior_torch(context, A, rho: float):
    """W Proposition 2's BMA posterior ``(B, H, H)`` (row 0 zeros) from context ``(B, L, H, d)``:
    ``softmax_{h' < h} sum_l log N(x^l_h; rho A^T x^l_h', (1 - rho^2) I)``; agrees with
    :func:`theory.gaussian_bma_posterior`."""
    import torch

    B, L, H, d = context.shape
    m = rho * context @ A  # (B, L, H, d): means rho A^T x_h' in row form
    cross = torch.einsum("blhd,blkd->bhk", context, m)  # (B, H, H): sum_l x_h . m_h'
    sq = (m * m).sum(-1).sum(1)  # (B, H): sum_l ||m_h'||^2
    scores = (2 * cross - sq[:, None, :]) / (2 * (1 - rho * rho))  # (B, H, H), up to a per-h constant
    earlier = torch.ones(H, H, dtype=torch.bool, device=context.device).tril(-1)
    post = torch.softmax(scores.masked_fill(~earlier, float("-inf"))[:, 1:], dim=-1)
    return torch.cat([post.new_zeros(B, 1, H), post], dim=1)


def _p2_settings(ctx: Context) -> tuple:
    """``(d, H, rho, Ls, n_seeds, n_eval, recipe, A kind)`` of the trained tier from the settings."""
    s = ctx.settings
    return (s.get("trained_d", 3), s.get("trained_H", 8), float(s.get("trained_rho", 0.8)),
            sorted(s.get("trained_L", (1, 4, 16))), s.get("trained_seeds", 2), s.get("trained_n_eval", 2048),
            WRecipe.from_settings(s, "trained_", base=W_P2_RECIPE), s.get("A_kind", "orthogonal"))


def _p2_job_args(ctx: Context) -> dict:
    """:func:`sim.claims.jobs.run_jobs`'s arguments for the tier's models: one per seed and ``L``
    (seed outer), each on the seed's ``A`` with its own init and data seeds."""
    d, H, rho, Ls, n_seeds, _, recipe, kind = _p2_settings(ctx)
    jobs = []
    for i in range(n_seeds):
        A = orthogonal_matrix(ctx.rng(f"trained/A/{i}"), d, kind)
        jobs += [{"A": A, "rho": rho, "L": L, "H": H, "recipe": recipe, "device": ctx.device,
                  "init_seed": ctx.seed_for(f"trained/init/{i}/{L}"),
                  "data_seed": ctx.seed_for(f"trained/data/{i}/{L}")} for L in Ls]
    return {"fn": train_continuous_job, "jobs": jobs, "key": _p2_key, "label": "W.P2 trained model",
            "cost": _p2_cost}


def p2_jobs(ctx: Context) -> list:
    """The trained tier's models as the cost plan sees them (none where rho leaves the task undefined)."""
    if abs(_p2_settings(ctx)[2]) >= 1:
        return []
    return planned_jobs(**_p2_job_args(ctx))


def _p2_key(job) -> tuple:
    """Every input of :func:`train_continuous_job` (``A`` by its bytes; not the seed's index or ``progress``)."""
    return ("W.P2 trained", np.asarray(job["A"]).tobytes(), job["rho"], job["L"], job["H"], job["recipe"],
            job["init_seed"], job["data_seed"], job["device"])


def train_continuous_job(job) -> tuple:
    """One model of the trained tier from plain arguments (``A``, ``rho``, ``L``, ``H``, ``recipe``, seeds,
    ``device``): W's continuous model trained on the Gaussian chains with the BMA's loss logged beside its
    own. Returns ``(model, log)``; module level, so a worker process runs it."""
    import torch

    from sim.train import make_generator, train

    A, rho, L, H, recipe, dev = job["A"], float(job["rho"]), job["L"], job["H"], job["recipe"], job["device"]
    task = ContinuousTask(A, rho, L, H, device=dev)
    A_t = torch.as_tensor(A, dtype=torch.float32, device=dev)
    model = init_wei_model(task.d, L, H, recipe, generator=make_generator(job["init_seed"], dev), continuous=True)

    def bayes(x):
        post = gaussian_bma_posterior_torch(x[:, :L], A_t, rho)
        pred = post[:, 1:] @ (rho * x[:, L] @ A_t)  # (B, H-1, d)
        return float(torch.nn.functional.mse_loss(pred, x[:, L, 1:]))

    progress = job.get("progress")
    log = train(model, task.sampler(recipe), recipe.config(job["data_seed"]), device=dev, bayes_loss=bayes,
                progress=progress or False)
    return model, log


def _p2_cost(job):
    """What :func:`train_continuous_job` trains: the recipe's two stages of W's continuous model."""
    from sim.claims.jobs import Cost

    recipe = job["recipe"]
    size = {"d": int(np.asarray(job["A"]).shape[0]), "L": int(job["L"]), "H": int(job["H"])}
    return Cost.of("wei-continuous", "sim.papers.wei.claims.continuous_trained:timing_run",
                   steps=[({**size, "batch": recipe.batch1, "stage": 1}, recipe.steps1),
                          ({**size, "batch": recipe.batch2, "stage": 2}, recipe.steps2)])


#: The seed of the cost plan's timing runs: they time a step, no number of theirs is reported.
TIMING_SEED = 0


def timing_run(unit: str, shape, count: int, device: str = "cpu") -> None:
    """The cost plan's timing run (:mod:`sim.plan`): ``count`` training steps of W's continuous model at
    ``shape`` (``d, L, H``, ``batch``, ``stage``), on an orthogonal ``A``."""
    d, stage1 = int(shape["d"]), int(shape["stage"]) == 1
    recipe = WRecipe(steps1=int(count) if stage1 else 0, batch1=int(shape["batch"]),
                     steps2=0 if stage1 else int(count), batch2=int(shape["batch"]))
    train_continuous_job({"A": orthogonal_matrix(np.random.default_rng(TIMING_SEED), d), "rho": 0.8,
                          "L": int(shape["L"]), "H": int(shape["H"]), "recipe": recipe, "device": device,
                          "init_seed": TIMING_SEED, "data_seed": TIMING_SEED})


def w_p2_trained_tier(ctx: Context) -> TierResult:
    """W.P2, trained part: :class:`~sim.papers.wei.model.WeiContinuous` (same recipe as W.E1, mean-squared error) trained
    on the continuous system at each ``L`` of a grid; its parent selection (argmax of layer-2
    attention, positions ``h >= 2``) against the BMA posterior's on the same fresh prompts.

    Conclusion: the accuracy gap BMA - trained is positive at the smallest ``L`` and smaller at
    the largest ``L`` (both beyond ``z`` s.e., seeds and prompts paired; :func:`decide_w_p2_trained`), and
    the same check FAILs each of :data:`P2_CONTROLS` on the same prompts. A seed with a run that did
    not train (:func:`loss_gap_closed` below :data:`TRAINED_FRACTION` beyond ``z`` s.e.: a bad
    optimum, not the bilinear limit the lemma is about) leaves the decision and is counted in the
    report; with fewer than two seeds left, or most runs stuck, the tier is INCONCLUSIVE. Settings (prefix
    ``trained_``): ``d, H, rho, L`` (grid), ``seeds``, ``n_eval``, recipe fields
    (``steps1, batch1, ...``); ``A_kind`` as in the other tiers.
    """
    with threads_for(ctx):
        return _w_p2_trained(ctx)


#: Random inits the untrained control averages over: one random bilinear form may happen to align with
#: A (or against it), and at large L the summed scores amplify that; the mean over inits is the
#: untrained model's expected parent selection, which the seeds then compare.
UNTRAINED_INITS = 8

#: Negative controls of W.P2's trained tier: (key, what the model is, why it is the wrong mechanism).
P2_CONTROLS = (
    ("untrained", f"the recipe's init at each L (step 0), accuracy averaged over {UNTRAINED_INITS} random inits",
     "no learning: layer 2 ranks the candidates by a random bilinear form"),
    ("structure-blind", "uniform attention over h' < h at every L",
     "ignores the context, so its parent selection cannot improve with L"),
    ("BMA itself", "the Gaussian BMA posterior as the attention (no bilinear limit)",
     "has no representation gap: the gap the claim is about is 0 at every L"),
)


#: A run "trained" when its loss closes at least this share of the gap between the structure-blind
#: predictor's loss and the Bayes loss, on its own task (the majority of what there is to learn; N's
#: Fig. 2 reads convergence the same way). Runs are bimodal: a run stuck in a bad optimum closes ~0.1,
#: the others > 0.9, so the decision does not hinge on where in between the line falls.
TRAINED_FRACTION = 0.5


def loss_gap_closed(model, x, A_t, rho: float):
    """Share of the loss gap the trained ``model`` closes on prompts ``x`` of its own task:
    ``f = (U - M) / (U - B)`` with mean squared errors ``M`` (the model), ``B`` (the BMA posterior's
    prediction ``sum_h' post[h, h'] rho A^T x_h'``) and ``U`` (the same with structure-blind weights
    ``1/h``). Returns ``(f, se)``, ``se`` by the delta method over the prompts
    (``g_i = ((u_i - m_i) - f (u_i - b_i)) / (U - B)``)."""
    import torch

    from sim.papers.wei.probes import blind_attention

    with torch.no_grad():
        L, H = model.L, x.shape[2]
        target = x[:, L, 1:].double()
        mean = (rho * x[:, L] @ A_t).double()  # (B, H, d): rho A^T x_h' in row form

        def per_prompt(pred):
            return ((pred - target) ** 2).mean(dim=(1, 2)).cpu().numpy()

        m = per_prompt(model(x).double())
        b = per_prompt(gaussian_bma_posterior_torch(x[:, :L].double(), A_t.double(), rho)[:, 1:] @ mean)
        u = per_prompt(blind_attention(H, device=x.device)[None, 1:] @ mean)
    span = float(u.mean() - b.mean())
    f = float(u.mean() - m.mean()) / span
    g = ((u - m) - f * (u - b)) / span
    return f, float(g.std(ddof=1) / math.sqrt(g.size))


def decide_w_p2_trained(gaps: dict[int, list[np.ndarray]], seeds: list[int], z: float, label: str = "trained"):
    """W.P2's trained deciding check on per-prompt accuracy gaps ``gaps[L][seed]`` = BMA's parent
    selection minus the model's (same prompts, paired).

    Conclusion: the gap is positive at the smallest ``L`` and smaller at the largest, both strictly
    and beyond ``z`` s.e. (:func:`~sim.papers.wei.training.strictly_above`). Returns
    ``(outcome, {L: gap Number}, shrink Number, line)``."""
    from sim.montecarlo import mean_estimate

    Ls = sorted(gaps)

    def gap_number(name, per_seed):
        est = [mean_estimate(g, seeds[i]) for i, g in enumerate(per_seed)]
        return seed_number(name, [e.value for e in est], seeds, mc_se=[e.stderr for e in est])

    nums = {L: gap_number(f"accuracy gap BMA - {label} at L={L}", gaps[L]) for L in Ls}
    shrink = gap_number(f"{label}: gap(L={Ls[0]}) - gap(L={Ls[-1]}) (paired)",
                        [gaps[Ls[0]][i] - gaps[Ls[-1]][i] for i in range(len(seeds))])
    outs = [strictly_above(nums[Ls[0]], 0.0, z), strictly_above(shrink, 0.0, z)]
    line = (f"gap at L={Ls[0]} {nums[Ls[0]].value:.4f} ± {nums[Ls[0]].stderr:.2g} ({outs[0].value}, needs > 0); "
            f"shrink to L={Ls[-1]} {shrink.value:.4f} ± {shrink.stderr:.2g} ({outs[1].value}, needs > 0)")
    return combine_outcomes(outs), nums, shrink, line


def _w_p2_trained(ctx: Context) -> TierResult:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch

    from sim.montecarlo import mean_estimate
    from sim.papers.wei.probes import blind_attention, copier_report, layer2_attention, parent_accuracy
    from sim.train import make_generator

    s = ctx.settings
    d, H, rho, Ls, n_seeds, n_eval, recipe, kind = _p2_settings(ctx)
    if abs(rho) >= 1:
        return undefined_rho_tier("trained", rho, [rho_assumption(rho)])
    # gaps[model][L][seed]: per-prompt BMA - model parent-selection accuracy on the same prompts.
    gaps = {m: {L: [] for L in Ls} for m in ("trained",) + tuple(k for k, _, _ in P2_CONTROLS)}
    accs = {L: {"model": [], "bma": []} for L in Ls}
    seeds, As, secs, copiers = [], [], 0.0, {L: [] for L in Ls}
    closed = {}  # (seed index, L) -> (share of the loss gap closed, its s.e.)
    c0 = time.process_time()
    # every (seed, L) model on the grid runner; an earlier look of a sequential decision trained some already
    trained = iter(run_jobs(ctx, **_p2_job_args(ctx)))
    for i in range(n_seeds):
        A = orthogonal_matrix(ctx.rng(f"trained/A/{i}"), d, kind)
        As.append(A)
        A_t = torch.as_tensor(A, dtype=torch.float32, device=ctx.device)
        eval_seed = ctx.seed_for(f"trained/eval/{i}")
        seeds.append(eval_seed)
        for L in Ls:
            task = ContinuousTask(A, rho, L, H, device=ctx.device)
            init_seed = ctx.seed_for(f"trained/init/{i}/{L}")
            model, log = next(trained)
            secs += log.seconds
            copiers[L].append(copier_report(model).min_score)
            x, par = task.draw(make_generator(eval_seed, ctx.device), n_eval)
            closed[i, L] = loss_gap_closed(model, x, A_t, rho)
            post = gaussian_bma_posterior_torch(x[:, :L], A_t, rho).double().cpu().numpy()
            par = par.cpu().numpy()
            acc_b = parent_accuracy(post, par)
            gen0 = make_generator(init_seed, ctx.device)  # the trained model's init comes first
            untrained = np.mean([parent_accuracy(layer2_attention(init_wei_model(d, L, H, recipe, generator=gen0,
                                                                                 continuous=True), x), par)
                                 for _ in range(UNTRAINED_INITS)], axis=0)
            accuracy = {"trained": parent_accuracy(layer2_attention(model, x), par), "untrained": untrained,
                        "structure-blind": parent_accuracy(blind_attention(H).numpy()[None].repeat(n_eval, 0), par),
                        "BMA itself": acc_b}
            for m, acc in accuracy.items():
                gaps[m][L].append(acc_b - acc)  # per prompt, paired
            accs[L]["model"].append(mean_estimate(acc_b - gaps["trained"][L][-1], eval_seed))
            accs[L]["bma"].append(mean_estimate(acc_b, eval_seed))
    assumptions = [Assumption("A orthogonal", all(float(np.abs(A.T @ A - np.eye(d)).max()) <= ORTHO_TOL for A in As),
                              f"A kind {kind!r}"),
                   rho_assumption(rho)]
    # A run that did not train (stuck far from the Bayes loss on its own task) says nothing about the bilinear
    # limit the lemma is about: its seed leaves the decision and is counted (the controls keep every seed).
    stuck = sorted({i for (i, L), (f, se) in closed.items()
                    if compare(f, TRAINED_FRACTION, stderr=se, z=ctx.z) is Outcome.VIOLATED})
    kept = [i for i in range(n_seeds) if i not in stuck]
    trained_gaps = {L: [gaps["trained"][L][i] for i in kept] for L in Ls}
    if len(kept) < 2 or len(stuck) * 2 > n_seeds:  # too few trained runs, or the recipe mostly fails
        conclusion, gap_nums, shrink, line = decide_w_p2_trained(gaps["trained"], seeds, ctx.z)
        conclusion = Outcome.UNDECIDED
    else:
        conclusion, gap_nums, shrink, line = decide_w_p2_trained(trained_gaps, [seeds[i] for i in kept], ctx.z)
    controls = []
    for key, name, why in P2_CONTROLS:
        out, _, c_shrink, c_line = decide_w_p2_trained(gaps[key], seeds, ctx.z, label=key)
        controls.append(Control(name, why, tier_verdict(assumptions, out), c_line, numbers=(c_shrink,)))
    numbers = []
    for L in Ls:
        numbers += [gap_nums[L],
                    seed_number(f"trained parent-selection accuracy at L={L}", [e.value for e in accs[L]["model"]],
                                 seeds, mc_se=[e.stderr for e in accs[L]["model"]]),
                    seed_number(f"BMA parent-selection accuracy at L={L}", [e.value for e in accs[L]["bma"]],
                                 seeds, mc_se=[e.stderr for e in accs[L]["bma"]]),
                    seed_number(f"copier score of the trained model at L={L}", copiers[L], seeds)]
    numbers.append(shrink)
    numbers.append(Number(
        f"training runs that did not train (closed < {TRAINED_FRACTION:g} of the structure-blind-to-Bayes loss gap)",
        sum(1 for (f, se) in closed.values() if compare(f, TRAINED_FRACTION, stderr=se, z=ctx.z) is Outcome.VIOLATED),
        n=len(closed), kind="trained",
        note="share closed per run (seed index, L): " + ", ".join(f"({i}, {L}) {f:.3f}±{se:.2g}"
                                                                  for (i, L), (f, se) in sorted(closed.items()))
        + (f"; seeds {[seeds[i] for i in stuck]} left the decision" if stuck else "")))
    numbers.append(Number("training seconds (all models)", round(secs, 1), kind="trained",
                          note=f"device {ctx.device}; this process's CPU seconds (evaluation, and training where it "
                               "ran here rather than in worker processes) "
                               f"{time.process_time() - c0:.1f}; recipe: {recipe.describe()}"))
    tol = s.get("trained_gap_tol", 0.02)
    last = gap_nums[Ls[-1]]
    findings = [Finding(
        FindingKind.STRICTER, f"the trained gap is closed, below {tol:g} at L={Ls[-1]} (W says 'comparable' at large "
        "L, no number)", tier_verdict(assumptions, compare(last.value, tol, stderr=last.stderr, z=ctx.z, df=last.df,
                                                              direction="<=")),
        f"trained gap at L={Ls[-1]}: {last.value:.4f} ± {last.stderr:.2g} against {tol:g}", numbers=(last,))]
    cex = None
    if conclusion is Outcome.VIOLATED:
        cex = {"A": [record_matrix(A) for A in As], "rho": rho, "d": d, "H": H, "L grid": Ls, "n_eval": n_eval,
               "eval seeds": seeds, "recipe": recipe.describe(),
               "gap per seed [L]": {L: [float(np.mean(g)) for g in gaps["trained"][L]] for L in Ls},
               "required": "gap(L_min) > 0 and gap(L_min) - gap(L_max) > 0, beyond z s.e."}
    res = TierResult(
        "trained", tier_verdict(assumptions, conclusion), conclusion,
        (f"trained WeiContinuous (d={d}, H={H}, rho={rho}, {n_seeds} seeds): accuracy gap BMA - trained "
         + ", ".join(f"L={L}: {gap_nums[L].value:.4f}±{gap_nums[L].stderr:.2g}" for L in Ls)
         + f"; positive at L={Ls[0]} and shrinking: {conclusion.value}"
         + (f" ({len(stuck)} of {n_seeds} seeds left out: a run did not train)" if stuck else "")),
        assumptions=assumptions, numbers=numbers, counterexample=cex, findings=findings, controls=controls,
        budget=("more seeds or n_eval (trained_seeds, trained_n_eval)" if len(stuck) * 2 <= n_seeds else
                "a recipe that trains: most runs did not (trained_steps1/2, trained_lr1/2)")
        if conclusion is Outcome.UNDECIDED else "")
    if not all(a.holds for a in assumptions):
        res.conclusion_without_assumptions = f"{conclusion.value} on the input that breaks an assumption"
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.errorbar(Ls, [np.mean([e.value for e in accs[L]["bma"]]) for L in Ls], fmt="ks--", ms=4, label="BMA")
    ax.errorbar(Ls, [np.mean([e.value for e in accs[L]["model"]]) for L in Ls],
                yerr=[ctx.z * gap_nums[L].stderr for L in Ls], fmt="o-", ms=4, capsize=3,
                label=f"trained (± {ctx.z:g} s.e. of the gap)")
    ax.set_xscale("log")
    ax.set(xlabel="L (context examples)", ylabel="parent-selection accuracy (h >= 2)",
           title=f"W.P2 trained: accuracy vs BMA (d={d}, rho={rho})")
    ax.legend(fontsize=7)
    res.figures.append(ctx.save_figure(fig, "trained-accuracy-vs-L"))
    return res
