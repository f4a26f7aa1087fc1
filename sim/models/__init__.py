"""The transformers of the papers, in torch: one readable file per model family.

- :mod:`sim.models.wei`: W's two-layer disentangled transformer (discrete and continuous)
  and W Theorem 1's construction.
- :mod:`sim.models.nichani`: N's reduced model, disentangled transformer, the Knowl 8/9
  constructions and their numpy reference estimators.
- :mod:`sim.models.standard`: a standard decoder transformer and N Knowl 7's exact maps.
- :mod:`sim.models.sa_transformer`: G's symmetric-constrained attention-only transformer (the
  minimal model of G's G1 -> G2 transition).
- :mod:`sim.models.hooks`: named hook points, ``run_with_cache``, ``run_with_hooks``.

Models run on whatever device and dtype their parameters have (float32 by default,
float64 for exactness checks); random initialisers take a ``torch.Generator``.
"""
from .hooks import HookPoint, hook_points, run_with_cache, run_with_hooks
from .nichani import (
    DisentangledTransformer,
    ReducedModel,
    empirical_multiparent_estimator,
    empirical_transition_estimator,
    nichani_construction,
    nichani_construction_limit,
    nichani_multiparent_construction,
    nichani_multiparent_construction_limit,
)
from .sa_transformer import SATransformer
from .standard import StandardTransformer, to_disentangled, to_standard
from .wei import WeiContinuous, WeiTransformer, wei_construction

__all__ = [
    "HookPoint",
    "hook_points",
    "run_with_cache",
    "run_with_hooks",
    "SATransformer",
    "WeiTransformer",
    "WeiContinuous",
    "wei_construction",
    "ReducedModel",
    "DisentangledTransformer",
    "nichani_construction",
    "nichani_multiparent_construction",
    "empirical_transition_estimator",
    "empirical_multiparent_estimator",
    "nichani_construction_limit",
    "nichani_multiparent_construction_limit",
    "StandardTransformer",
    "to_disentangled",
    "to_standard",
]
