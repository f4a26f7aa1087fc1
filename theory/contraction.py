"""PLACEHOLDER: being written; replace this whole file."""
def dobrushin(*a, **k):
    raise NotImplementedError
def eta_chi2(*a, **k):
    raise NotImplementedError
def eta_kl(*a, **k):
    raise NotImplementedError
def EtaKL(*a, **k):
    raise NotImplementedError
