"""The Markov home's training recipes, as data: the settings a claim, the ``sweep`` command's
presets and the benchmarks start from.

- :data:`EDELMAN_MAIN`: Edelman et al.'s main configuration (their paper and published code,
  github.com/EzraEdelman/Evolution-of-Statistical-Induction-Heads): 2 states, a fresh chain per
  sequence with Dirichlet(1) rows, block 100, 2 attention-only layers, 1 head, width 16, relative
  positions, AdamW lr 5e-4 (betas 0.9/0.95, weight decay 0.1), batch 64; trained here without
  their dropout of 0.1.
- :data:`GIBSON_BASE`: G.1's settings (seed 004's setting, sizes for a CPU): 10 states,
  Dirichlet(0.1) rows, N = 64, 2 layers of attention + MLP, width 64, Adam lr 1e-3, batch 32.

Keys are :class:`sim.papers.markov.task.MarkovRunSpec` fields; a claim's profile adds the grid
(``K``, ``seeds``) and the budget (``steps``, evaluation sizes).
"""
from __future__ import annotations

from sim.papers.markov.runs import PHASES

__all__ = ["EDELMAN_STAGES", "EDELMAN_MAIN", "GIBSON_BASE"]

#: E's stages, in the order training passes them
EDELMAN_STAGES = ("uniform", "unigram", "bigram")

#: Edelman et al.'s main configuration (see the module docstring), as
#: :class:`~sim.papers.markov.task.MarkovRunSpec` fields.
EDELMAN_MAIN = dict(C=2, K="inf", N=100, alpha=1.0, width=16, layers=2, heads=1, mlp=False, positions="relative",
                    dropout=0.0, lr=5e-4, betas=(0.9, 0.95), weight_decay=0.1, batch=64, strategies=EDELMAN_STAGES,
                    ood=True)

#: G.1's settings (see the module docstring), as :class:`~sim.papers.markov.task.MarkovRunSpec` fields.
GIBSON_BASE = dict(C=10, alpha=0.1, N=64, width=64, layers=2, heads=1, mlp=True, positions="relative", dropout=0.0,
                   lr=1e-3, betas=(0.9, 0.999), weight_decay=0.0, batch=32, strategies=PHASES, ood=True)
