"""The audit itself: every assumption of :data:`~sim.audit.catalogue.ASSUMPTIONS` decided at each
number of states and graph, from closed forms, atoms or seeded draws."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from sim.audit.catalogue import ASSUMPTIONS, DEFAULT_GRAPHS, FALLBACK_DEPTH, ZERO
from sim.audit.graphs import parse_graph
from sim.audit.records import AssumptionAudit, Finding, GraphInfo, PriorAudit
from sim.montecarlo import mean_estimate, proportion_estimate
from sim.priors import Prior, PriorError
from sim.priors import facts
from sim.priors.facts import matrix_record
from sim.seeds import derive_seed
from sim.verdict import Number, format_number
from theory.markov import chain_structure_batch, stationary_batch

__all__ = ["DrawStats", "draw_stats", "audit_prior", "claim_dims"]


@dataclass
class DrawStats:
    """Per-draw (or per-atom) quantities the audit decides on, each an array over the draws."""

    mats: np.ndarray  # (n, d, d)
    weights: np.ndarray  # (n,), sum 1
    exact: bool
    gamma: np.ndarray  # d * min entry
    irreducible: np.ndarray
    aperiodic: np.ndarray
    unique: np.ndarray  # unique stationary law
    delta: np.ndarray
    B: np.ndarray  # non-degeneracy sum, NaN without a unique mu
    info: np.ndarray  # rows differ on the support of the root law


def draw_stats(mats: np.ndarray, weights: np.ndarray, exact: bool) -> DrawStats:
    """N Knowl 2 (:func:`theory.markov.chain_structure_batch`), ``gamma = d min pi``, W's ``delta``
    (``min mu_pi``, or the smallest marginal of the uniform root up to depth
    :data:`~sim.audit.catalogue.FALLBACK_DEPTH` when ``mu_pi`` is not unique), N's non-degeneracy sum
    ``B = sum_s ||pi(.|s) - mu_pi||^2`` and whether the rows differ on the root law's support."""
    n, d, _ = mats.shape
    gamma = d * mats.min(axis=(1, 2))
    structure = chain_structure_batch(mats)
    irreducible, aperiodic = structure["irreducible"], structure["aperiodic"]
    unique = structure["unique stationary law"]
    mu = np.full((n, d), np.nan)
    if unique.any():
        mu[unique] = stationary_batch(mats[unique])
    delta = np.empty(n)
    B = np.full(n, np.nan)
    info = np.ones(n, dtype=bool)
    for k in range(n):
        pi = mats[k]
        if unique[k]:
            m = mu[k]
            delta[k] = m.min()
            B[k] = float(((pi - m[None, :]) ** 2).sum())
            support = m > 0
        else:
            p, low = np.full(d, 1.0 / d), 1.0 / d
            for _ in range(FALLBACK_DEPTH):
                p = p @ pi
                low = min(low, float(p.min()))
            delta[k] = low
            support = np.ones(d, dtype=bool)
        rows = pi[support]
        info[k] = bool(np.abs(rows - rows[0]).max() > 1e-12) if rows.shape[0] > 1 else False
    return DrawStats(mats, weights, exact, gamma, irreducible, aperiodic, unique, delta, B, info)


# ----------------------------------------------------------------------------- helpers --
def _quantile_number(x: np.ndarray, q: float, name: str, seed: int, note: str = "") -> Number:
    """A sample quantile with an error bar from the order statistics' binomial spread."""
    x = np.sort(np.asarray(x, dtype=float))
    n = x.size
    v = float(np.quantile(x, q))
    half = 1.96 * math.sqrt(n * q * (1 - q))
    lo, hi = int(max(0, math.floor(n * q - half))), int(min(n - 1, math.ceil(n * q + half)))
    se = max(0.0, float(x[hi] - x[lo]) / (2 * 1.96))
    return Number(name, v, stderr=se, n=n, seed=seed, kind="montecarlo", note=note or f"{q:.0%} quantile")


def _fraction(ok: np.ndarray, st: DrawStats, seed: int, name: str) -> Number:
    if st.exact:
        return Number(name, float(st.weights[ok].sum()), kind="exact", note=f"over {len(ok)} atoms")
    est = proportion_estimate(int(ok.sum()), len(ok), seed=seed)
    return est.number(name, note="Agresti-Coull standard error")


def _pct(x: float) -> str:
    return f"{100 * x:.3g}%"


def _fmt(x: float) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format_number(x)


def _witness_draw(st: DrawStats, bad: np.ndarray, what: str) -> tuple[str, dict]:
    k = int(np.flatnonzero(bad)[0])
    label = "atom" if st.exact else "draw"
    rec = {label: k, "pi": matrix_record(st.mats[k])}
    if st.exact:
        rec["weight"] = float(st.weights[k])
    return f"{label} {k} {what}", rec


# ------------------------------------------------------------------------- one d at a time --
class _DAudit:
    """Everything the audit computes at one number of states ``d``."""

    def __init__(self, prior: Prior, d: int, n_draws: int, seed: int, z: float):
        self.prior, self.d, self.z = prior, d, z
        self.seed = derive_seed(seed, "audit", d)
        self.draws = facts.draws_of(prior, n_draws, self.seed)
        self.st = draw_stats(self.draws.mats, self.draws.weights, self.draws.exact)
        self.where = f"d={d}"
        self.n = len(self.st.weights)

    def _src(self) -> str:
        return f"{self.n} atoms (exact)" if self.st.exact else f"{self.n} draws, seed {self.seed}"

    # -- N Knowl 10 (1) ----------------------------------------------------------------------
    def lower_bound(self) -> Finding:
        st, d, p = self.st, self.d, self.prior
        floor, inf = p.entry_floor(), p.entry_infimum()
        zero = st.gamma <= 0
        nums = []
        if not st.exact:
            nums += [Number("smallest gamma = d min pi among the draws", float(st.gamma.min()), n=self.n, seed=self.seed,
                            kind="montecarlo", note="extreme value: no error bar"),
                     _quantile_number(st.gamma, 0.01, "gamma: 1% quantile", self.seed),
                     _quantile_number(st.gamma, 0.5, "gamma: median", self.seed),
                     _fraction(zero, st, self.seed, "fraction of draws with a zero entry")]
        if inf is not None:
            g = d * inf
            nums.insert(0, Number("gamma = d * ess inf min pi", g, kind="exact",
                                  note="from the prior's closed form" if not st.exact else "over all atoms"))
            how = "exact" if st.exact else ("guaranteed" if g > 0 else "analytic")
            if g > 0:
                return Finding(self.where, "holds", how, f"every entry >= {_fmt(inf)} = gamma/d with gamma = {_fmt(g)}",
                               nums, gamma=g)
            if zero.any():
                text, rec = _witness_draw(st, zero, "has a zero entry")
                return Finding(self.where, "fails", how, f"no gamma > 0: {text}", nums, witness=rec, gamma=0.0)
            return Finding(self.where, "fails", how,
                           "no gamma > 0: entries come arbitrarily close to 0 under this prior (essential infimum 0; "
                           f"smallest gamma among {self._src()}: {_fmt(float(st.gamma.min()))})", nums, gamma=0.0)
        if floor is not None and floor > 0:
            nums.insert(0, Number("guaranteed floor gamma >= d * floor", d * floor, kind="exact",
                                  note="from the prior's closed form (a lower bound)"))
            return Finding(self.where, "holds", "guaranteed", f"every entry >= {_fmt(floor)}, so gamma >= {_fmt(d * floor)}",
                           nums, gamma=d * floor)
        if zero.any():
            text, rec = _witness_draw(st, zero, "has a zero entry")
            frac = float(st.weights[zero].sum())
            return Finding(self.where, "fails", "estimated", f"no gamma > 0: {_pct(frac)} of draws have a zero entry "
                           f"({text})", nums, witness=rec, gamma=0.0)
        g = float(st.gamma.min())
        return Finding(self.where, "undecided", "estimated",
                       f"every one of {self.n} draws is positive (smallest gamma {_fmt(g)}), but an almost-sure lower "
                       "bound cannot be read off samples; a prior with a closed-form floor (e.g. floor(...)) decides it",
                       nums, gamma=g)

    # -- N Knowl 10 (2) ----------------------------------------------------------------------
    def nondegeneracy(self, gamma1: float | None) -> Finding:
        st, d = self.st, self.d
        ok = st.unique
        if not ok.any():
            return Finding(self.where, "undecided", "exact" if st.exact else "estimated",
                           "the stationary law is not unique on any draw, so mu_pi (and item 2) is undefined")
        B, w = st.B[ok], st.weights[ok] / st.weights[ok].sum()
        note = "" if ok.all() else f" ({_pct(1 - float(st.weights[ok].sum()))} of draws have no unique mu_pi and are left out)"
        nums = []
        if st.exact:
            EB, se = float((w * B).sum()), 0.0
            nums.append(Number("E[sum_s ||pi(.|s) - mu||^2]", EB, kind="exact", note="over all atoms"))
            nums.append(Number("a.s. reading: smallest sum over the atoms", float(B.min()), kind="exact"))
            held = EB > ZERO
            status = "holds" if held else "fails"
        else:
            if B.size >= 2:
                est = mean_estimate(B, seed=self.seed)
                EB, se = est.value, est.stderr
                nums.append(est.number("E[sum_s ||pi(.|s) - mu||^2]"))
            else:
                EB, se = float(B[0]), 0.0
            g2 = np.sqrt(d * np.clip(B, 0, None))
            nums += [Number("a.s. reading: smallest per-draw gamma_2 = sqrt(S sum)", float(g2.min()), n=B.size,
                            seed=self.seed, kind="montecarlo", note="extreme value: no error bar"),
                     _quantile_number(g2, 0.01, "per-draw gamma_2: 1% quantile", self.seed)]
            if np.all(B <= ZERO):
                status = "fails"
            elif EB - self.z * se > 0:
                status = "holds"
            else:
                status = "undecided"
        if gamma1 is not None and gamma1 > 0:
            meets = B >= gamma1 ** 2 / d
            nums.append(Number(f"a.s. reading: fraction of draws with sum >= gamma_1^2/S (gamma_1 = {_fmt(gamma1)})",
                               float((w * meets).sum()), kind="exact" if st.exact else "montecarlo",
                               stderr=0.0 if st.exact else proportion_estimate(int(meets.sum()), B.size).stderr,
                               n=None if st.exact else B.size, seed=None if st.exact else self.seed))
        g = math.sqrt(max(d * EB, 0.0))
        how = "exact" if st.exact else "estimated"
        if status == "fails":
            bad = np.flatnonzero(ok)[B <= ZERO]
            mask = np.zeros(self.n, dtype=bool)
            mask[bad] = True
            text, rec = _witness_draw(st, mask, "mixes in one step (every row equals mu_pi)")
            return Finding(self.where, "fails", how, f"E[sum_s ||pi(.|s) - mu||^2] = {_fmt(EB)}: no gamma > 0 ({text}){note}",
                           nums, witness=rec, gamma=0.0)
        degenerate = float(w[B <= ZERO].sum())
        if degenerate > 0:
            note += (f"; almost-sure reading: {_pct(degenerate)} of the {'mass' if st.exact else 'draws'} mix in one step "
                     "(sum = 0), so no gamma > 0 holds almost surely")
        if status == "holds":
            return Finding(self.where, "holds", how, f"E[sum_s ||pi(.|s) - mu||^2] = {_fmt(EB)}"
                           + (f" ± {_fmt(se)}" if se else "") + f", so gamma_2 = sqrt(S E) = {_fmt(g)}{note}", nums, gamma=g)
        return Finding(self.where, "undecided", how, f"E[sum] = {_fmt(EB)} ± {_fmt(se)} is within {self.z:g} s.e. of 0"
                       f"{note}", nums, gamma=g)

    # -- N Knowl 10 (3) ----------------------------------------------------------------------
    def symmetry(self) -> Finding:
        return self._finding(facts.symmetry(self.prior, self.draws, self.z))

    def uniform_mean(self) -> Finding:
        return self._finding(facts.uniform_mean(self.prior, self.draws, self.z))

    def _finding(self, fact: facts.Fact) -> Finding:
        return Finding(self.where, fact.status, fact.how, fact.summary, fact.numbers, witness=fact.witness)

    # -- per-draw properties (W Lemmas 3-4, N Knowl 2) -------------------------------------
    def per_draw(self, ok: np.ndarray, *, name: str, broken: str, guaranteed: str | None = None,
                 numbers: Sequence[Number] = ()) -> Finding:
        st = self.st
        nums = [_fraction(ok, st, self.seed, f"fraction of {'atoms' if st.exact else 'draws'} where {name}")] + list(numbers)
        if guaranteed:
            return Finding(self.where, "holds", "guaranteed", guaranteed, nums)
        if ok.all():
            if st.exact:
                return Finding(self.where, "holds", "exact", f"{name} on every atom", nums)
            return Finding(self.where, "holds", "estimated", f"{name} on all {self.n} draws (a failure rate above "
                           f"{_fmt(3 / self.n)} would have shown with 95% probability)", nums)
        text, rec = _witness_draw(st, ~ok, broken)
        frac = float(st.weights[~ok].sum())
        return Finding(self.where, "fails", "exact" if st.exact else "estimated",
                       f"fails on {_pct(frac)} of {'the mass' if st.exact else 'draws'} ({text})", nums, witness=rec)


# ------------------------------------------------------------------------------ the audit --
def audit_prior(prior: Prior, *, dims: Sequence[int], n_draws: int = 2000, seed: int = 0,
                graphs: Sequence[str | GraphInfo] = DEFAULT_GRAPHS, z: float = 3.0,
                progress: Callable[[str], None] = lambda m: None) -> PriorAudit:
    """audit_prior(prior, *, dims, n_draws=2000, seed=0, graphs=DEFAULT_GRAPHS, z=3.0, progress=lambda message: None)

    Audit ``prior`` against every assumption in :data:`~sim.audit.catalogue.ASSUMPTIONS` at each
    ``d`` in ``dims`` (the prior's own ``d`` if it fixes one) and for each graph (a spec
    :func:`~sim.audit.graphs.parse_graph` reads, or a :class:`~sim.audit.records.GraphInfo`).

    Raises :class:`~sim.priors.PriorError` if the prior cannot be bound to a size or its sampler fails.
    """
    t0 = time.perf_counter()
    if prior.d is not None:
        dims = [prior.d]
    dims = sorted({int(d) for d in dims})
    if not dims:
        raise PriorError("no sizes d to audit at")
    ginfos = [g if isinstance(g, GraphInfo) else parse_graph(g) for g in graphs]
    for d in dims:  # fail fast: a prior that cannot be bound or drawn at some size says so at once
        (prior if prior.d == d else prior.bind(d)).sample(np.random.default_rng(0), 1)
    audits = {a.key: AssumptionAudit(a.key, a.name, a.source, a.statement, a.feeds) for a in ASSUMPTIONS}
    gamma_table = []
    for d in dims:
        progress(f"auditing d={d}")
        bound = prior if prior.d == d else prior.bind(d)
        da = _DAudit(bound, d, n_draws, seed, z)
        st = da.st
        floor = bound.entry_floor()
        positive = floor is not None and floor > 0
        f1 = da.lower_bound()
        audits["N.K10.1"].findings.append(f1)
        f2 = da.nondegeneracy(f1.gamma if f1.status == "holds" else None)
        audits["N.K10.2"].findings.append(f2)
        audits["N.K10.3a"].findings.append(da.symmetry())
        audits["N.K10.3b"].findings.append(da.uniform_mean())
        gnote = f"every entry >= {_fmt(floor)} > 0 by construction" if positive else None
        audits["W.L3.gamma"].findings.append(da.per_draw(
            st.gamma > 0, name="gamma = d min pi > 0", broken="has a zero entry (gamma = 0)", guaranteed=gnote))
        audits["W.L3.delta"].findings.append(da.per_draw(
            st.delta > 0, name="delta > 0", broken="has a state of marginal probability 0",
            guaranteed=f"mu_pi >= min pi >= {_fmt(floor)} by construction" if positive else None,
            numbers=[] if st.exact else [_quantile_number(st.delta, 0.01, "delta: 1% quantile", da.seed)]))
        audits["W.L4.info"].findings.append(da.per_draw(
            st.info, name="I(x_h; x_pa(h)) > 0", broken="has equal rows on the support of the root law (I = 0)"))
        audits["N.K2.irreducible"].findings.append(da.per_draw(
            st.irreducible, name="pi is irreducible", broken="is reducible",
            guaranteed="every entry is positive by construction" if positive else None))
        audits["N.K2.aperiodic"].findings.append(da.per_draw(
            st.aperiodic, name="every closed class is aperiodic", broken="has a periodic closed class",
            guaranteed="every entry is positive by construction" if positive else None))
        for g in ginfos:
            ok = g.T_eff >= d
            audits["N.K10.5"].findings.append(Finding(
                f"{g.name}, d={d}", "holds" if ok else "fails", "exact",
                f"T_eff = {g.T}/{g.max_leaves} = {_fmt(g.T_eff)} {'>=' if ok else '<'} S = {d}"
                + ("" if not f1.gamma else f" (T_eff gamma / S = {_fmt(g.T_eff * f1.gamma / d)})"),
                [Number("T_eff", g.T_eff, kind="exact", note=f"T = {g.T}, max leaves {g.max_leaves}")]))
            g1 = f1.gamma if f1.status != "fails" else 0.0
            g2 = f2.gamma if f2.status != "fails" else 0.0
            g4 = 1.0 - g.root_fraction
            parts = {"item 1 (lower bound)": g1, "item 2 (non-degeneracy)": g2, "item 4 (1 - r)": g4}
            known = {k: v for k, v in parts.items() if v is not None}
            gmin = min(known.values()) if known else None
            limit = min(known, key=known.get) if known else ""
            limit_finding = {"item 1 (lower bound)": f1, "item 2 (non-degeneracy)": f2}.get(limit)
            gamma_table.append({"d": d, "graph": g.name, "gamma_1": g1, "gamma_2": g2, "one_minus_r": g4,
                                "gamma": gmin, "limited_by": limit,
                                "estimated": limit_finding is not None and (limit_finding.how == "estimated"
                                                                            or limit_finding.status == "undecided")})
    for g in ginfos:
        ok = g.root_fraction < 1
        audits["N.K10.4"].findings.append(Finding(
            g.name, "holds" if ok else "fails", "exact",
            f"r = {g.n_roots}/{g.T} = {_fmt(g.root_fraction)}: " + (f"allows gamma <= {_fmt(1 - g.root_fraction)}" if ok
                                                                   else "every position is a root, no gamma > 0"),
            [Number("root fraction r", g.root_fraction, kind="exact", note=f"{g.n_roots} roots of {g.T}")],
            gamma=1 - g.root_fraction))
    notes = []
    if prior.d is None:
        notes.append(f"the prior does not fix d: audited at d = {', '.join(map(str, dims))} (the sizes the selected claims "
                     "draw at, or --d)")
    return PriorAudit(spec=prior.spec(), dims=list(dims), n_draws=n_draws, seed=seed, z=z, graphs=ginfos,
                      assumptions=list(audits.values()), gamma_table=gamma_table, notes=notes,
                      elapsed_s=round(time.perf_counter() - t0, 3))


def claim_dims(claims, profile: str) -> list[int]:
    """The numbers of states the claims draw at in ``profile`` (settings ``dims``, ``d``, ``S``, ``max_d``)."""
    out: set[int] = set()
    for c in claims:
        s = c.settings.get(profile, {})
        for key in ("dims", "d_values", "Ss"):
            v = s.get(key)
            if isinstance(v, (list, tuple)):
                out.update(int(x) for x in v if isinstance(x, (int, np.integer)) and x >= 1)
        for key in ("d", "S"):
            v = s.get(key)
            if isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1:
                out.add(int(v))
        v = s.get("max_d")
        if isinstance(v, (int, np.integer)) and v >= 2:
            out.update(range(2, int(v) + 1))
    return sorted(out)
