"""N.E: N's Fig. 2 experiment. N's disentangled transformer, trained as N's code trains it, on
the chain, in-context-function and random-tree DAGs; its first layer read against the
adjacency matrix and its loss against the Bayes loss of the task.

The primary reading (the one that decides), as N measures it
------------------------------------------------------------
Per trained model (one graph, one training seed), N's own per-graph number
(``many_graphs.ipynb``): the first layer's position block read as N reads it,
``S(A1_pos,pos) = softmax(MASK(A^(1)[S:, S:]))``, averaged over the non-root positions::

    m = (1/|E|) sum_{i non-root} S(A1_pos,pos)[i, p(i)],

and the loss against the Bayes loss ``B`` of the task, as the fraction of the gap from the
loss at initialisation (``W_O = 0`` outputs the uniform law: ``log S``) to ``B`` that
training closes::

    c = (log S - L_model) / (log S - B).

A graph family (chain, in-context function, random trees) meets the reading when every
trained model has ``m > 1/2`` and ``c > 1/2`` (``c`` beyond ``z`` standard errors of its
evaluation prompts). ``m > 1/2`` says the parent holds a majority of the attention on
average: the average row is nearer the adjacency row ``e_{p(i)}`` in total variation than
any other one-hot row, and it implies ``m`` exceeds both the uniform level
``mean_i 1/(i+1)`` (the first layer at initialisation) and the mean attention on the
strongest non-parent key. ``c > 1/2``: the trained loss ends nearer the Bayes loss than
where it started. N's own 20-graph output meets the first part with every graph (its
lowest per-graph mean is 0.675; :data:`N_REFERENCE_GRAPHS`). A family violates the
reading when its mean over trained models is below 1/2 beyond its error (seeds' spread
with a Student-t quantile at the level of ``z``, plus the prompts' error).

Only N's recipe decides (all blocks from zero, plain gradient descent, lr 1, cosine decay
over ``2**17`` steps, batch 1024: the paper profile). Any other recipe (quick, standard) is
not N's: its measurements are reported, and its verdict is INCONCLUSIVE, with the budget
that would decide it. Every other reading is a finding (:class:`sim.verdict.Finding`):
the per-position argmax (stricter than anything N claims: N's own output misses it on 5
of 20 graphs), the loss reaching the Bayes loss, N's code's plotted "Bayes" line (the
reference code), and Adam where plain gradient descent left an argmax off a parent
(another optimiser).

The Bayes loss: with roots ``~ mu_pi`` the add-alpha estimator is not Bayes (claim N.T). For any
predictor ``f`` computed from the prompt, ``loss(f) = E[H(P*)] + E[KL(P* || f)]`` with ``P* =
E[pi(q, .) | prompt]``, so ``B = loss(add-alpha) - E[KL(P* || add-alpha)]`` exactly; the KL is
estimated with ``P*`` by importance sampling, its ``O(1/K)`` bias removed by Richardson
extrapolation (:func:`bayes_excess`, on :func:`sim.papers.nichani.task.bayes_gap_richardson`, the
estimator claim N.T uses), on a subset of the evaluation prompts; add-alpha's loss and the
paired differences to it are on all of them. Under a prior that is not Dirichlet the baseline
is add-alpha (an upper bound on ``B``).
"""
from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from scipy import stats

from sim.threads import torch_threads
from theory.dirichlet import add_alpha_batch, dirichlet_row_entropy
from theory.graphs import from_parents

from sim.papers.nichani.task import bayes_gap_richardson, population_losses
from sim.graphs import draw_graph
from sim.papers.nichani.model import DisentangledTransformer
from sim.montecarlo import Estimate, mean_estimate
from sim.priors import Dirichlet, Prior, parse_prior
from sim.papers.nichani.probes import adjacency_pattern, mean_attention, parent_attention, position_attention
from sim.verdict import (Control, Finding, FindingKind, Number, Outcome, TierResult, Verdict, margin_multiplier,
                        tier_verdict, welch_df)
from sim.claims.base import Claim, Context, GraphInput, PrimaryReading, Source
from sim.claims.jobs import planned_jobs, run_jobs
from sim.papers.nichani.claims.reporting import RANDOM_LAWS, across_seeds, claim_graph, pyplot, trained_number, training_seeds
from sim.papers.nichani.task import N_ALPHA, N_S, N_T
from sim.papers.nichani.recipes import (FAST_RECIPE, N_E_RECIPE_DEFAULTS, N_MANY_GRAPHS_RECIPE, N_RECIPE, Recipe,
                                        recipe_from_settings)
from sim.papers.nichani.training import NTask, disentangled_cost, last_position_logits, sample_task, train_disentangled

__all__ = ["N_E", "CLAIMS", "E_GRAPHS", "N_REFERENCE_MASS", "N_REFERENCE_CHAIN", "N_REFERENCE_GRAPHS", "model_probs",
           "ERun", "FamilyOutcome", "family_outcome", "e_primary", "e_conclusion", "e_verdict", "is_n_recipe",
           "uniform_level", "other_key_level", "bayes_excess", "run_e_job"]

#: N's reference code's own figure (many_graphs.ipynb): mean attention on the parent, S(A1_pos,pos), over 20
#: random graphs, mean 0.8366, standard deviation 0.0540 (vocabulary 3, T = 20, each node a root w.p. 1/2,
#: constant-lr plain gradient descent at lr 1 for 2**14 steps, batch 1024).
N_REFERENCE_MASS = (0.8366, 0.0540)
#: The same output per graph: (mean over non-root positions, lowest position) of S(A1_pos,pos)[i, p(i)], read off
#: the notebook's printed deltas (1 - attention on the parent). Five graphs have a position at or below 0.22.
N_REFERENCE_GRAPHS = ((0.9269, 0.8852), (0.7996, 0.7146), (0.8580, 0.7934), (0.8060, 0.7205), (0.8563, 0.7717),
                      (0.8557, 0.7627), (0.8166, 0.7498), (0.8398, 0.7173), (0.8911, 0.8555), (0.8126, 0.2203),
                      (0.8441, 0.6659), (0.9066, 0.8519), (0.7622, 0.0941), (0.6746, 0.0742), (0.8785, 0.8286),
                      (0.8095, 0.1245), (0.8535, 0.7801), (0.8741, 0.7960), (0.8636, 0.7988), (0.8034, 0.0860))
#: Measured on N's reference chain task (S=10, T=20, alpha=0.1, 2**17 steps), CLAIMS.md N.E.
N_REFERENCE_CHAIN = {"mean": 0.79, "worst position": 0.72}


E_GRAPHS = ("chain", "icl", "random")


# --------------------------------------------------------------------- the primary reading --
def is_n_recipe(recipe: Recipe) -> bool:
    """Whether ``recipe`` is one of N's: CatFormer blocks from zero, plain gradient descent at lr 1,
    batch 1024, no weight decay, and either ``single_parent.py``'s cosine decay over ``2**17`` steps
    (:data:`~sim.papers.nichani.recipes.N_RECIPE`) or ``many_graphs.ipynb``'s constant rate over ``2**14`` steps
    (:data:`~sim.papers.nichani.recipes.N_MANY_GRAPHS_RECIPE`, the run behind N's 0.837 ± 0.054)."""
    return any(recipe.optimizer == r.optimizer and recipe.lr == r.lr and recipe.steps == r.steps
               and recipe.batch == r.batch and recipe.schedule == r.schedule
               and recipe.init_scale == 0.0 and recipe.weight_decay == 0.0 for r in (N_RECIPE, N_MANY_GRAPHS_RECIPE))


def uniform_level(parents) -> float:
    """``mean_{i non-root} 1/(i+1)``: the attention on the parent of a uniform first layer (``A^(1) = 0``,
    the layer at initialisation, or one that has learned nothing of the graph)."""
    par = np.asarray(parents, dtype=np.int64).copy()
    par[-1] = -1
    rows = np.flatnonzero(par >= 0)
    return float(np.mean(1.0 / (rows + 1.0)))


def other_key_level(attn, parents) -> float:
    """``mean_{i non-root} max_{j <= i, j != p(i)} A[i, j]``: the mean attention on the strongest
    non-parent key (the level the parent must stand above)."""
    par = np.asarray(parents, dtype=np.int64).copy()
    par[-1] = -1
    A = np.array(attn, dtype=np.float64)
    rows = np.flatnonzero(par >= 0)
    A[rows, par[rows]] = -np.inf
    return float(np.mean(A[rows].max(axis=1)))


@dataclass(frozen=True)
class ERun:
    """What the primary reading reads off one trained model: its graph family, training seed,
    ``parent_mass`` ``m = mean_{i non-root} S(A1_pos,pos)[i, p(i)]`` (N's per-graph number; exact,
    a function of the trained parameters) and ``closed`` ``c = (log S - L_model) / (log S - B)``
    with the standard error ``closed_se`` of its evaluation prompts."""

    graph: str
    seed: int
    parent_mass: float
    closed: float
    closed_se: float = 0.0


@dataclass(frozen=True)
class FamilyOutcome:
    """One criterion of the primary reading on one graph family (see :func:`family_outcome`)."""

    graph: str
    criterion: str  # "attention" | "loss"
    outcome: Outcome
    mean: float
    stderr: float
    n: int
    values: tuple[float, ...]
    seeds: tuple[int, ...]
    threshold: float
    margin: float

    def record(self) -> dict:
        """The outcome as the report prints it: the family, the criterion, the outcome, mean, standard error,
        per-model values, training seeds and threshold."""
        return {"graph family": self.graph, "criterion": self.criterion, "outcome": self.outcome.value,
                "mean over trained models": self.mean, "standard error": self.stderr, "trained models": self.n,
                "per model": [round(float(v), 6) for v in self.values], "training seeds": list(self.seeds),
                "threshold": self.threshold}


def family_outcome(values: Sequence[float], ses: Sequence[float], threshold: float, z: float, *,
                   graph: str = "", criterion: str = "", seeds: Sequence[int] = ()) -> FamilyOutcome:
    """Decide ``value > threshold`` for a graph family from its trained models.

    HELD when every model has ``v_r - z se_r > threshold`` (``se_r``: the model's own
    measurement error, ``0`` for the attention, which is exact). VIOLATED when the family's
    mean is below the threshold beyond its error: ``mean + q s/sqrt(n) + z e < threshold``,
    with ``s`` the models' spread, ``q`` the Student-t quantile with ``n - 1`` degrees of
    freedom at the one-sided level ``Phi(z)`` (few seeds make a wide interval, not a lucky
    one) and ``e = sqrt(sum se_r^2) / n``; a single model counts as exact. UNDECIDED
    otherwise (some models below, the family's mean not clearly so: more models decide).
    """
    v = np.asarray(values, dtype=np.float64)
    e = np.asarray(ses, dtype=np.float64) if len(ses) else np.zeros_like(v)
    if v.size == 0 or v.shape != e.shape:
        raise ValueError("family_outcome needs one error per value, and at least one value")
    n, m = v.size, float(v.mean())
    s = float(v.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0
    q = float(stats.t.ppf(stats.norm.cdf(z), n - 1)) if n > 1 else 0.0
    ep = float(math.sqrt((e ** 2).sum()) / n)
    lows = v - z * e
    upper = m + q * s + z * ep
    if (lows > threshold).all():
        out, margin = Outcome.HELD, float(lows.min() - threshold)
    elif upper < threshold:
        out, margin = Outcome.VIOLATED, upper - threshold
    else:
        out, margin = Outcome.UNDECIDED, float(lows.min() - threshold)
    return FamilyOutcome(graph, criterion, out, m, math.hypot(s, ep), n, tuple(float(x) for x in v),
                         tuple(int(x) for x in seeds), float(threshold), margin)


def e_primary(runs: Sequence[ERun], *, parent_mass: float = 0.5, gap_closed: float = 0.5,
              z: float = 3.0) -> list[FamilyOutcome]:
    """The primary reading on every graph family of ``runs``: the attention criterion
    (``m > parent_mass`` for every model) and the loss criterion (``c > gap_closed``)."""
    out = []
    for g in dict.fromkeys(r.graph for r in runs):
        rs = [r for r in runs if r.graph == g]
        sds = [r.seed for r in rs]
        out.append(family_outcome([r.parent_mass for r in rs], [0.0] * len(rs), parent_mass, z, graph=g,
                                  criterion="attention", seeds=sds))
        out.append(family_outcome([r.closed for r in rs], [r.closed_se for r in rs], gap_closed, z, graph=g,
                                  criterion="loss", seeds=sds))
    return out


def e_conclusion(families: Sequence[FamilyOutcome]) -> Outcome:
    """VIOLATED if some family violates a criterion, UNDECIDED if some is undecided, else HELD."""
    outs = [f.outcome for f in families]
    if Outcome.VIOLATED in outs:
        return Outcome.VIOLATED
    if Outcome.UNDECIDED in outs:
        return Outcome.UNDECIDED
    return Outcome.HELD


def e_verdict(families: Sequence[FamilyOutcome], decisive: bool) -> Verdict:
    """The tier's verdict: the primary reading's outcome under N's recipe; INCONCLUSIVE under any
    other recipe, whatever it measured (a recipe N did not use can neither refute nor settle N's
    Fig. 2, and a verdict that hung on which seeds converge under it would change with the seed)."""
    return tier_verdict([], e_conclusion(families)) if decisive else Verdict.INCONCLUSIVE


# ------------------------------------------------------------------------------- running --
def _e_prior_alpha(ctx: Context) -> tuple[Prior | None, float, bool]:
    """``(prior for the task, alpha for add-alpha, Bayes available)``: N's Dirichlet(alpha) by default;
    a user's Dirichlet keeps the exact machinery; any other prior trains and reports add-alpha at the
    innermost Dirichlet's alpha (1 if none) without an importance-sampling Bayes estimate."""
    if ctx.prior is None:
        return None, float(ctx.settings["alpha"]), True
    p = ctx.prior
    if isinstance(p, Dirichlet):
        return p, float(p.alpha), True
    inner = p
    while hasattr(inner, "base") and not isinstance(inner, Dirichlet):
        inner = inner.base
    return p, (float(inner.alpha) if isinstance(inner, Dirichlet) else 1.0), False


def model_probs(model, x: np.ndarray, device: str, chunk: int = 4096) -> np.ndarray:
    """The model's predicted law of the next token, the ``softmax`` of
    :func:`~sim.papers.nichani.training.last_position_logits`, ``(n, S)`` float64 for prompts ``x``
    ``(n, T)``, ``chunk`` prompts at a time."""
    out = []
    with torch.no_grad(), torch_threads(1):
        for lo in range(0, len(x), chunk):
            logits = last_position_logits(model, torch.as_tensor(x[lo:lo + chunk], device=device))
            out.append(torch.softmax(logits.double(), dim=-1).cpu().numpy())
    return np.concatenate(out)


def bayes_excess(tokens: np.ndarray, parents, alpha: float, S: int, n_samples: int, seed: int
                 ) -> tuple[Estimate, Estimate]:
    """``loss(add-alpha) - Bayes loss`` on ``tokens``, and the residual bias check.

    For any predictor ``f`` computed from the prompt, ``E[-sum_y pi(q, y) log f(y) | prompt] =
    H(P*) + KL(P* || f)`` with ``P* = E[pi(q, .) | prompt]``, so add-alpha's excess over the Bayes
    loss is ``E[KL(P* || a)]`` exactly. ``P*`` by importance sampling
    (:func:`sim.papers.nichani.task.bayes_gap_richardson`, the estimator N.T uses: conjugate-posterior
    proposal weighted by ``mu_pi`` of the roots, ``n_samples`` draws per prompt, the ``O(1/K)``
    bias removed by Richardson extrapolation). The error combines the prompts' standard error with
    the residual ``(g_R(K/2) - g_R(K)) / 3`` and its own error, so a bias left over widens the bar.
    """
    terms = bayes_gap_richardson(tokens, parents, alpha, S, n_samples, np.random.default_rng(seed))["kl"]
    rich = mean_estimate(terms["richardson"], seed)
    resid = mean_estimate((terms["richardson_half"] - terms["richardson"]) / 3.0, seed)
    err = math.sqrt(rich.stderr ** 2 + resid.value ** 2 + resid.stderr ** 2)
    return Estimate(rich.value, err, rich.n, seed), resid


def _e_jobs(ctx: Context, recipe: Recipe, prior: Prior | None, alpha: float, bayes_ok: bool, wrong) -> list[dict]:
    """One :func:`run_e_job` per graph family and training seed, in the settings' graph order. All
    that needs ``ctx`` (settings, graphs, seeds) is read here, so a worker process needs no ``ctx``."""
    s = ctx.settings
    sizes = {"S": int(s["S"]), "T": int(s["T"]), "n_eval": int(s["n_eval"]), "n_probe": int(s["n_probe"]),
             "n_bayes": int(s["n_bayes"]) if bayes_ok else None,
             "is_samples": int(s["is_samples"]) if bayes_ok else None}
    jobs = []
    for gname in s["graphs"]:
        n_models = int(s.get("random_graphs", s["seeds"])) if gname in RANDOM_LAWS else int(s["seeds"])
        for k, sd in enumerate(training_seeds(ctx, "train", n_models)):
            par = claim_graph(gname, sizes["T"], ctx, f"{gname}/{k}")
            jobs.append({"graph": gname, "parents": par.tolist(), "seed": sd, **sizes,
                         "eval_seed": ctx.seed_for(f"eval/{gname}/{sd}"),
                         "bayes_seed": ctx.seed_for(f"bayes/{gname}/{sd}") if bayes_ok else None,
                         "recipe": recipe, "prior": None if prior is None else prior.spec(), "alpha": alpha,
                         "bayes_ok": bayes_ok, "wrong": wrong, "device": ctx.device})
    return jobs


def _e_job_args(ctx: Context, recipe: Recipe, prior: Prior | None, alpha: float, bayes_ok: bool, wrong) -> dict:
    """:func:`sim.claims.jobs.run_jobs`'s arguments for :func:`_e_jobs`."""
    return {"fn": run_e_job, "jobs": _e_jobs(ctx, recipe, prior, alpha, bayes_ok, wrong), "key": _e_job_key,
            "label": "N.E model", "cost": disentangled_cost}


def _e_plan(ctx: Context) -> list:
    """N.E's models as the cost plan sees them (the Adam comparison, trained only where plain GD misses a
    parent, is not among them)."""
    s = ctx.settings
    recipe = recipe_from_settings(s["recipe"], N_E_RECIPE_DEFAULTS, where="N.E setting 'recipe'")
    prior, alpha, bayes_ok = _e_prior_alpha(ctx)
    return planned_jobs(**_e_job_args(ctx, recipe, prior, alpha, bayes_ok, ctx.params["wrong_task"]))


def _e_job_key(job: Mapping[str, Any]) -> tuple:
    """Every input of :func:`run_e_job` (the parents as a tuple; not ``progress``): two jobs with one
    key train and read the same model, so an earlier look of a sequential decision's run is reused."""
    return ("N.E run",) + tuple(sorted((k, tuple(v) if k == "parents" else v)
                                       for k, v in job.items() if k != "progress"))


def run_e_job(job: Mapping[str, Any]) -> dict:
    """Train one model on one graph and read it out against the baselines, from the plain
    arguments ``_e_jobs`` builds (module level: a worker process runs it). ``job``: ``graph``
    (its name), ``parents`` (a list, ``-1`` for roots), ``seed`` (training), ``eval_seed``,
    ``bayes_seed``, ``S``, ``T``, ``n_eval``, ``n_probe``, ``n_bayes``, ``is_samples``, ``recipe``,
    ``prior`` (its spec; None: N's Dirichlet(alpha) rows), ``alpha``, ``bayes_ok``, ``wrong``,
    ``device``, and ``progress`` (a callable) when it runs in the claim's own process."""
    gname, sd, device, recipe = job["graph"], job["seed"], job["device"], job["recipe"]
    S, T, alpha, wrong = job["S"], job["T"], job["alpha"], job["wrong"]
    par = np.asarray(job["parents"], dtype=np.int64)
    prior = None if job["prior"] is None else parse_prior(job["prior"])  # a spec travels where an object may not
    progress = job.get("progress")
    if progress is not None:
        progress(f"training on the {gname} graph, seed {sd} ({recipe.describe()})")
    task = NTask(S, T, tuple(par.tolist()), alpha=alpha, prior=prior)

    def batch_bayes(batch) -> float:  # add-alpha loss of the training batch, logged beside the model's
        x = batch.tokens.cpu().numpy()
        return float(population_losses(add_alpha_batch(x, par, alpha, S), batch.probs.double().cpu().numpy()).mean())

    model, log = train_disentangled(task, recipe, seed=sd, device=device, wrong=wrong,
                                    log_every=max(1, recipe.steps // 40), bayes_loss=batch_bayes, progress=progress)
    eval_seed = job["eval_seed"]
    x, pis = sample_task(task, np.random.default_rng(eval_seed), job["n_eval"])
    rows = pis[np.arange(len(x)), x[:, -1]]
    f = model_probs(model, x, device)
    l_model = population_losses(f, rows)
    l_aa = population_losses(add_alpha_batch(x, par, alpha, S), rows)
    l_code = population_losses(add_alpha_batch(x, par, alpha, S, root_source="last"), rows)
    probe = torch.as_tensor(x[: job["n_probe"]], device=device)
    att_prompts = mean_attention(model, probe)
    att_positions = position_attention(model)
    pa_prompts = parent_attention(att_prompts, par, reading="prompts")
    pa_positions = parent_attention(att_positions, par, reading="positions")
    run = {"graph": gname, "parents": par, "seed": sd, "eval_seed": eval_seed, "model": model, "log": log,
           "pa_prompts": pa_prompts, "pa_positions": pa_positions, "att_prompts": att_prompts,
           "att_positions": att_positions, "uniform": uniform_level(par),
           "other_key": other_key_level(att_positions, par), "loss": mean_estimate(l_model, eval_seed),
           "add_alpha": mean_estimate(l_aa, eval_seed), "code_line": mean_estimate(l_code, eval_seed),
           "code_minus_aa": mean_estimate(l_code - l_aa, eval_seed),
           "model_minus_aa": mean_estimate(l_model - l_aa, eval_seed), "bayes": None,
           "eval": (x, rows, l_aa)}  # the evaluation prompts, for the controls (:func:`_e_controls`)
    if job["bayes_ok"]:
        # Bayes = add-alpha's loss - E[KL(P* || add-alpha)]: the KL on the first n_bayes prompts,
        # add-alpha's loss (and the paired model / code differences) on all of them.
        nb, is_seed = job["n_bayes"], job["bayes_seed"]
        gap, resid = bayes_excess(x[:nb], par, alpha, S, job["is_samples"], is_seed)
        run["bayes"] = {"add_alpha_minus_bayes": gap, "residual": resid, "n": nb, "K": job["is_samples"]}
        run["bayes_full"] = Estimate(run["add_alpha"].value - gap.value, math.hypot(run["add_alpha"].stderr, gap.stderr),
                                     len(x), is_seed)
        run["model_minus_bayes"] = Estimate(run["model_minus_aa"].value + gap.value,
                                            math.hypot(run["model_minus_aa"].stderr, gap.stderr), len(x), is_seed)
        run["code_minus_bayes"] = Estimate(run["code_minus_aa"].value + gap.value,
                                           math.hypot(run["code_minus_aa"].stderr, gap.stderr), len(x), is_seed)
    run["closed"], run["closed_se"] = _closed(run, S)
    return run


def _closed(run: dict, S: int) -> tuple[float, float]:
    """``c = (log S - L_model) / (log S - B) = 1 - d / (log S - B)`` with ``d = L_model - B`` (paired),
    and its standard error by the delta method from the errors of ``d`` and of ``B`` (``B``: the
    Bayes estimate, or add-alpha where there is none)."""
    ref = run["bayes_full"] if run["bayes"] is not None else run["add_alpha"]
    diff = run["model_minus_bayes"] if run["bayes"] is not None else run["model_minus_aa"]
    spread = math.log(S) - ref.value
    return 1.0 - diff.value / spread, math.hypot(diff.stderr / spread, diff.value * ref.stderr / spread ** 2)


def _e_trained(ctx: Context) -> TierResult:
    s = ctx.settings
    S, T = int(s["S"]), int(s["T"])
    wrong = ctx.params["wrong_task"]
    pm, gc = float(ctx.params["parent_mass"]), float(ctx.params["gap_closed"])
    recipe = recipe_from_settings(s["recipe"], N_E_RECIPE_DEFAULTS, where="N.E setting 'recipe'")
    decisive = is_n_recipe(recipe)
    prior, alpha, bayes_ok = _e_prior_alpha(ctx)
    lstar = dirichlet_row_entropy(alpha, S) if (prior is None or isinstance(prior, Dirichlet)) else None
    # an earlier look of a sequential decision trained its seeds already: the same runs (ctx.memo)
    runs = run_jobs(ctx, **_e_job_args(ctx, recipe, prior, alpha, bayes_ok, wrong))
    for run in runs:
        run["wrong task"] = wrong
        if not run["pa_positions"].all_argmax_on_parent and s.get("adam_reading", True):
            run["adam"] = _adam_reading(ctx, run["graph"], run["parents"], run["seed"], prior, alpha, wrong)
    families = e_primary([ERun(r["graph"], r["seed"], r["pa_positions"].mean, r["closed"], r["closed_se"])
                          for r in runs], parent_mass=pm, gap_closed=gc, z=ctx.z)
    conclusion = e_conclusion(families)
    verdict = e_verdict(families, decisive)
    counterexample = None
    if verdict is Verdict.FAIL:
        worst = min((f for f in families if f.outcome is Outcome.VIOLATED), key=lambda f: f.margin)
        counterexample = {"conclusion": _criterion_text(worst.criterion, pm, gc), **worst.record(),
                          "recipe": recipe.describe(), "S": S, "T": T, "alpha": alpha, "wrong task": wrong,
                          "models": [_run_record(r) for r in runs if r["graph"] == worst.graph]}
    summary = (f"N's Fig. 2 as N measures it (every graph family: mean first-layer attention on the parent "
               f"> {pm:g} and the loss closes > {gc:g} of the log S-to-Bayes gap, for every trained model): "
               f"{conclusion.value} under {recipe.name}")
    if not decisive:
        summary += " — not N's recipe, so it does not decide (N's recipe runs in the paper profile)"
    res = TierResult(tier="trained", verdict=verdict, conclusion=conclusion, summary=summary,
                     numbers=_e_numbers(ctx, runs, lstar, recipe), counterexample=counterexample,
                     budget=_e_budget(ctx, recipe, decisive, conclusion))
    res.readings += _e_readings(families, runs, decisive, recipe, pm, gc)
    res.controls += _e_controls(ctx, runs, pm, gc)
    res.findings += _e_findings(ctx, runs, decisive, recipe)
    res.figures += _e_figures(ctx, runs, lstar)
    return res


# ------------------------------------------------------------------------------ controls --
#: First-layer scale of the hand-wired controls: softmax puts 1 - O(T e^-30) on the wired key.
WIRED_BETA = 30.0


def wired(model: DisentangledTransformer, parents, beta: float = WIRED_BETA) -> DisentangledTransformer:
    """A copy of ``model`` with the first layer's position block ``beta * adjacency(parents)`` (and 0
    elsewhere in that block): the model wired to the graph ``parents``."""
    out = copy.deepcopy(model)
    S, T = out.S, out.T
    with torch.no_grad():
        block = out.A[0][0, S:S + T, S:S + T]
        block.zero_()
        for i, p in enumerate(np.asarray(parents)[:-1]):
            if p >= 0:
                block[i, p] = beta
    return out


def wrong_parents(parents) -> np.ndarray:
    """A wrong graph with the same roots: each non-root ``i`` gets a neighbour of its parent,
    ``p(i) - 1`` (or ``p(i) + 1 <= i`` when ``p(i) = 0``), never ``p(i)``."""
    par = np.asarray(parents, dtype=np.int64).copy()
    nonroot = par >= 0
    par[nonroot] = np.where(par[nonroot] > 0, par[nonroot] - 1, par[nonroot] + 1)
    return par


def _control_erun(ctx: Context, run: dict, model) -> ERun:
    """The primary reading's two numbers for a hand-built model, on ``run``'s evaluation prompts and
    against ``run``'s Bayes (or add-alpha) estimate, as :func:`run_e_job` reads a trained model."""
    x, rows, l_aa = run["eval"]
    S = int(ctx.settings["S"])
    diff_aa = mean_estimate(population_losses(model_probs(model, x, ctx.device), rows) - l_aa, run["eval_seed"])
    probe = {"bayes": run["bayes"], "bayes_full": run.get("bayes_full"), "add_alpha": run["add_alpha"],
             "model_minus_aa": diff_aa}
    if run["bayes"] is not None:
        gap = run["bayes"]["add_alpha_minus_bayes"]
        probe["model_minus_bayes"] = Estimate(diff_aa.value + gap.value, math.hypot(diff_aa.stderr, gap.stderr),
                                              diff_aa.n, gap.seed)
    closed, closed_se = _closed(probe, S)
    m = parent_attention(position_attention(model), run["parents"], reading="positions").mean
    return ERun(run["graph"], run["seed"], m, closed, closed_se)


def _e_controls(ctx: Context, runs: list, pm: float, gc: float) -> list[Control]:
    """Wrong mechanisms through the primary reading's own check (:func:`e_primary`, each family's
    first trained model's evaluation prompts and Bayes estimate), decided as under N's recipe (a
    hand-built model has no recipe): each must FAIL.

    - untrained: N's initialisation, all blocks zero (uniform first layer, uniform output);
    - the trained model wired to a wrong graph: its first layer's position block replaced by
      ``30 * adjacency`` of :func:`wrong_parents` (a neighbour of each parent);
    - the true adjacency at its starting loss: the first layer wired to the true graph, nothing read
      out (``W_O = 0``: the uniform output, loss ``log S``)."""
    S, T = int(ctx.settings["S"]), int(ctx.settings["T"])
    first = {}
    for r in runs:
        first.setdefault(r["graph"], r)

    def zero():
        return DisentangledTransformer.init(S, T, [1, 1], device=ctx.device)

    variants = (
        ("untrained (N's init: all blocks zero)", "learned nothing: uniform first layer, uniform output",
         lambda r: zero()),
        ("trained model wired to a wrong graph (each parent's neighbour, p(i) - 1)",
         "the first layer attends to a non-parent key", lambda r: wired(r["model"], wrong_parents(r["parents"]))),
        ("true adjacency at its starting loss (first layer wired to the graph, W_O = 0)",
         "finds the graph but predicts nothing: the loss stays at log S", lambda r: wired(zero(), r["parents"])),
    )
    out = []
    for name, mechanism, build in variants:
        fams = e_primary([_control_erun(ctx, r, build(r)) for r in first.values()], parent_mass=pm, gap_closed=gc,
                         z=ctx.z)
        verdict = tier_verdict([], e_conclusion(fams))
        parts = []
        for crit, letter, thr in (("attention", "m", pm), ("loss", "c", gc)):
            vals = ", ".join(f"{f.graph} {f.mean:.3f}" + (f" ± {f.stderr:.2g}" if f.stderr else "")
                             for f in fams if f.criterion == crit)
            parts.append(f"{letter}: {vals} (needs > {thr:g})")
        out.append(Control(name, mechanism, verdict, "; ".join(parts), numbers=tuple(
            Number(f"{f.criterion} criterion, {f.graph}", f.mean, f.stderr, n=f.n, kind="trained",
                   note=f"{f.outcome.value}; threshold {f.threshold:g}") for f in fams)))
    return out


def _criterion_text(criterion: str, pm: float, gc: float) -> str:
    if criterion == "attention":
        return (f"mean first-layer attention on the parent, N's reading S(A1_pos,pos) over non-root positions, "
                f"> {pm:g} for every trained model of the family")
    return (f"the loss closes > {gc:g} of the gap from log S (the loss at initialisation) to the Bayes loss, "
            f"for every trained model of the family")


def _run_record(r: dict) -> dict:
    return {"graph": r["graph"], "parents": np.asarray(r["parents"]).tolist(), "training seed": r["seed"],
            "wrong task": r.get("wrong task"), "N's reading S(A1_pos,pos)": r["pa_positions"].record(),
            "prompts reading": r["pa_prompts"].record(), "uniform level": r["uniform"],
            "strongest other key (mean)": r["other_key"], "loss": r["loss"].value,
            "Bayes loss": r["bayes_full"].value if r["bayes"] is not None else None,
            "add-alpha loss": r["add_alpha"].value, "fraction of the gap closed": r["closed"],
            "its stderr": r["closed_se"]}


def _e_budget(ctx: Context, recipe: Recipe, decisive: bool, conclusion: Outcome) -> str:
    s = ctx.settings
    paper = N_E.settings["paper"]
    n_models = sum(int(paper.get("random_graphs", paper["seeds"])) if g == "random" else int(paper["seeds"])
                   for g in paper["graphs"])
    if decisive:
        if conclusion is Outcome.HELD:
            return ""
        return ("more trained models per graph family (seeds, random_graphs): some models are below the "
                "threshold while the family's mean is not below it beyond its error")
    ms = _step_time(ctx, int(s["S"]), int(s["T"]))
    hours = N_RECIPE.steps * ms / 1000 / 3600
    return (f"N's recipe decides: the paper profile trains {n_models} models (graph families {', '.join(paper['graphs'])};"
            f" {paper['seeds']} seeds, {paper.get('random_graphs', paper['seeds'])} random graphs) with plain gradient "
            f"descent, lr 1, cosine over 2**17 = {N_RECIPE.steps} steps, batch {N_RECIPE.batch}, all blocks from zero. "
            f"Measured here: {ms:.0f} ms per step at batch {N_RECIPE.batch} on one CPU thread, so about "
            f"{hours:.1f} CPU-hours per model and {hours * n_models:.0f} CPU-hours in all (`icl-verify run --profile "
            f"paper --claims N.E`; a CUDA device shortens the model's part, not the numpy sampling)")


def _step_time(ctx: Context, S: int, T: int, steps: int = 20) -> float:
    """Milliseconds per step of N's recipe (batch 1024) on this machine, from a few timed steps."""
    import time

    task = NTask(S, T, tuple(claim_graph("chain", T, ctx, "timing").tolist()))
    short = dataclasses.replace(N_RECIPE, steps=2)
    train_disentangled(task, short, seed=0, device=ctx.device, cache=False, log_every=10 ** 9)  # warm-up
    t0 = time.perf_counter()
    train_disentangled(task, dataclasses.replace(N_RECIPE, steps=steps), seed=0, device=ctx.device, cache=False,
                       log_every=10 ** 9)
    return 1000 * (time.perf_counter() - t0) / steps


# ----------------------------------------------------------------------------- reporting --
def _e_numbers(ctx, runs, lstar, recipe) -> list[Number]:
    s = ctx.settings
    numbers = [Number("training recipe", recipe.steps, note=recipe.describe() + ("" if is_n_recipe(recipe) else
                                                                                  " (not N's recipe)"))]
    if lstar is not None:
        numbers.append(Number("L* = psi(S alpha + 1) - psi(alpha + 1)", lstar, note="entropy rate, exact"))
    for gname in dict.fromkeys(r["graph"] for r in runs):
        rs = [r for r in runs if r["graph"] == gname]
        sds = [r["seed"] for r in rs]
        numbers += [
            trained_number(f"{gname}: mean attention on the parent, N's reading S(A1_pos,pos) (decides)",
                            [r["pa_positions"].mean for r in rs], sds,
                            tolerance=float(ctx.params["parent_mass"]),
                            note=f"N's many_graphs.ipynb: {N_REFERENCE_MASS[0]} (sd {N_REFERENCE_MASS[1]}) over 20 "
                                 f"random graphs; chain {N_REFERENCE_CHAIN['mean']} "
                                 f"(worst {N_REFERENCE_CHAIN['worst position']})"),
            trained_number(f"{gname}: uniform level mean_i 1/(i+1) (a first layer that learned nothing)",
                            [r["uniform"] for r in rs], sds),
            trained_number(f"{gname}: mean attention on the strongest non-parent key, N's reading",
                            [r["other_key"] for r in rs], sds),
            trained_number(f"{gname}: min attention on the parent, N's reading", [r["pa_positions"].min for r in rs], sds),
            trained_number(f"{gname}: mean attention on the parent, prompts reading", [r["pa_prompts"].mean for r in rs],
                            sds, note=f"the pattern the model computes, batch mean over {s['n_probe']} prompts"),
            trained_number(f"{gname}: min attention on the parent, prompts reading", [r["pa_prompts"].min for r in rs],
                            sds),
            trained_number(f"{gname}: fraction of the log S-to-Bayes gap closed (decides)", [r["closed"] for r in rs],
                            sds, tolerance=float(ctx.params["gap_closed"]),
                            note=f"prompt stderr per model {max(r['closed_se'] for r in rs):.2g}"),
            trained_number(f"{gname}: model loss", [r["loss"].value for r in rs], sds,
                            note=f"population form -sum pi(q,y) log f(y), {s['n_eval']} prompts per seed, prompt "
                                 f"stderr {max(r['loss'].stderr for r in rs):.2g}"),
            trained_number(f"{gname}: add-alpha loss (edges only)", [r["add_alpha"].value for r in rs], sds),
            trained_number(f"{gname}: N's code's Bayes line (roots counted as children of s_(T-2))",
                            [r["code_line"].value for r in rs], sds),
            trained_number(f"{gname}: N's code's line - add-alpha (paired)", [r["code_minus_aa"].value for r in rs], sds,
                            note=f"prompt stderr {max(r['code_minus_aa'].stderr for r in rs):.2g}"),
            trained_number(f"{gname}: model - add-alpha (paired)", [r["model_minus_aa"].value for r in rs], sds),
        ]
        if rs[0]["bayes"] is not None:
            b0 = rs[0]["bayes"]
            numbers += [
                trained_number(f"{gname}: Bayes loss, whole evaluation set", [r["bayes_full"].value for r in rs], sds,
                                note=f"add-alpha's loss minus E[KL(P* || add-alpha)] on {b0['n']} prompts, {b0['K']} "
                                     f"importance samples each, Richardson-extrapolated; seeds "
                                     f"{[r['bayes_full'].seed for r in rs]}"),
                trained_number(f"{gname}: model - Bayes (paired)", [r["model_minus_bayes"].value for r in rs], sds,
                                note=f"prompt stderr {max(r['model_minus_bayes'].stderr for r in rs):.2g}"),
                trained_number(f"{gname}: add-alpha - Bayes = E[KL(P* || add-alpha)]",
                                [r["bayes"]["add_alpha_minus_bayes"].value for r in rs], sds,
                                note=f"error per model {max(r['bayes']['add_alpha_minus_bayes'].stderr for r in rs):.2g} "
                                     "(prompts and Richardson residual); > 0: add-alpha is not Bayes under roots ~ mu_pi "
                                     "(N.T)"),
                trained_number(f"{gname}: Richardson residual of the KL (bias left after extrapolation)",
                                [r["bayes"]["residual"].value for r in rs], sds),
            ]
    ref = np.array([m for m, _ in N_REFERENCE_GRAPHS])
    numbers.append(Number("N's many_graphs.ipynb: mean attention on the parent per graph, mean over its 20 graphs",
                          float(ref.mean()), float(ref.std(ddof=1) / math.sqrt(ref.size)), n=ref.size, kind="trained",
                          note=f"lowest graph {ref.min():.4f}; vocabulary 3, constant lr 1, 2**14 steps (N's output, "
                               "read off the notebook)"))
    return numbers


def _e_readings(families, runs, decisive, recipe, pm, gc) -> list[dict]:
    """The two criteria of the primary reading, each with its outcome per graph family."""
    out = []
    ref = np.array([m for m, _ in N_REFERENCE_GRAPHS])
    for crit in ("attention", "loss"):
        fs = [f for f in families if f.criterion == crit]
        conc = e_conclusion(fs)
        verdict = tier_verdict([], conc) if decisive else Verdict.INCONCLUSIVE
        parts = []
        for f in fs:
            rs = [r for r in runs if r["graph"] == f.graph]
            extra = (f", uniform level {np.mean([r['uniform'] for r in rs]):.2f}, strongest other key "
                     f"{np.mean([r['other_key'] for r in rs]):.2f}" if crit == "attention" else "")
            parts.append(f"{f.graph}: {f.mean:.3f} ± {f.stderr:.2g} (n={f.n}, lowest {min(f.values):.3f}{extra}): "
                         f"{f.outcome.value}")
        detail = "; ".join(parts)
        if crit == "attention":
            detail += (f". N's own many_graphs output: {ref.mean():.3f} ± {ref.std(ddof=1) / math.sqrt(ref.size):.2g} "
                       f"(s.e., {ref.size} graphs, lowest {ref.min():.3f})")
        detail += f". Recipe: {recipe.describe()}" + ("" if decisive else " — not N's: reported, does not decide")
        out.append({"name": _criterion_text(crit, pm, gc), "verdict": str(verdict),
                    "outcome under this recipe": conc.value, "decisive recipe": decisive, "detail": detail,
                    "families": [f.record() for f in fs]})
    return out


def _e_findings(ctx, runs, decisive, recipe) -> list[Finding]:
    return [f for f in (_argmax_finding(runs, decisive, recipe), _bayes_reached_finding(ctx, runs, decisive, recipe),
                        _code_line_finding(ctx, runs), _adam_finding(runs)) if f is not None]


def _short(recipe: Recipe) -> str:
    return "N's recipe" if is_n_recipe(recipe) else f"{recipe.steps} steps at lr {recipe.lr:g}, not N's recipe"


def _argmax_finding(runs, decisive, recipe) -> Finding:
    """Stricter than N: the argmax of every non-root row of S(A1_pos,pos) on the parent."""
    miss = [(r, ~r["pa_positions"].argmax_on_parent) for r in runs]
    k = int(sum(m.sum() for _, m in miss))
    bad = [r for r, m in miss if m.any()]
    low = min(r["pa_positions"].min for r in runs)
    n_low = sum(1 for _, lo in N_REFERENCE_GRAPHS if round(lo, 2) <= 0.22)  # as N's notebook prints them
    if not bad:
        verdict = Verdict.PASS
        detail = f"argmax on the parent at every non-root position in all {len(runs)} models (lowest {low:.2f})"
    else:
        verdict = Verdict.FAIL if decisive else Verdict.INCONCLUSIVE
        detail = (f"argmax misses the parent at {k} positions in {len(bad)}/{len(runs)} models "
                  f"({_short(recipe).split(',')[0]}); N's own: {n_low}/{len(N_REFERENCE_GRAPHS)} graphs <= 0.22")
    worst = min(runs, key=lambda r: r["pa_positions"].min)
    prompts_miss = sum(int((~r["pa_prompts"].argmax_on_parent).sum()) for r in runs)
    return Finding(
        FindingKind.STRICTER,
        "the first layer's argmax (N's reading S(A1_pos,pos)) is on the parent at every non-root position of every "
        "graph and seed; N's Fig. 2 claims no such thing, and N's own 20-graph output has "
        f"{n_low} graphs with a position at or below 0.22 on the parent (a per-model miss under another recipe "
        "is undecided)", verdict, detail,
        numbers=(Number("non-root positions whose argmax misses the parent, N's reading", k, n=len(runs)),
                 Number("the same in the prompts reading (the pattern the model computes)", prompts_miss, n=len(runs)),
                 Number("lowest attention on a parent, N's reading", low, note=f"{worst['graph']} seed {worst['seed']}")),
        counterexample=_run_record(worst) if bad else None)


def _bayes_reached_finding(ctx, runs, decisive, recipe) -> Finding | None:
    """Stricter than "approaches": the trained loss equals the Bayes loss within its error."""
    if runs[0]["bayes"] is None:
        return None
    fam = []
    for g in dict.fromkeys(r["graph"] for r in runs):
        rs = [r for r in runs if r["graph"] == g]
        m, s_seed = across_seeds([r["model_minus_bayes"].value for r in rs])
        s_prompts = math.sqrt(sum(r["model_minus_bayes"].stderr ** 2 for r in rs)) / len(rs)
        df = welch_df([(s_seed ** 2, len(rs) - 1), (s_prompts ** 2, None)]) if len(rs) > 1 else None
        fam.append((g, m, math.hypot(s_seed, s_prompts), margin_multiplier(ctx.z, df)))
    # the family furthest above Bayes, each with its own margin (Student-t on its seeds' spread)
    worst, val, se, q = max(fam, key=lambda t: t[1] - t[3] * t[2])
    above = val - q * se > 0
    verdict = (Verdict.FAIL if decisive else Verdict.INCONCLUSIVE) if above else Verdict.PASS
    detail = (f"the loss is {val:.3f} ± {se:.1g} nats above the Bayes loss ({worst}; {_short(recipe)})" if above else
              f"loss within {q:.3g} s.e. of the Bayes loss in every family (largest gap {val:.3f} ± {se:.2g}, {worst})")
    return Finding(FindingKind.STRICTER,
                   "the trained loss reaches the Bayes loss (model - Bayes within z standard errors of 0 in every "
                   "graph family); N's Fig. 2 shows the loss approaching its Bayes line, not equal to it",
                   verdict, detail,
                   numbers=(Number(f"{worst}: model - Bayes (paired), mean over models", val, se, kind="trained",
                                   n=sum(r["graph"] == worst for r in runs)),))


def _code_line_finding(ctx, runs) -> Finding:
    """N's code's plotted "Bayes" line against the Bayes loss. Add-alpha is a predictor computed from
    the prompt alone, so its loss is >= the Bayes loss: ``line - add-alpha`` (paired, precise) is a
    lower bound on ``line - Bayes``; the estimate of the whole gap (via ``E[KL(P* || a)]``) is beside it."""
    fam = []
    for g in dict.fromkeys(r["graph"] for r in runs):
        rs = [r for r in runs if r["graph"] == g]
        fam.append((g, float(np.mean([r["code_minus_aa"].value for r in rs])),
                    math.sqrt(sum(r["code_minus_aa"].stderr ** 2 for r in rs)) / len(rs)))
    best, lb, se = max(fam, key=lambda t: t[1] - ctx.z * t[2])  # the clearest family
    rs = [r for r in runs if r["graph"] == best]
    full = float(np.mean([r["code_minus_bayes"].value for r in rs])) if rs[0]["bayes"] is not None else None
    above = lb - ctx.z * se > 0
    detail = (f"N's plotted 'Bayes' line is >= {lb:.3f} ± {se:.1g} nats above the Bayes loss ({best}"
              + (f"; estimate {full:.3f})" if full is not None else ")"))
    if not above:
        detail = f"N's plotted 'Bayes' line is not above add-alpha beyond error ({best}: {lb:.4f} ± {se:.1g})"
    return Finding(FindingKind.REFERENCE_CODE,
                   "N's code's plotted 'Bayes' line (InContextTree.bayes: add-alpha, counting roots as children of "
                   "s_(T-2)) is the Bayes loss the trained loss approaches; the paper defines no such line (N.T)",
                   Verdict.FAIL if above else Verdict.INCONCLUSIVE, detail,
                   numbers=(Number(f"{best}: N's line - add-alpha (paired; a lower bound on line - Bayes)", lb, se,
                                   kind="montecarlo", n=sum(r["graph"] == best for r in runs)),)
                   + ((Number(f"{best}: N's line - Bayes (estimate)", full, kind="montecarlo"),)
                      if full is not None else ()))


def _adam_finding(runs) -> Finding | None:
    adam = [r for r in runs if r.get("adam")]
    if not adam:
        return None
    ok = all(r["adam"]["positions"].all_argmax_on_parent for r in adam)
    low = min(r["adam"]["positions"].min for r in adam)
    return Finding(FindingKind.OUTSIDE,
                   "another optimiser: the models whose argmax missed a parent under plain gradient descent, "
                   f"retrained with Adam ({adam[0]['adam']['recipe']}), have the argmax on every parent",
                   Verdict.PASS if ok else Verdict.FAIL,
                   (f"with Adam the argmax is on every parent in all {len(adam)} retrained models (lowest {low:.2f})"
                    if ok else f"with Adam the argmax still misses a parent (lowest attention {low:.2f})"),
                   numbers=tuple(Number(f"{r['graph']} seed {r['seed']}: lowest attention on a parent, plain GD -> Adam "
                                        "(N's reading)", r["adam"]["positions"].min,
                                        note=f"plain GD {r['pa_positions'].min:.3f}") for r in adam))


def _adam_reading(ctx, gname, par, sd, prior, alpha, wrong) -> dict:
    """Where N's plain gradient descent left some row's argmax off the parent: the same model and
    task trained with this project's fast recipe (Adam, all blocks from zero, jointly), to tell a
    slow optimiser from a mechanism the model does not form (an ``outside`` finding)."""
    s = ctx.settings
    recipe = dataclasses.replace(FAST_RECIPE, batch=int(s.get("adam_batch", FAST_RECIPE.batch)))
    task = NTask(int(s["S"]), int(s["T"]), tuple(par.tolist()), alpha=alpha, prior=prior)
    ctx.progress(f"N.E: {gname} seed {sd} missed a parent; the same task with Adam for comparison")
    model, _ = train_disentangled(task, recipe, seed=sd, device=ctx.device, wrong=wrong)
    x, _ = sample_task(task, np.random.default_rng(ctx.seed_for(f"eval/{gname}/{sd}")), int(s["n_probe"]))
    return {"recipe": recipe.describe(),
            "prompts": parent_attention(mean_attention(model, torch.as_tensor(x, device=ctx.device)), par),
            "positions": parent_attention(position_attention(model), par, reading="positions")}


def _e_figures(ctx, runs, lstar) -> list[str]:
    plt = pyplot()
    graphs = list(dict.fromkeys(r["graph"] for r in runs))
    first = [next(r for r in runs if r["graph"] == g) for g in graphs]
    fig, axes = plt.subplots(len(first), 4, figsize=(12.4, 3.4 * len(first)), squeeze=False,
                             gridspec_kw={"width_ratios": [1.5, 1, 1, 1]})
    for row, r in zip(axes, first):
        par = np.asarray(r["parents"])
        draw_graph(row[0], from_parents(par, name=f"{r['graph']} (T={len(par)})", query=len(par) - 1))
        for ax, M, title in ((row[1], adjacency_pattern(r["parents"]), f"{r['graph']}: true adjacency"),
                             (row[2], r["att_prompts"], "layer 1, mean over prompts"),
                             (row[3], r["att_positions"], "N's S(A1_pos,pos)")):
            im = ax.imshow(M, cmap="viridis", vmin=0, vmax=1)
            ax.set_title(title, fontsize=9)
            ax.set_xlabel("key j", fontsize=8)
            ax.set_ylabel("query i", fontsize=8)
    fig.colorbar(im, ax=axes[:, 1:].ravel().tolist(), shrink=0.5)
    fig.suptitle(f"N.E: first-layer attention vs the DAG (seed {first[0]['seed']})")
    paths = [ctx.save_figure(fig, "attention", tight=False)]
    fig, axes = plt.subplots(1, len(first), figsize=(4.2 * len(first), 3.8), squeeze=False)
    for ax, g in zip(axes[0], graphs):
        rs = [r for r in runs if r["graph"] == g]
        for r in rs:
            log = r["log"]
            ax.plot(log.column("step"), log.column("loss"), lw=1, label=f"model, seed {r['seed']}")
        r = rs[0]
        ax.plot(r["log"].column("step"), r["log"].column("bayes_loss"), lw=0.8, color="gray",
                label="add-alpha on the training batch")
        if r["bayes"] is not None:
            ax.axhline(r["bayes_full"].value, color="k", ls="--", lw=1, label="Bayes")
        ax.axhline(r["code_line"].value, color="r", ls=":", lw=1, label="N's code's line")
        if lstar is not None:
            ax.axhline(lstar, color="k", lw=0.8, label="L*")
        ax.set_ylim(bottom=(lstar or 0) - 0.1, top=math.log(int(ctx.settings["S"])) + 0.2)
        ax.set_xlabel("step")
        ax.set_ylabel("loss (nats)")
        ax.set_title(f"N.E: {g}", fontsize=10)
        ax.legend(fontsize=6)
    paths.append(ctx.save_figure(fig, "loss"))
    return paths


N_E = Claim(
    id="N.E",
    title="N Fig. 2: trained first layers match the adjacency matrix; the loss approaches the Bayes loss",
    source=Source("N", "abstract; Section 3.1, Fig. 2; reference code single_parent.py, many_graphs.ipynb",
                  "trained on chain, in-context function and random-tree DAGs, A1 matches the adjacency matrix and "
                  "the loss approaches the Bayes loss"),
    statement=("Decided by N's Fig. 2 as N measures it (the primary reading). N's disentangled transformer (heads "
               "[1, 1], the reference code's CatFormer) trained by N's recipe: all blocks from zero, plain gradient "
               "descent, lr 1, cosine decay over 2**17 steps, batch 1024, on N's population loss -sum_y pi(s_T, y) "
               "log f(y) with fresh prompts every step (S=10, T=20, Dirichlet(0.1) rows, roots ~ mu_pi, query "
               "uniform), on the chain, in-context-function and random-tree graphs (p(i) ~ Unif{-1..i-1}, one per "
               "seed). Per trained model: m = mean over non-root i of S(A1_pos,pos)[i, p(i)] (N's per-graph number, "
               "many_graphs.ipynb), and c = the fraction of the gap from log S (the loss at initialisation) to the "
               "Bayes loss that training closes. A graph family meets the reading when every model has m > 1/2 (the "
               "parent holds a majority of the attention on average, above the uniform level and the strongest "
               "other key; N's own 20 graphs: 0.837 ± 0.054, lowest 0.675) and c > 1/2 beyond z prompt standard "
               "errors (the loss ends nearer Bayes than where it started); it violates it when its mean is below "
               "1/2 beyond its error (seeds' spread with a Student-t quantile). Only N's recipe decides (paper "
               "profile); the quick and standard profiles train a shorter plain-GD recipe (lr 20, 2,000 or 8,000 "
               "steps), report what it measures, and are INCONCLUSIVE with the budget that decides. The Bayes loss: "
               "add-alpha is not Bayes under roots ~ mu_pi (N.T); the Bayes loss is add-alpha's loss minus "
               "E[KL(P* || add-alpha)] (an identity, P* the posterior predictive), the KL by importance sampling "
               "with its O(1/K) bias removed by Richardson extrapolation (N.T's estimator). Findings (never "
               "deciding): the per-position argmax on the parent (stricter criterion; N's own output misses it "
               "on 5 of 20 graphs), the loss reaching the Bayes loss (stricter criterion), N's code's plotted "
               "'Bayes' line (reference code: add-alpha counting roots as children of s_(T-2), above the Bayes "
               "loss), and Adam where plain GD left an argmax off a parent (outside: another optimiser). The "
               "prompts reading (the pattern the model computes, averaged over prompts) is reported beside N's."),
    assumptions=(),
    checks={"trained": _e_trained},
    jobs={"trained": _e_plan},
    settings={
        # quick and standard train with plain GD at lr 20, not N's recipe: they never decide (INCONCLUSIVE by
        # design, at every master seed), so more seeds would buy nothing. The paper profile decides, sequentially.
        # quick does not spend its budget on a run that cannot decide (see `pending`); its settings stay the
        # small reading that standard's and the tests' runs scale from.
        "quick": {"tiers": (), "S": N_S, "T": N_T, "alpha": N_ALPHA, "graphs": E_GRAPHS, "seeds": 2,
                  "recipe": {"name": "plain GD from zero, quick", "optimizer": "sgd", "lr": 20.0, "steps": 2000,
                             "batch": 128, "schedule": "cosine"},
                  "n_eval": 4096, "n_probe": 1024, "n_bayes": 256, "is_samples": 400, "adam_batch": 256},
        "standard": {"tiers": ("trained",), "S": N_S, "T": N_T, "alpha": N_ALPHA, "graphs": E_GRAPHS, "seeds": 3,
                     "recipe": {"name": "plain GD from zero", "optimizer": "sgd", "lr": 20.0, "steps": 8000,
                                "batch": 256, "schedule": "cosine"},
                     "n_eval": 16384, "n_probe": 2048, "n_bayes": 512, "is_samples": 1000},
        "paper": {"tiers": ("trained",), "S": N_S, "T": N_T, "alpha": N_ALPHA, "graphs": E_GRAPHS, "seeds": 12,
                  "random_graphs": 12, "seeds_start": 4, "seeds_step": 4, "seeds_also": ("random_graphs",),
                  "recipe": {"name": N_RECIPE.name, "optimizer": "sgd", "lr": N_RECIPE.lr, "steps": N_RECIPE.steps,
                             "batch": N_RECIPE.batch, "schedule": "cosine"},
                  "n_eval": 65536, "n_probe": 4096, "n_bayes": 2000, "is_samples": 2000},
    },
    decided_by="paper",
    pending=(f"decided by the paper profile (N's recipe: plain GD at lr {N_RECIPE.lr:g}, batch {N_RECIPE.batch}, "
             f"{N_RECIPE.steps} steps, sequential over up to 12 seeds and random graphs): quick's short plain-GD run is not N's recipe and is INCONCLUSIVE at "
             "every master seed, so quick does not run it; standard runs it for its findings (`icl-verify run "
             "--profile paper --claims N.E`)"),
    params={"parent_mass": 0.5, "gap_closed": 0.5, "wrong_task": None},
    prior_dependent=True,
    graph_input=GraphInput(
        settings={"graphs": "T"}, fixed_length=True,
        replaces="the trained tier's chain, in-context and random graphs (one model per seed on it)",
        size_note="N's recipe, and N's reference numbers its findings compare with, are at T = 20"),
    primary=PrimaryReading(
        statement=("\"We confirm our theoretical findings by showing that transformers trained on our in-context "
                   "learning task are able to recover a wide variety of causal structures\" (abstract); in N's Fig. 2 "
                   "(Section 3.1) the trained first layer matches the adjacency matrix of the chain, in-context "
                   "function and random-tree graphs, and the loss approaches the Bayes loss. Decided per graph "
                   "family: mean attention on the parent > 1/2 and more than half the log S-to-Bayes gap closed, "
                   "for every model trained by N's recipe. Findings: per-position argmax, loss equal to Bayes, N's "
                   "plotted Bayes line, Adam."),
        seed="002", lines="15, 42",
        setting=("N's disentangled transformer (heads [1, 1]) from zero, plain GD at lr 1, cosine over 2**17 steps, "
                 "batch 1024, on N's task (S=10, T=20, Dirichlet(0.1) rows, roots ~ mu_pi); graphs chain, in-context "
                 "function, random trees p(i) ~ Unif{-1..i-1}; attention read as N reads it, S(A1_pos,pos) "
                 "(line 15: 'empirical simulations across varied causal tree graphs'; seed 003 line 1 repeats the "
                 "abstract)"),
        review=("N's evidence is a per-graph mean of the attention on the parent (0.837 ± 0.054 over 20 graphs) and "
                "loss curves against a Bayes line, never a per-position argmax, which N's own output misses on 5 of "
                "20 graphs; so the per-graph mean and the loss gap decide, under N's recipe only, and the argmax, "
                "an exact reach of Bayes, N's code's line and other optimisers are findings.")),
)

CLAIMS = [N_E]
