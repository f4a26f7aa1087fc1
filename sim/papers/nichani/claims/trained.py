"""N's trained claims on the reduced model: N.K1 (two-stage gradient descent recovers the graph
and approaches L*) and N.K4 (out of distribution), plus the N.K10
placeholder (decided by the prior audit, ``icl-verify prior``). N.E is in
:mod:`~sim.papers.nichani.claims.experiments`, N.K9's trained tier in
:mod:`~sim.papers.nichani.claims.constructions_trained`.

Training lives in :mod:`~sim.papers.nichani.training` (samplers, the fast readout, recipes, a
per-process cache so N.K4 reuses N.K1's models); the probes in :mod:`sim.papers.nichani.probes`;
the Bayes baselines in :mod:`sim.papers.nichani.task`. Every trained number is reported per seed
and as mean ± standard error across seeds, next to its baseline. Torch runs on ``ctx.device`` (``cpu`` or ``cuda``).

Each deciding check is a pure function of measurements (:func:`k1_decision`, :func:`k4_decision`)
that runs on the trained models and, unchanged, on negative controls: hand-built models on a
wrong mechanism (prompt unigram, uniform, wrong graph, untrained), which must FAIL it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
import torch

from sim.seeds import derive_seeds
from theory.markov import stationary_batch
from sim.threads import torch_threads
from theory.dirichlet import dirichlet_row_entropy
from theory.graphs import from_parents

from sim.papers.nichani.task import best_mixture_losses
from sim.graphs import draw_graph
from sim.papers.nichani.model import ReducedModel
from sim.montecarlo import Estimate, mean_estimate
from sim.priors import Dirichlet, Floor, Prior
from sim.papers.nichani.probes import adjacency_pattern, parent_attention, position_attention, root_uniformity
from sim.verdict import (Control, Finding, FindingKind, Number, Outcome, TierResult, Verdict, compare,
                        margin_multiplier, welch_df)
from sim.claims.base import Claim, Context, InstanceCheck, PrimaryReading, Source, summarize_instances
from sim.papers.nichani.claims.reporting import across_seeds, pyplot, trained_number
from sim.papers.nichani.task import N_ALPHA, N_S, n_graph
from sim.claims.jobs import planned_jobs, run_jobs
from sim.papers.nichani.training import (NTask, reduced_cost, reduced_group, reduced_group_key, reduced_job,
                                         reduced_key, sample_task)

__all__ = ["N_K1", "N_K4", "N_K10", "CLAIMS", "K1_ASSUMPTIONS", "K1_CONTROLS", "K4_CONTROLS", "Decision",
           "k1_decision", "k4_decision", "quantile_slope"]


# ====================================================================== N.K1 and N.K4 ==
K1_ASSUMPTIONS = ("lower bound: min pi(s'|s) > gamma/S a.s., gamma > 0",
                  "non-degeneracy: E sum_s ||pi(.|s) - mu_pi||^2 >= gamma^2/S, gamma > 0",
                  "permutation symmetry and uniform mean E[pi] = 11^T/S",
                  "root fraction |R|/T <= 1 - gamma",
                  "beta0 <= T_eff^(-3/2) (c_{gamma,S} taken as 1)")


def _k1_prior(ctx: Context, S: int) -> Prior:
    s = ctx.settings
    prior = ctx.prior if ctx.prior is not None else Floor(Dirichlet(float(s["alpha"])), float(s["gamma"]))
    return prior if prior.d is not None else prior.bind(S)


def _prior_gamma(ctx: Context, prior: Prior, S: int, parents: np.ndarray, beta0: float, T_eff: float):
    """Knowl 10's assumptions for ``prior`` and the graph: ``(holds {name: bool}, gamma, numbers)``.

    gamma (lower bound) = S * the prior's guaranteed entry floor (closed form when the prior
    knows it, else the smallest entry over draws); non-degeneracy by Monte Carlo;
    symmetry from the prior when known, else the mean matrix within 3 standard errors.
    """
    seed = ctx.seed_for("assumptions/prior")
    rng = np.random.default_rng(seed)
    n = int(ctx.settings.get("n_prior_draws", 4000))
    draws = prior.sample(rng, n)  # (n, S, S)
    floor = prior.entry_floor()
    g_low = S * float(floor) if floor is not None else S * float(draws.min())
    mu = stationary_batch(draws)
    nondeg = ((draws - mu[:, None, :]) ** 2).sum(axis=(1, 2))  # sum_s ||pi(.|s) - mu||^2
    nd = mean_estimate(nondeg, seed)
    g_nd = math.sqrt(max(S * (nd.value - ctx.z * nd.stderr), 0.0))
    sym = prior.symmetric()
    mean = prior.mean_matrix()
    if mean is None:
        m_hat, m_se = draws.mean(0), draws.std(0, ddof=1) / math.sqrt(n)
        uniform = bool((np.abs(m_hat - 1.0 / S) <= ctx.z * m_se + 1e-12).all())
    else:
        uniform = bool(np.allclose(mean, 1.0 / S, atol=1e-12))
    roots = int((parents[:-1] < 0).sum()) + 1  # the query is a root
    r = roots / parents.size
    gamma = min(g_low, g_nd, 1.0 - r)
    holds = {K1_ASSUMPTIONS[0]: g_low > 0, K1_ASSUMPTIONS[1]: g_nd > 0,
             K1_ASSUMPTIONS[2]: bool(uniform and sym is not False), K1_ASSUMPTIONS[3]: gamma > 0 and r <= 1 - gamma,
             K1_ASSUMPTIONS[4]: beta0 <= T_eff ** -1.5 + 1e-15}
    numbers = [Number("gamma (lower bound) = S * entry floor", g_low, seed=seed,
                      note="closed form" if floor is not None else f"smallest entry over {n} draws"),
               nd.number("E sum_s ||pi(.|s) - mu_pi||^2 (non-degeneracy)", note=f"{prior.spec()}, {n} draws"),
               Number("gamma allowed by all of Knowl 10 (1), (2), (4)", gamma)]
    return holds, gamma, numbers


def _lstar(prior: Prior, S: int, seed: int, n: int = 20_000) -> tuple[float, float]:
    """``L* = E[(1/S) sum_s H(pi(s, .))]``: exact for Dirichlet rows, Monte Carlo otherwise."""
    if isinstance(prior, Dirichlet):
        return dirichlet_row_entropy(float(prior.alpha), S), 0.0
    pis = prior.sample(np.random.default_rng(seed), n)
    ent = -(np.where(pis > 0, pis * np.log(np.where(pis > 0, pis, 1.0)), 0.0)).sum(-1).mean(-1)
    e = mean_estimate(ent, seed)
    return e.value, e.stderr


def _k1_hyper(s, T: int) -> dict:
    """Two-stage GD hyperparameters at prompt length ``T``: ``beta0 = T^(-3/2)`` unless set, and
    ``lr1 = eta1 T^2 / beta0`` (the stage-1 gradient is ``O(beta0 / (S T))`` times a softmax
    Jacobian with entries ``~1/i``, so this keeps the stage-1 dynamics comparable across T)."""
    beta0 = float(T ** -1.5 if s.get("beta0", "auto") == "auto" else s["beta0"])
    return {"beta0": beta0, "lr1": float(s["eta1"]) * T * T / beta0, "steps1": int(s["steps1"]),
            "lr2": float(s["lr2"]), "steps2": int(s["steps2"]), "batch": int(s["batch"])}


def _k1_job_args(ctx: Context, prior: Prior, wrong) -> dict:
    """:func:`sim.claims.jobs.run_jobs`'s arguments for every reduced model of the N.K1 grid (T outer,
    seeds inner): one job per model, the seeds of one T trained as one batch
    (:func:`~sim.papers.nichani.training.reduced_group`)."""
    s = ctx.settings
    S = int(s["S"])
    seeds = [int(v) for v in s.get("seed_list", ())] or _seeds_k1(ctx)
    jobs = []
    for T in s["Ts"]:
        par = n_graph(s["graph"], int(T))
        hp = _k1_hyper(s, int(T))
        jobs += [{"S": S, "T": int(T), "parents": tuple(int(p) for p in par.tolist()), "prior": prior.spec(),
                  "seed": int(sd), "device": ctx.device, "wrong": wrong, **hp} for sd in seeds]
    return {"fn": reduced_job, "jobs": jobs, "key": reduced_key, "cost": reduced_cost,
            "label": f"{ctx.claim.id} reduced model (two-stage GD)", "batch": reduced_group, "group": reduced_group_key,
            "batch_on_cpu": True}


def _k1_jobs(ctx: Context) -> list:
    """The N.K1 grid's models as the cost plan sees them (N.K4 reuses them)."""
    return planned_jobs(**_k1_job_args(ctx, _k1_prior(ctx, int(ctx.settings["S"])), ctx.params["wrong_task"]))


def _train_k1_models(ctx: Context, prior: Prior, wrong) -> dict:
    """Train every reduced model of the N.K1 grid on the grid runner (:func:`_k1_job_args`; models
    trained before, by an earlier look, or by N.K1 for N.K4, come from the run folder's records);
    ``{T: [(seed, model, log)]}``."""
    args = _k1_job_args(ctx, prior, wrong)
    pairs = run_jobs(ctx, **args)
    out: dict = {}
    for job, (model, log) in zip(args["jobs"], pairs):
        out.setdefault(int(job["T"]), []).append((job["seed"], model, log))
    return out


def _seeds_k1(ctx: Context) -> list[int]:
    """Seeds shared by N.K1 and N.K4 (so N.K4 reuses N.K1's trained models): derived from the run seed
    and a key of their own (7), not from a claim id."""
    return derive_seeds(ctx.seed, 7, n=int(ctx.settings["seeds"]) + 1)[1:]


# ----------------------------------------------------- models the deciding checks run on --
#: The hand-wired first layer's logit on the parent: softmax puts ``1 - (i-1) e^-30`` on it,
#: the true adjacency to float32 round-off at every T used here.
WIRE = 30.0

#: A predictor maps prompts ``(n, T)`` to probability vectors ``(n, S)``: trained models and
#: controls alike, so both go through the same deciding code.
Predictor = Callable[[np.ndarray], np.ndarray]

_VERDICT = {Outcome.HELD: Verdict.PASS, Outcome.VIOLATED: Verdict.FAIL, Outcome.UNDECIDED: Verdict.INCONCLUSIVE}


def _reduced_eval(model: ReducedModel, x: np.ndarray, device: str) -> np.ndarray:
    with torch.no_grad(), torch_threads(1):
        return model(torch.as_tensor(x, device=device)).double().cpu().numpy()  # (n, S)


def _predictor(model: ReducedModel, device: str = "cpu") -> Predictor:
    return lambda x: _reduced_eval(model, x, device)


def _uniform(S: int) -> Predictor:
    return lambda x: np.full((len(x), S), 1.0 / S)


def _wired(parents: np.ndarray, beta: float, S: int) -> ReducedModel:
    """The reduced model wired by hand: ``A1 = WIRE * adjacency(parents)`` (root rows attend
    uniformly), ``A2 = beta I`` (Knowl 5's stage-2 direction: ``A2`` and ``A2 + c 11^T`` are the
    same model). ``beta = 0`` is the prompt-unigram model."""
    A1 = torch.as_tensor(WIRE * adjacency_pattern(parents), dtype=torch.float32)
    return ReducedModel(A1, beta * torch.eye(S), t_eff=len(parents))


def _grandparents(parents: np.ndarray) -> np.ndarray:
    """The wrong graph of the controls: ``p'(i) = p(p(i))`` (a root where ``p(i)`` is one);
    on the chain, ``p'(i) = i - 2``."""
    par = np.asarray(parents)
    out = np.full_like(par, -1)
    out[par >= 0] = par[par[par >= 0]]
    return out


def _perturbed_losses(f: np.ndarray, rows: np.ndarray, eps: float) -> np.ndarray:
    """Per prompt ``-sum_s' pi(s'|s_T) log(f_s' + eps)`` (N's perturbed loss, Knowl 6)."""
    return -(rows * np.log(f + eps)).sum(1)


def _wired_forward(parents: np.ndarray, S: int, x: np.ndarray) -> Callable[[float], np.ndarray]:
    """``beta -> _wired(parents, beta)(x)`` with layer 1 computed once: with ``A2 = beta I``
    layer 2 scores position ``i`` by ``beta g_i``, ``g_i = c_i[s_T] = sum_j S(A1)[i, j] [s_j = s_T]``,
    and returns ``f(beta) = sum_i softmax(beta g)_i e_{s_i}`` (the model's forward pass, float64)."""
    a1 = position_attention(_wired(parents, 0.0, S))  # (T, T)
    g = (x == x[:, -1:]).astype(np.float64) @ a1.T  # (n, T)
    is_token = [x == v for v in range(S)]  # S masks (n, T)

    def forward(beta: float) -> np.ndarray:
        w = np.exp(beta * (g - g.max(1, keepdims=True)))
        w /= w.sum(1, keepdims=True)  # (n, T): layer 2's attention
        return np.stack([(w * m).sum(1) for m in is_token], axis=1)  # (n, S)

    return forward


def _fit_beta(parents: np.ndarray, S: int, eps: float, x: np.ndarray, rows: np.ndarray) -> float:
    """``beta`` minimising the mean perturbed loss of ``_wired(parents, beta)`` on ``(x, rows)``
    (fit prompts, not the evaluation prompts): the best stage 2 for that first layer."""
    from scipy.optimize import minimize_scalar

    forward = _wired_forward(parents, S, x)
    return float(minimize_scalar(lambda beta: float(_perturbed_losses(forward(beta), rows, eps).mean()),
                                 bounds=(0.0, 20.0), method="bounded", options={"xatol": 1e-2}).x)


@dataclass(frozen=True)
class Decision:
    """The deciding check's outcome on one model, trained or control: ``margin`` > 0 where the
    conclusion holds (``stderr`` its error), ``line`` the one line with the deciding number."""

    outcome: Outcome
    margin: float
    stderr: float
    line: str

    @property
    def verdict(self) -> Verdict:
        return _VERDICT[self.outcome]


def _control(name: str, mechanism: str, decision: Decision) -> Control:
    return Control(name, mechanism, decision.verdict, decision.line)


def _status(outcomes) -> Outcome:
    outcomes = list(outcomes)
    if Outcome.VIOLATED in outcomes:
        return Outcome.VIOLATED
    return Outcome.UNDECIDED if Outcome.UNDECIDED in outcomes else Outcome.HELD


def _pooled_parts(losses: Sequence[Estimate]) -> tuple[float, list[tuple[float, float | None]]]:
    """Mean over seeds of per-seed estimates on the same evaluation prompts, and its variance in
    two parts: the seeds' spread (``n - 1`` degrees of freedom) and the prompts' error (not
    divided by the number of seeds: the prompts are shared; known well)."""
    vals = [l.value for l in losses]
    m, se_seed = across_seeds(vals)
    var_prompts = sum(l.stderr ** 2 for l in losses) / len(losses)
    # One model (a control): the decision is about that model, and only its prompts' error counts.
    seed_part = [(se_seed ** 2, len(vals) - 1)] if len(vals) > 1 else []
    return m, seed_part + [(var_prompts, None)]


def _pooled(losses: Sequence[Estimate]) -> tuple[float, float]:
    """Mean and standard error of :func:`_pooled_parts`."""
    m, parts = _pooled_parts(losses)
    return m, math.sqrt(sum(v for v, _ in parts))


# ------------------------------------------------------------------------------ N.K1 --
def k1_decision(first: Sequence[Estimate], last: Sequence[Estimate], T0: int, T1: int, *, z: float,
                factor: float = 0.5) -> Decision:
    """Knowl 1's approach to L*, decided on one model (one estimate per training seed, all on
    the same evaluation prompts; a control is one model).

    The excess over L* beyond the perturbation's own shift,
    ``D(T) = [L_eps(f) - L*] - [L_eps(pi) - L*] = L_eps(f) - L_eps(pi)``, ``eps = T^-1/2``, paired
    per prompt, must decay towards 0: ``D(T1) <= factor * D(T0)`` with margin ``z`` standard
    errors (seeds' spread and prompts, ``_pooled_parts``), read with the Student-t quantile
    at the Welch-Satterthwaite degrees of freedom (:func:`sim.verdict.welch_df`: few seeds give a
    wide margin). A plateau above ``factor * D(T0)``
    fails; a power law ``b T^-c`` passes when ``(T1/T0)^-c < factor``.
    """
    m0, parts0 = _pooled_parts(first)
    m1, parts1 = _pooled_parts(last)
    parts = [(factor ** 2 * v, df) for v, df in parts0] + parts1
    se0, se1 = math.sqrt(sum(v for v, _ in parts0)), math.sqrt(sum(v for v, _ in parts1))
    margin, se = factor * m0 - m1, math.sqrt(sum(v for v, _ in parts))
    df = welch_df(parts)
    q = margin_multiplier(z, df)
    return Decision(compare(margin, 0.0, stderr=se, z=z, df=df), margin, se,
                    f"L_eps - L_eps(pi): {m0:.4f} ± {se0:.2g} at T={T0} -> {m1:.4f} ± {se1:.2g} at T={T1}; "
                    f"needs <= {factor:g} x {m0:.4f} = {factor * m0:.4f} by {q:.3g} s.e."
                    + ("" if df is None else f" (Student-t, {df:.1f} degrees of freedom)"))


#: N.K1's controls: (name, wrong mechanism); built per T in ``_k1_trained``.
K1_CONTROLS = (("prompt unigram: A1 = true adjacency, A2 = 0",
                "layer 2 ignores the query: predicts the prompt's unigram (-> mu_pi), not pi(.|s_T)"),
               ("uniform predictor: f = 1/S", "ignores the prompt"),
               ("wired to the wrong graph: A1 = adjacency of p(p(i)), A2 = the mechanism's beta I",
                "copies the grandparent: estimates the two-step transition pi^2(.|s_T), not pi(.|s_T)"))


def _k1_trained(ctx: Context) -> TierResult:
    s = ctx.settings
    S = int(s["S"])
    thr = float(ctx.params["attention_threshold"])
    factor = float(ctx.params["decay_factor"])
    wrong = ctx.params["wrong_task"]
    prior = _k1_prior(ctx, S)
    Ts = [int(T) for T in s["Ts"]]
    if len(Ts) < 2:
        raise ValueError(f"N.K1 decides a decay in T: Ts needs two lengths or more, got {Ts}")
    T0, T1 = Ts[0], Ts[-1]
    eps_fixed = T1 ** -0.5  # one eps for every T: the comparison the changing eps cannot blur
    models = _train_k1_models(ctx, prior, wrong)
    seeds = [sd for sd, _, _ in models[T0]]
    lstar, lstar_se = _lstar(prior, S, ctx.seed_for("lstar"))
    numbers = [Number("L* = E[(1/S) sum_s H(pi(s,.))]", lstar, lstar_se, seed=ctx.seed_for("lstar"),
                      kind="exact" if lstar_se == 0 else "montecarlo", note=prior.spec())]
    checks, per_T, assumption_sets = [], {}, []
    for T in Ts:
        par = n_graph(s["graph"], T)
        hp = _k1_hyper(s, T)
        holds, gamma, a_numbers = _prior_gamma(ctx, prior, S, par, hp["beta0"], float(T))
        assumption_sets.append(holds)
        if T == T0:
            numbers += a_numbers
        eps = T ** -0.5
        eval_seed = ctx.seed_for(f"eval/T{T}")
        task = NTask(S, T, tuple(par.tolist()), prior=prior)
        x, pis = sample_task(task, np.random.default_rng(eval_seed), int(s["n_eval"]))
        rows = pis[np.arange(len(x)), x[:, -1]]
        x_fit, pis_fit = sample_task(task, ctx.rng(f"fit/T{T}"), int(s["n_fit"]))
        rows_fit = pis_fit[np.arange(len(x_fit)), x_fit[:, -1]]
        present = np.zeros((len(x), S), dtype=bool)
        present[np.repeat(np.arange(len(x)), T), x.ravel()] = True
        floor = mean_estimate(best_mixture_losses(rows, present, eps), eval_seed)
        l_truth, l_truth_fixed = _perturbed_losses(rows, rows, eps), _perturbed_losses(rows, rows, eps_fixed)

        def excess(f: np.ndarray) -> tuple[Estimate, Estimate]:
            """D(T) at the paper's eps = T^-1/2 and at the fixed eps, paired per prompt."""
            return (mean_estimate(_perturbed_losses(f, rows, eps) - l_truth, eval_seed),
                    mean_estimate(_perturbed_losses(f, rows, eps_fixed) - l_truth_fixed, eval_seed))

        beta_mech = _fit_beta(par, S, eps, x_fit, rows_fit)
        f_mech = _predictor(_wired(par, beta_mech, S))(x)
        # the wrong graph keeps the mechanism's beta: at its own best beta (about 0 here, pi^2 being
        # close to mu) it would be the unigram control again
        controls = [excess(_predictor(_wired(par, 0.0, S))(x))[0], excess(_uniform(S)(x))[0],
                    excess(_predictor(_wired(_grandparents(par), beta_mech, S))(x))[0]]
        mins, losses, d, d_fixed, over_mech, roots_tv = [], [], [], [], [], []
        for sd, model, log in models[T]:
            attn = position_attention(model)
            pa = parent_attention(attn, par, reading="positions")
            f = _reduced_eval(model, x, ctx.device)
            l_model = _perturbed_losses(f, rows, eps)
            mins.append(pa.min)
            losses.append(mean_estimate(l_model, eval_seed))
            d_T, d_T_fixed = excess(f)
            d.append(d_T)
            d_fixed.append(d_T_fixed)
            over_mech.append(mean_estimate(l_model - _perturbed_losses(f_mech, rows, eps), eval_seed))
            roots_tv.append(root_uniformity(attn, par))
            out = compare(pa.min, thr)
            checks.append(InstanceCheck(holds, out, pa.min - thr, {
                "conclusion": f"S(A1)[i, p(i)] >= {thr} at every non-root i after stage 1", "T": T, "S": S,
                "graph": s["graph"], "parents": par.tolist(), "prior": prior.spec(), "training seed": sd,
                "wrong task": wrong, **hp, **pa.record(), "S(A1) (rounded)": np.round(attn, 4).tolist()}))
        mech, mech_fixed = excess(f_mech)
        per_T[T] = {"mins": mins, "losses": losses, "excess": d, "excess_fixed": d_fixed, "truth":
                    mean_estimate(l_truth, eval_seed), "mech": mech, "mech_fixed": mech_fixed, "controls": controls,
                    "par": par}
        dm, dse = _pooled(d)
        numbers += [
            trained_number(f"T={T}: min_i S(A1)[i, p(i)] after stage 1", mins, seeds, tolerance=thr,
                            note=f"threshold {thr}; beta0={hp['beta0']:.3g}, lr1={hp['lr1']:.3g}, "
                                 f"{hp['steps1']}+{hp['steps2']} steps, batch {hp['batch']}"),
            trained_number(f"T={T}: T * (1 - min_i S(A1)[i, p(i)])  (Knowl 1: O(1) as T grows)",
                            [T * (1 - m) for m in mins], seeds),
            trained_number(f"T={T}: trained perturbed loss L_eps(theta) (eps = T^-1/2 = {eps:.3g})",
                            [l.value for l in losses], seeds,
                            note=f"{len(x)} evaluation prompts (seed {eval_seed}), prompt stderr "
                                 f"{max(l.stderr for l in losses):.2g}"),
            per_T[T]["truth"].number(f"T={T}: L_eps(pi): perturbed loss of the true row pi(s_T, .) (L_eps(pi) - L* = "
                                     f"{per_T[T]['truth'].value - lstar:+.4f}: eps's own shift)"),
            Number(f"T={T}: D = L_eps(theta) - L_eps(pi), the excess over L* beyond eps's shift (decides)", dm, dse,
                   n=len(seeds), kind="trained",
                   note="paired per prompt; per seed: " + ", ".join(f"{e.value:.4g} (seed {sd})"
                                                                    for e, sd in zip(d, seeds))),
            trained_number(f"T={T}: D at the fixed eps = {eps_fixed:.3g} (T_max^-1/2)", [e.value for e in d_fixed],
                           seeds, note=f"prompt stderr {max(e.stderr for e in d_fixed):.2g}"),
            mech.number(f"T={T}: D of the mechanism: true adjacency, A2 = beta I, beta = {beta_mech:.3g} fitted on "
                        f"{len(x_fit)} other prompts"),
            trained_number(f"T={T}: L_eps(theta) - L_eps(mechanism) (paired per prompt)",
                           [e.value for e in over_mech], seeds,
                           note=f"prompt stderr {max(e.stderr for e in over_mech):.2g}"),
            floor.number(f"T={T}: floor: best mixture of prompt tokens knowing pi (no such predictor does better)"),
            *(c.number(f"T={T}: D of the control '{name}'") for c, (name, _) in zip(controls, K1_CONTROLS)),
        ]
        if (par[:-1] < 0).sum() > 1:
            numbers.append(trained_number(f"T={T}: max TV(S(A1) root row, uniform)", roots_tv, seeds))
        ctx.progress(f"N.K1 T={T}: min attention {np.min(mins):.3f}, D {dm:.4f} ± {dse:.2g}")
    decision = k1_decision(per_T[T0]["excess"], per_T[T1]["excess"], T0, T1, z=ctx.z, factor=factor)
    checks.append(InstanceCheck(assumption_sets[-1], decision.outcome, decision.margin, {
        "conclusion": (f"the excess over L* beyond eps's shift, D = L_eps(theta) - L_eps(pi), decays towards 0: "
                       f"D(T={T1}) <= {factor:g} D(T={T0})"), "deciding": decision.line,
        "standard error of the margin": decision.stderr,
        **{f"D at T={T}": _pooled(per_T[T]["excess"])[0] for T in Ts},
        **{f"D at T={T}, eps = {eps_fixed:.3g}": _pooled(per_T[T]["excess_fixed"])[0] for T in Ts},
        **{f"D of the mechanism at T={T}": per_T[T]["mech"].value for T in Ts},
        "L*": lstar, "seeds": seeds, "prior": prior.spec(), "wrong task": wrong}))
    res = summarize_instances(
        "trained", checks, list(K1_ASSUMPTIONS), numbers=numbers,
        what=(f"stage-1 attention >= {thr} on every parent (every T, every seed); the excess over L* beyond eps's "
              f"shift, D = L_eps(theta) - L_eps(pi), falls to at most {factor:g} of its T={T0} value at T={T1}"),
        budget="more seeds and evaluation prompts (seeds, n_eval), or longer stages (steps1, steps2)")
    attention = _status(c.outcome for c in checks[:-1])
    res.readings += [
        {"name": f"graph recovery: S(A1)[i, p(i)] >= {thr} at every non-root i, every T and seed",
         "verdict": str(_VERDICT[attention]), "detail": f"smallest {min(min(per_T[T]['mins']) for T in Ts):.4f}"},
        {"name": f"approach to L*: D(T={T1}) <= {factor:g} D(T={T0}), D = L_eps(theta) - L_eps(pi)",
         "verdict": str(decision.verdict), "detail": decision.line}]
    res.controls += [_control(name, why, k1_decision([per_T[T0]["controls"][k]], [per_T[T1]["controls"][k]], T0, T1,
                                                     z=ctx.z, factor=factor))
                     for k, (name, why) in enumerate(K1_CONTROLS)]
    res.findings.append(_k1_literal_finding(per_T, Ts, lstar, ctx.z))
    res.figures += _k1_figures(ctx, per_T, Ts, models, factor, eps_fixed)
    return res


def _k1_literal_finding(per_T, Ts, lstar, z: float) -> Finding:
    """Knowl 1's loss bound read literally: ``L(theta) - L* <= C (log^2 T / T_eff)^(c gamma / 24)``
    with N's perturbed loss. ``C`` and ``c`` are unspecified, so the bound can only be met
    trivially (``L(theta) - L* < 0``, below any positive bound) or left undecided."""
    below = True
    for T in Ts:
        m, se = _pooled(per_T[T]["losses"])
        below &= m - lstar + z * se < 0
    m1, _ = _pooled(per_T[Ts[-1]]["losses"])
    return Finding(
        FindingKind.LITERAL,
        "Knowl 1's literal loss bound L(theta) - L* <= C (log^2 T / T_eff)^(c gamma/24) (C, c unspecified), with N's "
        "perturbed loss (eps = T_eff^-1/2)",
        Verdict.PASS if below else Verdict.INCONCLUSIVE,
        (f"holds trivially: L(theta) - L* < 0 at every T (eps pulls the loss below L*; {m1 - lstar:+.3f} at T={Ts[-1]})"
         if below else f"L(theta) - L* = {m1 - lstar:+.3f} at T={Ts[-1]}; C and c unspecified, so undecided"),
        numbers=tuple(Number(f"T={T}: L(theta) - L*", _pooled(per_T[T]["losses"])[0] - lstar,
                             _pooled(per_T[T]["losses"])[1], kind="trained",
                             note=f"L_eps(pi) - L* = {per_T[T]['truth'].value - lstar:+.4f}") for T in Ts))


def _k1_figures(ctx, per_T, Ts, models, factor: float, eps_fixed: float) -> list[str]:
    plt = pyplot()
    out = []
    fig = plt.figure(figsize=(3.2 * len(Ts) + 4.2, 6.2))
    grid = fig.add_gridspec(2, len(Ts) + 1, width_ratios=[1.3] + [1] * len(Ts))
    par0 = per_T[Ts[0]]["par"]
    draw_graph(fig.add_subplot(grid[:, 0]), from_parents(par0, name=f"the graph, T={Ts[0]} ({ctx.settings['graph']})",
                                                         query=len(par0) - 1))
    axes = np.array([[fig.add_subplot(grid[r, k + 1]) for k in range(len(Ts))] for r in range(2)])
    for k, T in enumerate(Ts):
        _, model, _ = models[T][0]
        axes[0, k].imshow(adjacency_pattern(per_T[T]["par"]), cmap="viridis", vmin=0, vmax=1)
        axes[0, k].set_title(f"true adjacency, T={T}", fontsize=9)
        im = axes[1, k].imshow(position_attention(model), cmap="viridis", vmin=0, vmax=1)
        axes[1, k].set_title(f"S(A1) after stage 1 (seed {models[T][0][0]})", fontsize=9)
        for ax in axes[:, k]:
            ax.set_xlabel("key position j")
            ax.set_ylabel("query position i")
    fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.6)
    fig.suptitle("N.K1: reduced model, first-layer attention vs the graph")
    out.append(ctx.save_figure(fig, "attention", tight=False))
    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    ms = [_pooled(per_T[T]["excess"]) for T in Ts]
    ax.errorbar(Ts, [m for m, _ in ms], yerr=[3 * e for _, e in ms], marker="o", label="trained (two-stage GD)")
    ax.plot(Ts, [_pooled(per_T[T]["excess_fixed"])[0] for T in Ts], "o:", label=f"trained, fixed eps = {eps_fixed:.3g}")
    ax.plot(Ts, [per_T[T]["mech"].value for T in Ts], "s--", label="true adjacency, best beta")
    for k, (name, _) in enumerate(K1_CONTROLS):
        ax.plot(Ts, [per_T[T]["controls"][k].value for T in Ts], "x-.", label=f"control: {name.split(':')[0]}")
    ax.plot([Ts[-1]], [factor * ms[0][0]], "kv", label=f"needed at T={Ts[-1]}: {factor:g} x D(T={Ts[0]})")
    ax.axhline(0.0, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("T (= T_eff, chain)")
    ax.set_ylabel("D = L_eps(f) - L_eps(pi), eps = T^-1/2")
    ax.set_title("N.K1: excess over L* beyond eps's shift (bars: 3 s.e.)", fontsize=9)
    ax.legend(fontsize=6)
    out.append(ctx.save_figure(fig, "excess-vs-T"))
    return out


K1_TRAIN_QUICK = {"S": N_S, "graph": "chain", "Ts": (10, 40, 160), "seeds": 12, "seeds_start": 4, "seeds_step": 4,
                  "alpha": N_ALPHA, "gamma": 0.5,
                  "beta0": "auto", "eta1": 1.0, "steps1": 200, "lr2": 10.0, "steps2": 200, "batch": 256}
K1_TRAIN_STANDARD = {**K1_TRAIN_QUICK, "Ts": (10, 20, 40, 80, 160, 320), "seeds": 16, "seeds_start": 8,
                     "seeds_step": 4, "steps1": 600, "steps2": 600,
                     "batch": 1024}
K1_TRAIN_PAPER = {**K1_TRAIN_QUICK, "Ts": (10, 20, 40, 80, 160, 320), "seeds": 24, "seeds_start": 8,
                  "seeds_step": 8, "steps1": 2000, "steps2": 2000,
                  "batch": 2048}

N_K1 = Claim(
    id="N.K1",
    title="Two-stage gradient descent on the reduced model recovers the graph and approaches L*",
    source=Source("N", "Knowl 1 (Theorem 4.4); algorithm Knowl 5; model Knowl 6",
                  "S(A1)_{i,p(i)} >= 1 - O(1/T); L(theta) - L* <= C (log^2 T / T_eff)^(c gamma / 24)"),
    statement=("Primary reading (deciding): Knowl 1, by the two criteria below (a fixed 0.9 stands in for 1 - O(1/T), "
               "whose constant is unspecified; the approach to L* is decided on its decay in T up to 160 (quick) or "
               "320 (standard, paper)); reported as a finding: Knowl 1's literal loss bound. "
               "N's reduced model f = X^T softmax(S(MASK(A1)) X A2^T e_{s_T}) trained by N's two-stage gradient "
               "descent (Knowl 5): A1(0) = 0, A2(0) = beta0 I with beta0 = T^(-3/2); stage 1 plain GD on A1 (A2 "
               "frozen, lr1 = eta1 T^2 / beta0), stage 2 plain GD on A2 (A1 frozen); constant step sizes; N's "
               "perturbed population loss L_eps = -sum_s' pi(s'|s_T) log(f_s' + eps), eps = T_eff^(-1/2), on fresh "
               "batches. Chain graph (T_eff = T), prior floor(dirichlet(0.1), gamma=0.5) at S = 10 (Knowl 10's "
               "assumptions hold; N's plain Dirichlet(0.1) has no entry floor). Decided: (1) after stage 1, "
               "S(A1)[i, p(i)] >= 0.9 at every non-root i, for every T and every seed; (2) the approach to L*: "
               "L_eps(theta) - L* = D + (L_eps(pi) - L*), where L_eps(pi) - L* is the perturbation's own shift (the "
               "true row's perturbed loss; negative, -> 0 as eps -> 0, whatever the model) and D = L_eps(theta) - "
               "L_eps(pi) (paired per prompt) is the model's excess; D must decay towards 0: D(T_max) <= 1/2 "
               "D(T_min), margin z s.e. (seeds and prompts). A plateau above half the first value fails; a power "
               "law T^-c passes when c > log 2 / log(T_max/T_min). Negative controls through criterion (2), each "
               "must FAIL: the prompt-unigram model (A1 = true adjacency, A2 = 0), the uniform predictor, and the "
               "model wired to the wrong graph p(p(i)) with the mechanism's beta. Reported: D at one fixed eps = "
               "T_max^-1/2 for every T; the mechanism's D (true adjacency, A2 = beta I, beta fitted on other "
               "prompts) and the trained loss against it; the floor of any prompt-token mixture knowing pi; "
               "T (1 - min attention), whose O(1) constant is unspecified."),
    assumptions=K1_ASSUMPTIONS,
    checks={"trained": _k1_trained},
    jobs={"trained": _k1_jobs},
    settings={
        # Every seed is read on the same evaluation prompts, so their error does not shrink as the sequential
        # looks add seeds: n_eval sets it. At 4096 D(160) / D(10) ~ 0.46 sat within its margin of 1/2 at
        # some master seeds (INCONCLUSIVE at the cap of 12 seeds); at 16384 it decides at the first look.
        "quick": {"tiers": ("trained",), **K1_TRAIN_QUICK, "n_eval": 16384, "n_fit": 2048},
        "standard": {"tiers": ("trained",), **K1_TRAIN_STANDARD, "n_eval": 16384, "n_fit": 4096},
        "paper": {"tiers": ("trained",), **K1_TRAIN_PAPER, "n_eval": 65536, "n_fit": 16384},
    },
    params={"attention_threshold": 0.9, "decay_factor": 0.5, "wrong_task": None},
    prior_dependent=True,
    primary=PrimaryReading(
        statement=("Two-stage gradient descent on the reduced model (A1(0) = 0, A2(0) = beta0 I, beta0 <= c T_eff^-3/2) "
                   "recovers the graph, S(A1)_{i,p(i)} >= 1 - O(1/T) at every non-root i, and the perturbed population "
                   "loss reaches L* up to L(theta) - L* <= C (log^2 T / T_eff)^(c gamma/24) (Knowl 1)."),
        seed="002", lines="103-116",
        setting=("N's reduced model (Knowl 6) with N's perturbed loss, eps = T_eff^-1/2; a prior meeting Knowl 10 "
                 "with gamma > 0, root fraction <= 1 - gamma, T_eff >= poly(1/gamma, S); 'there exist' step sizes "
                 "and step counts"),
        review=("Graph recovery: a fixed 0.9 stands in for 1 - O(1/T) (its constant is unspecified; T (1 - min) is "
                "reported). Loss: with eps = T^-1/2 the literal L - L* is negative at these T (a finding), so the "
                "approach to L* is decided on the model's part of it, D = L_eps(theta) - L_eps(pi), which must halve "
                "between the smallest and the largest T (up to 160 in quick, 320 in standard and paper). The bound's "
                "rate (log^2 T / T_eff)^(c gamma/24) has unspecified c, so no rate is asked beyond that halving, "
                "which a plateau above half the first value cannot meet; the unigram, uniform and wrong-graph "
                "controls must FAIL it. Nothing here is stricter than Knowl 1 except that the decay must show on "
                "this T grid.")),
)


# ------------------------------------------------------------------------------ N.K4 --
K4_ASSUMPTIONS = ("min pi~ >= gamma/S for a gamma > 0 the prior allows (Knowl 10)", "the model trained as in N.K1")


def _ood_matrices(ctx: Context, S: int, train_floor: float) -> list[tuple[str, np.ndarray]]:
    """Out-of-distribution matrices: draws of floor(dirichlet(ood_alpha), ood_gamma) that have an
    entry below the training prior's floor (so they lie outside its support), and a cyclic matrix
    ``pi~(s, s+1) = 1 - (S-1) g/S``, other entries ``g/S`` (not permutation symmetric)."""
    s = ctx.settings
    g = float(s["ood_gamma"])
    rng = ctx.rng("ood/matrices")
    out = []
    while len(out) < int(s["n_ood"]):
        pi = g / S + (1 - g) * rng.dirichlet(np.full(S, float(s["ood_alpha"])), size=S)
        if pi.min() < train_floor or train_floor == 0:
            out.append((f"floor(dirichlet({s['ood_alpha']}), {g}) draw {len(out)}", pi))
    cyc = np.full((S, S), g / S)
    cyc[np.arange(S), (np.arange(S) + 1) % S] = 1 - (S - 1) * g / S
    out.append(("cyclic", cyc))
    return out


def _sup_errors(f: np.ndarray, target_rows: np.ndarray) -> np.ndarray:
    """Per prompt ``sup_s' |f_s' - pi~(s'|s_T)|`` (Knowl 4's error)."""
    return np.abs(f - target_rows).max(axis=1)


def quantile_slope(errors: Mapping[int, Sequence[np.ndarray]], *, q: float, rng: np.random.Generator,
                   n_boot: int) -> tuple[float, float, np.ndarray, float | None]:
    """Log-log slope in T of the ``q``-quantile of the error: ``(slope, stderr, quantiles, df)``.

    ``errors[T]`` holds one array of per-prompt errors per model (training seed), all models
    on the same prompts. Per model, ``slope_m`` is the least-squares slope of
    ``log quantile_q(errors[T][m])`` on ``log T``; ``slope`` is their mean. Its standard error adds
    in quadrature the models' spread (:func:`~sim.papers.nichani.claims.reporting.across_seeds`) and
    the prompts' (a bootstrap of each T's prompts, one resample shared by the models, ``n_boot``
    resamples). ``quantiles`` is the mean over models at each T (ascending T). ``df``: the
    Welch-Satterthwaite degrees of freedom of that standard error (the models' part has ``n - 1``;
    the bootstrap's is known well).
    """
    Ts = sorted(errors)
    xc = np.log(np.asarray(Ts, dtype=np.float64))
    xc -= xc.mean()

    def slopes(qs: np.ndarray) -> np.ndarray:  # (..., len(Ts)) -> (...,)
        return np.log(np.maximum(qs, np.finfo(np.float64).tiny)) @ xc / (xc @ xc)

    n_models = len(errors[Ts[0]])
    qs = np.array([[np.quantile(errors[T][m], q) for T in Ts] for m in range(n_models)])  # (models, T)
    mean, se_models = across_seeds(slopes(qs))
    boot = np.empty((n_boot, n_models, len(Ts)))
    for k, T in enumerate(Ts):
        idx = rng.integers(0, len(errors[T][0]), (n_boot, len(errors[T][0])))
        for m in range(n_models):
            boot[:, m, k] = np.quantile(errors[T][m][idx], q, axis=1)
    se_prompts = float(slopes(boot).mean(axis=1).std(ddof=1))
    df = welch_df([(se_models ** 2, n_models - 1), (se_prompts ** 2, None)]) if n_models > 1 else None
    return mean, math.hypot(se_models, se_prompts), qs.mean(axis=0), df


def k4_decision(slope: float, stderr: float, T0: int, T1: int, *, q: float, z: float,
                factor: float = 0.5, df: float | None = None) -> Decision:
    """Knowl 4 decided on one model: the ``q``-quantile of the out-of-distribution sup error
    decays towards 0 in T. The fitted log-log ``slope`` (:func:`quantile_slope`) must be below
    ``log(factor) / log(T1/T0)`` (the fitted quantile falls to at most ``factor`` of itself over
    the T grid) with margin ``z`` standard errors (the Student-t quantile on ``df`` degrees of
    freedom when given). A plateau, or a slow approach to one, fails."""
    needed = math.log(factor) / math.log(T1 / T0)
    margin = needed - slope
    k = margin_multiplier(z, df)
    return Decision(compare(margin, 0.0, stderr=stderr, z=z, df=df), margin, stderr,
                    f"{q:g}-quantile log-log slope {slope:+.3f} ± {stderr:.2g} over T={T0}..{T1}; needs <= "
                    f"{needed:+.3f} (a fall to {factor:g}x over the grid) by {k:.3g} s.e."
                    + ("" if df is None else f" (Student-t, {df:.1f} degrees of freedom)"))


#: N.K4's controls: (name, wrong mechanism); built per T in ``_k4_trained``.
K4_CONTROLS = (("prompt unigram: A1 = true adjacency, A2 = 0",
                "layer 2 ignores the query: error -> sup |mu - pi~(.|s_T)| (about 0.41 on average), not 0"),
               ("uniform predictor: f = 1/S", "ignores the prompt: error sup |1/S - pi~(.|s_T)| at every T"),
               ("untrained model: N's initialisation A1 = 0, A2 = beta0 I",
                "attends uniformly in both layers: about the prompt's unigram"))


def _k4_trained(ctx: Context) -> TierResult:
    s = ctx.settings
    S = int(s["S"])
    prior = _k1_prior(ctx, S)
    wrong = ctx.params["wrong_task"]
    q, factor = float(ctx.params["quantile"]), float(ctx.params["decay_factor"])
    models = _train_k1_models(ctx, prior, wrong)
    Ts = [int(T) for T in s["Ts"]]
    if len(Ts) < 2:
        raise ValueError(f"N.K4 decides a decay in T: Ts needs two lengths or more, got {Ts}")
    T0, T1 = Ts[0], Ts[-1]
    seeds = [sd for sd, _, _ in models[T0]]
    floor = prior.entry_floor()
    train_floor = float(floor) if floor is not None else 0.0
    holds_prior, gamma, a_numbers = _prior_gamma(ctx, prior, S, n_graph(s["graph"], T0),
                                                 _k1_hyper(s, T0)["beta0"], float(T0))
    mats = _ood_matrices(ctx, S, train_floor)
    n_per = int(s["n_prompts_per_matrix"])
    numbers = list(a_numbers)
    err = {"ood": {}, "id": {}}
    ctrl = [{} for _ in K4_CONTROLS]
    records = []
    for T in Ts:
        par = n_graph(s["graph"], T)
        task = NTask(S, T, tuple(par.tolist()), prior=prior)
        rng = ctx.rng(f"ood/prompts/T{T}")
        xs, rows = [], []
        for name, pi in mats:
            x, _ = sample_task(task, rng, n_per, pis=np.broadcast_to(pi, (n_per, S, S)).copy())
            xs.append(x)
            rows.append(pi[x[:, -1]])
        x_ood, r_ood = np.concatenate(xs), np.concatenate(rows)
        x_id, pis_id = sample_task(task, ctx.rng(f"id/prompts/T{T}"), n_per * len(mats))
        r_id = pis_id[np.arange(len(x_id)), x_id[:, -1]]
        for kind, x, r in (("ood", x_ood, r_ood), ("id", x_id, r_id)):
            err[kind][T] = [_sup_errors(_reduced_eval(m, x, ctx.device), r) for _, m, _ in models[T]]
        control_models = (_predictor(_wired(par, 0.0, S)), _uniform(S),
                          _predictor(ReducedModel.init(S, T, _k1_hyper(s, T)["beta0"])))
        for k, predict in enumerate(control_models):
            ctrl[k][T] = [_sup_errors(predict(x_ood), r_ood)]
        for k, (name, pi) in enumerate(mats):
            part = slice(k * n_per, (k + 1) * n_per)
            records.append({"T": T, "matrix": name,
                            "mean sup error per seed": [float(e[part].mean()) for e in err["ood"][T]],
                            f"{q:g}-quantile per seed": [float(np.quantile(e[part], q)) for e in err["ood"][T]]})
        for kind in ("ood", "id"):
            label = "out of distribution" if kind == "ood" else "in distribution"
            numbers.append(trained_number(f"T={T}: mean sup_s' |f - pi(s'|s_T)|, {label}",
                                          [float(e.mean()) for e in err[kind][T]], seeds,
                                          note=f"{len(err[kind][T][0])} prompts per seed"))
            numbers.append(trained_number(f"T={T}: {q:g}-quantile of the sup error, {label}",
                                          [float(np.quantile(e, q)) for e in err[kind][T]], seeds))
        numbers.append(trained_number(f"T={T}: {q:g}-quantile out / in distribution (reported, not decided)",
                                      [float(np.quantile(o, q) / np.quantile(i, q))
                                       for o, i in zip(err["ood"][T], err["id"][T])], seeds))
        numbers += [Number(f"T={T}: {q:g}-quantile of the sup error out of distribution, control '{name}'",
                           float(np.quantile(ctrl[k][T][0], q)), n=len(x_ood))
                    for k, (name, _) in enumerate(K4_CONTROLS)]
    # Knowl 10's assumptions hold for every gamma' <= gamma, so Knowl 4 applies with
    # gamma' = min(gamma, S min pi~), which is > 0 exactly when every entry of pi~ is positive.
    g_ood = min(S * min(pi.min() for _, pi in mats), gamma)
    assumptions = {K4_ASSUMPTIONS[0]: g_ood > 0 and all(holds_prior.values()), K4_ASSUMPTIONS[1]: True}
    numbers.append(Number("gamma' = min(gamma, S min pi~) used by Knowl 4", g_ood,
                          note=f"gamma allowed by the prior {gamma:.3g}; training prior's floor S * {train_floor:.3g}; "
                               f"every OOD matrix has an entry below the training floor (outside the support)"))
    n_boot = int(s["n_boot"])

    def decay(errors, tag: str):
        seed = ctx.seed_for(f"bootstrap/{tag}")
        slope, se, qs, df = quantile_slope(errors, q=q, rng=np.random.default_rng(seed), n_boot=n_boot)
        return k4_decision(slope, se, T0, T1, q=q, z=ctx.z, factor=factor, df=df), slope, se, qs, seed

    decision, slope, se, qs, boot_seed = decay(err["ood"], "ood")
    _, slope_id, se_id, qs_id, _ = decay(err["id"], "id")
    numbers += [
        Number(f"log-log slope in T of the {q:g}-quantile of the sup error, out of distribution (decides)", slope, se,
               n=len(seeds), seed=boot_seed, kind="trained", tolerance=math.log(factor) / math.log(T1 / T0),
               note=f"mean of per-seed least-squares slopes over T={Ts}; error: seeds' spread and a {n_boot}-resample "
                    f"bootstrap of the prompts; needs <= log {factor:g} / log(T_max/T_min)"),
        Number(f"log-log slope in T of the {q:g}-quantile of the sup error, in distribution (reported)", slope_id,
               se_id, n=len(seeds), kind="trained")]
    series = {"trained, out of distribution": (qs, slope), "trained, in distribution": (qs_id, slope_id)}
    controls = []
    for k, (name, why) in enumerate(K4_CONTROLS):
        c_decision, c_slope, _, c_qs, _ = decay(ctrl[k], f"control{k}")
        controls.append(_control(name, why, c_decision))
        series[f"control: {name.split(':')[0]}"] = (c_qs, c_slope)
    checks = [InstanceCheck(assumptions, decision.outcome, decision.margin, {
        "conclusion": (f"the {q:g}-quantile of the out-of-distribution sup error decays towards 0 in T: fitted "
                       f"log-log slope <= log {factor:g} / log({T1}/{T0})"), "deciding": decision.line,
        f"{q:g}-quantile per T (mean over seeds)": dict(zip(Ts, np.round(qs, 4).tolist())),
        f"in distribution, {q:g}-quantile per T": dict(zip(Ts, np.round(qs_id, 4).tolist())),
        "in-distribution slope": slope_id, "seeds": seeds, "matrices": [n for n, _ in mats],
        "out-of-distribution matrices": [np.round(pi, 6).tolist() for _, pi in mats], "per matrix": records,
        "wrong task": wrong})]
    res = summarize_instances("trained", checks, list(K4_ASSUMPTIONS), numbers=numbers,
                              what=(f"the {q:g}-quantile of the out-of-distribution sup error falls at a log-log "
                                    f"slope <= log {factor:g} / log({T1}/{T0}) over T={T0}..{T1}"),
                              budget="more prompts per matrix and more seeds (n_prompts_per_matrix, seeds), or a "
                                     "longer T grid (the standard profile's reaches 320)")
    res.readings.append({"name": f"Knowl 4 at probability {q:g}: the {q:g}-quantile of the OOD sup error decays in T",
                         "verdict": str(decision.verdict),
                         "detail": f"{decision.line}; in distribution: slope {slope_id:+.3f} ± {se_id:.2g}"})
    res.controls += controls
    res.figures.append(_k4_figure(ctx, Ts, series, q, factor, n_graph(s["graph"], Ts[0])))
    return res


def _k4_figure(ctx, Ts, series, q: float, factor: float, par0: np.ndarray) -> str:
    """The ``q``-quantile of the sup error vs T (log-log), each series with its fitted slope, and
    the steepest slope a fall to ``factor`` over the grid allows; the graph (at the smallest T) beside it."""
    plt = pyplot()
    fig, (ax, gax) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [1, 1]})
    draw_graph(gax, from_parents(par0, name=f"the graph, T={Ts[0]} ({ctx.settings['graph']})", query=len(par0) - 1))
    logT = np.log(Ts)
    for k, (label, (qs, slope)) in enumerate(series.items()):
        line = ax.plot(Ts, qs, "os^xdv"[k % 6] + ("-" if k < 2 else ":"), label=f"{label} (slope {slope:+.2f})")[0]
        icpt = float(np.mean(np.log(qs)) - slope * logT.mean())
        ax.plot(Ts, np.exp(icpt + slope * logT), "--", color=line.get_color(), lw=0.8)
    needed = math.log(factor) / math.log(Ts[-1] / Ts[0])
    q0 = series["trained, out of distribution"][0][0]
    ax.plot([Ts[0], Ts[-1]], [q0, q0 * factor], "k:", lw=1, label=f"needed: slope {needed:+.2f}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("T (= T_eff, chain)")
    ax.set_ylabel(f"{q:g}-quantile of sup_s' |f(s_1:T)_s' - pi(s'|s_T)|")
    ax.set_title(f"N.K4: {q:g}-quantile of the error vs T (dashed: fits)", fontsize=9)
    ax.legend(fontsize=6)
    return ctx.save_figure(fig, "ood-error")


N_K4 = Claim(
    id="N.K4",
    title="The trained model generalises out of distribution",
    source=Source("N", "Knowl 4 (Theorem 4.5)",
                  "min pi~ >= gamma/S => sup_s' |f(s_{1:T})_s' - pi~(s'|s_T)| <= C log T / T_eff^(c gamma) w.p. 0.99"),
    statement=("Primary reading (deciding): Knowl 4 at its own probability level, by the decay in T of the 0.99-quantile "
               "of the out-of-distribution sup error; no other reading is reported as a finding (the OOD/ID ratio, "
               "the means and the in-distribution slope are reported as numbers). "
               "The reduced models of N.K1 (same prior, graph, T grid, seeds and two-stage GD; shared within a run) "
               "evaluated on prompts drawn from fixed matrices outside the training prior's support: draws of "
               "floor(dirichlet(0.3), gamma=0.2) with an entry below the training floor 0.5/S, and a cyclic, "
               "non-symmetric matrix pi~(s, s+1) = 1 - (S-1) 0.2/S. They satisfy Knowl 4's only condition min pi~ >= "
               "gamma/S with gamma = 0.2, which Knowl 10 allows for this prior (its assumptions hold for every gamma <= "
               "0.5). Error: sup_s' |f(s_1:T)_s' - pi~(s'|s_T)| per prompt; its 0.99-quantile over the prompts at each "
               "T. Decided: the least-squares slope of log(0.99-quantile) on log T over the T grid (mean over seeds; "
               "error: the seeds' spread and a bootstrap of the prompts) is <= log(1/2) / log(T_max/T_min) by z s.e., "
               "i.e. the fitted quantile falls to half or less over the grid: a decay towards 0, which a plateau above "
               "half the first value (or a slow approach to one) cannot show. Negative controls through the same "
               "check, each must FAIL: the prompt-unigram model (A1 = true adjacency, A2 = 0), the uniform predictor "
               "and the untrained model (N's initialisation). The in-distribution slope is reported beside it."),
    assumptions=K4_ASSUMPTIONS,
    checks={"trained": _k4_trained},
    jobs={"trained": _k1_jobs},
    settings={
        # 8,000 prompts per matrix: the slope's error is mostly the prompts' (a 0.99-quantile of 4 x 1,000
        # prompts rests on 40 of them; the slope was -0.27 +- 0.0096 at master seed 855463134, undecided after
        # 12 seeds); with 8,000 it is -0.297 +- 0.0035 there, decided on 4 seeds, so the claim costs less in all
        "quick": {"tiers": ("trained",), **K1_TRAIN_QUICK, "ood_gamma": 0.2, "ood_alpha": 0.3, "n_ood": 3,
                  "n_prompts_per_matrix": 8000, "n_boot": 200},
        "standard": {"tiers": ("trained",), **K1_TRAIN_STANDARD, "ood_gamma": 0.2, "ood_alpha": 0.3, "n_ood": 6,
                     "n_prompts_per_matrix": 8000, "n_boot": 400},
        "paper": {"tiers": ("trained",), **K1_TRAIN_PAPER, "ood_gamma": 0.2, "ood_alpha": 0.3, "n_ood": 10,
                  "n_prompts_per_matrix": 10000, "n_boot": 1000},
    },
    params={"quantile": 0.99, "decay_factor": 0.5, "wrong_task": None},
    prior_dependent=True,
    reuses=("N.K1",),
    primary=PrimaryReading(
        statement=("For any pi~ (possibly outside the training prior's support) with min pi~ >= gamma/S, with "
                   "probability >= 0.99 over s_1:T drawn on the graph from pi~, the two-stage-GD model satisfies "
                   "sup_s' |f(s_1:T)_s' - pi~(s'|s_T)| <= C log T / T_eff^(c gamma) (Knowl 4)."),
        seed="002", lines="144-152",
        setting=("the reduced model trained by two-stage gradient descent (Knowl 5) on a prior meeting Knowl 10; "
                 "C, c unspecified constants independent of T"),
        review=("Knowl 4 bounds the 0.99-quantile of the sup error by C log T / T_eff^(c gamma), which tends to 0; "
                "the deciding criterion is that quantile's decay on the T grid: its fitted log-log slope must show a "
                "fall to half or less between the smallest and the largest T. With c unspecified no rate is asked "
                "beyond that; a mere 'significantly negative slope' would not do, since the prompt-unigram model's "
                "0.99-quantile also creeps down (its empirical unigram sharpens) towards a plateau near 0.74. The "
                "unigram, uniform and untrained controls must FAIL the same check.")),
)


# =========================================================================== placeholder ==
N_K10 = Claim(
    id="N.K10",
    title="N's assumptions on the prior, audited for any prior",
    source=Source("N", "Knowl 10",
                  "min pi > gamma/S; sum_s ||pi(.|s) - mu||^2 >= gamma^2/S; permutation symmetry and E[pi] = 11^T/S; "
                  "|R|/T <= 1 - gamma; T_eff >= poly(1/gamma, S)"),
    statement=("Primary reading: Knowl 10's assumptions as the paper states them; no other reading is reported as "
               "a finding. For a prior a user gives: the transition lower bound, non-degeneracy, permutation symmetry "
               "with uniform mean, the root fraction and T_eff, each checked (exactly or by Monte Carlo with error bars) "
               "and mapped to the claims it feeds (N.K1, N.K3, N.K4). Decided by `icl-verify prior SPEC`, not by a profile."),
    assumptions=(),
    checks={},
    settings={},
    decided_by="quick",
    pending="decided by the prior audit: `icl-verify prior SPEC` (see docs/tutorials/prior.md)",
    primary=PrimaryReading(
        statement=("The guarantees require, for a gamma > 0: min pi(s'|s) > gamma/S almost surely; sum_s ||pi(.|s) - "
                   "mu_pi||^2 >= gamma^2/S; permutation symmetry with E[pi] = 11^T/S; root fraction |R|/T <= 1 - "
                   "gamma; T_eff >= poly(1/gamma, S) (Knowl 10)."),
        seed="002", lines="206-213",
        setting="any prior over irreducible aperiodic transition matrices on [S], and N's DAG",
        review=("`icl-verify prior` audits each of Knowl 10's assumptions as the paper states them (exactly where the "
                "prior allows, else by Monte Carlo with error bars) and maps each to the claims it feeds; it reads "
                "nothing stricter. T_eff >= poly(1/gamma, S) has no stated polynomial: the audit checks the weakest "
                "natural reference, T_eff >= S, and reports T_eff.")),
)

CLAIMS = [N_K1, N_K4, N_K10]
