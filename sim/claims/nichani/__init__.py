"""Claims of Nichani, Damian & Lee, *How Transformers Learn Causal Structure with Gradient
Descent* (ICML 2024), seeds 002/003, in catalogue order. Positions are 0-based here (N writes
``1..T``; N's query ``s_T`` is position ``T-1``).

Submodules: ``task`` (N.T: the task and its Bayes predictor), ``gradient`` (N.K3: the
gradient at initialisation is a chi-square mutual information), ``constructions`` (N.K7
standard vs disentangled transformer, N.K8 / N.K9 the constructions of Knowls 8 and 9),
``trained`` (placeholders for the trained claims N.K1, N.K4, N.E and the prior audit N.K10).
"""
from __future__ import annotations

import importlib

_ORDER = ("N.T", "N.K3", "N.K1", "N.K4", "N.K7", "N.K8", "N.K9", "N.K10", "N.E")
_SUBMODULES = ("task", "gradient", "constructions", "trained")


def _collect():
    found = {}
    for name in _SUBMODULES:
        try:
            mod = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__name__}.{name}":
                continue
            raise
        for c in mod.CLAIMS:
            found[c.id] = c
    return [found[i] for i in _ORDER if i in found] + [c for i, c in found.items() if i not in _ORDER]


CLAIMS = _collect()
