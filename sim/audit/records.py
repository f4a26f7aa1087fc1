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
