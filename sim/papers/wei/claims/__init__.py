"""Claims of Wei, Chen, He & Yang, *How Transformers Learn Causal Structures In-Context*
(ICLR 2026), seeds 000/001, in catalogue order. Positions are 0-based here (W writes
h = 2..H and pa(h) in 1..h-1).

Submodules group the claims by the machinery they use: ``bma`` (W.L1, W.P1),
``construction`` (W.T1), ``information`` (W.L2-L4), ``identifiability`` (W.T2),
``dynamics`` (W.T3), ``continuous`` (W.P2; its trained tier in ``continuous_trained``),
``trained`` (W.E1, W.E2), ``architecture`` (W.E3, W.E4: the number of first-layer heads,
absolute positions). The task and runs they share are in :mod:`sim.papers.wei.training`, the
recipe in :mod:`sim.papers.wei.recipes`;
the tightness search space of W.L2-W.L4 and W.T3 in :mod:`sim.papers.wei.extremes`.
"""
from __future__ import annotations

from sim.claims.base import collect_claims


_ORDER = ("W.L1", "W.T1", "W.P1", "W.L2", "W.L3", "W.L4", "W.T2", "W.T3", "W.P2", "W.E1", "W.E2", "W.E3", "W.E4")
_SUBMODULES = ("bma", "construction", "information", "identifiability", "dynamics", "continuous", "trained", "architecture")


CLAIMS = collect_claims(__name__, _SUBMODULES, _ORDER)
