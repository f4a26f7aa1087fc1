"""Claims on in-context Markov chains: ``gibson`` (G.1, G.2), ``circuits`` (G.3, G.4) and ``edelman`` (E.1)."""
from __future__ import annotations

from sim.claims.base import collect_claims

_ORDER = ("G.1", "G.2", "G.3", "G.4", "G.5", "E.1")
_SUBMODULES = ("gibson", "circuits", "competition", "edelman")


CLAIMS = collect_claims(__name__, _SUBMODULES, _ORDER)
