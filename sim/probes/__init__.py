"""Mechanism probes: read a trained model's attention and weights and score them against the
theory's mechanism (detection patterns, DESIGN principle 5) and the Bayes baselines.

One module per paper's models: :mod:`sim.probes.wei` (W's two-layer transformer: copier
scores, ``W_KQ`` block structure, column/row-softmax errors, layer 2 against the BMA
posterior) and :mod:`sim.probes.nichani` (N's models: attention mass on the true adjacency,
which parent each head takes). Import the module you need, e.g.
``from sim.probes.wei import copier_report``.
"""
from . import nichani, wei

__all__ = ["nichani", "wei"]
