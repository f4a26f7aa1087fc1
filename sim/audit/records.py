"""What the prior audit finds: one finding per assumption and size (or graph), the audit of a
prior, and the evidence the claims give on each broken assumption."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sim.verdict import Number, to_jsonable


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
    """The audit of one assumption of :data:`~sim.audit.catalogue.ASSUMPTIONS` under one prior.

    ``key``, ``name``, ``source``, ``statement`` and ``feeds`` are copied from its
    :class:`~sim.audit.catalogue.AssumptionDef`; ``findings`` holds one :class:`Finding` per size
    ``d`` and/or graph. After the claims ran (:func:`~sim.audit.evidence.attach_results`) a broken
    assumption gets its ``necessity`` (``necessary``, ``necessary jointly``, ``removable``,
    ``undecided`` or ``not tested``; empty while it holds), the reason in ``necessity_detail``,
    and the claims' ``evidence``.
    """

    key: str
    name: str
    source: str
    statement: str
    feeds: tuple[str, ...]
    findings: list[Finding] = field(default_factory=list)
    necessity: str = ""  # necessary | necessary jointly | removable | undecided | not tested | "" (it holds)
    necessity_detail: str = ""
    evidence: list[ClaimEvidence] = field(default_factory=list)

    @property
    def status(self) -> str:
        """``fails`` if any finding fails, ``holds`` if every one holds, else ``undecided``."""
        sts = [f.status for f in self.findings]
        if "fails" in sts:
            return "fails"
        if sts and all(s == "holds" for s in sts):
            return "holds"
        return "undecided"

    @property
    def how(self) -> str:
        """The weakest way (``estimated`` < ``exact`` < ``analytic`` < ``guaranteed``) among the findings
        that decide :attr:`status`; ``—`` without findings."""
        order = ["estimated", "exact", "analytic", "guaranteed"]
        hows = {f.how for f in self.findings if f.status == self.status} or {f.how for f in self.findings}
        return min(hows, key=order.index) if hows else "—"

    def worst(self) -> Finding | None:
        """The first failing finding, else the first undecided one, else the first that holds."""
        for st in ("fails", "undecided", "holds"):
            for f in self.findings:
                if f.status == st:
                    return f
        return None


@dataclass
class GraphInfo:
    """One of N's graphs as items 4 and 5 of N Knowl 10 read it (made by :func:`~sim.audit.graphs.parse_graph`).

    ``parents`` is the 0-based parent list (``-1`` for a root), ``T`` the number of positions,
    ``root_fraction = n_roots / T`` (N's ``r = |R|/T``), ``max_leaves`` the most leaves under one
    root, and ``T_eff = T / max_leaves`` N's effective length.
    """

    name: str
    parents: list[int]
    T: int
    n_roots: int
    root_fraction: float
    max_leaves: int
    T_eff: float


@dataclass
class PriorAudit:
    """The audit of one prior (made by :func:`~sim.audit.checks.audit_prior`; rendered by :mod:`sim.report`).

    ``spec`` is the prior's canonical spec, audited at each ``d`` in ``dims`` and on ``graphs``,
    from ``n_draws`` draws per size (seed ``seed``, margins of ``z`` standard errors).
    ``assumptions`` holds one :class:`AssumptionAudit` per catalogue entry; ``gamma_table`` one
    row per ``(d, graph)``: ``{"d", "graph", "gamma_1", "gamma_2", "one_minus_r", "gamma",
    "limited_by", "estimated"}``, N's one constant ``gamma`` being the minimum of the items' largest
    allowed values. ``claims_run`` maps each claim that ran under the prior to its verdict.
    """

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
        """The audit of the assumption with catalogue key ``key`` (e.g. ``"N.K10.1"``)."""
        return next(a for a in self.assumptions if a.key == key)

    def broken(self) -> list[AssumptionAudit]:
        """The assumptions whose status is ``fails``."""
        return [a for a in self.assumptions if a.status == "fails"]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (:func:`~sim.verdict.to_jsonable`), each assumption with its ``status`` and ``how``."""
        doc = to_jsonable(self)
        for a, d in zip(self.assumptions, doc["assumptions"]):
            d["status"], d["how"] = a.status, a.how
        return doc
