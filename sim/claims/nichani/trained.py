"""N's trained claims on the reduced model: N.K1 (two-stage gradient descent reaches the
Bayes-optimal in-context predictor) and N.K4 (out of distribution), plus the N.K10
placeholder (decided by the prior audit, ``icl-verify prior``). N.E is in
:mod:`.experiments`, N.K9's trained tier in :mod:`.constructions_trained`.

Training lives in :mod:`.training` (samplers, the fast readout, recipes, a per-process cache so
N.K4 reuses N.K1's models); the probes in :mod:`sim.probes.nichani`; the Bayes baselines in
:mod:`sim.bayes_nichani`. Every trained number is reported per seed and as mean ± standard
error across seeds, next to its baseline. Torch runs on ``ctx.device`` (``cpu`` or ``cuda``).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch

from theory.dirichlet import dirichlet_row_entropy

from ...bayes_nichani import best_mixture_losses
from ...models.nichani import ReducedModel
from ...montecarlo import Estimate, mean_estimate
from ...priors import Dirichlet, Floor, Prior
from ...probes.nichani import adjacency_pattern, parent_attention, position_attention, root_uniformity
from ...sampling import batched_stationary
from ...verdict import Finding, FindingKind, Number, Outcome, TierResult, Verdict, compare
from ..base import Claim, Context, InstanceCheck, PrimaryReading, Source, summarize_instances
from .reporting import across_seeds, pyplot, trained_number
from .task import N_ALPHA, N_S, n_graph
from .training import NTask, OneThread, reduced_loss, sample_task, train_reduced

__all__ = ["N_K1", "N_K4", "N_K10", "CLAIMS", "K1_ASSUMPTIONS"]


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
    mu = batched_stationary(draws)
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


def _train_k1_models(ctx: Context, prior: Prior, wrong) -> dict:
    """Train (or fetch from the cache) every reduced model of the N.K1 grid; ``{T: [(seed, model, log)]}``."""
    s = ctx.settings
    S = int(s["S"])
    out = {}
    seeds = [int(v) for v in s.get("seed_list", ())] or _seeds_k1(ctx)
    for T in s["Ts"]:
        par = n_graph(s["graph"], int(T))
        task = NTask(S, int(T), tuple(par.tolist()), prior=prior)
        hp = _k1_hyper(s, int(T))
        out[int(T)] = []
        for sd in seeds:
            ctx.progress(f"two-stage GD on the reduced model, T={T}, seed {sd}")
            model, log = train_reduced(task, seed=sd, device=ctx.device, wrong=wrong, **hp)
            out[int(T)].append((sd, model, log))
    return out


def _seeds_k1(ctx: Context) -> list[int]:
    """Seeds shared by N.K1 and N.K4 (so N.K4 reuses N.K1's trained models): derived from the run seed
    and the purpose ``"N.K1 training"``, not from the claim id."""
    n = int(ctx.settings["seeds"])
    return [int(np.random.SeedSequence(ctx.seed, spawn_key=(7,)).generate_state(n + 1)[k + 1]) for k in range(n)]


def _reduced_eval(model: ReducedModel, x: np.ndarray, device: str, eps: float) -> np.ndarray:
    with torch.no_grad(), OneThread():
        return model(torch.as_tensor(x, device=device)).double().cpu().numpy()  # (n, S)


def _reachable(ctx: Context, task: NTask, eps: float, steps: int, batch: int, x_eval, rows) -> np.ndarray:
    """The reduced model with the true adjacency in layer 1 (``A1 = 30 * adjacency``; roots
    uniform) and ``A2`` fitted by Adam: what this model class reaches once the graph is known.
    Returns per-prompt perturbed losses on the evaluation prompts."""
    from ...train import Stage, TrainConfig, train

    S, T = task.S, task.T
    A1 = torch.as_tensor(30.0 * adjacency_pattern(task.parents), dtype=torch.float32)
    model = ReducedModel(A1, 0.1 * torch.eye(S), t_eff=T)
    seed = ctx.seed_for(f"reachable/T{T}")
    cfg = TrainConfig(stages=(Stage(steps, 0.05, params=("A2",), optimizer="adam", schedule="cosine"),),
                      seed=seed, log_every=max(1, steps))
    with OneThread():
        train(model, task.sampler(batch, seed=seed, device=ctx.device), cfg, device=ctx.device, loss_fn=reduced_loss)
    f = _reduced_eval(model, x_eval, ctx.device, eps)
    return -(rows * np.log(f + eps)).sum(1)


def _k1_trained(ctx: Context) -> TierResult:
    s = ctx.settings
    S = int(s["S"])
    thr = float(ctx.params["attention_threshold"])
    wrong = ctx.params["wrong_task"]
    prior = _k1_prior(ctx, S)
    Ts = [int(T) for T in s["Ts"]]
    models = _train_k1_models(ctx, prior, wrong)
    seeds = [sd for sd, _, _ in models[Ts[0]]]
    lstar, lstar_se = _lstar(prior, S, ctx.seed_for("lstar"))
    numbers = [Number("L* = E[(1/S) sum_s H(pi(s,.))]", lstar, lstar_se, seed=ctx.seed_for("lstar"),
                      kind="exact" if lstar_se == 0 else "montecarlo", note=prior.spec())]
    checks, per_T, assumption_sets = [], {}, []
    for T in Ts:
        par = n_graph(s["graph"], T)
        hp = _k1_hyper(s, T)
        holds, gamma, a_numbers = _prior_gamma(ctx, prior, S, par, hp["beta0"], float(T))
        assumption_sets.append(holds)
        if T == Ts[0]:
            numbers += a_numbers
        eps = T ** -0.5
        eval_seed = ctx.seed_for(f"eval/T{T}")
        task = NTask(S, T, tuple(par.tolist()), prior=prior)
        x, pis = sample_task(task, np.random.default_rng(eval_seed), int(s["n_eval"]))
        rows = pis[np.arange(len(x)), x[:, -1]]
        present = np.zeros((len(x), S), dtype=bool)
        present[np.repeat(np.arange(len(x)), T), x.ravel()] = True
        floor = mean_estimate(best_mixture_losses(rows, present, eps), eval_seed)
        truth = mean_estimate(-(rows * np.log(rows + eps)).sum(1), eval_seed)
        l_reach = _reachable(ctx, task, eps, int(s["reach_steps"]), int(s["batch"]), x, rows)
        reach = mean_estimate(l_reach, eval_seed)
        l_truth = -(rows * np.log(rows + eps)).sum(1)  # the true row's perturbed loss, per prompt
        masses, mins, losses, excess, over_reach, roots_tv = [], [], [], [], [], []
        for sd, model, log in models[T]:
            attn = position_attention(model)
            pa = parent_attention(attn, par, reading="positions")
            f = _reduced_eval(model, x, ctx.device, eps)
            l_model = -(rows * np.log(f + eps)).sum(1)
            masses.append(pa.mean)
            mins.append(pa.min)
            losses.append(mean_estimate(l_model, eval_seed))
            excess.append(mean_estimate(l_model - l_truth, eval_seed))
            over_reach.append(mean_estimate(l_model - l_reach, eval_seed))
            roots_tv.append(root_uniformity(attn, par))
            out = compare(pa.min, thr)
            checks.append(InstanceCheck(holds, out, pa.min - thr, {
                "conclusion": f"S(A1)[i, p(i)] >= {thr} at every non-root i after stage 1", "T": T, "S": S,
                "graph": s["graph"], "parents": par.tolist(), "prior": prior.spec(), "training seed": sd,
                "wrong task": wrong, **hp, **pa.record(), "S(A1) (rounded)": np.round(attn, 4).tolist()}))
        per_T[T] = {"mins": mins, "masses": masses, "losses": losses, "excess": excess, "over_reach": over_reach,
                    "floor": floor,
                    "reach": reach, "truth": truth, "roots": roots_tv, "par": par, "hp": hp, "gamma": gamma, "eps": eps}
        lm, lse = _pooled(losses)
        numbers += [
            trained_number(f"T={T}: min_i S(A1)[i, p(i)] after stage 1", mins, seeds, tolerance=thr,
                            note=f"threshold {thr}; beta0={hp['beta0']:.3g}, lr1={hp['lr1']:.3g}, "
                                 f"{hp['steps1']}+{hp['steps2']} steps, batch {hp['batch']}"),
            trained_number(f"T={T}: T * (1 - min_i S(A1)[i, p(i)])  (Knowl 1: O(1) as T grows)",
                            [T * (1 - m) for m in mins], seeds),
            trained_number(f"T={T}: trained perturbed loss L(theta) (eps = T^-1/2 = {eps:.3g})",
                            [l.value for l in losses], seeds,
                            note=f"{len(x)} evaluation prompts (seed {eval_seed}), prompt stderr "
                                 f"{max(l.stderr for l in losses):.2g}"),
            truth.number(f"T={T}: L_eps(pi): perturbed loss of the true row pi(s_T, .) (below L* because eps > 0)"),
            trained_number(f"T={T}: L(theta) - L_eps(pi) (paired per prompt)", [e.value for e in excess], seeds,
                            note=f"prompt stderr {max(e.stderr for e in excess):.2g}"),
            trained_number(f"T={T}: L(theta) - L* (Knowl 1's literal gap)", [l.value - lstar for l in losses], seeds),
            reach.number(f"T={T}: best reachable: true adjacency, A2 fitted (Adam, {s['reach_steps']} steps)"),
            trained_number(f"T={T}: L(theta) - reachable (paired per prompt)", [e.value for e in over_reach], seeds,
                            tolerance=float(s["reach_tol"])),
            floor.number(f"T={T}: floor: best mixture of prompt tokens knowing pi (no such predictor does better)"),
        ]
        if (par[:-1] < 0).sum() > 1:
            numbers.append(trained_number(f"T={T}: max TV(S(A1) root row, uniform)", roots_tv, seeds))
        ctx.progress(f"N.K1 T={T}: min attention {np.min(mins):.3f}, loss {lm:.4f} ± {lse:.2g}")
    # Loss approaching the optimum as T grows (Knowl 1, item 2). The perturbed loss with
    # eps = T^-1/2 sits far below L* at these T (eps shifts it by O(eps)), so L(theta) - L* is
    # negative and moves with eps, not with learning; the decided form compares with the same
    # perturbed loss of the truth, L_eps(pi), which tends to L* as eps -> 0.
    T0, T1 = Ts[0], Ts[-1]
    m0, se0 = _pooled(per_T[T0]["excess"])
    m1, se1 = _pooled(per_T[T1]["excess"])
    drop = (m0 - m1) - float(ctx.params["required_drop"])
    se_drop = math.hypot(se0, se1)
    out = compare(drop, 0.0, stderr=se_drop, z=ctx.z)
    checks.append(InstanceCheck(assumption_sets[-1], out, drop, {
        "conclusion": (f"L(theta) - L_eps(pi) falls from T={T0} to T={T1} (by more than "
                       f"{ctx.params['required_drop']})"),
        f"L(theta) - L_eps(pi) at T={T0}": m0, f"L(theta) - L_eps(pi) at T={T1}": m1,
        "standard error of the drop": se_drop, "L*": lstar,
        f"L(theta) - L* at T={T0}": _pooled(per_T[T0]["losses"])[0] - lstar,
        f"L(theta) - L* at T={T1}": _pooled(per_T[T1]["losses"])[0] - lstar,
        "seeds": seeds, "prior": prior.spec(), "wrong task": wrong}))
    tol = float(s["reach_tol"])
    for T in Ts:
        excess_r, se_r = _pooled(per_T[T]["over_reach"])  # paired per prompt
        out = compare(tol, excess_r, stderr=se_r, z=ctx.z)
        checks.append(InstanceCheck(assumption_sets[Ts.index(T)], out, tol - excess_r, {
            "conclusion": f"trained L(theta) within {tol} of the best reachable loss (true adjacency, A2 fitted)",
            "T": T, "trained": _pooled(per_T[T]["losses"])[0], "reachable": per_T[T]["reach"].value,
            "floor (mixture knowing pi)": per_T[T]["floor"].value, "trained - reachable (paired)": excess_r,
            "stderr": se_r, "seeds": seeds, "wrong task": wrong}))
    res = summarize_instances(
        "trained", checks, K1_ASSUMPTIONS,
        what=(f"stage-1 attention >= {thr} on every parent (every T, every seed); L(theta) - L_eps(pi) falls with T; "
              f"L(theta) within {tol} of the reachable loss"), numbers=numbers,
        budget="more seeds and evaluation prompts (seeds, n_eval), or longer stages (steps1, steps2)")
    res.findings.append(_k1_literal_finding(per_T, Ts, lstar, ctx.z))
    res.figures += _k1_figures(ctx, per_T, Ts, lstar, models)
    return res


def _pooled(losses: Sequence[Estimate]) -> tuple[float, float]:
    """Mean over seeds of per-seed estimates on the same evaluation prompts; error: the seeds'
    spread and the prompts' error (not divided by the number of seeds: the prompts are shared)."""
    vals = [l.value for l in losses]
    m, se_seed = across_seeds(vals)
    se_prompts = math.sqrt(sum(l.stderr ** 2 for l in losses) / len(losses))
    return m, math.hypot(se_seed, se_prompts)


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


def _k1_figures(ctx, per_T, Ts, lstar, models) -> list[str]:
    plt = pyplot()
    out = []
    fig, axes = plt.subplots(2, len(Ts), figsize=(3.2 * len(Ts), 6.2), squeeze=False)
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
    fig, ax = plt.subplots(figsize=(5, 4))
    ms = [_pooled(per_T[T]["losses"]) for T in Ts]
    ax.errorbar(Ts, [m for m, _ in ms], yerr=[3 * e for _, e in ms], marker="o", label="trained (two-stage GD)")
    ax.plot(Ts, [per_T[T]["reach"].value for T in Ts], "s--", label="true adjacency, A2 fitted")
    ax.plot(Ts, [per_T[T]["floor"].value for T in Ts], "v:", label="floor: best prompt-token mixture knowing pi")
    ax.plot(Ts, [per_T[T]["truth"].value for T in Ts], "^:", label="L_eps(pi): true row pi(s_T, .)")
    ax.axhline(lstar, color="k", lw=1, label="L*")
    ax.set_xscale("log")
    ax.set_xlabel("T (= T_eff, chain)")
    ax.set_ylabel("perturbed loss, eps = T^-1/2")
    ax.set_title("N.K1: loss vs T (error bars: 3 s.e.)")
    ax.legend(fontsize=7)
    out.append(ctx.save_figure(fig, "loss-vs-T"))
    return out


K1_TRAIN_QUICK = {"S": N_S, "graph": "chain", "Ts": (10, 20, 40), "seeds": 2, "alpha": N_ALPHA, "gamma": 0.5,
                  "beta0": "auto", "eta1": 1.0, "steps1": 200, "lr2": 10.0, "steps2": 200, "batch": 256}
K1_TRAIN_STANDARD = {**K1_TRAIN_QUICK, "Ts": (10, 20, 40, 80), "seeds": 3, "steps1": 600, "steps2": 600,
                     "batch": 1024}
K1_TRAIN_PAPER = {**K1_TRAIN_QUICK, "Ts": (10, 20, 40, 80, 160), "seeds": 5, "steps1": 2000, "steps2": 2000,
                  "batch": 2048}

N_K1 = Claim(
    id="N.K1",
    title="Two-stage gradient descent on the reduced model recovers the graph and approaches L*",
    source=Source("N", "Knowl 1 (Theorem 4.4); algorithm Knowl 5; model Knowl 6",
                  "S(A1)_{i,p(i)} >= 1 - O(1/T); L(theta) - L* <= C (log^2 T / T_eff)^(c gamma / 24)"),
    statement=("Primary reading (deciding): Knowl 1, checked by the three criteria below, which are not all Knowl "
               "1's own (see the review: the fixed 0.9 stands in for 1 - O(1/T), the loss is compared with L_eps(pi) "
               "instead of L*, and criterion (3) is this project's); reported as a finding: Knowl 1's literal loss "
               "bound. "
               "N's reduced model f = X^T softmax(S(MASK(A1)) X A2^T e_{s_T}) trained by N's two-stage gradient "
               "descent (Knowl 5): A1(0) = 0, A2(0) = beta0 I with beta0 = T^(-3/2); stage 1 plain GD on A1 (A2 "
               "frozen, lr1 = eta1 T^2 / beta0), stage 2 plain GD on A2 (A1 frozen); constant step sizes; N's "
               "perturbed population loss -sum_s' pi(s'|s_T) log(f_s' + eps), eps = T_eff^(-1/2), on fresh batches. "
               "Chain graph (T_eff = T), prior floor(dirichlet(0.1), gamma=0.5) at S = 10 (Knowl 10's assumptions "
               "hold; N's plain Dirichlet(0.1) has no entry floor). Decided: (1) after stage 1, S(A1)[i, p(i)] >= "
               "0.9 at every non-root i, for every T and every seed; (2) the loss approaches the optimum as T grows: "
               "the excess L(theta) - L_eps(pi) over the perturbed loss of the true row pi(s_T, .) (same eps, paired "
               "per prompt) is smaller at the largest T than at the smallest (margin z s.e.); L_eps(pi) -> L* as eps "
               "-> 0, and Knowl 1's literal L(theta) - L* is reported (it is negative at these T: eps = T^-1/2 pulls "
               "the perturbed loss below L*, so the literal bound holds trivially); (3) the trained "
               "loss is within reach_tol of the best loss this model class reaches once the graph is known (true "
               "adjacency in layer 1, A2 fitted by Adam). The model's output is a mixture of prompt tokens, so it "
               "cannot reach the add-alpha Bayes loss and nothing here asks it to; the floor of any prompt-token "
               "mixture, even one that knows pi, is reported, as is the perturbed loss of the true row (below L*). "
               "The 1 - O(1/T) rate and the loss exponent have unspecified constants: reported, not decided."),
    assumptions=K1_ASSUMPTIONS,
    checks={"trained": _k1_trained},
    settings={
        "quick": {"tiers": ("trained",), **K1_TRAIN_QUICK, "n_eval": 4096, "reach_steps": 200, "reach_tol": 0.01},
        "standard": {"tiers": ("trained",), **K1_TRAIN_STANDARD, "n_eval": 16384, "reach_steps": 600,
                     "reach_tol": 0.01},
        "paper": {"tiers": ("trained",), **K1_TRAIN_PAPER, "n_eval": 65536, "reach_steps": 2000, "reach_tol": 0.005},
    },
    params={"attention_threshold": 0.9, "required_drop": 0.0, "wrong_task": None},
    prior_dependent=True,
    primary=PrimaryReading(
        statement=("Two-stage gradient descent on the reduced model (A1(0) = 0, A2(0) = beta0 I, beta0 <= c T_eff^-3/2) "
                   "recovers the graph, S(A1)_{i,p(i)} >= 1 - O(1/T) at every non-root i, and the perturbed population "
                   "loss reaches L* up to L(theta) - L* <= C (log^2 T / T_eff)^(c gamma/24) (Knowl 1)."),
        seed="002", lines="103-116",
        setting=("N's reduced model (Knowl 6) with N's perturbed loss, eps = T_eff^-1/2; a prior meeting Knowl 10 "
                 "with gamma > 0, root fraction <= 1 - gamma, T_eff >= poly(1/gamma, S); 'there exist' step sizes "
                 "and step counts"),
        review=("The deciding criteria are not all the paper's: a fixed 0.9 stands in for 1 - O(1/T) (its constant "
                "is unspecified; T (1 - min) is reported), the loss criterion compares with L_eps(pi) instead of "
                "L* (the literal L - L* is negative at these T and is a finding), and 'within reach_tol of the "
                "reachable loss' is this project's; CLAIMS.md asks to decide the approach to L* directly at T up "
                "to 160-320. Redesigning them is another issue; nothing here is stricter than Knowl 1.")),
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


def _sup_errors(model, x, target_rows, device) -> np.ndarray:
    f = _reduced_eval(model, x, device, 0.0)
    return np.abs(f - target_rows).max(axis=1)


def _k4_trained(ctx: Context) -> TierResult:
    s = ctx.settings
    S = int(s["S"])
    prior = _k1_prior(ctx, S)
    wrong = ctx.params["wrong_task"]
    models = _train_k1_models(ctx, prior, wrong)
    Ts = [int(T) for T in s["Ts"]]
    seeds = [sd for sd, _, _ in models[Ts[0]]]
    floor = prior.entry_floor()
    train_floor = float(floor) if floor is not None else 0.0
    holds_prior, gamma, a_numbers = _prior_gamma(ctx, prior, S, n_graph(s["graph"], Ts[0]),
                                                 _k1_hyper(s, Ts[0])["beta0"], float(Ts[0]))
    mats = _ood_matrices(ctx, S, train_floor)
    n_per = int(s["n_prompts_per_matrix"])
    numbers = list(a_numbers)
    err = {"ood": {}, "id": {}}
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
            per_seed = [_sup_errors(m, x, r, ctx.device) for _, m, _ in models[T]]
            err[kind][T] = per_seed
        for k, (name, pi) in enumerate(mats):
            e = [float(ps[k * n_per:(k + 1) * n_per].mean()) for ps in err["ood"][T]]
            records.append({"T": T, "matrix": name, "mean sup error per seed": e})
        for kind in ("ood", "id"):
            means = [float(e.mean()) for e in err[kind][T]]
            q99 = [float(np.quantile(e, 0.99)) for e in err[kind][T]]
            label = "out of distribution" if kind == "ood" else "in distribution"
            numbers.append(trained_number(f"T={T}: mean sup_s' |f - pi(s'|s_T)|, {label}", means, seeds,
                                           note=f"{len(err[kind][T][0])} prompts per seed"))
            numbers.append(trained_number(f"T={T}: 0.99-quantile of the sup error, {label}", q99, seeds))
    # Knowl 10's assumptions hold for every gamma' <= gamma, so Knowl 4 applies with
    # gamma' = min(gamma, S min pi~), which is > 0 exactly when every entry of pi~ is positive.
    g_ood = min(S * min(pi.min() for _, pi in mats), gamma)
    assumptions = {K4_ASSUMPTIONS[0]: g_ood > 0 and all(holds_prior.values()), K4_ASSUMPTIONS[1]: True}
    numbers.append(Number("gamma' = min(gamma, S min pi~) used by Knowl 4", g_ood,
                          note=f"gamma allowed by the prior {gamma:.3g}; training prior's floor S * {train_floor:.3g}; "
                               f"every OOD matrix has an entry below the training floor (outside the support)"))
    checks = []
    T0, T1 = Ts[0], Ts[-1]
    ratio_max = float(ctx.params["ratio_max"])
    for kind in ("ood", "id"):
        m0, se0 = _pooled_errors(err[kind][T0])
        m1, se1 = _pooled_errors(err[kind][T1])
        drop = m0 - m1
        out = compare(drop, 0.0, stderr=math.hypot(se0, se1), z=ctx.z)
        if kind == "id":
            out = Outcome.HELD if out is not Outcome.VIOLATED else out  # context, decided with the OOD part
        checks.append(InstanceCheck(assumptions if kind == "ood" else {}, out, drop, {
            "conclusion": f"the {'out-of-distribution' if kind == 'ood' else 'in-distribution'} sup error shrinks "
                          f"from T={T0} to T={T1}", f"error at T={T0}": m0, f"error at T={T1}": m1,
            "standard error": math.hypot(se0, se1), "seeds": seeds, "matrices": [n for n, _ in mats],
            "out-of-distribution matrices": [np.round(pi, 6).tolist() for _, pi in mats] if kind == "ood" else None,
            "per matrix": records if kind == "ood" else None, "wrong task": wrong}))
    for T in Ts:
        mo, seo = _pooled_errors(err["ood"][T])
        mi, sei = _pooled_errors(err["id"][T])
        slack = ratio_max * mi - mo
        se = math.hypot(seo, ratio_max * sei)
        out = compare(slack, 0.0, stderr=se, z=ctx.z)
        checks.append(InstanceCheck(assumptions, out, slack, {
            "conclusion": f"out-of-distribution error <= {ratio_max} x in-distribution error (like in distribution)",
            "T": T, "ood error": mo, "id error": mi, "stderr": se, "seeds": seeds, "wrong task": wrong}))
    res = summarize_instances("trained", checks, list(K4_ASSUMPTIONS),
                              what=(f"OOD sup error shrinks from T={T0} to T={T1} and stays within "
                                    f"{ratio_max}x the in-distribution error"), numbers=numbers,
                              budget="more prompts per matrix and more seeds (n_prompts_per_matrix, seeds)")
    res.figures.append(_k4_figure(ctx, err, Ts))
    return res


def _pooled_errors(per_seed: Sequence[np.ndarray]) -> tuple[float, float]:
    return _pooled([mean_estimate(e) for e in per_seed])


def _k4_figure(ctx, err, Ts) -> str:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 4))
    for kind, label, mk in (("id", "in distribution", "o"), ("ood", "out of distribution", "s")):
        ms = [_pooled_errors(err[kind][T]) for T in Ts]
        ax.errorbar(Ts, [m for m, _ in ms], yerr=[3 * e for _, e in ms], marker=mk, label=f"mean, {label}")
        ax.plot(Ts, [np.mean([np.quantile(e, 0.99) for e in err[kind][T]]) for T in Ts], mk + ":",
                label=f"0.99-quantile, {label}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("T (= T_eff, chain)")
    ax.set_ylabel("sup_s' |f(s_1:T)_s' - pi(s'|s_T)|")
    ax.set_title("N.K4: error vs T (error bars: 3 s.e.)")
    ax.legend(fontsize=7)
    return ctx.save_figure(fig, "ood-error")


N_K4 = Claim(
    id="N.K4",
    title="The trained model generalises out of distribution",
    source=Source("N", "Knowl 4 (Theorem 4.5)",
                  "min pi~ >= gamma/S => sup_s' |f(s_{1:T})_s' - pi~(s'|s_T)| <= C log T / T_eff^(c gamma) w.p. 0.99"),
    statement=("Primary reading (deciding): Knowl 4, checked by the mean sup error's decrease in T and its ratio "
               "to the in-distribution error below, which are this project's stand-ins for Knowl 4's 0.99-probability "
               "bound (see the review); no other reading is reported as a finding (the 0.99-quantile is reported as "
               "numbers). "
               "The reduced models of N.K1 (same prior, graph, T grid, seeds and two-stage GD; shared within a run) "
               "evaluated on prompts drawn from fixed matrices outside the training prior's support: draws of "
               "floor(dirichlet(0.3), gamma=0.2) with an entry below the training floor 0.5/S, and a cyclic, "
               "non-symmetric matrix pi~(s, s+1) = 1 - (S-1) 0.2/S. They satisfy Knowl 4's only condition min pi~ >= "
               "gamma/S with gamma = 0.2, which Knowl 10 allows for this prior (its assumptions hold for every gamma <= "
               "0.5). Error: sup_s' |f(s_1:T)_s' - pi~(s'|s_T)| per prompt, mean and 0.99-quantile over prompts, mean ± "
               "s.e. over seeds. Decided: the out-of-distribution error at the largest T is below that at the smallest "
               "T (margin z s.e.), and at every T it is at most ratio_max (2) times the in-distribution error (Knowl 4's "
               "bound has the same T-dependence in and out of distribution)."),
    assumptions=K4_ASSUMPTIONS,
    checks={"trained": _k4_trained},
    settings={
        "quick": {"tiers": ("trained",), **K1_TRAIN_QUICK, "ood_gamma": 0.2, "ood_alpha": 0.3, "n_ood": 3,
                  "n_prompts_per_matrix": 1000},
        "standard": {"tiers": ("trained",), **K1_TRAIN_STANDARD, "ood_gamma": 0.2, "ood_alpha": 0.3, "n_ood": 6,
                     "n_prompts_per_matrix": 4000},
        "paper": {"tiers": ("trained",), **K1_TRAIN_PAPER, "ood_gamma": 0.2, "ood_alpha": 0.3, "n_ood": 10,
                  "n_prompts_per_matrix": 10000},
    },
    params={"ratio_max": 2.0, "wrong_task": None},
    prior_dependent=True,
    primary=PrimaryReading(
        statement=("For any pi~ (possibly outside the training prior's support) with min pi~ >= gamma/S, with "
                   "probability >= 0.99 over s_1:T drawn on the graph from pi~, the two-stage-GD model satisfies "
                   "sup_s' |f(s_1:T)_s' - pi~(s'|s_T)| <= C log T / T_eff^(c gamma) (Knowl 4)."),
        seed="002", lines="144-152",
        setting=("the reduced model trained by two-stage gradient descent (Knowl 5) on a prior meeting Knowl 10; "
                 "C, c unspecified constants independent of T"),
        review=("Knowl 4 is a statement about the 0.99-quantile of the sup error and its decay like log T / "
                "T_eff^(c gamma); the deciding criteria use the mean sup error's decrease from the smallest to the "
                "largest T and a ratio <= 2 to the in-distribution error, which are this project's, not the paper's "
                "(CLAIMS.md: decide on the 0.99-quantile's decay, with a prompt-unigram negative control). The "
                "0.99-quantile is reported; redesigning the criteria is another issue.")),
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
    pending="decided by the prior audit: `icl-verify prior SPEC` (see README, Auditing a prior)",
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
