"""Numbers across training seeds, and the small pieces every trained claim of N shares
(:mod:`~sim.papers.nichani.claims.trained` N.K1/N.K4, :mod:`~sim.papers.nichani.claims.experiments` N.E,
:mod:`~sim.papers.nichani.claims.constructions_trained` N.K9's
trained tier). Every trained number is the mean ± standard error across seeds, with the
per-seed values and seeds in its note.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from sim.verdict import Number
from sim.claims.base import Context
from sim.papers.nichani.task import n_graph

__all__ = ["training_seeds", "across_seeds", "trained_number", "claim_graph", "pyplot"]


def training_seeds(ctx: Context, purpose: str, n: int) -> list[int]:
    """``n`` training seeds for ``purpose`` (reported with every number)."""
    return [ctx.seed_for(f"{purpose}/seed{k}") for k in range(int(n))]


def across_seeds(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error across seeds (``0`` for one seed)."""
    v = np.asarray(values, dtype=np.float64)
    return float(v.mean()), (float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else 0.0)


def trained_number(name: str, values: Sequence[float], seeds: Sequence[int], note: str = "",
                    tolerance: float | None = None) -> Number:
    """A ``trained`` :class:`~sim.verdict.Number`: the mean of ``values`` over seeds with its standard error
    (:func:`across_seeds`, ``df = n - 1``), each seed's value in the note."""
    m, se = across_seeds(values)
    per = ", ".join(f"{v:.4g} (seed {s})" for v, s in zip(values, seeds))
    return Number(name, m, se, n=len(values), tolerance=tolerance, kind="trained", df=len(values) - 1,
                  note=(note + "; " if note else "") + f"per seed: {per}")


#: N's graph laws that draw a graph per model (the rest are one fixed graph).
RANDOM_LAWS = ("random", "many")


def claim_graph(name: str, T: int, ctx: Context, tag: str) -> np.ndarray:
    """N's graphs; a random graph (``random`` or ``many``) is drawn from the claim's ``tree`` stream (one per ``tag``)."""
    return n_graph(name, T, ctx.rng(f"tree/{tag}") if name in RANDOM_LAWS else None)



def pyplot():
    """``matplotlib.pyplot`` on the ``Agg`` backend (files only, no display); matplotlib loads on first use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
