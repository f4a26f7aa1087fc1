"""Users' own samplers for ``icl-verify prior path/to/user_priors.py:function``.

Each takes ``(rng, n)`` and returns an ``(n, d, d)`` array of transition matrices; the
broken ones exist to test the error messages.
"""
import numpy as np


def floored(rng, n):
    """3-state Dirichlet(1) rows floored at gamma = 0.3: meets every assumption of the audit."""
    return 0.1 + 0.7 * rng.dirichlet(np.ones(3), size=(n, 3))


def asymmetric_uniform_mean(rng, n):
    """J/3 +- eps X with X nonzero only in row 0: uniform mean, floor, but not relabelling-symmetric."""
    X = np.zeros((3, 3))
    X[0, 0], X[0, 1] = 1.0, -1.0
    sign = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    return np.full((n, 3, 3), 1 / 3) + 0.2 * sign[:, None, None] * X[None]


def not_stochastic(rng, n):
    out = rng.dirichlet(np.ones(3), size=(n, 3))
    out[:, 1] *= 1.2  # row 1 sums to 1.2
    return out


def breaks_later(rng, n):
    """Fine for small requests; the 8th draw of a larger one has a negative entry."""
    out = rng.dirichlet(np.ones(3), size=(n, 3))
    if n > 7:
        out[7, 2] = [1.5, -0.25, -0.25]
    return out


def raises(rng, n):
    raise RuntimeError("my sampler is broken")


def wrong_shape(rng, n):
    return rng.dirichlet(np.ones(3), size=(n, 3, 2))


def not_an_array(rng, n):
    return "a string"
