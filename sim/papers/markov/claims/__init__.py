"""Claims on in-context Markov chains: ``gibson`` (G.1, G.2) and ``edelman`` (E.1)."""
from __future__ import annotations

from sim.claims.base import collect_claims

_ORDER = ("G.1", "G.2", "E.1")
_SUBMODULES = ("gibson", "edelman")


CLAIMS = collect_claims(__name__, _SUBMODULES, _ORDER)
