"""PLACEHOLDER: being written; replace this whole file."""
def chernoff_exponent(*a, **k):
    raise NotImplementedError
def llr_law(*a, **k):
    raise NotImplementedError
def pairwise_error_exact(*a, **k):
    raise NotImplementedError
