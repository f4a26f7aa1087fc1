"""W's tasks, as far as more than one claim samples them.

W Prop 2's continuous task embeds each token through an orthogonal ``A`` (W.P2's assumption);
the discrete task's sampler is :func:`sim.sampling.sample_w_prompts` (torch twin
:func:`sim.sampling.sample_w_prompts_torch`), shared with the Monte Carlo checks, and the
trained claims' task is in :mod:`sim.papers.wei.training`.
"""
from __future__ import annotations

import numpy as np

__all__ = ["ORTHO_TOL", "orthogonal_matrix"]


# W.P2 assumes A exactly orthogonal; in float64 "orthogonal" means round-off from it. Haar draws by QR
# deviate by max |A^T A - I| <= 2e-15 (measured, d <= 64). A deviation delta moves the quadratic part of the
# BMA logit, c2 x^T (A A^T - I) x, by up to d delta relative, so an A counted as orthogonal must keep
# d delta far below W.P2's IDENTITY_RTOL (1e-9): at 1e-8 an A with delta = 6e-9 met the assumption and
# FAILed the identity.
ORTHO_TOL = 1e-12


def orthogonal_matrix(rng: np.random.Generator, d: int, kind: str = "orthogonal") -> np.ndarray:
    """Haar orthogonal ``A`` (QR with the sign fix), or with its columns scaled by 0.6..1.4
    (``kind="nonorthogonal"``, which breaks W.P2's assumption)."""
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    q = q * np.sign(np.diag(r))
    if kind == "orthogonal":
        return q
    if kind == "nonorthogonal":
        return q @ np.diag(np.linspace(0.6, 1.4, d))
    raise ValueError(f"unknown A kind {kind!r}; expected 'orthogonal' or 'nonorthogonal'")
