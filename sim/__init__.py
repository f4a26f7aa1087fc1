"""Everything stochastic or trained: samplers, Monte Carlo, models, training, probes,
the claim registry, the verdict engine, reports and the ``icl-verify`` CLI.

``sim`` imports ``theory``; ``theory`` never imports ``sim``.
"""

__version__ = "0.1.0"
