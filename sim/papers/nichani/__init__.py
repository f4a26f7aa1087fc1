"""Nichani, Damian & Lee, *How Transformers Learn Causal Structure with Gradient Descent*
(ICML 2024), seeds 002/003: claims N.T-N.E.

``task`` (N's task: batched stationary laws, population losses, the Bayes gap), ``model``
(the reduced and disentangled models, the Knowl 8/9 constructions), ``standard`` (a standard
transformer and Knowl 7's exact maps), ``probes`` (attention on the true adjacency),
``recipes`` (the training recipes, as data), ``training`` (samplers, runs), ``claims/`` (the checks).
"""
