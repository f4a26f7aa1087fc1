"""Training and evaluating W's two-layer transformer for the trained claims (W.E1, W.E2 in
:mod:`~sim.papers.wei.claims.trained`; W.P2's trained tier in
:mod:`~sim.papers.wei.claims.continuous_trained`): the task, one run, its jobs on the grid runner,
and the statistics over seeds. The training recipe, and why it is what it is, is
:class:`sim.papers.wei.recipes.WRecipe`.

The task (W sections 1-3; CLAIMS conventions, 0-based positions)
------------------------------------------------------------------
One transition matrix ``pi`` is drawn from the prior (``ctx.prior`` or the default
floored Dirichlet(1), its own seed) and FIXED for the whole training run, so the model can
store ``log pi`` and ``pi`` in its weights; every prompt gets a fresh random recursive tree
(``pa(h) ~ Unif{0..h-1}``) shared by its ``L`` context examples and the target, roots from
the stationary law. The model predicts the target's tokens ``h = 1..H-1``. Baselines on
the same prompts: the BMA predictive (Bayes-optimal; W Lemma 1 / Theorem 1) and the best
structure-blind predictor ``(1/h) sum_{h' < h} pi(x_h', .)`` (uniform attention over the
candidate parents with the true pi).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from sim.threads import torch_threads
from sim.graphs import random_recursive_parents_torch as recursive_parents_torch  # W's trees, drawn on the device
from sim.verdict import Assumption, Number, Outcome, compare, margin_multiplier
from sim.claims.base import Context
from sim.claims.jobs import run_jobs as run_claim_jobs
from sim.claims.inputs import default_root, prior_for, record_matrix
from sim.papers.wei.recipes import WRecipe

__all__ = [
    "TASKS", "POSITIONS", "WTask", "WRun", "recursive_parents_torch", "init_wei_model", "train_wei", "evaluate_wei",
    "paired_ratio", "closed_fraction", "blind_bma_tv", "uniform_ov_error", "run_record", "threads_for",
    "seed_number", "OUTCOME_VERDICT", "combine_outcomes", "ROUND_OFF", "strictly_above",
    "task_assumptions", "train_job", "train_group_job", "run_jobs", "clear_shared_runs", "train_seeds", "seed_jobs",
    "seed_job_args", "job_args", "train_cost", "timing_run",
]

TASKS = ("w", "independent-trees", "fixed-tree")


# ================================================================================ task ==
@dataclass
class WTask:
    """W's prompts for one fixed ``pi``: tokens ``(B, L+1, H)`` (target = example ``L``).

    ``kind``: ``"w"`` (W's task: a fresh tree per prompt, shared by context and target);
    ``"independent-trees"`` (a wrong task: every example, the target included, has its own
    tree, so the context says nothing about the target's parents); ``"fixed-tree"`` (one
    tree for every prompt, drawn once from ``fixed_seed``).
    """

    pi: np.ndarray
    L: int
    H: int
    kind: str = "w"
    fixed_seed: int = 0
    device: str = "cpu"

    def __post_init__(self):
        import torch

        from theory.markov import stationary_batch

        if self.kind not in TASKS:
            raise ValueError(f"task kind must be one of {TASKS}, got {self.kind!r}")
        self.pi = np.asarray(self.pi, dtype=np.float64)
        root = default_root(self.pi)
        mu = stationary_batch(self.pi[None])[0] if root is None else root
        self.root_name = "stationary" if root is None else "uniform (stationary law not unique)"
        self._pi = torch.as_tensor(self.pi, dtype=torch.float32, device=self.device)  # (d, d)
        self._mu = torch.as_tensor(mu, dtype=torch.float32, device=self.device)  # (d,)
        self._fixed = None
        if self.kind == "fixed-tree":
            g = torch.Generator(device=self.device).manual_seed(int(self.fixed_seed))
            self._fixed = recursive_parents_torch(g, 1, self.H)  # (1, H)

    @property
    def d(self) -> int:
        return self.pi.shape[0]

    def draw(self, gen, B: int):
        """``(tokens (B, L+1, H), parents (B, H))``; for independent trees the target's tree."""
        from sim.sampling import sample_w_prompts_torch

        d, L, H = self.d, self.L, self.H
        if self.kind == "independent-trees":
            n = B * (L + 1)
            par = recursive_parents_torch(gen, n, H)  # (B*(L+1), H)
            x = sample_w_prompts_torch(gen, self._pi.expand(n, d, d), par, 0, roots=self._mu.expand(n, d))
            return x.reshape(B, L + 1, H), par.reshape(B, L + 1, H)[:, L]
        par = self._fixed.expand(B, H) if self._fixed is not None else recursive_parents_torch(gen, B, H)
        x = sample_w_prompts_torch(gen, self._pi.expand(B, d, d), par, L, roots=self._mu.expand(B, d))
        return x, par

    def sampler(self, recipe: "WRecipe") -> Callable:
        """``sample(gen, step)`` for :func:`sim.train.train`: stage 1 draws ``batch1`` prompts, stage 2 ``batch2``."""
        def sample(gen, step):
            return self.draw(gen, recipe.batch1 if step < recipe.steps1 else recipe.batch2)[0]

        return sample


#: How layer 1 sees positions: W's relative-position encoding (the RPE) or absolute positions (W Appendix G).
POSITIONS = ("relative", "absolute")


def init_wei_model(d: int, L: int, H: int, recipe: WRecipe, *, generator, continuous: bool = False,
                   K: int | None = None, positions: str = "relative"):
    """A :class:`~sim.papers.wei.model.WeiTransformer` (or :class:`~sim.papers.wei.model.WeiContinuous`,
    or with ``positions="absolute"`` a :class:`~sim.papers.wei.model.WeiAbsolute`) with ``K`` heads
    (default ``L``) and the recipe's init, on ``generator.device``. The permutation start gives head
    ``k`` its preference for example ``sigma(k)``, ``sigma`` the first ``K`` entries of a uniformly random
    permutation of the ``L`` examples (so ``K < L`` heads start on ``K`` distinct examples)."""
    import torch

    from sim.papers.wei.model import WeiAbsolute, WeiContinuous, WeiTransformer

    if positions not in POSITIONS:
        raise ValueError(f"positions must be one of {POSITIONS}, got {positions!r}")
    if continuous and positions != "relative":
        raise ValueError("the continuous model has W's relative positions only")
    K = L if K is None else int(K)
    if not 1 <= K <= L:
        raise ValueError(f"need 1 <= K <= L heads, got K={K}, L={L}")
    cls = WeiContinuous if continuous else WeiAbsolute if positions == "absolute" else WeiTransformer
    model = cls.init(d, L, H, K, generator=generator, scale=recipe.init_scale, wH0=recipe.wH0)
    if recipe.wL_init == "permutation":
        sigma = torch.randperm(L, generator=generator, device=generator.device)[:K]  # head k -> example sigma(k)
        heads = torch.arange(K, device=generator.device)
        with torch.no_grad():
            if positions == "absolute":
                model.w_ex[heads, :, sigma] += recipe.perm_bias  # at every query position
            else:
                model.w_L[heads, sigma] += recipe.perm_bias
    return model


# ========================================================================= one run ==
@dataclass
class WRun:
    """One trained model with everything needed to report and re-check it."""

    model: Any
    task: WTask
    recipe: WRecipe
    seeds: dict[str, int]
    log: Any  # sim.train.TrainLog
    seconds: float
    initial_copier: float
    cpu_seconds: float = 0.0  # process CPU time: the wall time on an otherwise idle machine, one thread
    blind_curve: list[float] = field(default_factory=list)  # structure-blind loss at the log points
    eval: dict[str, Any] = field(default_factory=dict)


def train_wei(task: WTask, recipe: WRecipe, *, init_seed: int, data_seed: int, device: str = "cpu",
              progress: Callable[[str], None] | None = None, probes=None, thresholds=None,
              stop_when_crossed: bool = False, K: int | None = None, positions: str = "relative") -> WRun:
    """Train W's model (``K`` heads, default ``L``; layer-1 ``positions`` as :func:`init_wei_model`) on
    ``task`` with ``recipe``; logs the BMA and structure-blind losses of every logged batch next to the
    model's (:func:`sim.train.train`)."""
    import torch

    from sim.papers.wei.probes import blind_attention, bma_posterior_torch, copier_report
    from sim.train import make_generator, train

    gen = make_generator(init_seed, device)
    model = init_wei_model(task.d, task.L, task.H, recipe, generator=gen, K=K, positions=positions)
    initial = copier_report(model).min_score
    pi64 = torch.as_tensor(task.pi, dtype=torch.float64, device=device)
    with np.errstate(divide="ignore"):
        logpi = torch.as_tensor(np.log(task.pi), dtype=torch.float64, device=device)
    blind_curve: list[float] = []

    def nll(attn, x):
        tgt = x[:, task.L]
        p = (attn[:, 1:] @ pi64[tgt]).gather(-1, tgt[:, 1:, None])
        return float(-torch.log(p).mean())

    def bayes(x):
        blind_curve.append(nll(blind_attention(task.H, device=device)[None].expand(x.shape[0], -1, -1), x))
        return nll(bma_posterior_torch(x[:, :task.L], logpi), x)

    t0, c0 = time.perf_counter(), time.process_time()
    log = train(model, task.sampler(recipe), recipe.config(data_seed), device=device, bayes_loss=bayes,
                probes=probes, thresholds=thresholds, stop_when_crossed=stop_when_crossed,
                progress=progress or False)
    return WRun(model=model, task=task, recipe=recipe, seeds={"init": init_seed, "data": data_seed}, log=log,
                seconds=time.perf_counter() - t0, initial_copier=initial, blind_curve=blind_curve,
                cpu_seconds=time.process_time() - c0)


def evaluate_wei(run: WRun, n_eval: int, eval_seed: int, *, eval_task: WTask | None = None) -> dict[str, Any]:
    """Probe a trained model on ``n_eval`` fresh prompts of W's task (``eval_task``, default
    ``run.task``): copiers, block structure, column/row softmax errors, ``sigma(W_OV)`` vs pi,
    layer-2 attention vs BMA, losses vs the baselines. Stores and returns ``run.eval``."""
    from sim.montecarlo import mean_estimate
    from sim.papers.wei import probes as P
    from sim.train import make_generator

    model, task = run.model, eval_task or run.task
    device = str(model.W_OV.device)
    tokens, parents = task.draw(make_generator(eval_seed, device), n_eval)
    losses = P.prompt_losses(model, tokens, task.pi)
    rep = P.copier_report(model)
    with np.errstate(divide="ignore"):
        log_pi = np.log(task.pi)
    W = P.learned_W(model, "mean")
    per_head = P.learned_W(model, "per-head")
    tv = P.layer2_bma_tv(model, tokens, task.pi)
    blk = P.block_structure(model)
    # W's mechanism sits at distance 0; the wrong one (structure-blind) sets the scale of each distance.
    closed, se_closed = closed_fraction(losses["model"] - losses["bma"], losses["blind"] - losses["bma"])
    tv_blind = blind_bma_tv(tokens, task.pi, task.L)
    tv_closed, tv_closed_se = closed_fraction(tv, tv_blind)
    attn = P.layer2_attention(model, tokens[:8])
    run.eval = {
        "copier": rep, "n_eval": n_eval, "eval_seed": eval_seed,
        "loss_model": mean_estimate(losses["model"], eval_seed), "loss_bma": mean_estimate(losses["bma"], eval_seed),
        "loss_blind": mean_estimate(losses["blind"], eval_seed), "gap_closed": closed, "gap_closed_se": se_closed,
        "col_error": P.column_softmax_error(W, log_pi), "row_error": P.row_softmax_error(W, log_pi),
        "col_error_heads": [P.column_softmax_error(w, log_pi) for w in per_head],
        "row_error_heads": [P.row_softmax_error(w, log_pi) for w in per_head],
        "ov_error": P.ov_error(model, task.pi), "ov_error_uniform": uniform_ov_error(task.pi),
        "tv_bma": mean_estimate(tv, eval_seed), "tv_blind": mean_estimate(tv_blind, eval_seed),
        "tv_closed": tv_closed, "tv_closed_se": tv_closed_se,
        "block": blk, "W": W, "example_attn": attn, "example_tokens": tokens[:8].cpu().numpy(),
        "example_parents": parents[:8].cpu().numpy(),
        "parent_acc_model": float(P.parent_accuracy(attn, parents[:8].cpu().numpy()).mean()),
    }
    return run.eval


def paired_ratio(num, den) -> tuple[float, float]:
    """``mean(num) / mean(den)`` of paired per-prompt values, with the delta-method standard error
    ``sqrt(var(num) - 2 r cov(num, den) + r^2 var(den)) / (sqrt(n) mean(den))``; ``(nan, 0)`` unless
    ``mean(den) > 0``."""
    a, b = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    gap = b.mean()
    if not gap > 0:
        return float("nan"), 0.0
    r = a.mean() / gap
    cov = np.cov(np.stack([a, b])) if a.size > 1 else np.zeros((2, 2))
    se = math.sqrt(max(cov[0, 0] - 2 * r * cov[0, 1] + r * r * cov[1, 1], 0.0) / a.size) / gap
    return float(r), se


def closed_fraction(dist_model, dist_wrong) -> tuple[float, float]:
    """How much of a wrong mechanism's distance from W's mechanism a model closes, on paired
    per-prompt distances (W's mechanism at distance 0):

        closed = 1 - mean(dist_model) / mean(dist_wrong),

    with the delta-method standard error of the ratio (:func:`paired_ratio`). 1 = W's mechanism, 0 = no
    nearer than the wrong one; below -1 it reads -1 (twice as far as the wrong mechanism, or further)."""
    r, se = paired_ratio(dist_model, dist_wrong)
    if math.isnan(r):
        return float("nan"), 0.0
    return max(1.0 - r, -1.0), se


def blind_bma_tv(tokens, pi, L: int, *, chunk: int = 512) -> np.ndarray:
    """Per-prompt mean total variation between structure-blind attention (``1/h`` on every ``h' < h``)
    and the BMA posterior, ``(B,)``: the distance of the wrong layer 2 that ignores the context."""
    import torch

    from sim.papers.wei.probes import blind_attention, bma_posterior_torch

    with np.errstate(divide="ignore"):
        log_pi = torch.as_tensor(np.log(np.asarray(pi, dtype=np.float64)), device=tokens.device)
    blind = blind_attention(tokens.shape[2], device=tokens.device)
    out = []
    for start in range(0, tokens.shape[0], chunk):
        post = bma_posterior_torch(tokens[start:start + chunk, :L], log_pi)
        out.append((0.5 * (blind - post).abs()[:, 1:].sum(-1).mean(-1)).cpu())
    return torch.cat(out).numpy()


def uniform_ov_error(pi) -> float:
    """``(1/d)||U - pi||_1`` with ``U`` uniform rows: ``sigma(W_OV)``'s distance from pi when ``W_OV = 0``."""
    pi = np.asarray(pi, dtype=np.float64)
    return float(np.abs(pi - 1.0 / pi.shape[1]).sum() / pi.shape[0])


def run_record(run: WRun) -> dict:
    """Everything needed to re-check one seed by hand (JSON-able)."""
    e = run.eval
    return {"pi": record_matrix(run.task.pi), "d": run.task.d, "L": run.task.L, "H": run.task.H,
            "task": run.task.kind, "root_law": run.task.root_name, "seeds": run.seeds, "recipe": run.recipe.describe(),
            "train_seconds": round(run.seconds, 2), "initial_copier_score": run.initial_copier,
            "copier": e["copier"].as_dict(), "col_softmax_error": e["col_error"], "row_softmax_error": e["row_error"],
            "col_softmax_error_per_head": e["col_error_heads"], "W_tf (mean diagonal block)": record_matrix(e["W"]),
            "ov_error": e["ov_error"], "loss_model": e["loss_model"].value, "loss_bma": e["loss_bma"].value,
            "loss_blind": e["loss_blind"].value, "gap_closed": e["gap_closed"],
            "W_KQ offdiag/diag centred norm": e["block"].ratio, "eval_seed": e["eval_seed"], "n_eval": e["n_eval"]}


# ========================================================================== threads ==
def threads_for(ctx: Context):
    """The torch threads W's trained checks run with: ``torch_threads`` of the profile (1) on the CPU."""
    return torch_threads(ctx.settings.get("torch_threads", 1) if ctx.device == "cpu" else None)


# ======================================================================== statistics ==
def seed_number(name: str, values: Sequence[float], seeds: Sequence[int], *, mc_se: Sequence[float] | None = None,
                 tolerance: float | None = None, note: str = "") -> Number:
    """Mean over seeds with the seeds' standard error (or the Monte Carlo error if larger), on
    ``n - 1`` degrees of freedom (margins use the Student-t quantile, :func:`sim.verdict.compare`)."""
    v = np.asarray(values, dtype=float)
    se = float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else 0.0
    if mc_se is not None:
        se = max(se, float(math.sqrt(np.sum(np.square(mc_se))) / v.size))
    per = ", ".join(f"{x:.4g}" for x in v)
    return Number(name, float(v.mean()), stderr=se, n=int(v.size), seed=int(seeds[0]), tolerance=tolerance,
                  kind="trained", df=int(v.size) - 1, note=(f"per seed: [{per}]; seeds {list(seeds)}" + (f"; {note}" if note else "")))


#: A criterion's outcome as a reading's verdict (the tier's verdict carries the assumptions).
OUTCOME_VERDICT = {Outcome.HELD: "PASS", Outcome.VIOLATED: "FAIL", Outcome.UNDECIDED: "INCONCLUSIVE"}


def combine_outcomes(outcomes: Sequence[Outcome]) -> Outcome:
    """VIOLATED if any is, else UNDECIDED if any is, else HELD (all must hold)."""
    if Outcome.VIOLATED in outcomes:
        return Outcome.VIOLATED
    if Outcome.UNDECIDED in outcomes:
        return Outcome.UNDECIDED
    return Outcome.HELD


#: Float32 round-off on a mean loss or accuracy of order 1: two quantities closer than this are tied.
ROUND_OFF = 1e-6


def strictly_above(num: Number, threshold: float, z: float) -> Outcome:
    """Decide ``num.value > threshold`` beyond ``z`` s.e. (:func:`sim.verdict.compare`), where a tie
    within round-off and with no statistical error is VIOLATED: a strict inequality ("better",
    "positive") fails on equality, e.g. for a model that does not depend on what is compared."""
    out = compare(num.value, threshold, stderr=num.stderr, z=z, tol=ROUND_OFF, df=num.df)
    if out is Outcome.UNDECIDED and num.stderr * margin_multiplier(z, num.df) <= ROUND_OFF:
        return Outcome.VIOLATED
    return out


def task_assumptions(pis: Sequence[np.ndarray], kind: str) -> list[Assumption]:
    """The trained tiers' assumptions: W's task (``kind == "w"``) and ``pi > 0`` entrywise on every seed's ``pi``."""
    zero = [k for k, pi in enumerate(pis) if np.any(np.asarray(pi) <= 0)]
    return [Assumption("W's task: one random recursive tree per prompt, shared by the L examples and the target",
                       kind == "w", f"task = {kind!r}"),
            Assumption("pi > 0 entrywise (log pi finite)", not zero,
                       "every drawn pi > 0" if not zero else f"pi of seed(s) {zero} has a zero entry")]


def train_job(job: Mapping[str, Any]) -> WRun:
    """Train (and, with ``n_eval``, evaluate) one model from plain arguments: what a worker
    process runs (module level, so a spawned worker can import it)."""
    import torch

    torch.set_num_threads(1)
    dev = job["device"]
    task = WTask(job["pi"], job["L"], job["H"], kind=job["kind"], fixed_seed=job["fixed_seed"], device=dev)
    run = train_wei(task, job["recipe"], init_seed=job["init_seed"], data_seed=job["data_seed"], device=dev,
                    progress=job.get("progress"), K=job.get("K"), positions=job.get("positions", "relative"))
    if job.get("n_eval"):
        # Evaluated on W's task whatever the training task was: the checks are about W's mechanism.
        evaluate_wei(run, job["n_eval"], job["eval_seed"], eval_task=WTask(job["pi"], job["L"], job["H"], device=dev))
    return run


def train_group_job(group: Mapping[str, Any]) -> list[WRun]:
    """Train the jobs ``group["jobs"]`` (one architecture: the same ``d, L, H``, task kind, recipe, device,
    ``K`` and positions; each its own ``pi``, seeds and prompts) as one (:func:`sim.train.train_batched`),
    and evaluate each as :func:`train_job`. Model ``k`` is the model :func:`train_job` gives for job ``k``,
    to float round-off (vmapped kernels sum in another order); the runs log the training loss only (no
    Bayes loss beside it). Module level: a spawned worker imports it."""
    import torch

    from sim.papers.wei.probes import copier_report
    from sim.train import make_generator, train_batched

    torch.set_num_threads(1)
    jobs = group["jobs"]
    first = jobs[0]
    dev, recipe = first["device"], first["recipe"]
    tasks = [WTask(j["pi"], j["L"], j["H"], kind=j["kind"], fixed_seed=j["fixed_seed"], device=dev) for j in jobs]
    models = [init_wei_model(t.d, t.L, t.H, recipe, generator=make_generator(j["init_seed"], dev), K=j.get("K"),
                             positions=j.get("positions", "relative")) for t, j in zip(tasks, jobs)]
    initial = [copier_report(m).min_score for m in models]
    t0, c0 = time.perf_counter(), time.process_time()
    logs = train_batched(models, [t.sampler(recipe) for t in tasks], recipe.config(0), [j["data_seed"] for j in jobs],
                         device=dev, progress=group.get("progress"))
    wall, cpu = (time.perf_counter() - t0) / len(jobs), (time.process_time() - c0) / len(jobs)
    runs = []
    for j, t, m, log, init in zip(jobs, tasks, models, logs, initial):
        run = WRun(model=m, task=t, recipe=recipe, seeds={"init": j["init_seed"], "data": j["data_seed"]}, log=log,
                   seconds=wall, initial_copier=init, cpu_seconds=cpu)
        if j.get("n_eval"):
            evaluate_wei(run, j["n_eval"], j["eval_seed"], eval_task=WTask(j["pi"], j["L"], j["H"], device=dev))
        runs.append(run)
    return runs


def _job_key(job: Mapping[str, Any]) -> tuple:
    """Every input of :func:`train_job` (``pi`` by its bytes): two jobs with one key train the same model."""
    return ("wei.train_job",) + tuple(sorted(
        (k, np.asarray(v, dtype=np.float64).tobytes() if k == "pi" else v) for k, v in job.items() if k != "progress"))


def train_cost(job: Mapping[str, Any]):
    """What :func:`train_job` trains: the recipe's two stages of W's model (``steps1`` at ``batch1``,
    ``steps2`` at ``batch2``; ``K`` heads and layer-1 ``positions`` when the job names them) and, with
    ``n_eval``, one evaluation (:func:`evaluate_wei`). A job of a batched group is priced as trained alone
    (an upper bound: the group's models train as one)."""
    from sim.claims.jobs import Cost

    recipe, d = job["recipe"], int(np.asarray(job["pi"]).shape[0])
    size = {"d": d, "L": int(job["L"]), "H": int(job["H"])}
    if job.get("K") is not None:
        size["K"] = int(job["K"])
    if job.get("positions", "relative") != "relative":
        size["positions"] = job["positions"]
    steps = [({**size, "batch": recipe.batch1, "stage": 1}, recipe.steps1),
             ({**size, "batch": recipe.batch2, "stage": 2}, recipe.steps2)]
    evals = [({**size, "n_eval": int(job["n_eval"])}, 1)] if job.get("n_eval") else []
    return Cost.of("wei", "sim.papers.wei.training:timing_run", steps=steps, evals=evals)


def job_args(jobs: list[dict], label: str, *, batched: bool = False) -> dict[str, Any]:
    """:func:`sim.claims.jobs.run_jobs`'s arguments for :func:`train_job` over ``jobs`` (what
    :func:`run_jobs` trains and a claim's plan prices); with ``batched``, the jobs to do that share an
    architecture (``_architecture``) train as one group (:func:`train_group_job`), on the CPU too."""
    args = {"fn": train_job, "jobs": jobs, "key": _job_key, "label": label, "cost": train_cost}
    if batched:
        args.update(batch=train_group_job, group=_architecture, batch_on_cpu=True)
    return args


#: Runs that more than one claim trains, kept in this process (``share=True`` in :func:`run_jobs`): W.E3 and
#: W.E4 read W.E1's mechanism runs beside their own models (``Claim.reuses``: a run evaluates them after
#: W.E1, in its process, and a resumed run finds W.E1's records). Keyed by every input of the job, so a hit
#: is the model the job would train.
_SHARED_RUNS: dict[tuple, WRun] = {}
_SHARED_MAX = 256


def clear_shared_runs() -> None:
    """Forget the runs kept for other claims in this process."""
    _SHARED_RUNS.clear()


def run_jobs(ctx: Context, jobs: list[dict], label: str, *, share: bool = False, batched: bool = False) -> list[WRun]:
    """:func:`train_job` over ``jobs``, in order, on the grid runner (:func:`sim.claims.jobs.run_jobs`):
    on the CPU a local pool of ``settings["workers"]`` (default: the CPU count) one-thread
    workers, otherwise here one by one with live progress; the numbers are the same. Jobs this
    claim's evaluation already trained (an earlier look of a sequential decision, or an
    interrupted run's records) are not trained again; with ``share``, so are jobs another claim trained
    in this process with ``share`` (the same inputs: the same model), and these runs are kept for the next.
    With ``batched``, the jobs left to train that share an architecture are trained as one
    (:func:`train_group_job`, one grid job per architecture, each job still its own record): several
    small models per step cost little more than one."""
    keys = [_job_key(job) for job in jobs]
    if share:
        for k in keys:
            if k in _SHARED_RUNS and k not in ctx.memo_store:
                ctx.memo(k, lambda k=k: _SHARED_RUNS[k])
    runs = run_claim_jobs(ctx, **job_args(jobs, label, batched=batched))
    if share:
        for k, run in zip(keys, runs):
            if k not in _SHARED_RUNS and len(_SHARED_RUNS) >= _SHARED_MAX:
                _SHARED_RUNS.pop(next(iter(_SHARED_RUNS)))
            _SHARED_RUNS[k] = run
    return runs


def _architecture(job: Mapping[str, Any]) -> tuple:
    """What models must share to be trained as one: every input of a job but its ``pi``, seeds and prompts."""
    own = ("pi", "fixed_seed", "init_seed", "data_seed", "eval_seed", "progress")
    return tuple(sorted((k, v) for k, v in job.items() if k not in own))


def seed_jobs(ctx: Context, part: str, s: Mapping[str, Any], prefix: str, n_seeds: int, *,
              task_kind: str | None = None, seed_claim: str | None = None) -> list[dict]:
    """The jobs of :func:`train_seeds`: ``n_seeds`` models of part ``part`` (settings ``s`` under ``prefix``: ``d,
    L, H``, the recipe, ``n_eval``), each on its own ``pi`` from the prior and its own seeds. The seeds are the
    claim's own (``ctx.seed_for``), or with ``seed_claim`` those claim ``seed_claim`` derives for the same part
    from the same master seed: its jobs, so W.E3 and W.E4 train beside W.E1's runs on the same ``pi``, data
    and evaluation prompts."""
    from sim.seeds import derive_seed

    owner = seed_claim or ctx.claim.id

    def seed(purpose: str) -> int:  # ctx.seed_for(purpose) when the owner is the claim itself
        return derive_seed(ctx.seed, owner, purpose)

    d, L, H = s[f"{prefix}d"], s[f"{prefix}L"], s[f"{prefix}H"]
    recipe = WRecipe.from_settings(s, prefix)
    kind = task_kind or s.get("task", "w")
    return [{"pi": prior_for(ctx, d).sample(np.random.default_rng(seed(f"{part}/pi/{i}")), 1)[0], "L": L, "H": H,
             "kind": kind, "fixed_seed": seed(f"{part}/fixed-tree/{i}"), "recipe": recipe, "device": ctx.device,
             "init_seed": seed(f"{part}/init/{i}"), "data_seed": seed(f"{part}/data/{i}"),
             "n_eval": s[f"{prefix}n_eval"], "eval_seed": seed(f"{part}/eval/{i}")} for i in range(n_seeds)]


def _seed_label(ctx: Context, part: str) -> str:
    return f"{ctx.claim.id} {part} seed"


def seed_job_args(ctx: Context, part: str, s: Mapping[str, Any], prefix: str, n_seeds: int, *,
                  task_kind: str | None = None) -> dict[str, Any]:
    """:func:`job_args` of :func:`seed_jobs` (what :func:`train_seeds` trains and a claim's plan prices)."""
    return job_args(seed_jobs(ctx, part, s, prefix, n_seeds, task_kind=task_kind), _seed_label(ctx, part))


def train_seeds(ctx: Context, part: str, s: Mapping[str, Any], prefix: str, n_seeds: int, *,
                task_kind: str | None = None, share: bool = False) -> list[WRun]:
    """Train the models of :func:`seed_jobs` through :func:`run_jobs` (``share``: kept for, and taken from,
    other claims in this process)."""
    return run_jobs(ctx, seed_jobs(ctx, part, s, prefix, n_seeds, task_kind=task_kind), _seed_label(ctx, part),
                    share=share)


#: The seed of the cost plan's timing runs: they time a step, no number of theirs is reported.
TIMING_SEED = 0


def timing_run(unit: str, shape: Mapping[str, Any], count: int, device: str = "cpu") -> None:
    """The cost plan's timing run (:mod:`sim.plan`): ``count`` training steps of W's model at ``shape``
    (``d, L, H``, ``batch`` and the ``stage``, whose parameters train; ``K`` heads and ``positions`` when
    given), or ``count`` evaluations on ``n_eval`` prompts (:func:`evaluate_wei`, after one step)."""
    from sim.claims.inputs import DEFAULT_W_PRIOR

    d, L, H = int(shape["d"]), int(shape["L"]), int(shape["H"])
    arch = {"K": int(shape["K"]) if "K" in shape else None, "positions": shape.get("positions", "relative")}
    pi = DEFAULT_W_PRIOR.bind(d).sample(np.random.default_rng(TIMING_SEED), 1)[0]
    task = WTask(pi, L, H, device=device)
    if unit == "step":
        stage1 = int(shape["stage"]) == 1
        recipe = WRecipe(steps1=int(count) if stage1 else 0, batch1=int(shape["batch"]),
                         steps2=0 if stage1 else int(count), batch2=int(shape["batch"]))
        train_wei(task, recipe, init_seed=TIMING_SEED, data_seed=TIMING_SEED, device=device, **arch)
        return
    run = train_wei(task, WRecipe(steps1=1, steps2=0, batch1=8), init_seed=TIMING_SEED, data_seed=TIMING_SEED,
                    device=device, **arch)
    for _ in range(int(count)):
        evaluate_wei(run, int(shape["n_eval"]), TIMING_SEED)
