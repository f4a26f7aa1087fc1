"""N's task and its Bayes predictor (claim N.T; N Knowl 2).

Positions are 0-based: a prompt is ``s_0 .. s_{T-1}``; ``s_{T-1}`` is N's query ``s_T``, a
root drawn from ``Unif[S]``, and the target is ``y ~ pi(s_{T-1}, .)``. N's graphs follow N's
reference code (``single_parent.py``, github.com/eshnich/transformers-learn-causal-structure):
``chain`` (``p(i) = i-1``), ``icl`` (in-context function: ``p(i) = i-1`` for odd ``i``) and
``random`` (``p(i) ~ Unif{-1, .., i-1}``), each on the ``T-1`` context positions, with the
query appended as a root. N's code draws ``pi`` with i.i.d. ``Dirichlet(alpha 1_S)`` rows, the
non-query roots from ``mu_pi`` and the query uniformly; its "Bayes" baseline is the add-alpha
count estimator.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
from scipy import stats

from theory import CausalTree
from theory.dirichlet import add_alpha_predictive, bayes_quadrature_s2, dirichlet_row_entropy

from ...montecarlo import mean_estimate
from ...priors import Dirichlet, Prior
from ...sampling import batched_stationary, categorical, dirichlet_rows, sample_n_prompts
from ...verdict import Assumption, Number, Outcome, TierResult, Verdict, compare, tier_verdict
from ..base import Claim, Context, InstanceCheck, Source, summarize_instances
from ..inputs import batch_chain_structure

__all__ = ["N_S", "N_T", "N_ALPHA", "n_graph", "add_alpha_batch", "A_DIRICHLET", "A_IRREDUCIBLE", "A_APERIODIC",
           "draw_structure", "structure_assumptions", "replace_assumptions", "N_T_CLAIM", "CLAIMS"]

#: N's sizes (``single_parent.py`` defaults): alphabet, prompt length, Dirichlet concentration.
N_S, N_T, N_ALPHA = 10, 20, 0.1
ROUNDOFF = 1e-12
GRAPHS = ("chain", "icl", "random")
#: Largest number of prompts the exact tier enumerates (S^T) when a user's prior fixes S > 2.
MAX_EXACT_PROMPTS = 4096

A_DIRICHLET = "prior: i.i.d. Dirichlet(alpha) rows (the conjugate prior)"
A_IRREDUCIBLE = "irreducible: one communicating class, so mu_pi is unique and positive (N Knowl 2)"
A_APERIODIC = "aperiodic: every closed class has period 1 (N Knowl 2)"
STRUCTURE = {A_IRREDUCIBLE: "irreducible", A_APERIODIC: "aperiodic"}


# ----------------------------------------------------------- N Knowl 2 on the draws --
def draw_structure(prior: Prior, pis: np.ndarray) -> dict[str, np.ndarray]:
    """``batch_chain_structure`` of the draws, skipping the work where it is known: a prior with
    a positive entry floor, or Dirichlet rows, give irreducible aperiodic draws (almost surely),
    and so does any draw without a zero entry."""
    n = pis.shape[0]
    out = {k: np.ones(n, dtype=bool) for k in ("unique stationary law", "irreducible", "aperiodic")}
    floor = prior.entry_floor()
    if isinstance(prior, Dirichlet) or (floor is not None and floor > 0):
        return out
    zero = np.flatnonzero((pis <= 0).any(axis=(1, 2)))
    if zero.size:
        sub = batch_chain_structure(pis[zero])
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


# ----------------------------------------------------------------------------- graphs --
def n_graph(name: str, T: int, rng: np.random.Generator | None = None) -> np.ndarray:
    """N's graphs as parent arrays of length ``T``; the query ``T-1`` is a root.

    ``chain``: ``p(i) = i-1`` for ``1 <= i <= T-2``. ``icl``: ``p(i) = i-1`` for odd
    ``i <= T-2``, other positions roots (pairs ``(x_k, f(x_k))``). ``random``:
    ``p(i) ~ Unif{-1, 0, .., i-1}`` for ``i <= T-2`` (needs ``rng``), as N's code draws it.
    """
    if T < 2:
        raise ValueError(f"T must be >= 2 (context and query), got {T}")
    par = np.full(T, -1, dtype=np.int64)
    ctx_pos = np.arange(T - 1)
    if name == "chain":
        par[1:T - 1] = ctx_pos[1:] - 1
    elif name == "icl":
        odd = ctx_pos[ctx_pos % 2 == 1]
        par[odd] = odd - 1
    elif name == "random":
        if rng is None:
            raise ValueError("the random graph needs a generator")
        par[:T - 1] = np.floor(rng.random(T - 1) * (ctx_pos + 1)).astype(np.int64) - 1
    else:
        raise ValueError(f"unknown graph {name!r}; expected one of {GRAPHS}")
    return par


# ------------------------------------------------------------------- count estimators --
def add_alpha_batch(tokens: np.ndarray, parents, alpha: float, S: int, *, root_source: str = "none") -> np.ndarray:
    """Add-alpha predictive ``(alpha + n(q, .)) / (S alpha + n(q))`` for a batch ``(B, T)`` -> ``(B, S)``.

    ``root_source="none"`` counts the DAG's edges only (the estimator N.T is about).
    ``root_source="last"`` reproduces N's reference ``InContextTree.bayes``: a root position
    ``i < T-1`` has ``dag[i] = -1``, and indexing ``seq[-1]`` after the query was split off
    reads the last context token ``s_{T-2}``, so roots count as children of ``s_{T-2}``.
    """
    par = np.asarray(parents)
    B, T = tokens.shape
    q = tokens[:, -1]
    counts = np.zeros((B, S))
    b = np.arange(B)
    for i in range(T - 1):
        p = int(par[i])
        if p >= 0:
            src = tokens[:, p]
        elif root_source == "last":
            src = tokens[:, T - 2]
        else:
            continue
        counts[b, tokens[:, i]] += src == q
    c = counts + alpha
    return c / c.sum(1, keepdims=True)


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
    x[:, -1] = categorical(u[0], batched_stationary(pis))
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
    n_tests = 5 * len(graph_names)
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


def _sampler_group(ctx, sampler, prior, pis, st, mask, ok, name, par, S, T, z, alpha_bonf, tol, rng_seq,
                   rng_pick) -> list[InstanceCheck]:
    """The sampler's tests on one group of draws (meeting N Knowl 2, or not)."""
    out = []
    n = pis.shape[0]
    assumptions = {A_IRREDUCIBLE: bool(st["irreducible"][mask].all()), A_APERIODIC: bool(st["aperiodic"][mask].all())}
    x, y = sampler(rng_seq, pis, par)
    mu = batched_stationary(pis)
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
            mus = batched_stationary(pis)
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
def _n_t_exact(ctx: Context) -> TierResult:
    s = ctx.settings
    S, T = _exact_size(ctx, int(s["exact_T"]))
    predictor = ctx.params["predictor"]
    decide = ctx.params["root_law"]
    user_alpha, is_dirichlet, user_prior = _exact_prior(ctx)
    alphas = [user_alpha] if user_alpha is not None else list(s["alphas"])
    quadrature = is_dirichlet and S == 2  # theory.dirichlet.bayes_quadrature_s2 is exact at S = 2
    names = {"stationary": [A_DIRICHLET, A_IRREDUCIBLE, A_APERIODIC], "independent": [A_DIRICHLET]}
    prompts = np.array(list(itertools.product(range(S), repeat=T)), dtype=np.int64)
    rng_tree = ctx.rng("tree")
    graphs = [(g, n_graph(g, T, rng_tree)) for g in GRAPHS]
    checks = {"stationary": [], "independent": []}
    numbers = []
    structure, samples = None, {}
    if not quadrature:
        n_samples = int(s.get("prior_samples", 20_000))
        prior = user_prior.bind(S) if user_prior.d is None else user_prior
        pis_all = _draw(prior, ctx.rng("prior-samples"), n_samples)
        structure = draw_structure(prior, pis_all)
        # N's task needs roots ~ mu_pi: the mu_pi reading conditions the prior on a unique stationary law.
        samples = {"independent": pis_all, "stationary": pis_all[structure["unique stationary law"]]}
        sample_mus = batched_stationary(samples["stationary"]) if len(samples["stationary"]) else None
        numbers.append(Number("prior samples (self-normalised importance weights)", n_samples,
                              note=f"{int(samples['stationary'].shape[0])} with a unique stationary law enter the "
                                   "mu_pi reading"))
    ok = {"stationary": {A_DIRICHLET: is_dirichlet, A_IRREDUCIBLE: True, A_APERIODIC: True},
          "independent": {A_DIRICHLET: is_dirichlet}}
    if structure is not None:
        ok["stationary"].update({A_IRREDUCIBLE: bool(structure["irreducible"].all()),
                                 A_APERIODIC: bool(structure["aperiodic"].all())})
    for alpha in alphas:
        for gname, par in graphs:
            aa = np.array([predictor(x, par, alpha, S) for x in prompts])
            if quadrature:
                quads = {law: [bayes_quadrature_s2(x, par, alpha, law) for x in prompts] for law in checks}
                exact = {law: (np.array([q.predictive for q in qs]), np.array([q.abserr for q in qs]),
                               np.ones(len(prompts), dtype=bool)) for law, qs in quads.items()}
                probs = np.array([q.prompt_probability for q in quads["stationary"]])
                numbers.append(Number(f"sum of P(prompt), {gname}, alpha={alpha:g}", float(probs.sum()),
                                      tolerance=1e-10, note="all 2^T prompts; must be 1 (quadrature sanity)"))
                bayes = exact["stationary"][0]
                kl = np.sum(bayes * (np.log(bayes) - np.log(aa)), axis=1)
                numbers.append(Number(f"expected log-loss gap add-alpha - Bayes, {gname}, alpha={alpha:g}",
                                      float(probs @ kl), note=f"exact, S=2, T={T}, roots ~ mu_pi: "
                                                              "sum_prompts P(prompt) KL(Bayes || add-alpha)"))
            else:
                exact = {law: (_bayes_by_prior_samples(prompts, par, samples[law], law,
                                                       sample_mus if law == "stationary" else None)
                               if len(samples[law])
                               else (np.full((len(prompts), S), np.nan),) * 2 + (np.zeros(len(prompts), bool),))
                         for law in checks}
            for law in checks:
                est, err, possible = exact[law]
                if not possible.any():  # e.g. no sample with a unique stationary law: nothing to compare
                    checks[law].append(InstanceCheck(
                        assumptions=ok[law], outcome=Outcome.UNDECIDED, margin=0.0,
                        record={"graph": gname, "parents": par.tolist(), "S": S, "alpha": alpha,
                                "why": "no prompt has positive probability under the prior samples used "
                                       f"({len(samples[law])} samples)"}))
                    continue
                diff = np.where(possible, np.abs(np.nan_to_num(est) - aa).max(axis=1), 0.0)
                if quadrature:
                    tol = np.maximum(ROUNDOFF, 10 * err.max(axis=1) if err.ndim > 1 else 10 * err)
                    viol = diff > tol
                    undec = np.zeros_like(viol)
                elif is_dirichlet:  # Dirichlet at S > 2 by prior samples: decide with the error bar
                    sd = np.nan_to_num(err).max(axis=1)
                    tol = ctx.z * sd + 1e-9
                    viol = diff > tol
                    undec = np.zeros_like(viol)
                else:  # prior-sample estimate: decide with its error bar
                    sd = np.nan_to_num(err).max(axis=1)
                    viol = diff > ctx.z * sd + 1e-9
                    undec = ~viol & (diff > 1e-9)
                    tol = ctx.z * sd + 1e-9
                w = int(np.argmax(np.where(possible, diff - tol, -np.inf)))
                outcome = Outcome.VIOLATED if viol.any() else (Outcome.UNDECIDED if undec.any() else Outcome.HELD)
                checks[law].append(InstanceCheck(
                    assumptions=ok[law], outcome=outcome, margin=float(np.min(np.where(possible, tol - diff, np.inf))),
                    record={"graph": gname, "parents": par.tolist(), "S": S, "alpha": alpha,
                            "root law": "mu_pi (N's task)" if law == "stationary" else "independent of pi",
                            "prompt": prompts[w].tolist(), "query": int(prompts[w][-1]),
                            "exact posterior predictive": est[w].tolist(), "add-alpha": aa[w].tolist(),
                            "max |difference|": float(diff[w]), "tolerance": float(np.atleast_1d(tol)[w]),
                            "prompts differing": int(viol.sum()), "prompts": len(prompts),
                            "prompts impossible under the prior (left out)": int((~possible).sum()),
                            "method": "Gauss-Jacobi quadrature (theory.dirichlet.bayes_quadrature_s2)"
                                      if quadrature else "self-normalised prior samples"}))
                numbers.append(Number(f"max |add-alpha - Bayes|, {gname}, alpha={alpha:g}, roots "
                                      + ("~ mu_pi" if law == "stationary" else "independent"),
                                      float(diff.max()), tolerance=float(np.max(tol)),
                                      note=f"over the {int(possible.sum())} possible of {len(prompts)} prompts, "
                                           f"S={S}, T={T}"))
    results = {law: summarize_instances("exact", cs, names[law],
                                        what="add-alpha == exact posterior predictive, roots "
                                             + ("~ mu_pi" if law == "stationary" else "independent of pi"))
               for law, cs in checks.items()}
    if structure is not None:  # N Knowl 2 is about the prior's draws, not the (alpha, graph) instances
        nonunique = int((~structure["unique stationary law"]).sum())
        replace_assumptions(results["stationary"], structure_assumptions(structure, "prior samples"),
                            note=(f"{nonunique} prior samples without a unique stationary law were left out of "
                                  "this reading (N's task is undefined there)") if nonunique else "")
    res = results[decide]
    cwa = res.conclusion_without_assumptions or ""
    if decide == "stationary" and cwa.startswith("violated"):
        # add-alpha is not Bayes under roots ~ mu_pi even with every assumption met (Dirichlet rows,
        # the default): a violation where one breaks says nothing about whether it is needed.
        res.conclusion_without_assumptions = (
            "not informative about these assumptions: the mu_pi reading fails with every assumption met too "
            "(Dirichlet rows: see the readings), so the violation here does not show one is needed; " + cwa)
    res.numbers = numbers
    names = {"stationary": "roots ~ mu_pi (N's task)", "independent": "roots independent of pi (conjugacy)"}
    for law in ("stationary", "independent"):
        r = results[law]
        cex = r.counterexample
        detail = r.summary + ("" if cex is None or "prompt" not in cex else
                              f"; counterexample: {cex['graph']} graph, prompt {cex['prompt']}, alpha={cex['alpha']:g}: "
                              f"Bayes {np.round(cex['exact posterior predictive'], 6).tolist()} vs add-alpha "
                              f"{np.round(cex['add-alpha'], 6).tolist()}; {cex['prompts differing']} of "
                              f"{cex['prompts']} prompts differ")
        res.readings.append({"name": names[law] + (" [decides]" if law == decide else ""),
                             "verdict": r.verdict.value, "detail": detail})
    return res


# -------------------------------------------------------------------- montecarlo tier --
def _n_t_montecarlo(ctx: Context) -> TierResult:
    s = ctx.settings
    S, T = int(s["S"]), int(s["T"])
    default = Dirichlet(N_ALPHA)
    prior = (ctx.prior if ctx.prior is not None else default)
    prior = prior if prior.d is not None else prior.bind(S)
    S = prior.d
    checks, structures = _sampler_checks(ctx, ctx.params["sampler"], prior, s["graphs"], S, T, int(s["n_sampler"]))
    numbers = []
    alpha = float(prior.alpha) if isinstance(prior, Dirichlet) else None
    # L*: N Knowl 1's optimal loss, the entropy rate; exact for Dirichlet rows, MC otherwise.
    seed_pi = ctx.seed_for("loss/pi")
    pis = _draw(prior, np.random.default_rng(seed_pi), int(s["n_loss"]))
    unique = draw_structure(prior, pis)["unique stationary law"]
    n_left_out = int((~unique).sum())
    pis = pis[unique]  # N's task (roots ~ mu_pi) exists only where mu_pi is unique
    ent = -(np.where(pis > 0, pis * np.log(np.where(pis > 0, pis, 1.0)), 0.0)).sum(-1).mean(-1)  # (n,)
    lstar_mc = mean_estimate(ent, seed_pi)
    numbers.append(lstar_mc.number("L* = E[entropy rate] (Monte Carlo)", note=f"prior {prior.spec()}, S={S}" + (
        f"; {n_left_out} draws without a unique stationary law left out" if n_left_out else "")))
    if alpha is not None:
        lstar = dirichlet_row_entropy(alpha, S)
        numbers.append(Number("L* = psi(S alpha + 1) - psi(alpha + 1) (exact)", lstar,
                              note="theory.dirichlet.dirichlet_row_entropy"))
        out = compare(ctx.z * lstar_mc.stderr + 1e-12, abs(lstar_mc.value - lstar))
        checks.append(InstanceCheck(assumptions={}, outcome=Outcome.HELD if out is not Outcome.VIOLATED else out,
                                    margin=ctx.z * lstar_mc.stderr - abs(lstar_mc.value - lstar),
                                    record={"check": "L* exact formula vs Monte Carlo", "exact": lstar,
                                            "monte carlo": lstar_mc.value, "stderr": lstar_mc.stderr,
                                            "seed": seed_pi}))
    # Bayes loss of add-alpha, and N's reference code's root indexing.
    a_est = alpha if alpha is not None else 1.0
    rng_seq = ctx.rng("loss/sequences")
    rng_tree = ctx.rng("tree")
    for name in s["graphs"]:
        par = n_graph(name, T, rng_tree)
        x, _ = sample_n_prompts(rng_seq, pis, par)
        row = pis[np.arange(len(x)), x[:, -1]]  # pi(query, .): N's population form of the loss
        loss = {src: -(row * np.log(add_alpha_batch(x, par, a_est, S, root_source=src))).sum(1)
                for src in ("none", "last")}
        seed = ctx.seed_for("loss/sequences")
        numbers.append(mean_estimate(loss["none"], seed).number(
            f"loss of add-alpha (edges only), {name}", note=f"S={S}, T={T}, alpha={a_est:g}, population form"))
        numbers.append(mean_estimate(loss["last"], seed).number(
            f"loss of N's code's count (roots as children of s_(T-2)), {name}",
            note="InContextTree.bayes indexes seq[-1] for roots"))
        numbers.append(mean_estimate(loss["last"] - loss["none"], seed).number(
            f"overstatement of the Bayes loss by N's code, {name}", note="paired difference"))
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
    # Reading: is add-alpha Bayes at N's sizes? Any predictor computed from the prompt alone that
    # beats it in expected loss proves it is not; the importance-sampling posterior mean is one.
    n_is = int(s.get("n_is_prompts", 0))
    if n_is and alpha is not None:
        res.readings.append(_is_gap_reading(ctx, prior, alpha, S, T, n_is, int(s.get("is_samples", 2000))))
    res.numbers.append(Number("seed (sampler sequences)", ctx.seed_for("sampler/sequences")))
    return res


def _is_gap_reading(ctx, prior, alpha, S, T, n_prompts, n_samples) -> dict:
    """Lower bound on ``loss(add-alpha) - Bayes loss`` at N's sizes (chain graph).

    Any predictor computed from the prompt alone has loss >= the Bayes loss, so if one
    beats add-alpha, add-alpha is not Bayes. The predictor: a self-normalised
    importance-sampling posterior mean ``p1`` (``theory.dirichlet.bayes_predictive_estimate``).
    Its advantage ``E[sum_y pi(q, y) (log p1(y) - log addalpha(y))]`` is estimated with
    ``pi(q, .)`` replaced by an independent second estimate ``p2`` of the posterior mean
    (Rao-Blackwellisation: same expectation up to the O(1/n) bias of self-normalised
    importance sampling, far smaller variance).
    """
    from theory.dirichlet import bayes_predictive_estimate

    seed = ctx.seed_for("is/pi")
    rng = np.random.default_rng(seed)
    pis = _draw(prior, rng, n_prompts)
    par = n_graph("chain", T)
    x, _ = sample_n_prompts(rng, pis, par)
    aa = add_alpha_batch(x, par, alpha, S)
    diffs = np.empty(n_prompts)
    for b in range(n_prompts):
        if b % 100 == 0:
            ctx.progress(f"N.T importance-sampling predictor {b + 1}/{n_prompts}")
        p1, _ = bayes_predictive_estimate(x[b], par, alpha, S, n_samples, seed=rng)
        p2, _ = bayes_predictive_estimate(x[b], par, alpha, S, n_samples, seed=rng)
        diffs[b] = float((p2 * (np.log(np.maximum(p1, 1e-300)) - np.log(aa[b]))).sum())
    gap = mean_estimate(diffs, seed)
    out = compare(gap.value, 0.0, stderr=gap.stderr, z=ctx.z)
    verdict = {Outcome.HELD: "FAIL", Outcome.VIOLATED: "PASS", Outcome.UNDECIDED: "INCONCLUSIVE"}[out]
    return {"name": f"add-alpha is Bayes at N's sizes (chain, S={S}, T={T}, alpha={alpha:g}, roots ~ mu_pi)",
            "verdict": verdict,
            "detail": f"an importance-sampling posterior mean ({n_samples} draws per prompt; a predictor computed "
                      f"from the prompt alone) beats add-alpha by {gap.value:.5f} ± {gap.stderr:.5f} nats "
                      f"(n={n_prompts} prompts, seed {seed}; a lower bound on add-alpha's excess over the Bayes "
                      "loss, up to the O(1/n) bias of self-normalised importance sampling)"}


N_T_CLAIM = Claim(
    id="N.T",
    title="N's task, and add-alpha as its Bayes predictor",
    source=Source("N", "Knowl 2 (task); reference code problems.InContextTree",
                  "pi ~ P_pi; roots ~ mu_pi; s_i ~ pi(.|s_p(i)); s_T ~ Unif[S]; y ~ pi(.|s_T); Bayes = add-alpha counts"),
    statement=("Two parts. (1) montecarlo: sim.sampling.sample_n_prompts draws N's task (S=10, T=20, Dirichlet(0.1) "
               "rows; chain and in-context-function graphs as in N's code): a non-query root ~ mu_pi, the query "
               "~ Unif[S] independent of pi, a random edge's parent ~ mu_pi and child ~ pi(parent, .), the target "
               "~ pi(query, .), each checked by a chi-square test on ranks conditional on each prompt's pi "
               "(exact covariance, Bonferroni at the z-level) and with every cell frequency within 0.01 "
               "(margin z standard errors); L* = psi(S alpha + 1) - psi(alpha + 1) against Monte Carlo. "
               "Reported: add-alpha's loss at N's sizes and how much N's reference code overstates it (it counts "
               "root positions as children of s_(T-2)). (2) exact (S=2, all prompts of chain, in-context and "
               "random graphs, alpha in {0.1, 1}): the exact posterior predictive by quadrature against the "
               "add-alpha estimator (alpha + n(q, .)) / (S alpha + n(q)). Two readings: roots independent of pi "
               "(conjugacy: must agree to round-off) and roots ~ mu_pi as in N's task. The claim is about N's "
               "task, so the mu_pi reading decides the verdict; it fails when the roots carry information "
               "about pi, and the expected log-loss gap is reported. Under a user's prior: a non-Dirichlet prior "
               "breaks the conjugacy assumption (its Bayes predictor is then estimated from prior samples, S = the "
               "prior's size with S^T <= 4096 prompts); N Knowl 2's irreducibility and aperiodicity are checked on "
               "every draw, draws without a unique stationary law are left out (roots ~ mu_pi is undefined there) "
               "and counted, and the sampler is checked separately on the draws that break N Knowl 2 but have a "
               "unique mu_pi."),
    assumptions=(A_DIRICHLET, A_IRREDUCIBLE, A_APERIODIC),
    checks={"exact": _n_t_exact, "montecarlo": _n_t_montecarlo},
    settings={
        "quick": {"tiers": ("exact", "montecarlo"), "exact_T": 6, "alphas": (0.1, 1.0), "S": N_S, "T": N_T,
                  "graphs": ("chain", "icl"), "n_sampler": 20_000, "freq_tol": 0.02, "n_loss": 50_000, "n_is_prompts": 100,
                  "is_samples": 1500},
        "standard": {"tiers": ("exact", "montecarlo"), "exact_T": 8, "alphas": (0.1, 1.0), "S": N_S, "T": N_T,
                     "graphs": ("chain", "icl", "random"), "n_sampler": 100_000, "freq_tol": 0.01, "n_loss": 400_000,
                     "n_is_prompts": 400, "is_samples": 2000},
        "paper": {"tiers": ("exact", "montecarlo"), "exact_T": 10, "alphas": (0.1, 0.5, 1.0), "S": N_S, "T": N_T,
                  "graphs": ("chain", "icl", "random"), "n_sampler": 400_000, "freq_tol": 0.005, "n_loss": 1_000_000,
                  "n_is_prompts": 2000, "is_samples": 5000},
    },
    params={"predictor": add_alpha_predictive, "root_law": "stationary", "sampler": sample_n_prompts},
    prior_dependent=True,
)

CLAIMS = [N_T_CLAIM]
