"""The prior audit: which assumptions of the papers a prior on transition matrices meets,
which claims each one feeds, and, after the claims ran under the prior, whether each
broken assumption looks necessary (a counterexample to a conclusion was found on draws
that break it) or removable (none was found within the budget).

Assumptions audited (``ASSUMPTIONS``):

- N Knowl 10: (1) entrywise lower bound ``min pi > gamma/S`` almost surely; (2) non-degeneracy
  ``sum_s ||pi(.|s) - mu_pi||^2 >= gamma^2/S``; (3) permutation symmetry and uniform mean
  ``E[pi] = 11^T/S`` (two rows: 3a, 3b); (4) root fraction ``|R|/T <= 1 - gamma``; (5) effective
  length ``T_eff = T / max leaves >= poly(1/gamma, S)``, for the given graphs;
- W Lemma 3: ``gamma > 0`` and ``delta > 0`` on each draw; W Lemma 4: ``I(x_h; x_pa(h)) > 0``;
- N Knowl 2: the chain is irreducible and aperiodic.

How each is decided, per number of states ``d``: from the prior's closed form where it has
one (``guaranteed`` when it holds by construction, ``analytic`` when it provably fails),
over every atom of a finite prior (``exact``), or from ``n`` seeded draws (``estimated``,
every number with its error bar). Readings (said in the report): N's ``gamma`` is one
constant for all items, so each of items 1, 2 and 4 reports the largest ``gamma`` it allows
and the audit reports their minimum. Item 2 is decided in expectation over ``pi`` (the form
N Knowl 3's bound uses once ``1 - alpha(pi) >= gamma`` holds a.s.); its almost-sure form is
reported next to it. Item 5 leaves ``poly`` unspecified: the audit checks the weakest
natural reference, ``T_eff >= S``, and reports ``T_eff``.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from math import gcd
from typing import Any, Callable, Sequence

import numpy as np
from scipy import stats as sstats

from theory.markov import stationary_batch
from theory import CausalTree

from sim.seeds import derive_seed
from sim.montecarlo import mean_estimate, proportion_estimate
from sim.priors import Prior, PriorError, parse_prior
from sim.verdict import Number, to_jsonable

__all__ = [
    "AssumptionDef",
    "ASSUMPTIONS",
    "Finding",
    "ClaimEvidence",
    "AssumptionAudit",
    "GraphInfo",
    "PriorAudit",
    "parse_graph",
    "audit_prior",
    "run_prior_audit",
    "AUDIT_DRAWS",
    "DEFAULT_GRAPHS",
    "DEFAULT_DIMS",
    "render_text",
    "render_necessity",
    "gamma_summary",
    "claim_dims",
    "attach_results",
]

#: Draws per number of states, per profile.
AUDIT_DRAWS = {"quick": 2000, "standard": 10000, "paper": 50000}
#: N's two running examples (Knowl 2) at N's prompt length T = 20.
DEFAULT_GRAPHS = ("chain:20", "icf:20")
#: Sizes audited when the prior does not fix d and the selected claims do not say theirs.
DEFAULT_DIMS = (2, 3, 5)
#: Depth up to which W's marginals are checked when the stationary law is not unique (W's quick H = 7).
FALLBACK_DEPTH = 6
ZERO = 1e-15  # a non-degeneracy sum at or below this is 0 (exactly degenerate up to round-off)
ROUNDOFF = 1e-12  # a Monte Carlo mean within this of its target differs by round-off only

_N_THEORY = ("N.K1", "N.K3", "N.K4")


@dataclass(frozen=True)
class AssumptionDef:
    key: str
    name: str
    source: str
    statement: str
    feeds: tuple[str, ...]
    per: str = "d"  # "d" (per number of states), "graph", or "graph,d"


ASSUMPTIONS: tuple[AssumptionDef, ...] = (
    AssumptionDef("N.K10.1", "entrywise lower bound gamma > 0", "N Knowl 10 (1)",
                  "almost surely min_{s,s'} pi(s'|s) > gamma/S for one constant gamma > 0 (ensures min mu_pi >= gamma/S)",
                  _N_THEORY + ("N.E",)),
    AssumptionDef("N.K10.2", "non-degeneracy", "N Knowl 10 (2)",
                  "sum_s ||pi(.|s) - mu_pi||_2^2 >= gamma^2/S: the chain does not mix in one step (decided in "
                  "expectation over pi, the form N Knowl 3's bound uses; the almost-sure form is reported too)",
                  _N_THEORY),
    AssumptionDef("N.K10.3a", "permutation symmetry", "N Knowl 10 (3)",
                  "sigma^-1 pi sigma has the law of pi for every relabelling sigma of the states", _N_THEORY),
    AssumptionDef("N.K10.3b", "uniform mean", "N Knowl 10 (3)",
                  "E[pi] = 11^T / S (N Knowl 3 needs it for g_{i,i})", _N_THEORY),
    AssumptionDef("N.K10.4", "non-root fraction", "N Knowl 10 (4)",
                  "r = |R|/T <= 1 - gamma for some gamma > 0, i.e. r < 1 (the largest gamma it allows is 1 - r)",
                  ("N.K1", "N.K4", "N.E"), per="graph"),
    AssumptionDef("N.K10.5", "effective length", "N Knowl 10 (5)",
                  "T_eff = T / max_i L_i >= poly(1/gamma, S); N leaves poly unspecified: checked against the weakest "
                  "reference T_eff >= S", _N_THEORY + ("N.E",), per="graph,d"),
    AssumptionDef("W.L3.gamma", "gamma > 0 on each draw", "W Lemma 3",
                  "min pi >= gamma/d with gamma = d min pi > 0, for each drawn pi", ("W.L3", "W.L4", "W.T2", "W.T3")),
    AssumptionDef("W.L3.delta", "delta > 0 on each draw", "W Lemma 3",
                  "every position's marginal >= delta > 0: delta = min_s mu_pi(s) under the stationary root (the "
                  f"uniform root up to depth {FALLBACK_DEPTH} when the stationary law is not unique)",
                  ("W.L3", "W.L4", "W.T2", "W.T3")),
    AssumptionDef("W.L4.info", "I(x_h; x_pa(h)) > 0 on each draw", "W Lemma 4",
                  "the rows of pi differ on the support of the root law, so parent and child are dependent",
                  ("W.L4", "W.T2", "W.T3")),
    AssumptionDef("N.K2.irreducible", "irreducible", "N Knowl 2",
                  "every state reaches every other (one communicating class): mu_pi unique and positive",
                  ("N.T",) + _N_THEORY + ("N.E",)),
    AssumptionDef("N.K2.aperiodic", "aperiodic", "N Knowl 2",
                  "every closed class has period 1", ("N.T",) + _N_THEORY + ("N.E",)),
)
_DEFS = {a.key: a for a in ASSUMPTIONS}


# ------------------------------------------------------------------------------ results --
@dataclass
class Finding:
    """One assumption at one size ``d`` and/or one graph."""

    where: str
    status: str  # holds | fails | undecided
    how: str  # guaranteed | analytic | exact | estimated
    summary: str
    numbers: list[Number] = field(default_factory=list)
    witness: dict[str, Any] | None = None
    gamma: float | None = None  # the largest gamma this item allows here (N items 1, 2, 4)


@dataclass
class ClaimEvidence:
    """What one tier of one claim said about an assumption that failed on its inputs."""

    claim: str
    tier: str
    verdict: str
    outcome: str  # counterexample | none | inconclusive
    detail: str
    counterexample: dict[str, Any] | None = None
    jointly: list[str] = field(default_factory=list)  # other broken assumptions the same counterexample breaks


@dataclass
class AssumptionAudit:
    key: str
    name: str
    source: str
    statement: str
    feeds: tuple[str, ...]
    findings: list[Finding] = field(default_factory=list)
    necessity: str = ""  # necessary | removable | undecided | not tested | "" (the assumption holds)
    necessity_detail: str = ""
    evidence: list[ClaimEvidence] = field(default_factory=list)

    @property
    def status(self) -> str:
        sts = [f.status for f in self.findings]
        if "fails" in sts:
            return "fails"
        if sts and all(s == "holds" for s in sts):
            return "holds"
        return "undecided"

    @property
    def how(self) -> str:
        order = ["estimated", "exact", "analytic", "guaranteed"]
        hows = {f.how for f in self.findings if f.status == self.status} or {f.how for f in self.findings}
        return min(hows, key=order.index) if hows else "—"

    def worst(self) -> Finding | None:
        for st in ("fails", "undecided", "holds"):
            for f in self.findings:
                if f.status == st:
                    return f
        return None


@dataclass
class GraphInfo:
    name: str
    parents: list[int]
    T: int
    n_roots: int
    root_fraction: float
    max_leaves: int
    T_eff: float


@dataclass
class PriorAudit:
    spec: str
    dims: list[int]
    n_draws: int
    seed: int
    z: float
    graphs: list[GraphInfo]
    assumptions: list[AssumptionAudit]
    gamma_table: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    claims_run: dict[str, str] = field(default_factory=dict)
    elapsed_s: float = 0.0

    def get(self, key: str) -> AssumptionAudit:
        return next(a for a in self.assumptions if a.key == key)

    def broken(self) -> list[AssumptionAudit]:
        return [a for a in self.assumptions if a.status == "fails"]

    def to_dict(self) -> dict[str, Any]:
        doc = to_jsonable(self)
        for a, d in zip(self.assumptions, doc["assumptions"]):
            d["status"], d["how"] = a.status, a.how
        return doc

    def finalize(self, dicts: Sequence[dict]) -> dict[str, Any]:
        """Attach the claims' results (necessity of each broken assumption) and return the JSON form."""
        attach_results(self, dicts)
        return self.to_dict()


# ------------------------------------------------------------------------------- graphs --
#: Longest graph the audit accepts (N's tasks use T = 20; its items are computed per position).
MAX_GRAPH_T = 100_000


def parse_graph(text: str, default_T: int = 20) -> GraphInfo:
    """A graph for N's items 4 and 5: ``chain[:T]``, ``icf[:T]`` (in-context function),
    ``star[:T]``, ``roots[:T]`` (no edges), a parent list such as ``[-1, 0, 1, -1]``, or a
    graph file (:func:`sim.graphs.read_graph`: GraphML, JSON or an edge list), as
    :func:`sim.graphs.graph_from_spec` reads them.

    Positions are 0-based; the last position is N's query, always a root. The families are
    :func:`theory.graphs.n_parents`.
    """
    from theory.graphs import to_parents

    from sim.graphs import GraphFileError, GraphSpecError, graph_from_spec

    text = str(text).strip()
    try:
        g = graph_from_spec(text, default_T=default_T, max_parents=1)
    except GraphFileError as exc:
        raise PriorError(f"--graph {exc}") from None
    except GraphSpecError as exc:
        raise PriorError(str(exc)) from None
    if g.number_of_nodes() > MAX_GRAPH_T:
        raise PriorError(f"graph {text}: {g.number_of_nodes()} positions is more than {MAX_GRAPH_T}")
    tree, name = CausalTree(to_parents(g)), g.graph["name"]
    if tree.parents[-1] != -1:
        raise PriorError(f"graph {text!r}: the last position is N's query and must be a root (-1), got parent "
                         f"{int(tree.parents[-1])}")
    par = tree.parents
    T = tree.n
    root_of = np.arange(T)
    for h in range(T):
        if par[h] >= 0:
            root_of[h] = root_of[par[h]]
    has_child = np.zeros(T, dtype=bool)
    has_child[par[par >= 0]] = True
    leaves = np.bincount(root_of[~has_child], minlength=T)
    n_roots = int((par < 0).sum())
    max_leaves = int(leaves.max())
    return GraphInfo(name=f"{name} (T={T})", parents=[int(p) for p in par], T=T, n_roots=n_roots,
                     root_fraction=n_roots / T, max_leaves=max_leaves, T_eff=T / max_leaves)


# --------------------------------------------------------------------- per-draw statistics --
def _period(adj: np.ndarray) -> int:
    """Period of a strongly connected digraph (boolean adjacency), by BFS levels."""
    n = adj.shape[0]
    level = np.full(n, -1)
    level[0] = 0
    queue, g = [0], 0
    while queue:
        u = queue.pop(0)
        for v in np.flatnonzero(adj[u]):
            if level[v] < 0:
                level[v] = level[u] + 1
                queue.append(v)
            else:
                g = gcd(g, abs(int(level[u]) + 1 - int(level[v])))
    return g


@dataclass
class _Stats:
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


def _reachability(P: np.ndarray) -> np.ndarray:
    """``R[k, i, j]``: state j is reachable from i (in zero or more steps) in draw k."""
    n, d, _ = P.shape
    R = (P > 0) | np.eye(d, dtype=bool)[None]
    for _ in range(max(1, math.ceil(math.log2(max(d, 2))))):
        R = np.einsum("kij,kjl->kil", R.astype(np.int64), R.astype(np.int64)) > 0
    return R


def _draw_stats(mats: np.ndarray, weights: np.ndarray, exact: bool) -> _Stats:
    n, d, _ = mats.shape
    gamma = d * mats.min(axis=(1, 2))
    irreducible = np.ones(n, dtype=bool)
    aperiodic = np.ones(n, dtype=bool)
    unique = np.ones(n, dtype=bool)
    delta = np.empty(n)
    B = np.full(n, np.nan)
    info = np.ones(n, dtype=bool)
    mu = np.full((n, d), np.nan)
    pos = gamma > 0
    if pos.any():  # strictly positive draws: irreducible, aperiodic, mu unique and positive
        mu[pos] = stationary_batch(mats[pos])
    zero_idx = np.flatnonzero(~pos)
    if zero_idx.size:
        R = _reachability(mats[zero_idx])
        for j, k in enumerate(zero_idx):
            pi, r = mats[k], R[j]
            irreducible[k] = bool(r.all())
            closed = np.all(~r | r.T, axis=1)  # i is recurrent iff everything it reaches reaches it back
            classes = {tuple(np.flatnonzero(r[i] & r[:, i])) for i in np.flatnonzero(closed)}
            aperiodic[k] = all(_period(pi[np.ix_(c, c)] > 0) == 1 for c in classes)
            unique[k] = len(classes) == 1
            if unique[k]:  # GTH needs only irreducibility: run it on the closed class
                c = np.array(next(iter(classes)))
                sub = pi[np.ix_(c, c)]
                mu[k] = 0.0
                mu[k, c] = stationary_batch((sub / sub.sum(axis=1, keepdims=True))[None])[0]
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
    return _Stats(mats, weights, exact, gamma, irreducible, aperiodic, unique, delta, B, info)


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


def _fraction(ok: np.ndarray, st: _Stats, seed: int, name: str) -> Number:
    if st.exact:
        return Number(name, float(st.weights[ok].sum()), kind="exact", note=f"over {len(ok)} atoms")
    est = proportion_estimate(int(ok.sum()), len(ok), seed=seed)
    return est.number(name, note="Agresti-Coull standard error")


def _matrix_record(pi: np.ndarray) -> list[list[float]]:
    return [[float(v) for v in row] for row in pi]


def _pct(x: float) -> str:
    return f"{100 * x:.3g}%"


def _fmt(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e5):
        return f"{x:.3e}"
    return f"{x:.4g}"


def _bonferroni_alpha(z: float, m: int) -> float:
    """Per-test two-sided level so that m tests together keep the level of one z-test."""
    return 2 * sstats.norm.sf(z) / max(m, 1)


def _witness_draw(st: _Stats, bad: np.ndarray, what: str) -> tuple[str, dict]:
    k = int(np.flatnonzero(bad)[0])
    label = "atom" if st.exact else "draw"
    rec = {label: k, "pi": _matrix_record(st.mats[k])}
    if st.exact:
        rec["weight"] = float(st.weights[k])
    return f"{label} {k} {what}", rec


# ------------------------------------------------------------------------- one d at a time --
class _DAudit:
    """Everything the audit computes at one number of states ``d``."""

    def __init__(self, prior: Prior, d: int, n_draws: int, seed: int, z: float):
        self.prior, self.d, self.z = prior, d, z
        self.seed = derive_seed(seed, "audit", d)
        atoms = prior.atoms()
        if atoms is not None:
            w, mats = atoms
            keep = w > 0
            self.st = _draw_stats(mats[keep], w[keep] / w[keep].sum(), exact=True)
        else:
            mats = prior.sample(np.random.default_rng(self.seed), n_draws)
            self.st = _draw_stats(mats, np.full(n_draws, 1.0 / n_draws), exact=False)
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
        st, d, p = self.st, self.d, self.prior
        if d == 1:
            return Finding(self.where, "holds", "guaranteed", "one state: nothing to relabel")
        if st.exact:
            bad = _asymmetric_generator(st.weights, st.mats)
            if bad is None:
                return Finding(self.where, "holds", "exact", "the law of the atoms is invariant under a transposition and "
                               "a d-cycle, which generate every relabelling")
            return Finding(self.where, "fails", "exact", f"relabelling by {bad} changes the law of the atoms",
                           witness={"relabelling": bad})
        known = p.symmetric()
        nums, worst, m = self._symmetry_tests()
        if known is True:
            return Finding(self.where, "holds", "guaranteed", "the prior is relabelling-invariant by construction "
                           f"(Monte Carlo check: largest |z| = {_fmt(worst[0])} over {m} statistics)", nums)
        alpha = _bonferroni_alpha(self.z, m)
        rejected = worst[1] < alpha
        if known is False or rejected:
            how = "analytic" if known is False else "estimated"
            detail = worst[2]
            return Finding(self.where, "fails", how, f"not relabelling-invariant: {detail}", nums,
                           witness={"statistic": detail})
        return Finding(self.where, "holds", "estimated",
                       f"no relabelling statistic differs (largest |z| = {_fmt(worst[0])}, smallest p = {_fmt(worst[1])} "
                       f"over {m} tests, Bonferroni level {_fmt(alpha)}); consistent with symmetry, not a proof", nums)

    def _symmetry_tests(self):
        """Statistics that a relabelling would leave unchanged: per-entry first and second moments
        of diagonal and off-diagonal entries against a reference entry (paired differences over the
        draws), the cross moment pi[s,t] pi[t,s], and two-sample KS tests on split halves."""
        X, d = self.st.mats, self.d
        n = X.shape[0]
        tests = []  # (|z|, p, description, number)

        def paired(a, b, label):
            diff = a - b
            if np.all(diff == 0):
                z, pval, mean, se = 0.0, 1.0, 0.0, 0.0
            else:
                est = mean_estimate(diff, seed=self.seed)
                mean, se = est.value, est.stderr
                excess = max(abs(mean) - ROUNDOFF, 0.0)
                z = 0.0 if excess == 0 else (excess / se if se > 0 else math.inf)
                pval = float(2 * sstats.norm.sf(z))
            tests.append((z, pval, f"{label} = {_fmt(mean)} ± {_fmt(se)} (z = {_fmt(z)})",
                          Number(label, mean, stderr=se, n=n, seed=self.seed, kind="montecarlo",
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
        ks_pairs = [((0, 0), (1, 1)), ((0, 1), (1, 2) if d > 2 else (1, 0))]
        for a, b in ks_pairs:
            if half >= 5:
                res = sstats.ks_2samp(X[:half, a[0], a[1]], X[half:2 * half, b[0], b[1]])
                pval = float(res.pvalue)
                label = f"KS two-sample p-value, law of pi{list(a)} vs pi{list(b)} (split halves)"
                tests.append((float(sstats.norm.isf(max(pval, 1e-300) / 2)), pval,
                              f"{label} = {_fmt(pval)} (statistic {_fmt(float(res.statistic))})",
                              Number(label, pval, n=half, seed=self.seed, kind="montecarlo",
                                     note=f"KS statistic {_fmt(float(res.statistic))}")))
        worst = min(tests, key=lambda t: t[1])
        shown = sorted(tests, key=lambda t: t[1])[:4]
        return [t[3] for t in shown], (worst[0], worst[1], worst[2]), len(tests)

    def uniform_mean(self) -> Finding:
        st, d, p = self.st, self.d, self.prior
        target = 1.0 / d
        m = None if st.exact else p.mean_matrix()
        if st.exact:
            m = np.einsum("k,kst->st", st.weights, st.mats)
        if m is not None:
            dev = float(np.abs(m - target).max())
            s, t = np.unravel_index(int(np.abs(m - target).argmax()), m.shape)
            how_ok, how_bad = ("exact", "exact") if st.exact else ("guaranteed", "analytic")
            nums = [Number("max |E[pi] - 1/S|", dev, kind="exact", tolerance=1e-12, note=f"at entry [{s}, {t}]")]
            if dev <= 1e-12:
                return Finding(self.where, "holds", how_ok, f"E[pi] = 11^T/{d} exactly", nums)
            return Finding(self.where, "fails", how_bad, f"E[pi][{s}, {t}] = {_fmt(float(m[s, t]))} vs 1/S = {_fmt(target)} "
                           f"(E[trace pi] = {_fmt(float(np.trace(m)))}; uniform needs 1)", nums,
                           witness={"mean": _matrix_record(m)})
        X = st.mats
        mean = X.mean(axis=0)
        se = X.std(axis=0, ddof=1) / math.sqrt(X.shape[0])
        dev = np.abs(mean - target)
        excess = np.clip(dev - ROUNDOFF, 0.0, None)  # round-off in a mean of constants is not a deviation
        with np.errstate(divide="ignore", invalid="ignore"):
            zs = np.where(excess <= 0, 0.0, np.where(se > 0, excess / se, np.inf))
        s, t = np.unravel_index(int(np.argmax(zs)), zs.shape)
        alpha = _bonferroni_alpha(self.z, d * d)
        z_crit = float(sstats.norm.isf(alpha / 2))
        nums = [Number(f"E[pi][{s},{t}] - 1/S (largest |z| entry)", float(mean[s, t] - target), stderr=float(se[s, t]),
                       n=X.shape[0], seed=self.seed, kind="montecarlo", note=f"z = {_fmt(float(zs[s, t]))}"),
                Number("max_st |E[pi][s,t] - 1/S|", float(dev.max()), n=X.shape[0], seed=self.seed, kind="montecarlo",
                       stderr=float(se.max()), note="largest standard error shown")]
        if zs[s, t] > z_crit:
            return Finding(self.where, "fails", "estimated", f"E[pi][{s}, {t}] = {_fmt(float(mean[s, t]))} ± "
                           f"{_fmt(float(se[s, t]))} vs 1/S = {_fmt(target)} (z = {_fmt(float(zs[s, t]))} > {_fmt(z_crit)}, "
                           f"Bonferroni over {d * d} entries)", nums, witness={"mean": _matrix_record(mean)})
        return Finding(self.where, "holds", "estimated", f"every entry of E[pi] is within {_fmt(z_crit)} s.e. of 1/S "
                       f"(largest |z| = {_fmt(float(zs[s, t]))}); consistent with a uniform mean, not a proof", nums)

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


def _asymmetric_generator(weights, mats, decimals: int = 12) -> str | None:
    from sim.priors import _relabel_generators

    def law(ms):
        out: dict[bytes, float] = {}
        for w, m in zip(weights, ms):
            key = np.round(m, decimals).tobytes()
            out[key] = out.get(key, 0.0) + float(w)
        return out

    base = law(mats)
    d = mats.shape[1]
    for p, label in zip(_relabel_generators(d), ("the transposition of states 0 and 1", f"the cycle 0 -> 1 -> ... -> {d - 1} -> 0")):
        moved = law(mats[:, p][:, :, p])
        if base.keys() != moved.keys() or any(abs(base[k] - moved[k]) > 1e-12 for k in base):
            return label
    return None


# ------------------------------------------------------------------------------ the audit --
def audit_prior(prior: Prior, *, dims: Sequence[int], n_draws: int = 2000, seed: int = 0,
                graphs: Sequence[str | GraphInfo] = DEFAULT_GRAPHS, z: float = 3.0,
                progress: Callable[[str], None] = lambda m: None) -> PriorAudit:
    """Audit ``prior`` against every assumption in :data:`ASSUMPTIONS` at each ``d`` in ``dims``
    (the prior's own ``d`` if it fixes one) and for each graph.

    Raises :class:`PriorError` if the prior cannot be bound to a size or its sampler fails.
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


# ------------------------------------------------------------------ necessity from the claims --
def _keys_for(claim_id: str, name: str) -> list[str]:
    """Audit keys a claim's assumption name refers to, read from its words (the claim's paper
    picks W's per-draw form or N's a.s. form). Specific words win over ``gamma``, which many
    names mention only as the constant in their bound."""
    n = name.lower()
    paper = claim_id.split(".")[0].upper()
    keys: list[str] = []

    def add(w_key, n_key):
        if paper == "W":
            keys.append(w_key)
        elif paper == "N":
            keys.append(n_key)
        else:
            keys.extend(dict.fromkeys((w_key, n_key)))

    if "delta" in n or "marginal >" in n or "marginal ≥" in n:
        add("W.L3.delta", "W.L3.delta")
    if "i(x_h" in n or "mutual information" in n or "degenera" in n:
        add("W.L4.info", "N.K10.2")
    if "symmetr" in n:
        keys.append("N.K10.3a")
    if "uniform mean" in n or "e[pi]" in n:
        keys.append("N.K10.3b")
    if "irreducib" in n:
        keys.append("N.K2.irreducible")
    if "aperiod" in n:
        keys.append("N.K2.aperiodic")
    if "root fraction" in n or "non-root" in n:
        keys.append("N.K10.4")
    if "t_eff" in n or "effective length" in n:
        keys.append("N.K10.5")
    if not keys and ("gamma" in n or "min pi" in n or "lower bound" in n or "floor" in n):
        add("W.L3.gamma", "N.K10.1")
    return list(dict.fromkeys(keys))


def _examples_budget(t: dict) -> str:
    for num in t.get("numbers", []):
        if str(num.get("name", "")).startswith("examples evaluated"):
            return f"{num['value']} evaluations, {num.get('note', '')}".rstrip(", ")
    return ""


def _record_breaks(rec) -> set[str] | None:
    """The per-draw assumptions a counterexample record's ``pi`` breaks (``None`` without a valid ``pi``).

    Uses the record's own ``gamma`` / ``delta`` / ``I(x_h; x_pa)`` when it reports them (they
    belong to the instance's root law and tree); otherwise computes them from ``pi`` under
    the stationary root (the uniform root when the stationary law is not unique).
    """
    if not isinstance(rec, dict) or "pi" not in rec:
        return None
    try:
        P = np.array(rec["pi"], dtype=float)
        if P.ndim != 2 or P.shape[0] != P.shape[1] or not np.all(np.isfinite(P)) or np.any(P < 0) \
                or np.abs(P.sum(axis=1) - 1).max() > 1e-8:
            return None
    except (TypeError, ValueError):
        return None
    st = _draw_stats(P[None], np.ones(1), exact=True)

    def number(*names):
        for nm in names:
            v = rec.get(nm)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return float(v)
        return None

    out = set()
    gamma = number("gamma")
    if (st.gamma[0] if gamma is None else gamma) <= 0:
        out |= {"W.L3.gamma", "N.K10.1"}
    delta = number("delta")
    if (st.delta[0] if delta is None else delta) <= 0:
        out.add("W.L3.delta")
    info = number("I(x_h; x_pa)", "I(x_h; x_pa(h))")
    if (not st.info[0]) if info is None else info <= 1e-12:
        out.add("W.L4.info")
    if not st.irreducible[0]:
        out.add("N.K2.irreducible")
    if not st.aperiodic[0]:
        out.add("N.K2.aperiodic")
    if st.unique[0] and st.B[0] <= ZERO:
        out.add("N.K10.2")
    return out


def _tier_evidence(claim_id: str, t: dict) -> list[tuple[str, ClaimEvidence]]:
    failed = [a["name"] for a in t.get("assumptions", []) if a.get("holds") is False]
    if not failed:
        return []
    cwa = (t.get("conclusion_without_assumptions") or "").strip()
    low = cwa.lower()
    named = [nm for nm in failed if nm in cwa]
    budget = _examples_budget(t)
    failed_keys = {k for nm in failed for k in _keys_for(claim_id, nm)}
    cex = t.get("counterexample")
    breaks = _record_breaks(cex) if low.startswith("violated") else None
    out = []
    for nm in failed:
        for key in _keys_for(claim_id, nm):
            jointly: list[str] = []
            record = None
            if low.startswith("violated"):
                if breaks is not None:
                    if key in breaks:
                        outcome, record = "counterexample", cex
                        other_keys = {k for x in failed if x != nm for k in _keys_for(claim_id, x)}
                        jointly = sorted((breaks & other_keys) - set(_keys_for(claim_id, nm)))
                        detail = (f"{cwa}; its pi breaks " + (f"this and {', '.join(jointly)}" if jointly else "only this")
                                  + " (of the assumptions this tier checks)")
                    elif breaks & failed_keys:
                        outcome = "inconclusive"
                        detail = f"the counterexample reported breaks {', '.join(sorted(breaks & failed_keys))}, not this one"
                    else:
                        outcome = "inconclusive"
                        detail = ("the counterexample reported meets every assumption this tier checks (a FAIL in "
                                  "substance), which says nothing about this assumption")
                elif named and nm not in named:
                    outcome, detail = "inconclusive", f"the search stopped at a counterexample that breaks {', '.join(named)}"
                else:
                    outcome, record, detail = "counterexample", cex, cwa
                    others = [x for x in (named or failed) if x != nm]
                    jointly = sorted({k for x in others for k in _keys_for(claim_id, x)} - set(_keys_for(claim_id, nm)))
            elif low.startswith("held") or low.startswith("no counterexample"):
                outcome, detail = "none", cwa + (f" [{budget}]" if budget else "")
            elif low.startswith("undecided"):
                outcome, detail = "inconclusive", cwa
            elif t.get("conclusion") == "violated" and cex:
                outcome = "inconclusive"
                detail = ("the tier found a counterexample on inputs that meet every assumption (a FAIL in substance), "
                          "which says nothing about this assumption")
            else:
                outcome, detail = "inconclusive", cwa or "the tier did not say whether the conclusion held where it failed"
            out.append((key, ClaimEvidence(claim_id, t["tier"], t["verdict"], outcome, f"{nm}: {detail}", record,
                                           jointly)))
    return out


def attach_results(audit: PriorAudit, dicts: Sequence[dict]) -> None:
    """Fill each broken assumption's necessity from the claims' results (JSON form)."""
    audit.claims_run = {d["id"]: d["verdict"] for d in dicts}
    by_key: dict[str, list[ClaimEvidence]] = {}
    for d in dicts:
        for t in d.get("tiers", []):
            for key, ev in _tier_evidence(d["id"], t):
                by_key.setdefault(key, []).append(ev)
            if t.get("verdict") == "ASSUMPTION_UNMET" and t.get("conclusion") == "violated" and t.get("counterexample"):
                failed_keys = {k for a in t.get("assumptions", []) if a.get("holds") is False
                               for k in _keys_for(d["id"], a["name"])}
                breaks = _record_breaks(t["counterexample"])
                if failed_keys and breaks is not None and not (breaks & failed_keys):
                    audit.notes.append(
                        f"{d['id']} {t['tier']}: its counterexample meets every assumption the tier checks (a FAIL in "
                        "substance), but the verdict is ASSUMPTION_UNMET because other draws broke an assumption; "
                        "read the counterexample in the claim's section")
    for a in audit.assumptions:
        a.evidence = by_key.get(a.key, [])
        if a.status != "fails":
            a.necessity, a.necessity_detail = "", ""
            continue
        cex = [e for e in a.evidence if e.outcome == "counterexample"]
        none = [e for e in a.evidence if e.outcome == "none"]
        if cex:
            alone = [e for e in cex if not e.jointly]

            def kind(e):
                return (f"{e.claim} {e.tier}" + (" (smallest found, shrunk)" if e.tier == "property" else " (worst instance)")
                        + (f" — also breaks {', '.join(e.jointly)}" if e.jointly else ""))

            if alone:
                a.necessity = "necessary"
                a.necessity_detail = ("counterexample to a conclusion on a draw that breaks only this one of the claim's "
                                      "assumptions: " + "; ".join(kind(e) for e in alone))
                rest = [e for e in cex if e.jointly]
                if rest:
                    a.necessity_detail += "; also jointly: " + "; ".join(kind(e) for e in rest)
            else:
                a.necessity = "necessary jointly"
                a.necessity_detail = ("counterexamples found only on draws that break it together with other assumptions: "
                                      + "; ".join(kind(e) for e in cex))
        elif none:
            a.necessity = "removable"
            a.necessity_detail = "no counterexample within the budget: " + "; ".join(
                f"{e.claim} {e.tier}: {e.detail.split(': ', 1)[-1]}" for e in none)
        elif a.evidence:
            a.necessity = "undecided"
            a.necessity_detail = "; ".join(f"{e.claim} {e.tier}: {e.detail}" for e in a.evidence)
        else:
            ran = [c for c in a.feeds if c in audit.claims_run]
            missing = [c for c in a.feeds if c not in audit.claims_run]
            a.necessity = "not tested"
            a.necessity_detail = ("no claim that ran drew inputs breaking it"
                                  + (f" (ran: {', '.join(ran)})" if ran else "")
                                  + (f"; claims it feeds that did not run or are not built yet: {', '.join(missing)}"
                                     if missing else ""))


# --------------------------------------------------------------------------- rendering --
def render_text(audit: PriorAudit | dict, width: int = 100) -> str:
    """The assumptions table for a terminal."""
    doc = audit.to_dict() if isinstance(audit, PriorAudit) else audit
    dims = ", ".join(map(str, doc["dims"]))
    graphs = ", ".join(g["name"] for g in doc["graphs"])
    lines = [f"Assumptions under prior {doc['spec']}  (d = {dims}; {doc['n_draws']} draws per d unless exact; "
             f"seed {doc['seed']}; graphs {graphs})"]
    rows = [("assumption", "source", "status", "how", "necessary?", "evidence (worst case)")]
    for a in doc["assumptions"]:
        worst = next((f for st in ("fails", "undecided", "holds") for f in a["findings"] if f["status"] == st), None)
        ev = "" if worst is None else f"{worst['where']}: {worst['summary']}"
        rows.append((f"{a['key']} {a['name']}", a["source"], a["status"].upper() if a["status"] == "fails" else a["status"],
                     a["how"], a.get("necessity") or ("—" if a["status"] != "fails" else "(after the claims)"),
                     _clip(ev, width)))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for k, r in enumerate(rows):
        lines.append("  ".join(r[i].ljust(widths[i]) for i in range(5)) + "  " + r[5])
        if k == 0:
            lines.append("  ".join("-" * w for w in widths) + "  " + "-" * 8)
    if doc.get("gamma_table"):
        lines.append("N's gamma = min(item 1, item 2, 1 - r): " + gamma_summary(doc["gamma_table"]))
    return "\n".join(lines)


def gamma_summary(rows: Sequence[dict]) -> str:
    """One line: N's gamma per d (graphs with the same value merged), and what limits it."""
    by_d: dict[int, list[dict]] = {}
    for g in rows:
        by_d.setdefault(g["d"], []).append(g)
    parts = []
    for d, gs in by_d.items():
        vals = {(_fmt(g["gamma"]) if g["gamma"] is not None else "—", g["limited_by"]) for g in gs}
        if len(vals) == 1:
            v, lim = vals.pop()
            parts.append(f"d={d}: {v}" + (f" (limited by {lim})" if lim else ""))
        else:
            parts.append(f"d={d}: " + ", ".join(f"{_fmt(g['gamma'])} on {g['graph']} (limited by {g['limited_by']})"
                                                for g in gs))
    return "; ".join(parts)


def render_necessity(audit: PriorAudit | dict) -> str:
    doc = audit.to_dict() if isinstance(audit, PriorAudit) else audit
    broken = [a for a in doc["assumptions"] if a["status"] == "fails"]
    if not broken:
        return "Every assumption holds (or is undecided) under this prior."
    lines = ["Broken assumptions — necessary or removable for the claims that ran:"]
    for a in broken:
        lines.append(f"  {a['key']} {a['name']}: {a['necessity'].upper()} — {a['necessity_detail']}")
    return "\n".join(lines)


def _clip(text: str, n: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


# ---------------------------------------------------------------------------------- CLI --
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


def run_prior_audit(args, *, make_config, select, execute, user_error) -> int:
    """``icl-verify prior SPEC``: parse, audit, run the prior-dependent claims under the prior,
    write the reports with the assumptions table at the top. A bad spec or sampler fails here,
    before anything is written (exit 2)."""
    import sys

    def say(msg):
        if not getattr(args, "no_progress", False):
            print(msg, file=sys.stderr, flush=True)

    say(f"icl-verify prior: reading {args.spec!r}" + (" (calling the sampler once to learn d)" if "(" not in args.spec
                                                      else ""))
    try:
        prior = parse_prior(args.spec)
        if args.d is not None:
            prior = prior.bind(args.d)
    except PriorError as exc:
        raise user_error(str(exc)) from None
    if prior.d == 1:
        raise user_error(f"{prior.spec()} is a prior on 1 state: every transition matrix is [[1]], no token carries "
                         "information and the claims have nothing to check; give d >= 2")
    chosen = select(args.claims)
    selected = [c for c in chosen if c.prior_dependent]
    skipped = [c.id for c in chosen if not c.prior_dependent]
    if not selected:
        from sim import claims as registry

        dep = [c.id for c in registry.all_claims() if c.prior_dependent]
        raise user_error(f"none of the claims matching {args.claims!r} depends on the prior; prior-dependent claims: "
                         f"{', '.join(dep)}")
    if skipped and args.claims.strip() != "*":
        print(f"skipping {len(skipped)} claim(s) that do not depend on the prior: {', '.join(skipped)}", file=sys.stderr)
    overrides = {c.id: {"max_examples": int(args.budget)} for c in selected} if args.budget is not None else {}
    try:
        graphs = [parse_graph(g) for g in (getattr(args, "graph", None) or DEFAULT_GRAPHS)]
    except PriorError as exc:
        raise user_error(str(exc)) from None
    config = make_config(args, prior_spec=prior.spec(), overrides=overrides)
    dims = [prior.d] if prior.d is not None else (claim_dims(selected, config.profile) or list(DEFAULT_DIMS))
    n_draws = getattr(args, "draws", None) or AUDIT_DRAWS[config.profile]
    say(f"icl-verify prior: auditing the assumptions on {n_draws} draws at d = {', '.join(map(str, dims))} and "
        f"{len(graphs)} graph(s)")
    try:
        audit = audit_prior(prior, dims=dims, n_draws=n_draws, seed=config.seed, graphs=graphs, z=config.z)
    except PriorError as exc:
        raise user_error(f"the prior failed while it was being audited: {exc}") from None
    print(render_text(audit))
    print()
    code = execute(args, config, selected, prior=prior, audit=audit.finalize, header_extra=f" prior={prior.spec()}")
    print()
    print(render_necessity(audit))
    return code
