"""PLACEHOLDER: being written; replace this whole file."""
def nichani_gradient_signal(*a, **k):
    raise NotImplementedError
def wei_gradient_at_zero(*a, **k):
    raise NotImplementedError
def wei_chi2_signal(*a, **k):
    raise NotImplementedError
