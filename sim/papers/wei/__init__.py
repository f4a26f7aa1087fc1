"""Wei, Chen, He & Yang, *How Transformers Learn Causal Structures In-Context* (ICLR 2026),
seeds 000/001: claims W.L1-W.E2.

``model`` (the two-layer disentangled transformer, discrete and continuous, and Theorem 1's
construction), ``probes`` (copier scores, ``W_KQ`` blocks, layer 2 against the BMA posterior),
``recipes`` (the training recipe, as data), ``training`` (the task sampler and runs of the
trained claims), ``extremes`` (the
tightness search space of the information lemmas), ``claims/`` (the checks).
"""
