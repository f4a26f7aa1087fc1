"""In-context Markov chains: Gibson et al. (arXiv 2604.12151, seed 004; claims G.1-G.8) and
Edelman et al. (cited in seed 000; claim E.1), which share the K-chain task.

``task`` (the K-chain task, the strategies' predictors, training and evaluating the
Markov-chain LM), ``model`` (the Markov-chain LM), ``probes`` (detection patterns, ablations,
patching and the pairs probe, through the model's hook points), ``sa_transformer`` (G's minimal
symmetric-constrained attention-only model), ``task_head`` (G's minimal model of the
task-recognition head: encoder, pooling into the task vector, decoder), ``runs`` (the runs a
claim asks for, their distances to the strategies, the trained models kept in memory, and
figures), ``claims/`` (the checks).
"""
