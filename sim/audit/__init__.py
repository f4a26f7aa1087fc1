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

The package: :mod:`~sim.audit.catalogue` (the assumptions, as data), :mod:`~sim.audit.checks`
(the audit; symmetry and the uniform mean are decided by :mod:`sim.priors.facts`, the facts
N.K3 reads too), :mod:`~sim.audit.graphs` (N's graphs), :mod:`~sim.audit.evidence`
(necessity from the claims' results) and :mod:`~sim.audit.records` (what it returns). The
tables are rendered by :mod:`sim.report`; ``icl-verify prior`` is in :mod:`sim.cli`.
"""
from __future__ import annotations

from sim.audit.catalogue import ASSUMPTIONS, AUDIT_DRAWS, DEFAULT_DIMS, DEFAULT_GRAPHS, AssumptionDef
from sim.audit.checks import audit_prior, claim_dims
from sim.audit.evidence import attach_results
from sim.audit.graphs import parse_graph
from sim.audit.records import AssumptionAudit, ClaimEvidence, Finding, GraphInfo, PriorAudit

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
    "AUDIT_DRAWS",
    "DEFAULT_GRAPHS",
    "DEFAULT_DIMS",
    "claim_dims",
    "attach_results",
]
