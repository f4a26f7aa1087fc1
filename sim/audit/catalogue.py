"""The assumption catalogue: what the prior audit checks, where each assumption comes from, and
which claims it feeds (data; the checks are in :mod:`sim.audit.checks`)."""
from __future__ import annotations

from dataclasses import dataclass

#: Draws per number of states, per profile.
AUDIT_DRAWS = {"quick": 2000, "standard": 10000, "paper": 50000}
#: N's two running examples (Knowl 2) at N's prompt length T = 20.
DEFAULT_GRAPHS = ("chain:20", "icf:20")
#: Sizes audited when the prior does not fix d and the selected claims do not say theirs.
DEFAULT_DIMS = (2, 3, 5)
#: Depth up to which W's marginals are checked when the stationary law is not unique (W's quick H = 7).
FALLBACK_DEPTH = 6
#: A non-degeneracy sum at or below this is 0 (exactly degenerate up to round-off).
ZERO = 1e-15
_N_THEORY = ("N.K1", "N.K3", "N.K4")


@dataclass(frozen=True)
class AssumptionDef:
    """One assumption the audit checks: its ``key`` (``"N.K10.1"``), short ``name``, the paper's
    ``source`` (``"N Knowl 10 (1)"``), the ``statement`` checked, the claim ids it ``feeds``, and
    what it is decided ``per``: ``"d"`` (each number of states), ``"graph"`` or ``"graph,d"``.
    """

    key: str
    name: str
    source: str
    statement: str
    feeds: tuple[str, ...]
    per: str = "d"  # "d" (per number of states), "graph", or "graph,d"


#: Every assumption the audit checks, in report order (N Knowl 10 items 1-5, W Lemmas 3 and 4, N Knowl 2).
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
