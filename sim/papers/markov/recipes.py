"""The Markov home's training recipes, as data: the settings a claim, the ``sweep`` command's
presets and the benchmarks start from.

- :data:`EDELMAN_MAIN`: Edelman et al.'s main configuration (their paper and published code,
  github.com/EzraEdelman/Evolution-of-Statistical-Induction-Heads): 2 states, a fresh chain per
  sequence with Dirichlet(1) rows, block 100, 2 attention-only layers, 1 head, width 16, relative
  positions, AdamW lr 5e-4 (betas 0.9/0.95, weight decay 0.1), batch 64; trained here without
  their dropout of 0.1.
- :data:`GIBSON_BASE`: G.1's settings (seed 004's setting, sizes for a CPU): 10 states,
  Dirichlet(0.1) rows, N = 64, 2 layers of attention + MLP, width 64, Adam lr 1e-3, batch 32.
- :data:`SA_RUNS`: the SA-transformer runs G.2 decides on and G.7 reads (the same runs: G.7 finds
  them in G.2's job records when it is evaluated after G.2), per profile: plain SGD lr 1,
  init N(0, 0.01^2), the N grid, seeds per N and batch per seed, the step budget, and the
  evaluation (every 10 steps on 1024 fresh sequences, stop after 3 evaluations in G2).

Keys are :class:`sim.papers.markov.task.MarkovRunSpec` fields; a claim's profile adds the grid
(``K``, ``seeds``) and the budget (``steps``, evaluation sizes).
"""
from __future__ import annotations

from sim.papers.markov.runs import PHASES

__all__ = ["EDELMAN_STAGES", "EDELMAN_MAIN", "GIBSON_BASE", "SA_RUNS"]

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

_SA_COMMON = dict(sa_layer1="learned", sa_lr=1.0, sa_init_std=0.01, sa_eval_every=10, sa_n_eval=1024, sa_patience=3,
                  sa_batch=128)

#: G.2's and G.7's SA-transformer runs per profile (see the module docstring). Quick's grid reaches
#: N = 512: the exponent of tau_2Gen ~ N / log N must be told from N's (b ≈ 1.19 on this grid) by
#: more than z standard errors of the fit and of the O(1 / log N) correction, which N <= 256 does not
#: do at every master seed.
SA_RUNS = {
    "quick": dict(_SA_COMMON, sa_N_grid=(16, 32, 64, 128, 256, 512), sa_seeds=5, sa_max_steps=1500),
    "standard": dict(_SA_COMMON, sa_N_grid=(16, 32, 64, 128, 256, 512), sa_seeds=6, sa_max_steps=3000),
    "paper": dict(_SA_COMMON, sa_N_grid=(16, 32, 64, 128, 256, 512, 1024), sa_seeds=8, sa_max_steps=6000),
}
