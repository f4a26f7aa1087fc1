"""W's tasks, as far as more than one claim samples them.

W Prop 2's continuous task embeds each token through an orthogonal ``A`` (W.P2's assumption);
the discrete task's sampler is :func:`sim.sampling.sample_w_prompts` (torch twin
:func:`sim.sampling.sample_w_prompts_torch`), shared with the Monte Carlo checks, and the
trained claims' task is in :mod:`sim.papers.wei.training`.
"""
from __future__ import annotations

import numpy as np

__all__ = ["orthogonal_matrix"]


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
