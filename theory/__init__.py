"""Exact, pure derivations for the theory of how transformers learn causal structure in context.

numpy, scipy and sympy only (and python-flint's ball arithmetic for the certified tier): no
torch, no global random state, no I/O. Every function is a function of ``(pi, tree, root
law[, prior])`` or of a joint pmf, with the convention and the paper's equation in its
docstring. Conventions: ``shared/CLAIMS.md``. Submodules not re-exported here (so ``import
theory`` stays light): ``theory.symbolic`` (sympy derivations), ``theory.strategies`` (public
hypothesis strategies), ``theory.intervals`` and ``theory.certified`` (the certified tier's
enclosures and branch-and-bound).
"""
from .errors import TheoryError
from .structures import CausalTree
from .markov import (validate_stochastic, validate_prob_vector, stationary, stationary_batch, stationary_positive,
                     closed_classes, chain_structure_batch)
from .joint import marginal, marginals, pairwise_joint, all_pairwise_joints, channel, sequence_pmf
from .information import f_divergence, mutual_information, entropy
from .contraction import dobrushin, eta_chi2, eta_kl, EtaKL, contraction_report
from .bma import (
    bma_log_scores,
    bma_posterior,
    bma_posterior_bruteforce,
    bma_posterior_matrix,
    bma_predictive,
    expected_loglik,
    recursive_trees,
)
from .gradients import nichani_gradient_signal, nichani_parent_chi2, wei_gradient_at_zero, wei_chi2_signal
from .dirichlet import (
    add_alpha_batch,
    add_alpha_predictive,
    bayes_predictive_estimate,
    dirichlet_row_entropy,
    edge_count_rows,
    edge_counts,
    exact_bayes_predictive,
)
from .largedev import (
    ChernoffResult,
    MapErrorExponent,
    bahadur_rao_log_error,
    bahadur_rao_prefactor,
    chernoff_exponent,
    llr_law,
    map_error_exponent,
    pairwise_error_exact,
)
from .continuous import gaussian_bma_constants, gaussian_bma_logits, gaussian_bma_posterior, bilinear_logits

__all__ = [
    "TheoryError",
    "CausalTree",
    "validate_stochastic",
    "validate_prob_vector",
    "stationary",
    "stationary_batch",
    "stationary_positive",
    "chain_structure_batch",
    "closed_classes",
    "marginal",
    "marginals",
    "pairwise_joint",
    "all_pairwise_joints",
    "channel",
    "sequence_pmf",
    "f_divergence",
    "mutual_information",
    "entropy",
    "dobrushin",
    "eta_chi2",
    "eta_kl",
    "EtaKL",
    "contraction_report",
    "bma_log_scores",
    "bma_posterior",
    "bma_posterior_bruteforce",
    "bma_posterior_matrix",
    "bma_predictive",
    "expected_loglik",
    "recursive_trees",
    "nichani_gradient_signal",
    "nichani_parent_chi2",
    "add_alpha_batch",
    "add_alpha_predictive",
    "bayes_predictive_estimate",
    "dirichlet_row_entropy",
    "edge_count_rows",
    "edge_counts",
    "exact_bayes_predictive",
    "wei_gradient_at_zero",
    "wei_chi2_signal",
    "ChernoffResult",
    "MapErrorExponent",
    "bahadur_rao_log_error",
    "bahadur_rao_prefactor",
    "chernoff_exponent",
    "llr_law",
    "map_error_exponent",
    "pairwise_error_exact",
    "gaussian_bma_constants",
    "gaussian_bma_logits",
    "gaussian_bma_posterior",
    "bilinear_logits",
]
