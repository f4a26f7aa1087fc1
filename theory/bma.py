"""PLACEHOLDER: being written; replace this whole file."""
def bma_log_scores(*a, **k):
    raise NotImplementedError
def bma_posterior(*a, **k):
    raise NotImplementedError
def bma_posterior_bruteforce(*a, **k):
    raise NotImplementedError
def bma_predictive(*a, **k):
    raise NotImplementedError
def expected_loglik(*a, **k):
    raise NotImplementedError
def recursive_trees(*a, **k):
    raise NotImplementedError
