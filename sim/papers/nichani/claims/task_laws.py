"""N's task and its L* (claim N.T; N Knowl 2 and Knowl 1), with N's reference code's "Bayes" as findings.

Positions are 0-based: a prompt is ``s_0 .. s_{T-1}``; ``s_{T-1}`` is N's query ``s_T``, a
root drawn from ``Unif[S]``, and the target is ``y ~ pi(s_{T-1}, .)``. N's graphs follow N's
reference code (``single_parent.py``, github.com/eshnich/transformers-learn-causal-structure):
``chain`` (``p(i) = i-1``), ``icl`` (in-context function: ``p(i) = i-1`` for odd ``i``) and
``random`` (``p(i) ~ Unif{-1, .., i-1}``), each on the ``T-1`` context positions, with the
query appended as a root. N's code draws ``pi`` with i.i.d. ``Dirichlet(alpha 1_S)`` rows, the
non-query roots from ``mu_pi`` and the query uniformly.

The primary reading is the task itself: the sampler's laws, and ``L* := -E_pi[(1/S) sum_{s,s'}
pi(s'|s) log pi(s'|s)]`` (Knowl 1), ``= psi(S alpha + 1) - psi(alpha + 1)`` for Dirichlet rows.
N's code calls the add-alpha count estimator ``(alpha + n(q, .)) / (S alpha + n(q))`` its
``bayes`` baseline; no seed says so, and with roots ``~ mu_pi`` it is not the Bayes predictor
(the roots carry information about pi): reference-code findings, with the true Bayes loss.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
from scipy import stats

from theory.markov import stationary_batch
from theory import CausalTree
from theory.dirichlet import (add_alpha_batch, add_alpha_predictive, bayes_quadrature_s2, dirichlet_row_entropy,
                              entropy_rate_quadrature)

from sim.papers.nichani.task import GRAPHS, N_ALPHA, N_S, N_T, n_graph
from sim.papers.nichani.task import bayes_gap_richardson, population_losses
from sim.montecarlo import Estimate, mean_estimate
from sim.priors import Dirichlet, Prior
from sim.sampling import categorical, dirichlet_rows, sample_n_prompts
from sim.verdict import (Assumption, Control, Finding, FindingKind, Number, Outcome, TierResult, Verdict, compare,
                        tier_verdict)
from sim.claims.base import Claim, Context, GraphInput, InstanceCheck, PrimaryReading, Source, summarize_instances
from theory.markov import chain_structure_batch

__all__ = ["A_DIRICHLET", "A_IRREDUCIBLE", "A_APERIODIC", "draw_structure", "structure_assumptions", "replace_assumptions",
           "sampler_draws_needed", "N_T_CLAIM", "CLAIMS"]

#: N's sizes (``single_parent.py`` defaults): alphabet, prompt length, Dirichlet concentration.
ROUNDOFF = 1e-12
#: Largest number of prompts the exact tier enumerates (S^T) when a user's prior fixes S > 2.
MAX_EXACT_PROMPTS = 4096

A_DIRICHLET = "prior: i.i.d. Dirichlet(alpha) rows (N's code's prior; the closed form of L*)"
A_IRREDUCIBLE = "irreducible: one communicating class, so mu_pi is unique and positive (N Knowl 2)"
A_APERIODIC = "aperiodic: every closed class has period 1 (N Knowl 2)"
STRUCTURE = {A_IRREDUCIBLE: "irreducible", A_APERIODIC: "aperiodic"}


# ----------------------------------------------------------- N Knowl 2 on the draws --
def draw_structure(prior: Prior, pis: np.ndarray) -> dict[str, np.ndarray]:
    """``chain_structure_batch`` of the draws, skipping the work where it is known: a prior with
    a positive entry floor, or Dirichlet rows, give irreducible aperiodic draws (almost surely),
    and so does any draw without a zero entry."""
    n = pis.shape[0]
    out = {k: np.ones(n, dtype=bool) for k in ("unique stationary law", "irreducible", "aperiodic")}
    floor = prior.entry_floor()
    if isinstance(prior, Dirichlet) or (floor is not None and floor > 0):
        return out
    zero = np.flatnonzero((pis <= 0).any(axis=(1, 2)))
    if zero.size:
        sub = chain_structure_batch(pis[zero])
        for k in out:
            out[k][zero] = sub[k]
    return out


def structure_assumptions(structure: dict[str, np.ndarray], what: str = "draws") -> list[Assumption]:
    """N Knowl 2's two assumptions with per-draw counts, for a tier's result."""
    n = structure["irreducible"].size
    out = []
    for name, key in STRUCTURE.items():
        bad = int((~structure[key]).sum())
        detail = f"held on all {n} {what}" if bad == 0 else f"failed on {bad} of {n} {what}"
        if key == "irreducible" and bad:
            nonunique = int((~structure["unique stationary law"]).sum())
            if nonunique:
                detail += (f" ({nonunique} without a unique stationary law: roots ~ mu_pi is undefined there, so "
                           "N's task is too; they are left out)")
        out.append(Assumption(name, bad == 0, detail))
    return out


def replace_assumptions(res: TierResult, replacements: list[Assumption], note: str = "") -> TierResult:
    """Put per-draw assumption findings in place of summarize_instances' per-instance ones (same
    names; new ones appended), and recompute the verdict: a counterexample meeting every
    assumption stays a FAIL; otherwise the verdict follows the assumptions."""
    by_name = {a.name: a for a in replacements}
    res.assumptions = [by_name.pop(a.name, a) for a in res.assumptions] + list(by_name.values())
    if res.verdict is not Verdict.FAIL:
        res.verdict = tier_verdict(res.assumptions, res.conclusion)
    broken = [a.name for a in res.assumptions if a.holds is False]
    if broken and not res.conclusion_without_assumptions:
        res.conclusion_without_assumptions = note or ("not evaluated: no evaluable input broke "
                                                      + ", ".join(broken))
    elif note and res.conclusion_without_assumptions:
        res.conclusion_without_assumptions += "; " + note
    return res


# -------------------------------------------------------------------- wrong samplers --
def sampler_uniform_roots(rng, pis, tree):
    """A deliberately wrong sampler (for tests): non-query roots ``~ Unif[S]`` instead of ``mu_pi``."""
    par = CausalTree(tree).parents if not isinstance(tree, CausalTree) else tree.parents
    B, S, _ = pis.shape
    T = par.size
    x = np.empty((B, T), dtype=np.int64)
    u = rng.random((B, T + 1))
    b = np.arange(B)
    for i in range(T - 1):
        p = int(par[i])
        x[:, i] = np.minimum((u[:, i] * S).astype(np.int64), S - 1) if p < 0 else categorical(u[:, i], pis[b, x[:, p]])
    x[:, T - 1] = np.minimum((u[:, T - 1] * S).astype(np.int64), S - 1)
    return x, categorical(u[:, T], pis[b, x[:, T - 1]])


def sampler_query_from_mu(rng, pis, tree):
    """A deliberately wrong sampler (for tests): the query ``~ mu_pi`` instead of ``Unif[S]``."""
    x, _ = sample_n_prompts(rng, pis, tree)
    B = x.shape[0]
    u = rng.random((2, B))
    x[:, -1] = categorical(u[0], stationary_batch(pis))
    return x, categorical(u[1], pis[np.arange(B), x[:, -1]])


# --------------------------------------------------------------- goodness of fit (MC) --
def _rank_gof(order_keys: np.ndarray, probs: np.ndarray, tokens: np.ndarray, min_expected: float = 5.0) -> dict:
    """Goodness of fit of independent categorical draws with prompt-specific laws.

    Draw ``b`` is ``tokens[b] ~ probs[b]`` under the task. The cells are ranks: the
    position of the token when the states are sorted by ``order_keys[b]`` (descending,
    stable), so the statistic conditions on each prompt's ``pi``. Cell ``c``'s count is a sum
    of independent Bernoullis with expectation ``E_c = sum_b P_bc`` and exact covariance
    ``Cov = diag(E) - sum_b P_b P_b^T``; cells with ``E < min_expected`` are pooled. The
    statistic ``X2 = d^T Cov^{-1} d`` on all cells but one is asymptotically chi-square
    with ``k - 1`` degrees of freedom.
    """
    B, S = probs.shape
    perm = np.argsort(-order_keys, axis=1, kind="stable")  # (B, S)
    cellp = np.take_along_axis(probs, perm, axis=1)  # (B, S): law of the rank
    cell = np.argmax(perm == tokens[:, None], axis=1)  # (B,)
    E = cellp.sum(0)
    groups, rest = [], []
    for c in range(S):
        (groups.append([c]) if E[c] >= min_expected else rest.append(c))
    if rest:
        if E[rest].sum() >= min_expected or not groups:
            groups.append(rest)
        else:
            groups[-1] = groups[-1] + rest
    k = len(groups)
    M = np.zeros((S, k))
    for g, cs in enumerate(groups):
        M[cs, g] = 1.0
    P = cellp @ M  # (B, k)
    Eg = P.sum(0)
    Og = np.bincount(cell, minlength=S) @ M
    cov = np.diag(Eg) - P.T @ P
    d = Og - Eg
    if k >= 2:
        x2 = float(d[:-1] @ np.linalg.solve(cov[:-1, :-1], d[:-1]))
        pval = float(stats.chi2.sf(x2, k - 1))
    else:
        x2, pval = 0.0, 1.0
    se = np.sqrt(np.clip(np.diag(cov), 0, None)) / B
    return {"X2": x2, "df": k - 1, "p_value": pval, "n": B, "cells": [[int(c) for c in cs] for cs in groups],
            "expected_freq": (Eg / B).tolist(), "observed_freq": (Og / B).tolist(), "freq_stderr": se.tolist(),
            "max_abs_dev": float(np.abs(d / B).max())}


def _draw(prior: Prior, rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` matrices from ``prior``; i.i.d. Dirichlet rows take the vectorised sampler
    (``sim.sampling.dirichlet_rows``, log-space: no underflow at alpha = 0.1)."""
    if isinstance(prior, Dirichlet):
        return dirichlet_rows(rng, float(prior.alpha), n, prior.d)
    return prior.sample(rng, n)


#: The sampler's tests per group of draws (:func:`_sampler_group`): query, non-query root, edge parent,
#: edge child, target.
SAMPLER_TESTS = 5


def _sampler_checks(ctx: Context, sampler, prior: Prior, graph_names, S: int, T: int, n: int,
                    min_group: int = 200) -> tuple[list[InstanceCheck], list[dict]]:
    """The task's law, checked on ``n`` prompts per graph: non-query roots ~ mu_pi, query
    uniform (ranked by mu_pi, so a query drawn from mu_pi shows), a random edge's parent ~
    mu_pi and child ~ pi(parent, .), and the target ~ pi(query, .).

    Draws are split by N Knowl 2: the tests run on the draws that are irreducible and
    aperiodic, and separately (assumption broken) on the others that still have a unique
    stationary law; draws without one are left out (roots ~ mu_pi is undefined). Groups of
    fewer than ``min_group`` draws are skipped. Returns the checks and each graph's structure."""
    z = ctx.z
    n_tests = SAMPLER_TESTS * len(graph_names)
    alpha_bonf = math.erfc(z / math.sqrt(2)) / n_tests  # two-sided z-level, Bonferroni over all tests
    tol = float(ctx.settings["freq_tol"])
    rng_pi, rng_seq, rng_pick = ctx.rng("sampler/pi"), ctx.rng("sampler/sequences"), ctx.rng("sampler/pick")
    rng_tree = ctx.rng("tree")
    out = []
    structures = []
    for name in graph_names:
        par = n_graph(name, T, rng_tree)
        all_pis = _draw(prior, rng_pi, n)
        st = draw_structure(prior, all_pis)
        structures.append(st)
        meets = st["irreducible"] & st["aperiodic"]
        groups = [(meets, True)]
        if not meets.all():  # N's task still exists where mu_pi is unique: check the sampler there too
            groups.append((~meets & st["unique stationary law"], False))
        for mask, ok in groups:
            if mask.sum() >= min_group:
                out += _sampler_group(ctx, sampler, prior, all_pis[mask], st, mask, ok, name, par, S, T, z,
                                      alpha_bonf, tol, rng_seq, rng_pick)
    return out, structures


def sampler_draws_needed(freq_tol: float, z: float, n_graphs: int, S: int = N_S, tests: int = SAMPLER_TESTS,
                         miss: float = 1e-3) -> int:
    """Draws per graph for which a correct sampler's check is HELD with probability ``1 - miss``.

    HELD needs ``|o - e| + z s <= freq_tol`` in every rank cell, ``s <= 0.5 / sqrt(n)`` a cell
    frequency's standard error. For a correct sampler ``|o - e|`` is about ``N(0, s)``, so over the
    ``m = n_graphs * tests * S`` cells all stay within ``z_m s`` with probability ``1 - miss``,
    ``z_m = Phi^-1(1 - miss / (2 m))`` (union bound), and
    ``n >= ((z + z_m) * 0.5 / freq_tol) ** 2`` suffices."""
    z_m = float(stats.norm.isf(miss / (2 * n_graphs * tests * S)))
    return math.ceil(((z + z_m) * 0.5 / freq_tol) ** 2)


def _sampler_group(ctx, sampler, prior, pis, st, mask, ok, name, par, S, T, z, alpha_bonf, tol, rng_seq,
                   rng_pick) -> list[InstanceCheck]:
    """The sampler's tests on one group of draws (meeting N Knowl 2, or not)."""
    out = []
    n = pis.shape[0]
    assumptions = {A_IRREDUCIBLE: bool(st["irreducible"][mask].all()), A_APERIODIC: bool(st["aperiodic"][mask].all())}
    x, y = sampler(rng_seq, pis, par)
    mu = stationary_batch(pis)
    b = np.arange(n)
    roots = np.flatnonzero(par[:T - 1] < 0)
    edges = np.flatnonzero(par[:T - 1] >= 0)
    tests = {}
    r_pick = roots[rng_pick.integers(0, roots.size, n)]
    tests["non-query root ~ mu_pi (rank under mu_pi)"] = (mu, mu, x[b, r_pick])
    tests["query ~ Unif[S] independent of pi (rank under mu_pi)"] = (mu, np.full((n, S), 1.0 / S), x[:, -1])
    if edges.size:
        e_pick = edges[rng_pick.integers(0, edges.size, n)]
        par_tok = x[b, par[e_pick]]
        tests["edge parent s_p(i) ~ mu_pi"] = (mu, mu, par_tok)
        row = pis[b, par_tok]
        tests["edge child s_i ~ pi(s_p(i), .)"] = (row, row, x[b, e_pick])
    trow = pis[b, x[:, -1]]
    tests["target y ~ pi(query, .)"] = (trow, trow, y)
    for what, (keys, probs, tok) in tests.items():
        res = _rank_gof(keys, probs, tok)
        sev = max(abs(o - e) + z * s for o, e, s in zip(res["observed_freq"], res["expected_freq"],
                                                         res["freq_stderr"]))
        if res["p_value"] < alpha_bonf:
            outcome = Outcome.VIOLATED
        elif sev <= tol:
            outcome = Outcome.HELD
        else:
            outcome = Outcome.UNDECIDED
        out.append(InstanceCheck(
            assumptions=assumptions, outcome=outcome, margin=res["p_value"] - alpha_bonf,
            record={"graph": name, "parents": par.tolist(), "check": what, "S": S, "T": T,
                    "prior": prior.spec(), "draws": n if ok else
                    f"{n} draws that break N Knowl 2 (irreducible and aperiodic) but have a unique mu_pi",
                    "seed (pi)": ctx.seed_for("sampler/pi"),
                    "seed (sequences)": ctx.seed_for("sampler/sequences"),
                    "rejection level (Bonferroni)": alpha_bonf, "frequency tolerance": tol, **res}))
    return out


def _exact_prior(ctx: Context) -> tuple[float, bool, Prior | None]:
    """``(alpha, is_dirichlet, prior)`` for the exact tier: the default Dirichlet(alpha), a
    user Dirichlet (its alpha), or another user prior (the innermost Dirichlet's alpha,
    else 1, with the prior kept for prior-sample Bayes)."""
    if ctx.prior is None:
        return None, True, None
    p = ctx.prior
    if isinstance(p, Dirichlet):
        return float(p.alpha), True, p
    inner = p
    while hasattr(inner, "base") and not isinstance(inner, Dirichlet):
        inner = inner.base
    return (float(inner.alpha) if isinstance(inner, Dirichlet) else 1.0), False, p


def _bayes_by_prior_samples(prompts: np.ndarray, par: np.ndarray, pis: np.ndarray, root_law: str, mus=None,
                            chunk: int = 256):
    """Posterior predictive ``E[pi(q, .) | prompt]`` for a prior given by samples ``pis`` ``(K, S, S)``:
    self-normalised weights ``P(prompt | pi_k)`` (roots ``~ mu_pi`` or independent of pi);
    returns ``(estimate (P, S), stderr (P, S), possible (P,))`` (delta method). A prompt that
    no sample can produce (``possible`` False) has no posterior: its rows are NaN.
    With ``root_law="stationary"`` every sample must have a unique stationary law (``mus``: their
    stationary laws, computed here when not given). Vectorised over chunks of prompts: the
    log-likelihoods are ``counts (P, S*S) @ log pi (S*S, K)`` (theory.dirichlet.edge_counts' counts)."""
    K, S, _ = pis.shape
    P, T = prompts.shape
    logpi = np.log(np.where(pis > 0, pis, 1.0)).reshape(K, S * S)
    zero = (pis <= 0).reshape(K, S * S).astype(np.float64)
    if root_law == "stationary":
        if mus is None:
            mus = stationary_batch(pis)
        logmu = np.log(np.where(mus > 0, mus, 1.0))  # (K, S)
        mu_zero = (mus <= 0).astype(np.float64)
    # counts of every prompt: edges among positions 0..T-2 and roots i < T-1 (the query is a root)
    body, parents = prompts[:, :-1], np.asarray(par)[:-1]
    nonroot = np.flatnonzero(parents >= 0)
    n = np.zeros((P, S * S))
    for i in nonroot:
        np.add.at(n, (np.arange(P), prompts[:, parents[i]] * S + body[:, i]), 1.0)
    r = np.zeros((P, S))
    for i in np.flatnonzero(parents < 0):
        np.add.at(r, (np.arange(P), body[:, i]), 1.0)
    est, se = np.full((P, S), np.nan), np.full((P, S), np.nan)
    possible = np.zeros(P, dtype=bool)
    q = prompts[:, -1]
    for lo in range(0, P, chunk):
        sl = slice(lo, min(P, lo + chunk))
        ll = n[sl] @ logpi.T  # (p, K)
        impossible = (n[sl] > 0).astype(np.float64) @ zero.T > 0
        if root_law == "stationary":
            ll = ll + r[sl] @ logmu.T
            impossible |= (r[sl] > 0).astype(np.float64) @ mu_zero.T > 0
        ll = np.where(impossible, -np.inf, ll)
        ok = np.isfinite(ll).any(axis=1)
        possible[sl] = ok
        top = np.where(ok, ll.max(axis=1, initial=-np.inf, where=np.isfinite(ll)), 0.0)
        w = np.where(impossible, 0.0, np.exp(np.where(impossible, 0.0, ll - top[:, None])))  # (p, K)
        wsum = w.sum(axis=1)
        w2 = w * w
        for s_q in range(S):  # prompts with the same query share the rows pi_k(q, .)
            sel = np.flatnonzero(ok & (q[sl] == s_q))
            if not sel.size:
                continue
            rows = pis[:, s_q]  # (K, S)
            e = (w[sel] @ rows) / wsum[sel, None]
            # sum_k w_k^2 (rows_k - e)^2 = W2 rows^2 - 2 e W2 rows + e^2 sum W2 (delta method)
            var = (w2[sel] @ rows ** 2 - 2 * e * (w2[sel] @ rows) + e ** 2 * w2[sel].sum(1, keepdims=True))
            est[lo + sel] = e
            se[lo + sel] = np.sqrt(np.clip(var, 0.0, None)) / wsum[sel, None]
    return est, se, possible


def _exact_size(ctx: Context, T: int) -> tuple[int, int]:
    """``(S, T)`` for the exact tier: S = 2, or the size a user's prior fixes, with T cut so that
    the S^T prompts stay at most MAX_EXACT_PROMPTS."""
    S = 2 if ctx.prior is None or ctx.prior.d is None else int(ctx.prior.d)
    while S ** T > MAX_EXACT_PROMPTS and T > 2:
        T -= 1
    return S, T


# ------------------------------------------------------------------------ exact tier --
EPS = float(np.finfo(np.float64).eps)


def _entropy_rows(p: np.ndarray) -> np.ndarray:
    """``-sum_y p_y log p_y`` along the last axis (``0 log 0 = 0``)."""
    pos = p > 0
    return -np.where(pos, p * np.log(np.where(pos, p, 1.0)), 0.0).sum(axis=-1)


def _lstar_checks(ctx: Context, lstar_fn, sizes, alphas, dirichlet: bool, ok: dict,
                  samples: dict | None = None) -> tuple[list[InstanceCheck], list[Number]]:
    """N's ``L* := -E_pi[(1/S) sum_{s,s'} pi(s'|s) log pi(s'|s)]`` (Knowl 1) against the formula
    under test ``lstar_fn(alpha, S)`` (``psi(S alpha + 1) - psi(alpha + 1)``).

    Dirichlet rows: the definition by quadrature (``theory.dirichlet.entropy_rate_quadrature``);
    tolerance = QUADPACK's error estimate + 64 ulp of the value (float64 round-off of the
    digamma difference and of the quadrature sum). Another prior (``samples[S]``: its draws):
    the mean entropy rate of the draws, tolerance ``z`` standard errors + the same round-off."""
    checks, numbers = [], []
    for S_ in sizes:
        for a in alphas:
            claimed = float(lstar_fn(a, S_))
            if dirichlet:
                val, err = entropy_rate_quadrature(a, S_)
                sd, n, how = 0.0, None, "quadrature of the Beta marginal (theory.dirichlet.entropy_rate_quadrature)"
                tol = err + 64 * EPS * (1.0 + abs(val))
            else:
                est = mean_estimate(_entropy_rows(samples[S_]).mean(axis=-1), ctx.seed_for("prior-samples"))
                val, sd, n, err, how = est.value, est.stderr, est.n, 0.0, "mean entropy rate of the prior samples"
                tol = ctx.z * sd + 64 * EPS * (1.0 + abs(val))
            diff = abs(claimed - val)
            checks.append(InstanceCheck(
                assumptions=ok, outcome=Outcome.VIOLATED if diff > tol else Outcome.HELD, margin=tol - diff,
                record={"check": "L* formula vs N's definition", "S": S_, "alpha": a, "formula": claimed,
                        "definition": val, "|difference|": diff, "tolerance": tol, "method": how}))
            numbers.append(Number(f"L* by N's definition, S={S_}, alpha={a:g}", val, stderr=sd, n=n,
                                  tolerance=tol, kind="exact" if dirichlet else "montecarlo",
                                  note=how + (f"; quadrature error estimate {err:.1e}" if dirichlet else "")))
            numbers.append(Number(f"L* by the formula under test, psi(S alpha + 1) - psi(alpha + 1), S={S_}, "
                                  f"alpha={a:g}", claimed,
                                  note=f"|difference| {diff:.2e}, tolerance {tol:.2e}"))
    return checks, numbers


def _n_t_exact(ctx: Context) -> TierResult:
    """Primary reading: N's L* (closed form against the definition; L* <= the exact Bayes loss at
    S = 2). Findings: add-alpha against the exact posterior predictive, with roots ~ mu_pi (N's
    task; N's code calls add-alpha ``bayes``) and with roots independent of pi (conjugacy)."""
    s = ctx.settings
    S, T = _exact_size(ctx, int(s["exact_T"]))
    predictor, lstar_fn = ctx.params["predictor"], ctx.params["lstar"]
    user_alpha, is_dirichlet, user_prior = _exact_prior(ctx)
    alphas = [user_alpha] if user_alpha is not None else list(s["alphas"])
    quadrature = is_dirichlet and S == 2  # theory.dirichlet.bayes_quadrature_s2 is exact at S = 2
    all_names = [A_DIRICHLET, A_IRREDUCIBLE, A_APERIODIC]
    names = {"stationary": all_names, "independent": [A_DIRICHLET]}
    prompts = np.array(list(itertools.product(range(S), repeat=T)), dtype=np.int64)
    rng_tree = ctx.rng("tree")
    graphs = [(g, n_graph(g, T, rng_tree)) for g in GRAPHS]
    structure, samples, sample_mus = None, {}, None
    if not quadrature:
        n_samples = int(s.get("prior_samples", 20_000))
        prior = user_prior.bind(S) if user_prior.d is None else user_prior
        pis_all = _draw(prior, ctx.rng("prior-samples"), n_samples)
        structure = draw_structure(prior, pis_all)
        # N's task needs roots ~ mu_pi: the mu_pi reading conditions the prior on a unique stationary law.
        samples = {"independent": pis_all, "stationary": pis_all[structure["unique stationary law"]]}
        sample_mus = stationary_batch(samples["stationary"]) if len(samples["stationary"]) else None
    ok = {A_DIRICHLET: is_dirichlet, A_IRREDUCIBLE: True, A_APERIODIC: True}
    if structure is not None:
        ok.update({A_IRREDUCIBLE: bool(structure["irreducible"].all()),
                   A_APERIODIC: bool(structure["aperiodic"].all())})
    # (1) L*: the formula against N's definition.
    if ctx.prior is None or (is_dirichlet and ctx.prior.d is None):
        sizes = sorted({S, int(s["S"])})
    else:
        sizes = [S]
    lstar_alphas = alphas if ctx.prior is not None else sorted(set(alphas) | {N_ALPHA})
    checks, numbers = _lstar_checks(ctx, lstar_fn, sizes, lstar_alphas, is_dirichlet, ok,
                                    None if is_dirichlet else {S: pis_all})
    n_lstar = len(checks)
    # (2) S = 2, every prompt: the exact Bayes loss (>= L*), and add-alpha against the exact posterior predictive.
    finding_checks = {"stationary": [], "independent": []}
    gaps = {}
    if not quadrature:
        numbers.append(Number("prior samples (self-normalised importance weights)", n_samples,
                              note=f"{int(samples['stationary'].shape[0])} with a unique stationary law enter the "
                                   "mu_pi reading"))
    for alpha in alphas:
        for gname, par in graphs:
            aa = np.array([predictor(x, par, alpha, S) for x in prompts])
            if quadrature:
                quads = {law: [bayes_quadrature_s2(x, par, alpha, law) for x in prompts] for law in finding_checks}
                exact = {law: (np.array([q.predictive for q in qs]), np.array([q.abserr for q in qs]),
                               np.ones(len(prompts), dtype=bool)) for law, qs in quads.items()}
                probs = np.array([q.prompt_probability for q in quads["stationary"]])
                numbers.append(Number(f"sum of P(prompt), {gname}, alpha={alpha:g}", float(probs.sum()),
                                      note=f"all 2^{T} prompts of N's task (quadrature); 1 up to round-off"))
                bayes, berr = exact["stationary"][0], exact["stationary"][1]
                # Bayes loss = sum_x P(x) H(P*(x)); its quadrature error <= sum_x P(x) |dH/dp| abserr(x)
                bayes_loss = float(probs @ _entropy_rows(bayes))
                p1 = np.clip(bayes[:, 1], 1e-300, 1 - 1e-16)
                tol = float(probs @ (np.abs(np.log((1 - p1) / p1)) * berr)) + 64 * EPS * (1.0 + bayes_loss)
                lstar = float(lstar_fn(alpha, S))
                checks.append(InstanceCheck(
                    assumptions=ok, outcome=Outcome.VIOLATED if lstar - bayes_loss > tol else Outcome.HELD,
                    margin=bayes_loss - lstar + tol,
                    record={"check": "L* <= exact Bayes loss (L* is the minimal possible loss)", "graph": gname,
                            "parents": par.tolist(), "S": S, "T": T, "alpha": alpha, "L* (formula)": lstar,
                            "exact Bayes loss": bayes_loss, "tolerance": tol}))
                numbers.append(Number(f"exact Bayes loss of N's task, {gname}, alpha={alpha:g}", bayes_loss,
                                      tolerance=tol, note=f"S=2, T={T}: sum_prompts P(prompt) H(P*(prompt)); "
                                                          f"L* = {lstar:.6f}"))
                kl = np.sum(bayes * (np.log(bayes) - np.log(aa)), axis=1)
                gaps[(gname, alpha)] = float(probs @ kl)
                numbers.append(Number(f"add-alpha's loss minus the Bayes loss, {gname}, alpha={alpha:g}",
                                      gaps[(gname, alpha)], note=f"exact, S=2, T={T}, roots ~ mu_pi: "
                                                                 "sum_prompts P(prompt) KL(Bayes || add-alpha)"))
            else:
                exact = {law: (_bayes_by_prior_samples(prompts, par, samples[law], law,
                                                       sample_mus if law == "stationary" else None)
                               if len(samples[law])
                               else (np.full((len(prompts), S), np.nan),) * 2 + (np.zeros(len(prompts), bool),))
                         for law in finding_checks}
            for law, cs in finding_checks.items():
                cs.append(_add_alpha_check(ctx, exact[law], aa, law, gname, par, S, alpha, prompts, quadrature,
                                           is_dirichlet, {k: ok[k] for k in names[law]}, len(samples.get(law, ()))))
                est, _, possible = exact[law]
                if possible.any():
                    worst = np.where(possible, np.abs(np.nan_to_num(est) - aa).max(axis=1), 0.0).max()
                    numbers.append(Number(f"max |add-alpha - Bayes|, {gname}, alpha={alpha:g}, roots "
                                          + ("~ mu_pi" if law == "stationary" else "independent"), float(worst),
                                          tolerance=float(cs[-1].record.get("tolerance", 0.0)),
                                          note=f"over the {int(possible.sum())} possible of {len(prompts)} prompts, "
                                               f"S={S}, T={T}"))
    how = "quadrature" if is_dirichlet else "prior samples"
    what = (f"N's L* := -E_pi[(1/S) sum pi log pi] equals psi(S alpha + 1) - psi(alpha + 1) ({how})"
            + (f" and is at most the exact Bayes loss of N's task (S=2, T={T}, every prompt)" if quadrature else ""))
    res = summarize_instances("exact", checks, all_names, what=what, numbers=numbers)
    parts = {f"L* formula = N's definition ({how})": checks[:n_lstar],
             "L* <= exact Bayes loss (L* is the minimal possible loss)": checks[n_lstar:]}
    for name, cs in parts.items():
        if cs:
            bad = sum(c.outcome is Outcome.VIOLATED for c in cs)
            res.readings.append({"name": name, "verdict": "FAIL" if bad else "PASS",
                                 "detail": f"{bad} of {len(cs)} instances violate (smallest margin "
                                           f"{min(c.margin for c in cs):.3g})"})
    if structure is not None:  # N Knowl 2 is about the prior's draws, not the (alpha, graph) instances
        nonunique = int((~structure["unique stationary law"]).sum())
        replace_assumptions(res, structure_assumptions(structure, "prior samples"),
                            note=(f"{nonunique} prior samples without a unique stationary law were left out of "
                                  "the add-alpha findings (N's task is undefined there)") if nonunique else "")
    res.findings.extend(_add_alpha_exact_findings(finding_checks, names, gaps, S, T))
    return res


def _add_alpha_check(ctx, exact, aa, law, gname, par, S, alpha, prompts, quadrature, is_dirichlet, ok,
                     n_samples) -> InstanceCheck:
    """add-alpha against the exact (quadrature) or prior-sample posterior predictive on every prompt."""
    est, err, possible = exact
    if not possible.any():  # e.g. no sample with a unique stationary law: nothing to compare
        return InstanceCheck(assumptions=ok, outcome=Outcome.UNDECIDED, margin=0.0,
                             record={"graph": gname, "parents": par.tolist(), "S": S, "alpha": alpha,
                                     "why": "no prompt has positive probability under the prior samples used "
                                            f"({n_samples} samples)"})
    diff = np.where(possible, np.abs(np.nan_to_num(est) - aa).max(axis=1), 0.0)
    if quadrature:  # quadrature error (rule orders n and n + 8), at least round-off
        tol = np.maximum(ROUNDOFF, 10 * err.max(axis=1) if err.ndim > 1 else 10 * err)
        viol, undec = diff > tol, np.zeros(diff.shape, dtype=bool)
    else:  # prior-sample estimate: decide with its error bar
        tol = ctx.z * np.nan_to_num(err).max(axis=1) + 1e-9
        viol = diff > tol
        undec = np.zeros(diff.shape, dtype=bool) if is_dirichlet else (~viol & (diff > 1e-9))
    w = int(np.argmax(np.where(possible, diff - tol, -np.inf)))
    outcome = Outcome.VIOLATED if viol.any() else (Outcome.UNDECIDED if undec.any() else Outcome.HELD)
    return InstanceCheck(
        assumptions=ok, outcome=outcome, margin=float(np.min(np.where(possible, tol - diff, np.inf))),
        record={"graph": gname, "parents": par.tolist(), "S": S, "alpha": alpha,
                "root law": "mu_pi (N's task)" if law == "stationary" else "independent of pi",
                "prompt": prompts[w].tolist(), "query": int(prompts[w][-1]),
                "exact posterior predictive": est[w].tolist(), "add-alpha": aa[w].tolist(),
                "max |difference|": float(diff[w]), "tolerance": float(np.atleast_1d(tol)[w]),
                "prompts differing": int(viol.sum()), "prompts": len(prompts),
                "prompts impossible under the prior (left out)": int((~possible).sum()),
                "method": "Gauss-Jacobi quadrature (theory.dirichlet.bayes_quadrature_s2)"
                          if quadrature else "self-normalised prior samples"})


def _add_alpha_exact_findings(finding_checks, names, gaps, S, T) -> list[Finding]:
    """The exact tier's findings: add-alpha as the posterior predictive, roots ~ mu_pi (N's code
    calls it ``bayes``) and roots independent of pi (outside N's task: conjugacy)."""
    out = []
    for law, cs in finding_checks.items():
        r = summarize_instances("exact", cs, names[law], what="add-alpha == exact posterior predictive, roots "
                                + ("~ mu_pi" if law == "stationary" else "independent of pi"))
        worst = max((c.record.get("max |difference|", 0.0) for c in cs), default=0.0)
        n_diff = sum(c.record.get("prompts differing", 0) for c in cs)
        n_all = sum(c.record.get("prompts", 0) for c in cs)
        if law == "stationary":
            if r.verdict is Verdict.FAIL and gaps:
                chain = sorted(k for k in gaps if k[0] == "chain")  # N's chain task, N's alpha where run
                key = ("chain", N_ALPHA) if ("chain", N_ALPHA) in gaps else (chain[0] if chain else max(gaps))
                detail = (f"exact, S={S}, T={T}, {key[0]}, alpha={key[1]:g}: add-alpha's loss exceeds the Bayes "
                          f"loss by {gaps[key]:.4f} nats")
            elif r.verdict is Verdict.FAIL:
                detail = (f"S={S}, T={T}: add-alpha misses the posterior predictive of N's task on {n_diff} of "
                          f"{n_all} prompts (max |diff| {worst:.3g})")
            else:
                detail = f"S={S}, T={T}: {r.summary}"
            out.append(Finding(
                FindingKind.REFERENCE_CODE,
                "add-alpha, which N's reference code calls the Bayes predictor (InContextTree.bayes), is the exact "
                f"posterior predictive of N's task (roots ~ mu_pi; S={S}, every prompt of length T={T}, chain, "
                "in-context-function and random graphs)", r.verdict, detail,
                numbers=tuple(Number(f"add-alpha's loss minus the Bayes loss, {g}, alpha={a:g}", v,
                                     note=f"exact, S={S}, T={T}") for (g, a), v in gaps.items()),
                counterexample=r.counterexample))
        else:
            detail = (f"roots independent of pi (not N's task): add-alpha is the exact Bayes predictor "
                      f"(max |diff| {worst:.1e})" if r.verdict is Verdict.PASS else
                      f"roots independent of pi: add-alpha misses the Bayes predictor on {n_diff} of {n_all} "
                      f"prompts (max |diff| {worst:.3g})" if r.verdict is Verdict.FAIL else
                      f"roots independent of pi: {r.summary}")
            out.append(Finding(
                FindingKind.OUTSIDE,
                "with non-query roots independent of pi (outside N's task, where roots ~ mu_pi), the Dirichlet "
                "prior is conjugate and add-alpha is the exact posterior predictive", r.verdict, detail,
                counterexample=r.counterexample))
    return out


# -------------------------------------------------------------------- montecarlo tier --
def _n_t_montecarlo(ctx: Context) -> TierResult:
    """Primary reading: the sampler draws N's task, and L* matches its closed form. Findings
    (Dirichlet priors): the Bayes loss of N's chain task, add-alpha's excess over it, and N's
    code's Bayes line's excess over add-alpha (:func:`_bayes_findings`)."""
    s = ctx.settings
    S, T = int(s["S"]), int(s["T"])
    default = Dirichlet(N_ALPHA)
    prior = (ctx.prior if ctx.prior is not None else default)
    prior = prior if prior.d is not None else prior.bind(S)
    S = prior.d
    checks, structures = _sampler_checks(ctx, ctx.params["sampler"], prior, s["graphs"], S, T, int(s["n_sampler"]))
    alpha = float(prior.alpha) if isinstance(prior, Dirichlet) else None
    found, numbers = _lstar_mc_checks(ctx, prior, alpha, S)
    checks += found
    what = ("the sampler draws N's task (roots ~ mu_pi, query uniform, edges and target ~ pi) and L* matches its "
            "closed form")
    structure = {k: np.concatenate([st[k] for st in structures]) for k in structures[0]}
    sampler_draws = structure_assumptions(structure, "sampler draws")
    if not checks:  # every group too small, e.g. no draw with a unique stationary law
        return TierResult("montecarlo", tier_verdict(sampler_draws, Outcome.UNDECIDED), Outcome.UNDECIDED,
                          f"{what}: not evaluated — too few draws of {prior.spec()} with a unique stationary law",
                          assumptions=sampler_draws, numbers=numbers,
                          conclusion_without_assumptions="not evaluated: N's task (roots ~ mu_pi) is undefined on "
                                                         "the draws that break it",
                          budget="more draws (n_sampler)")
    res = summarize_instances("montecarlo", checks, [A_IRREDUCIBLE, A_APERIODIC], what=what, numbers=numbers,
                              budget="more prompts (n_sampler) shrink the frequency error bars below freq_tol")
    nonunique = int((~structure["unique stationary law"]).sum())
    replace_assumptions(res, sampler_draws,
                        note=(f"{nonunique} sampler draws without a unique stationary law were left out (N's task is "
                              "undefined there)") if nonunique else "")
    res.numbers.append(Number("seed (sampler sequences)", ctx.seed_for("sampler/sequences"), kind="seed"))
    if s.get("controls", True):
        res.controls += _task_controls(ctx, prior, alpha, S, T)
    if alpha is not None and int(s.get("n_bayes", 0)) > 0:
        findings, nums = _bayes_findings(ctx, alpha, S, T)
        res.findings.extend(findings)
        res.numbers.extend(nums)
    return res


def _lstar_mc_checks(ctx: Context, prior: Prior, alpha: float | None, S: int) -> tuple[list[InstanceCheck], list[Number]]:
    """L* (N Knowl 1's optimal loss, the entropy rate) by Monte Carlo on ``n_loss`` draws of ``prior``
    and, for Dirichlet(``alpha``) rows, against the closed form within ``z`` standard errors + 1e-12."""
    seed_pi = ctx.seed_for("loss/pi")
    pis = _draw(prior, np.random.default_rng(seed_pi), int(ctx.settings["n_loss"]))
    unique = draw_structure(prior, pis)["unique stationary law"]
    n_left_out = int((~unique).sum())
    pis = pis[unique]  # N's task (roots ~ mu_pi) exists only where mu_pi is unique
    lstar_mc = mean_estimate(_entropy_rows(pis).mean(-1), seed_pi)
    numbers = [lstar_mc.number("L* = E[entropy rate] (Monte Carlo)", note=f"prior {prior.spec()}, S={S}" + (
        f"; {n_left_out} draws without a unique stationary law left out" if n_left_out else ""))]
    if alpha is None:
        return [], numbers
    lstar = float(ctx.params["lstar"](alpha, S))
    numbers.append(Number("L* = psi(S alpha + 1) - psi(alpha + 1) (the formula under test)", lstar,
                          note="theory.dirichlet.dirichlet_row_entropy"))
    tol = ctx.z * lstar_mc.stderr + 1e-12
    out = compare(tol, abs(lstar_mc.value - lstar))
    return [InstanceCheck(assumptions={}, outcome=Outcome.HELD if out is not Outcome.VIOLATED else out,
                          margin=tol - abs(lstar_mc.value - lstar),
                          record={"check": "L* formula vs Monte Carlo", "formula": lstar, "monte carlo": lstar_mc.value,
                                  "stderr": lstar_mc.stderr, "seed": seed_pi})], numbers


def _task_controls(ctx: Context, prior: Prior, alpha: float | None, S: int, T: int) -> list[Control]:
    """Samplers of a wrong law through the tier's own checks (:func:`_sampler_checks`,
    :func:`_lstar_mc_checks`); each must FAIL: non-query roots ~ Unif[S] instead of mu_pi, the query
    ~ mu_pi instead of Unif[S], and (Dirichlet priors) rows ~ Dirichlet(10 alpha) instead of
    Dirichlet(alpha), judged against the closed form at alpha."""
    s = ctx.settings
    graphs = s["graphs"][:1]  # the laws under test do not depend on the graph: the first one is enough
    cases = [("sampler with non-query roots ~ Unif[S]", "roots not from mu_pi (Knowl 2 draws them from mu_pi)",
              lambda: _sampler_checks(ctx, sampler_uniform_roots, prior, graphs, S, T, int(s["n_sampler"]))[0]),
             ("sampler with the query ~ mu_pi", "the query is not uniform (Knowl 2: s_T ~ Unif[S])",
              lambda: _sampler_checks(ctx, sampler_query_from_mu, prior, graphs, S, T, int(s["n_sampler"]))[0])]
    if alpha is not None:
        cases.append((f"rows ~ Dirichlet({10 * alpha:g}) in place of Dirichlet({alpha:g})",
                      "pi is not drawn from the prior the closed form of L* is for",
                      lambda: _lstar_mc_checks(ctx, Dirichlet(10 * alpha).bind(S), alpha, S)[0]))
    out = []
    for name, mechanism, run in cases:
        found = run()
        res = summarize_instances("montecarlo", found, [A_IRREDUCIBLE, A_APERIODIC], what=name)
        rec = res.counterexample or min(found, key=lambda c: c.margin).record
        if "p_value" in rec:
            deciding = (f"{rec['check']} ({rec['graph']}): X2 = {rec['X2']:.1f}, df {rec['df']}, p = {rec['p_value']:.2g}"
                        f" (rejected below {rec['rejection level (Bonferroni)']:.2g})")
        else:
            deciding = (f"L* Monte Carlo {rec['monte carlo']:.4f} ± {rec['stderr']:.1g} vs closed form {rec['formula']:.4f}"
                        " (must agree within z s.e.)")
        out.append(Control(name, mechanism, res.verdict, deciding))
    return out


def _richardson_estimate(terms: dict, seed: int) -> tuple[Estimate, Estimate, Estimate, float]:
    """``(extrapolated mean, correction, residual, error bar)`` of one :func:`bayes_gap_richardson` term.

    The residual ``(g_R(K/2) - g_R(K)) / 3`` estimates the ``O(1/K^2)`` bias left after
    extrapolation; the error bar combines the standard error over prompts with that residual
    and its own standard error (so an unremoved bias widens the bar instead of hiding)."""
    rich = mean_estimate(terms["richardson"], seed)
    corr = mean_estimate(terms["correction"], seed)
    resid = mean_estimate((terms["richardson_half"] - terms["richardson"]) / 3.0, seed)
    return rich, corr, resid, math.sqrt(rich.stderr ** 2 + resid.value ** 2 + resid.stderr ** 2)


def _bayes_findings(ctx: Context, alpha: float, S: int, T: int) -> tuple[list[Finding], list[Number]]:
    """The reference code's "Bayes" on N's chain task (``S``, ``T``, ``alpha``; roots ~ mu_pi).

    With ``a`` add-alpha, ``P*`` the posterior predictive and ``pi_q = pi(s_T, .)``:

    - add-alpha's loss ``= L* + E[KL(pi_q || a)]`` on ``n_bayes`` prompts (``E[H(pi_q)] = L*``
      exactly, the query being uniform and independent of pi: a control variate with known mean);
    - add-alpha's excess over the Bayes loss ``= E[KL(P* || a)]`` (small, low variance) on
      ``n_gap`` further prompts with ``P*`` by importance sampling
      (``sim.papers.nichani.task.bayes_gap_richardson``: ``gap_samples`` draws of the conjugate posterior
      per prompt, weight ``mu_pi`` of the roots, ``O(1/K)`` bias removed by Richardson);
    - Bayes loss ``=`` add-alpha's loss minus its excess (independent prompts: errors in quadrature),
      and by a second route ``E[H(a)] + E[H(P*) - H(a)]`` as a consistency number;
    - N's code's line (``InContextTree.bayes`` counts roots as children of the last context token)
      minus add-alpha: the paired difference of their losses on the ``n_bayes`` prompts.
    """
    s = ctx.settings
    n_big, n_gap, K = int(s["n_bayes"]), int(s["n_gap"]), int(s["gap_samples"])
    z = ctx.z
    par = n_graph("chain", T)
    lstar = dirichlet_row_entropy(alpha, S)  # N's L* for Dirichlet rows (the exact tier checks the formula)
    where = f"N's chain task (S={S}, T={T}, alpha={alpha:g}, roots ~ mu_pi)"
    short = "N's chain task" if (S, T, alpha) == (N_S, N_T, N_ALPHA) else f"the chain task (S={S}, T={T})"
    seed_pi, seed_seq = ctx.seed_for("bayes/pi"), ctx.seed_for("bayes/sequences")
    rng_pi, rng_seq = np.random.default_rng(seed_pi), np.random.default_rng(seed_seq)
    cols = {k: [] for k in ("ce", "ce_code", "h_aa", "h_row")}
    chunk = 25_000
    for lo in range(0, n_big, chunk):
        ctx.progress(f"N.T Bayes loss: prompts {lo + 1}-{min(n_big, lo + chunk)} of {n_big}")
        m = min(chunk, n_big - lo)
        pis = dirichlet_rows(rng_pi, alpha, m, S)
        x, _ = sample_n_prompts(rng_seq, pis, par)
        row = pis[np.arange(m), x[:, -1]]
        aa = add_alpha_batch(x, par, alpha, S)
        cols["ce"].append(population_losses(aa, row))
        cols["ce_code"].append(population_losses(add_alpha_batch(x, par, alpha, S, root_source="last"), row))
        cols["h_aa"].append(_entropy_rows(aa))
        cols["h_row"].append(_entropy_rows(row))
    c = {k: np.concatenate(v) for k, v in cols.items()}
    aa_loss = mean_estimate(c["ce"] - (c["h_row"] - lstar), seed_seq)
    h_aa = mean_estimate(c["h_aa"], seed_seq)
    code_minus_aa = mean_estimate(c["ce_code"] - c["ce"], seed_seq)
    # P* by importance sampling on n_gap further prompts
    seed_is = ctx.seed_for("bayes/importance")
    rng_is = np.random.default_rng(seed_is)
    pis = dirichlet_rows(rng_is, alpha, n_gap, S)
    x, _ = sample_n_prompts(rng_is, pis, par)
    ctx.progress(f"N.T Bayes loss: posterior predictive of {n_gap} prompts ({K} importance samples each)")
    terms = bayes_gap_richardson(x, par, alpha, S, K, rng_is)
    gap, gap_corr, gap_resid, gap_err = _richardson_estimate(terms["kl"], seed_is)
    dh, dh_corr, dh_resid, dh_err = _richardson_estimate(terms["entropy_diff"], seed_is)
    bayes = aa_loss.value - gap.value  # independent prompt sets: the errors add in quadrature
    bayes_se = math.hypot(aa_loss.stderr, gap_err)
    bayes2 = h_aa.value + dh.value
    bayes2_se = math.hypot(h_aa.stderr, dh_err)
    code_minus_bayes = code_minus_aa.value + gap.value
    code_minus_bayes_se = math.hypot(code_minus_aa.stderr, gap_err)
    bayes_n = Number(f"Bayes loss of {where}", bayes, stderr=bayes_se, n=n_big, seed=seed_seq, kind="montecarlo",
                     note=f"add-alpha's loss on {n_big} prompts (seed {seed_seq}) minus its excess E[KL(P* || "
                          f"add-alpha)] on {n_gap} prompts, {K} importance samples each (seed {seed_is})")
    gap_n = Number(f"add-alpha's loss minus the Bayes loss, {where}", gap.value, stderr=gap_err, n=n_gap,
                   seed=seed_is, kind="montecarlo",
                   note=f"E[KL(P* || add-alpha)], {K} importance samples per prompt, Richardson-extrapolated; the "
                        "error bar includes the estimated residual bias")
    nums = [
        bayes_n,
        aa_loss.number(f"loss of add-alpha, {where}",
                       note="L* + E[KL(pi(s_T, .) || add-alpha)] (the entropy of pi(s_T, .) as control variate, its "
                            "mean L* exact)"),
        gap_n,
        Number("Bayes loss by a second route (consistency)", bayes2, stderr=bayes2_se, n=n_big, seed=seed_seq,
               kind="montecarlo", note=f"E[H(add-alpha)] ({n_big} prompts) + E[H(P*) - H(add-alpha)] ({n_gap} "
                                       f"prompts, Richardson-extrapolated); differs by {bayes2 - bayes:+.4f}"),
        gap_corr.number("importance-sampling bias removed from the excess (plug-in minus extrapolated)",
                        note=f"O(1/K) with K={K}: KL(hat P_K || a) - [2 KL(hat P_K || a) - KL(hat P_K/2 || a)]"),
        gap_resid.number("residual bias of the excess after extrapolation (estimated)",
                         note="(g_R(K/2) - g_R(K)) / 3: the O(1/K^2) term Richardson leaves"),
        dh.number("E[H(P*) - H(add-alpha)] (Richardson-extrapolated)", note=f"{n_gap} prompts, K={K}"),
        dh_corr.number("importance-sampling bias removed from E[H(P*) - H(add-alpha)]", note=f"K={K}"),
        dh_resid.number("residual bias of E[H(P*) - H(add-alpha)] after extrapolation (estimated)"),
        h_aa.number("E[H(add-alpha)]", note=f"{n_big} prompts"),
        Number("L* (entropy rate, exact)", lstar, note="psi(S alpha + 1) - psi(alpha + 1)"),
    ]
    verdict_gap = Verdict.FAIL if gap.value - z * gap_err > 0 else Verdict.INCONCLUSIVE
    f_gap = Finding(
        FindingKind.REFERENCE_CODE,
        f"add-alpha, which N's reference code calls the Bayes predictor (InContextTree.bayes), is the Bayes predictor "
        f"of {where}", verdict_gap,
        f"add-alpha's loss exceeds the Bayes loss ({bayes:.4f} ± {bayes_se:.4f}) by {gap.value:.4f} ± "
        f"{gap_err:.4f} nats on {short}", numbers=tuple(nums[:4]))
    code_n = code_minus_aa.number(f"N's code's Bayes line minus add-alpha's loss, {where}",
                                  note="paired; InContextTree.bayes counts every non-query root as a child of the "
                                       "last context token")
    code_bayes_n = Number(f"N's code's Bayes line minus the Bayes loss, {where}", code_minus_bayes,
                          stderr=code_minus_bayes_se, kind="montecarlo", note="the two differences added")
    code_loss = mean_estimate(c["ce_code"] - (c["h_row"] - lstar), seed_seq).number(
        f"loss of N's code's count (its plotted Bayes line), {where}", note="L* + E[KL(pi(s_T, .) || code's count)]")
    nums += [code_loss, code_n, code_bayes_n]
    verdict_code = Verdict.FAIL if abs(code_minus_aa.value) - z * code_minus_aa.stderr > 0 else Verdict.INCONCLUSIVE
    f_code = Finding(
        FindingKind.REFERENCE_CODE,
        "N's code plots add-alpha's loss as its Bayes line (InContextTree.bayes counts the DAG's edges only)",
        verdict_code,
        f"N's code's Bayes line is {code_minus_aa.value:.4f} ± {code_minus_aa.stderr:.4f} nats above add-alpha "
        f"(it counts roots as edges)", numbers=(code_loss, code_n, code_bayes_n))
    return [f_gap, f_code], nums


N_T_CLAIM = Claim(
    id="N.T",
    title="N's task: the sampler's laws and L* = the entropy rate",
    source=Source("N", "Knowl 2 (the task), Knowl 1 (L*); findings: reference code problems.InContextTree.bayes",
                  "pi ~ P_pi; s_i ~ mu_pi (roots), s_i ~ pi(.|s_p(i)); s_T ~ Unif[S]; y ~ pi(.|s_T); "
                  "L* := -E_pi[(1/S) sum_{s,s'} pi(s'|s) log pi(s'|s)]"),
    statement=(
        "Primary reading: N's task as Knowl 2 defines it, and N's L* (Knowl 1) (seed 002, lines 114-127). Reported "
        "as findings: add-alpha, which only N's reference code calls the Bayes predictor (InContextTree.bayes and "
        "its plot legend), against the true Bayes predictor (exact at S=2; on N's chain task S=10, T=20, "
        "alpha=0.1 the Bayes loss with its standard error and add-alpha's excess over it); the code's Bayes line "
        "against add-alpha (it counts roots as children of the last context token); and, outside N's task, "
        "add-alpha with roots independent of pi (conjugacy: exact). "
        "(1) montecarlo: sim.sampling.sample_n_prompts draws N's task (S=10, T=20, Dirichlet(0.1) rows; chain and "
        "in-context-function graphs as in N's code): a non-query root ~ mu_pi, the query ~ Unif[S] independent "
        "of pi, a random edge's parent ~ mu_pi and child ~ pi(parent, .), the target ~ pi(query, .), each checked "
        "by a chi-square test on ranks conditional on each prompt's pi (exact covariance, Bonferroni at the "
        "z-level) and with every cell frequency within freq_tol (margin z standard errors); "
        "L* = psi(S alpha + 1) - psi(alpha + 1) against the Monte Carlo mean entropy rate (z standard errors). "
        "(2) exact: the closed form against N's definition by quadrature of the Beta marginal of a Dirichlet "
        "row (S in {2, 10}, alpha in {0.1, 1}; tolerance QUADPACK's error estimate plus 64 ulp), and L* at most "
        "the exact Bayes loss of N's task at S=2 (every prompt of length 6 of the chain, in-context and random "
        "graphs; quadrature; L* is the minimal possible loss). "
        "Findings' method: Bayes loss = add-alpha's loss - E[KL(P* || add-alpha)]; add-alpha's loss = L* + "
        "E[KL(pi(s_T, .) || add-alpha)] (control variate with exact mean) on many prompts; P* the posterior "
        "predictive by importance sampling (conjugate-posterior proposal, weight mu_pi of the roots) on fewer "
        "prompts, its O(1/K) bias removed by Richardson extrapolation from K and K/2 samples (the residual is "
        "measured and enters the error bar); a second route E[H(add-alpha)] + E[H(P*) - H(add-alpha)] is "
        "reported for consistency. "
        "Under a user's prior: a non-Dirichlet prior breaks the closed form's assumption (L* is then the prior "
        "samples' mean entropy rate; the add-alpha findings use prior-sample Bayes, S = the prior's size with "
        "S^T <= 4096 prompts); N Knowl 2's irreducibility and aperiodicity are checked on every draw, draws "
        "without a unique stationary law are left out (roots ~ mu_pi is undefined there) and counted, and the "
        "sampler is checked separately on the draws that break N Knowl 2 but have a unique mu_pi."),
    assumptions=(A_DIRICHLET, A_IRREDUCIBLE, A_APERIODIC),
    checks={"exact": _n_t_exact, "montecarlo": _n_t_montecarlo},
    # n_sampler >= sampler_draws_needed(freq_tol, z=3, graphs): with 20,000 draws at freq_tol 0.02 the worst
    # of ~100 rank cells per graph sat at the tolerance, and the tier was INCONCLUSIVE at some master seeds.
    settings={
        "quick": {"tiers": ("exact", "montecarlo"), "exact_T": 6, "alphas": (0.1, 1.0), "S": N_S, "T": N_T,
                  "graphs": ("chain", "icl"), "n_sampler": 40_000, "freq_tol": 0.02, "n_loss": 50_000,
                  "n_bayes": 200_000, "n_gap": 400, "gap_samples": 512},
        "standard": {"tiers": ("exact", "montecarlo"), "exact_T": 8, "alphas": (0.1, 1.0), "S": N_S, "T": N_T,
                     "graphs": ("chain", "icl", "random"), "n_sampler": 150_000, "freq_tol": 0.01, "n_loss": 400_000,
                     "n_bayes": 600_000, "n_gap": 2000, "gap_samples": 1024},
        "paper": {"tiers": ("exact", "montecarlo"), "exact_T": 10, "alphas": (0.1, 0.5, 1.0), "S": N_S, "T": N_T,
                  "graphs": ("chain", "icl", "random"), "n_sampler": 600_000, "freq_tol": 0.005, "n_loss": 1_000_000,
                  "n_bayes": 2_000_000, "n_gap": 5000, "gap_samples": 2048},
    },
    params={"lstar": dirichlet_row_entropy, "sampler": sample_n_prompts, "predictor": add_alpha_predictive},
    prior_dependent=True,
    graph_input=GraphInput(
        settings={"graphs": "T"}, max_nodes=100,
        replaces="the Monte Carlo tier's own graphs (the sampler's laws are checked on it), at T = "
                 "the graph's positions; its Bayes-loss finding on the chain task follows that T and names it (the "
                 "exact tier keeps its enumeration of every prompt on its own graphs at exact_T)",
        size_note="the Monte Carlo tier draws every position of its prompts and of its Bayes finding's"),
    primary=PrimaryReading(
        statement=("Knowl 2: pi ~ P_pi (irreducible, aperiodic; mu_pi its stationary law); for i = 1..T-1, s_i ~ mu_pi "
                   "if p(i) is empty, else s_i ~ pi(.|s_p(i)); the query s_T ~ Unif([S]) and the target "
                   "y ~ pi(.|s_T). Knowl 1: the minimal possible loss is L* := -E_pi[(1/S) sum_{s,s'} pi(s'|s) "
                   "log pi(s'|s)]."),
        seed="002", lines="114-127",
        setting=("N's code's prior (i.i.d. Dirichlet(alpha) rows, S=10, T=20, alpha=0.1) and graphs (chain, "
                 "in-context function, random tree; at most one parent), for which L* = psi(S alpha + 1) - "
                 "psi(alpha + 1); any prior a user gives, with Knowl 2's assumptions checked on its draws."),
        review=("The checks decide the task's own laws (the sampler, by goodness of fit conditional on each pi) and "
                "N's L* (the closed form against the definition by quadrature; the minimal-loss property against "
                "the exact Bayes loss at S=2). No seed says add-alpha is the Bayes predictor: only N's reference "
                "code calls it `bayes`, so add-alpha against the true Bayes predictor, and the code's own line, "
                "are reference-code findings.")),
)

CLAIMS = [N_T_CLAIM]
