"""The facts about a prior that the assumptions of the papers need, decided in one place.

N Knowl 10's assumption 3 asks that the prior be *relabelling-invariant* (``sigma^{-1} pi
sigma`` has the law of ``pi`` for every permutation ``sigma`` of the states) and have a
*uniform mean* (``E[pi] = 11^T / S``). The prior audit (:mod:`sim.audit`) reports both, and
N.K3 builds its finite stand-in for a user's prior from them; both read them here, so they
cannot disagree.

Each fact is decided, in this order:

- ``guaranteed`` / ``analytic``: from the prior's closed form (:meth:`Prior.symmetric <sim.priors.Prior.symmetric>`,
  :meth:`Prior.mean_matrix <sim.priors.Prior.mean_matrix>`), true or provably false;
- ``exact``: over every atom of a finite prior (:meth:`Prior.atoms <sim.priors.Prior.atoms>`);
- ``estimated``: from ``n`` seeded draws, by z-tests at the level of one ``z``-test with a
  Bonferroni correction over the statistics (a rejection shows the fact fails at that level;
  passing is consistency, not proof).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats as sstats

from sim.montecarlo import mean_estimate
from sim.priors.base import Prior, asymmetric_relabelling
from sim.verdict import Number, format_number

__all__ = ["Draws", "Fact", "draws_of", "symmetry", "uniform_mean", "bonferroni_alpha", "matrix_record", "ROUNDOFF"]

#: A Monte Carlo mean within this of its target differs by round-off only (a mean of constants).
ROUNDOFF = 1e-12
#: Largest deviation of an exact mean from 1/S that is still round-off.
EXACT_MEAN_TOL = 1e-12


@dataclass(frozen=True)
class Draws:
    """What a fact is decided on: the atoms and weights of a finite prior (``exact``), or ``n``
    seeded draws with equal weights."""

    mats: np.ndarray  # (n, d, d)
    weights: np.ndarray  # (n,), sum 1
    exact: bool
    seed: int | None = None

    @property
    def d(self) -> int:
        return self.mats.shape[-1]

    def source(self) -> str:
        """What the facts were decided on: ``"<n> atoms (exact)"`` or ``"<n> draws, seed <seed>"``."""
        n = len(self.weights)
        return f"{n} atoms (exact)" if self.exact else f"{n} draws, seed {self.seed}"


def draws_of(prior: Prior, n: int, seed: int) -> Draws:
    """The atoms of ``prior`` (positive weights, renormalised) when it has a finite support, else
    ``n`` draws from ``numpy.random.default_rng(seed)``. ``prior`` must be bound to a size."""
    atoms = prior.atoms()
    if atoms is not None:
        w, mats = atoms
        keep = w > 0
        return Draws(mats[keep], w[keep] / w[keep].sum(), exact=True)
    mats = prior.sample(np.random.default_rng(seed), n)
    return Draws(mats, np.full(n, 1.0 / n), exact=False, seed=seed)


@dataclass
class Fact:
    """A decided fact: ``status`` holds | fails | undecided, ``how`` guaranteed | analytic | exact
    | estimated, one line saying why, the numbers behind it and, when it fails, a witness."""

    status: str
    how: str
    summary: str
    numbers: list[Number] = field(default_factory=list)
    witness: dict[str, Any] | None = None

    @property
    def holds(self) -> bool | None:
        """``True`` / ``False`` when decided, ``None`` when undecided."""
        return {"holds": True, "fails": False}.get(self.status)


def bonferroni_alpha(z: float, m: int) -> float:
    """Per-test two-sided level so that ``m`` tests together keep the level of one ``z``-test."""
    return 2 * sstats.norm.sf(z) / max(m, 1)


def matrix_record(m: np.ndarray) -> list[list[float]]:
    """A matrix as nested lists of floats (JSON round-trips them exactly), for witnesses."""
    return [[float(v) for v in row] for row in m]


# --------------------------------------------------------------------------- symmetry --
def symmetry(prior: Prior, draws: Draws, z: float) -> Fact:
    """Whether ``prior`` (bound to ``d = draws.d`` states) is relabelling-invariant."""
    d, fmt = draws.d, format_number
    if d == 1:
        return Fact("holds", "guaranteed", "one state: nothing to relabel")
    if draws.exact:
        bad = asymmetric_relabelling(draws.weights, draws.mats)
        if bad is None:
            return Fact("holds", "exact", "the law of the atoms is invariant under a transposition and a d-cycle, "
                        "which generate every relabelling")
        return Fact("fails", "exact", f"relabelling by {bad} changes the law of the atoms", witness={"relabelling": bad})
    known = prior.symmetric()
    nums, worst, m = _symmetry_tests(draws)
    if known is True:
        return Fact("holds", "guaranteed", "the prior is relabelling-invariant by construction "
                    f"(Monte Carlo check: largest |z| = {fmt(worst[0])} over {m} statistics)", nums)
    alpha = bonferroni_alpha(z, m)
    if known is False or worst[1] < alpha:
        return Fact("fails", "analytic" if known is False else "estimated", f"not relabelling-invariant: {worst[2]}",
                    nums, witness={"statistic": worst[2]})
    return Fact("holds", "estimated",
                f"no relabelling statistic differs (largest |z| = {fmt(worst[0])}, smallest p = {fmt(worst[1])} "
                f"over {m} tests, Bonferroni level {fmt(alpha)}); consistent with symmetry, not a proof", nums)


def _symmetry_tests(draws: Draws):
    """Statistics a relabelling would leave unchanged: per-entry first and second moments of
    diagonal and off-diagonal entries against a reference entry (paired differences over the
    draws), the cross moment ``pi[s,t] pi[t,s]``, and two-sample KS tests on split halves.
    Returns the four most significant as numbers, the worst ``(|z|, p, text)`` and the count."""
    X, d, seed, fmt = draws.mats, draws.d, draws.seed, format_number
    n = X.shape[0]
    tests = []  # (|z|, p, description, number)

    def paired(a, b, label):
        diff = a - b
        if np.all(diff == 0):
            zz, pval, mean, se = 0.0, 1.0, 0.0, 0.0
        else:
            est = mean_estimate(diff, seed=seed)
            mean, se = est.value, est.stderr
            excess = max(abs(mean) - ROUNDOFF, 0.0)
            zz = 0.0 if excess == 0 else (excess / se if se > 0 else math.inf)
            pval = float(2 * sstats.norm.sf(zz))
        tests.append((zz, pval, f"{label} = {fmt(mean)} ± {fmt(se)} (z = {fmt(zz)})",
                      Number(label, mean, stderr=se, n=n, seed=seed, kind="montecarlo",
                             note="0 under relabelling symmetry")))

    diag = [(s, s) for s in range(d)]
    off = [(s, t) for s in range(d) for t in range(d) if s != t]
    for group, ref in ((diag, (0, 0)), (off, (0, 1))):
        for e in group:
            if e == ref:
                continue
            for power, lab in ((1, ""), (2, "^2")):
                paired(X[:, e[0], e[1]] ** power, X[:, ref[0], ref[1]] ** power,
                       f"E[pi{list(e)}{lab}] - E[pi{list(ref)}{lab}]")
    pairs = [(s, t) for s in range(d) for t in range(s + 1, d)]
    for (s, t) in pairs[1:]:
        paired(X[:, s, t] * X[:, t, s], X[:, 0, 1] * X[:, 1, 0], f"E[pi[{s},{t}] pi[{t},{s}]] - E[pi[0,1] pi[1,0]]")
    half = n // 2
    for a, b in (((0, 0), (1, 1)), ((0, 1), (1, 2) if d > 2 else (1, 0))):
        if half >= 5:
            res = sstats.ks_2samp(X[:half, a[0], a[1]], X[half:2 * half, b[0], b[1]])
            pval = float(res.pvalue)
            label = f"KS two-sample p-value, law of pi{list(a)} vs pi{list(b)} (split halves)"
            tests.append((float(sstats.norm.isf(max(pval, 1e-300) / 2)), pval,
                          f"{label} = {fmt(pval)} (statistic {fmt(float(res.statistic))})",
                          Number(label, pval, n=half, seed=seed, kind="montecarlo",
                                 note=f"KS statistic {fmt(float(res.statistic))}")))
    worst = min(tests, key=lambda t: t[1])
    shown = sorted(tests, key=lambda t: t[1])[:4]
    return [t[3] for t in shown], (worst[0], worst[1], worst[2]), len(tests)


# ------------------------------------------------------------------------ uniform mean --
def uniform_mean(prior: Prior, draws: Draws, z: float) -> Fact:
    """Whether ``E[pi] = 11^T / d`` under ``prior`` (bound to ``d = draws.d`` states).

    Estimated from draws, ``d^2 + 1`` z-tests with one Bonferroni correction: every entry of
    the sample mean against ``1/d``, and the mean trace against 1. The trace test is valid for
    any prior (a uniform mean has trace 1) and is the powerful one for a symmetric prior,
    whose mean is ``a I + b 11^T``: uniform exactly when its trace is 1.
    """
    d, fmt = draws.d, format_number
    target = 1.0 / d
    m = np.einsum("k,kst->st", draws.weights, draws.mats) if draws.exact else prior.mean_matrix()
    if m is not None:
        dev = float(np.abs(m - target).max())
        s, t = np.unravel_index(int(np.abs(m - target).argmax()), m.shape)
        how_ok, how_bad = ("exact", "exact") if draws.exact else ("guaranteed", "analytic")
        nums = [Number("max |E[pi] - 1/S|", dev, kind="exact", tolerance=EXACT_MEAN_TOL, note=f"at entry [{s}, {t}]")]
        if dev <= EXACT_MEAN_TOL:
            return Fact("holds", how_ok, f"E[pi] = 11^T/{d} exactly", nums)
        return Fact("fails", how_bad, f"E[pi][{s}, {t}] = {fmt(float(m[s, t]))} vs 1/S = {fmt(target)} "
                    f"(E[trace pi] = {fmt(float(np.trace(m)))}; uniform needs 1)", nums,
                    witness={"mean": matrix_record(m)})
    X, seed = draws.mats, draws.seed
    n = X.shape[0]
    mean = X.mean(axis=0)
    se = X.std(axis=0, ddof=1) / math.sqrt(n)
    tr = np.trace(X, axis1=1, axis2=2)
    tr_mean, tr_se = float(tr.mean()), float(tr.std(ddof=1) / math.sqrt(n))

    def zscore(dev, err):  # round-off in a mean of constants is not a deviation
        excess = np.clip(np.abs(dev) - ROUNDOFF, 0.0, None)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(excess <= 0, 0.0, np.where(err > 0, excess / err, np.inf))

    zs = zscore(mean - target, se)
    z_tr = float(zscore(np.array(tr_mean - 1.0), np.array(tr_se)))
    s, t = np.unravel_index(int(np.argmax(zs)), zs.shape)
    z_crit = float(sstats.norm.isf(bonferroni_alpha(z, d * d + 1) / 2))
    nums = [Number(f"E[pi][{s},{t}] - 1/S (largest |z| entry)", float(mean[s, t] - target), stderr=float(se[s, t]),
                   n=n, seed=seed, kind="montecarlo", note=f"z = {fmt(float(zs[s, t]))}"),
            Number("E[trace pi] - 1", tr_mean - 1.0, stderr=tr_se, n=n, seed=seed, kind="montecarlo",
                   note=f"z = {fmt(z_tr)}"),
            Number("max_st |E[pi][s,t] - 1/S|", float(np.abs(mean - target).max()), n=n, seed=seed, kind="montecarlo",
                   stderr=float(se.max()), note="largest standard error shown")]
    tests = f"Bonferroni over {d * d} entries and the trace"
    if z_tr > z_crit and z_tr >= zs[s, t]:
        return Fact("fails", "estimated", f"E[trace pi] = {fmt(tr_mean)} ± {fmt(tr_se)} vs 1 (z = {fmt(z_tr)} > "
                    f"{fmt(z_crit)}, {tests})", nums, witness={"mean": matrix_record(mean)})
    if zs[s, t] > z_crit:
        return Fact("fails", "estimated", f"E[pi][{s}, {t}] = {fmt(float(mean[s, t]))} ± {fmt(float(se[s, t]))} vs "
                    f"1/S = {fmt(target)} (z = {fmt(float(zs[s, t]))} > {fmt(z_crit)}, {tests})", nums,
                    witness={"mean": matrix_record(mean)})
    return Fact("holds", "estimated", f"every entry of E[pi] is within {fmt(z_crit)} s.e. of 1/S and E[trace pi] "
                f"within {fmt(z_crit)} s.e. of 1 (largest |z| = {fmt(max(float(zs[s, t]), z_tr))}); consistent with "
                "a uniform mean, not a proof", nums)
