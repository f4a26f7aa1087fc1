"""Claims of Edelman et al., *The Evolution of Statistical Induction Heads* (2024), as cited by W.
Trained claim; the tier that decides it is issue #6."""
from __future__ import annotations

from .base import Claim, Source

E_1 = Claim(
    id="E.1",
    title="Training passes uniform -> unigram -> bigram (statistical induction head)",
    source=Source("E", "Sec. 3", "in-context Markov chains, 2 states, block 100"),
    statement=("On in-context Markov chains the trained transformer's predictions move in stages from uniform to "
               "in-context unigram to in-context bigram; measured as the KL distance to each strategy over training."),
    assumptions=(), checks={}, settings={},
    pending="trained tier not built yet (issue #6); decided by the trained tier of the quick profile once built",
)

CLAIMS = [E_1]
