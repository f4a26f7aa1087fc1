"""Claims of Nichani, Damian & Lee, *How Transformers Learn Causal Structure with Gradient
Descent* (ICML 2024), seeds 002/003, in catalogue order. Positions are 0-based here (N writes
``1..T``; N's query ``s_T`` is position ``T-1``).

Submodules: ``task_laws`` (N.T: the task's laws, L* and the Bayes predictor), ``gradient`` (N.K3: the
gradient at initialisation is a chi-square mutual information), ``constructions`` (N.K7
standard vs disentangled transformer, N.K8 / N.K9 the constructions of Knowls 8 and 9; N.K9's
trained tier in ``constructions_trained``), ``trained`` (N.K1, N.K4 on the reduced model, and
N.K10, decided by the prior audit), ``experiments`` (N.E, N's Fig. 2). Shared: ``reporting``
(numbers across seeds); the samplers and runs are in :mod:`sim.papers.nichani.training`, the recipes in
:mod:`sim.papers.nichani.recipes`.
"""
from __future__ import annotations

from sim.claims.base import collect_claims


_ORDER = ("N.T", "N.K3", "N.K1", "N.K4", "N.K7", "N.K8", "N.K9", "N.K10", "N.E")
_SUBMODULES = ("task_laws", "gradient", "constructions", "trained", "experiments")


CLAIMS = collect_claims(__name__, _SUBMODULES, _ORDER)
