"""Model-agnostic pieces shared by every paper's transformers.

- :mod:`sim.models.hooks`: named hook points, ``run_with_cache``, ``run_with_hooks``.

Each paper's models live in its home, one readable file per model family:
:mod:`sim.papers.wei.model` (W's two-layer disentangled transformer and W Theorem 1's
construction), :mod:`sim.papers.nichani.model` (N's reduced and disentangled models and the
Knowl 8/9 constructions), :mod:`sim.papers.nichani.standard` (a standard decoder transformer and
N Knowl 7's exact maps), :mod:`sim.papers.markov.model` (the Markov-chain LM of G and E) and
:mod:`sim.papers.markov.sa_transformer` (G's minimal model).

Models run on whatever device and dtype their parameters have (float32 by default,
float64 for exactness checks); random initialisers take a ``torch.Generator``.
"""
from sim.models.hooks import HookPoint, hook_points, run_with_cache, run_with_hooks

__all__ = ["HookPoint", "hook_points", "run_with_cache", "run_with_hooks"]
