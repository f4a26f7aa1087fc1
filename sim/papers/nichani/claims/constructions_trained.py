"""The trained tier of N.K9: a disentangled transformer with two first-layer heads, trained on
a two-parent task, splits the parents across its heads. The claim itself is in
:mod:`~sim.papers.nichani.claims.constructions`, which imports this module only when the trained tier runs.
"""
from __future__ import annotations

import numpy as np
import torch

from sim.papers.nichani.task import population_losses
from sim.montecarlo import mean_estimate
from sim.papers.nichani.probes import head_attention, head_parent_masses, head_split, multiparent_patterns
from sim.verdict import Number, Outcome, TierResult
from sim.claims.base import Context, InstanceCheck, summarize_instances
from sim.papers.nichani.claims.experiments import model_probs
from sim.papers.nichani.claims.reporting import pyplot, trained_number, training_seeds
from sim.papers.nichani.task import N_ALPHA
from sim.papers.nichani.recipes import K9_RECIPE_DEFAULTS, recipe_from_settings
from sim.claims.jobs import planned_jobs, run_jobs
from sim.papers.nichani.training import MultiParentTask, disentangled_cost, sample_multiparent, train_disentangled

__all__ = ["K9_TRAINED_DEFAULTS", "n_k9_trained_tier", "k9_train_job", "k9_jobs"]


# T = 8: at T = 12 the same recipe (2,000 steps, init 0.01 or 0.1) left both heads diffuse (mass ~0.2 on
# either parent); at T = 8 the heads split by 1,000 steps (own-parent mass 0.63, loss within 0.02 of Bayes).
#: The trained tier's settings when the profile does not give them: the task (``S``, ``T``, the graph,
#: ``alpha``), seeds, evaluation and probe sizes, and the training recipe.
K9_TRAINED_DEFAULTS = {"trained_S": 3, "trained_T": 8, "trained_graph": "ngram", "trained_seeds": 2,
                       "trained_alpha": N_ALPHA, "trained_n_eval": 4096, "trained_n_probe": 1024,
                       "trained_recipe": {"name": "Adam from a small random start (N's multi_parent.ipynb uses AdamW)",
                                          "optimizer": "adam", "lr": 0.05, "steps": 1000, "batch": 512,
                                          "schedule": "cosine", "init_scale": 0.1}}


def _k9_settings(ctx: Context) -> dict:
    return {**K9_TRAINED_DEFAULTS, **{k: v for k, v in ctx.settings.items() if k.startswith("trained_")}}


def _k9_job_args(ctx: Context) -> dict:
    """:func:`sim.claims.jobs.run_jobs`'s arguments for the trained part's models: one 2-head model per
    seed, each on its own draw of the settings' graph."""
    from sim.papers.nichani.task import multiparent_graph

    s = _k9_settings(ctx)
    S, T = int(s["trained_S"]), int(s["trained_T"])
    recipe = recipe_from_settings(s["trained_recipe"], K9_RECIPE_DEFAULTS, where="N.K9 setting 'trained_recipe'")
    jobs = []
    for k, sd in enumerate(training_seeds(ctx, "trained/k9", int(s["trained_seeds"]))):
        sets = multiparent_graph(s["trained_graph"], T, 2, ctx.rng(f"trained/k9/graph{k}"))
        jobs.append({"S": S, "T": T, "parent_sets": tuple(tuple(int(v) for v in p) for p in sets),
                     "alpha": float(s["trained_alpha"]), "recipe": recipe, "seed": int(sd), "heads": (2, 1),
                     "multi": True, "device": ctx.device, "wrong": ctx.params.get("trained_wrong_task"),
                     "log_every": max(1, recipe.steps // 30)})
    return {"fn": k9_train_job, "jobs": jobs, "key": _k9_key, "cost": disentangled_cost,
            "label": f"N.K9 trained: 2-head model on the {s['trained_graph']} task, seed"}


def k9_jobs(ctx: Context) -> list:
    """The trained part's models as the cost plan sees them (only where the profile runs that part)."""
    return planned_jobs(**_k9_job_args(ctx)) if ctx.settings.get("trained_finding", False) else []


def _k9_key(job) -> tuple:
    return ("N.K9 trained",) + tuple(sorted((k, v) for k, v in job.items() if k != "progress"))


def k9_train_job(job) -> tuple:
    """One 2-head model from plain arguments (``_k9_job_args``): ``(model, log)``; module level, so a
    worker process runs it."""
    task = MultiParentTask(int(job["S"]), tuple(tuple(p) for p in job["parent_sets"]), float(job["alpha"]))
    return train_disentangled(task, job["recipe"], seed=int(job["seed"]), heads=tuple(job["heads"]),
                              device=job["device"], wrong=job["wrong"], log_every=int(job["log_every"]),
                              progress=job.get("progress"))


def n_k9_trained_tier(ctx: Context) -> TierResult:
    """N.K9's trained part: a disentangled transformer with 2 first-layer heads (heads [2, 1]),
    trained on a 2-parent task, splits the parents across its heads.

    Reads from ``ctx.settings`` (defaults in :data:`K9_TRAINED_DEFAULTS`): ``trained_S``,
    ``trained_T``, ``trained_graph`` (``ngram``: trigram ``p(i) = (i-2, i-1)``; ``notebook``: N's
    ``((i-1)//2, i-1)``; ``random``), ``trained_seeds``, ``trained_alpha``, ``trained_recipe``,
    ``trained_n_eval``, ``trained_n_probe``; from ``ctx.params`` (optional):
    ``trained_split_threshold`` (default 0.5) and ``trained_wrong_task`` (``None``,
    ``"shuffled"`` or ``"one-parent"``). Decided per seed: the heads' argmax parents are distinct and each head puts
    at least the threshold of its pattern-row attention (mean over prompts) on its parent;
    two heads holding the threshold on the same parent are a counterexample; heads still below
    the threshold on every parent are undecided at the recipe's budget.
    """
    from sim.papers.nichani.task import multiparent_add_alpha

    s = _k9_settings(ctx)
    S, T = int(s["trained_S"]), int(s["trained_T"])
    alpha = float(s["trained_alpha"])
    thr = float(ctx.params.get("trained_split_threshold", 0.5))
    wrong = ctx.params.get("trained_wrong_task")
    recipe = recipe_from_settings(s["trained_recipe"], K9_RECIPE_DEFAULTS, where="N.K9 setting 'trained_recipe'")
    args = _k9_job_args(ctx)
    seeds = [job["seed"] for job in args["jobs"]]
    checks, runs = [], []
    for k, (sd, job, (model, log)) in enumerate(zip(seeds, args["jobs"], run_jobs(ctx, **args))):
        sets = [list(p) for p in job["parent_sets"]]
        eval_seed = ctx.seed_for(f"trained/k9/eval{k}")
        x, rows = sample_multiparent(np.random.default_rng(eval_seed), S, sets, alpha, int(s["trained_n_eval"]))
        att = head_attention(model, torch.as_tensor(x[: int(s["trained_n_probe"])], device=ctx.device))
        split = head_split(head_parent_masses(att, sets), thr)
        f = model_probs(model, x, ctx.device)
        loss = mean_estimate(population_losses(f, rows), eval_seed)
        bayes = mean_estimate(population_losses(multiparent_add_alpha(x, sets, alpha, S), rows), eval_seed)
        one = mean_estimate(population_losses(multiparent_add_alpha(x, sets, alpha, S, use=(1,)), rows), eval_seed)
        runs.append({"seed": sd, "sets": sets, "att": att, "split": split, "loss": loss, "bayes": bayes, "one": one,
                     "log": log})
        # heads still diffuse (below the threshold, not settled on one parent) are undecided at this budget
        out = (Outcome.HELD if split.split else Outcome.VIOLATED if split.committed_together else Outcome.UNDECIDED)
        margin = float(split.own_mass.min() - thr) if split.distinct else -1.0
        checks.append(InstanceCheck({}, out, margin, {
            "conclusion": f"the two first-layer heads take distinct parents, each with attention >= {thr} on it",
            "graph": s["trained_graph"], "parent_sets": [list(p) for p in sets], "S": S, "T": T, "alpha": alpha,
            "training seed": sd, "recipe": recipe.describe(), "wrong task": wrong, **split.record(),
            "loss": loss.value, "Bayes loss (2-parent add-alpha)": bayes.value}))
    sds = [r["seed"] for r in runs]
    numbers = [
        Number("training recipe", recipe.steps, note=recipe.describe()),
        trained_number("smallest own-parent mass over the two heads", [float(r["split"].own_mass.min()) for r in runs],
                        sds, tolerance=thr),
        trained_number("largest other-parent mass over the two heads",
                        [float(np.sort(r["split"].masses, axis=1)[:, 0].max()) for r in runs], sds),
        trained_number("model loss", [r["loss"].value for r in runs], sds,
                        note=f"{s['trained_n_eval']} prompts per seed, population form"),
        trained_number("Bayes loss: 2-parent add-alpha (exact here: roots are uniform, independent of pi)",
                        [r["bayes"].value for r in runs], sds),
        trained_number("1-parent add-alpha (parent i-1 only; N's notebook's 'one NN' line)",
                        [r["one"].value for r in runs], sds),
    ]
    res = summarize_instances("trained", checks, [], what="a trained 2-head first layer splits the parents across heads",
                              numbers=numbers, budget="longer training (trained_recipe.steps) or more seeds")
    res.figures.append(_k9_figure(ctx, runs))
    return res


def _k9_figure(ctx, runs) -> str:
    plt = pyplot()
    r = runs[0]
    P = multiparent_patterns(r["sets"])
    fig, axes = plt.subplots(2, 2, figsize=(6.4, 6.2))
    for l in range(2):
        axes[0, l].imshow(P[l], cmap="viridis", vmin=0, vmax=1)
        axes[0, l].set_title(f"parent {l + 1} pattern", fontsize=9)
        axes[1, l].imshow(r["att"][l], cmap="viridis", vmin=0, vmax=1)
        axes[1, l].set_title(f"head {l}, mean over prompts", fontsize=9)
        for ax in axes[:, l]:
            ax.set_xlabel("key j", fontsize=8)
            ax.set_ylabel("query i", fontsize=8)
    fig.suptitle(f"N.K9 (trained): heads vs parents (seed {r['seed']})")
    return ctx.save_figure(fig, "trained-heads")
