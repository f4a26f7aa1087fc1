"""Claims on in-context Markov chains: ``gibson`` (G.1, G.2), ``circuits`` (G.3, G.4), ``competition`` (G.5),
``bottleneck`` (G.6, G.8: G's minimal model of the task-recognition head), ``flow`` (G.7: the G1 -> G2 flow on
the SA-transformer) and ``edelman`` (E.1)."""
from __future__ import annotations

from sim.claims.base import collect_claims

_ORDER = ("G.1", "G.2", "G.3", "G.4", "G.5", "G.6", "G.7", "G.8", "E.1")
_SUBMODULES = ("gibson", "circuits", "competition", "bottleneck", "flow", "edelman")


CLAIMS = collect_claims(__name__, _SUBMODULES, _ORDER)
