"""W's tasks, as far as more than one claim samples them.

W Prop 2's continuous task embeds each token through an orthogonal ``A`` (W.P2's assumption);
the discrete task's sampler is :func:`sim.sampling.sample_w_prompts` (torch twin
:func:`sim.sampling.sample_w_prompts_torch`), shared with the Monte Carlo checks, and the
trained claims' task is in :mod:`sim.papers.wei.training`.
"""
from __future__ import annotations

import numpy as np

from sim.verdict import Assumption, Outcome, TierResult, tier_verdict

__all__ = ["ORTHO_TOL", "RHO_RANGE", "orthogonal_matrix", "rho_assumption", "undefined_rho_record",
           "undefined_rho_tier"]


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


# W.P2 (x_h = rho A^T x_pa + sqrt(1 - rho^2) eta): no model at |rho| >= 1, in any of its tiers
RHO_RANGE = "0 < |rho| < 1"


def rho_assumption(rho: float) -> Assumption:
    """W.P2's assumption on rho, named alike in every tier."""
    return Assumption(RHO_RANGE, 0 < abs(rho) < 1, f"rho = {rho}")


def undefined_rho_record(rho) -> dict:
    """The counterexample record of W.P2 at ``|rho| >= 1``: the noise variance ``1 - rho^2`` and why it is not
    evaluated there."""
    return {"rho": rho, "why": f"1 - rho^2 = {1 - rho * rho:g} is the noise variance of x_h given its parent: at "
                               "|rho| >= 1 the model is no Gaussian (and c1, c2 divide by 0), so it is not evaluated"}


def undefined_rho_tier(tier: str, rho: float, assumptions: list[Assumption]) -> TierResult:
    """The result of a sampled tier at ``|rho| >= 1``: ASSUMPTION_UNMET, not evaluated (W.T1's rule for
    a construction that does not exist: never a crash)."""
    return TierResult(tier, tier_verdict(assumptions, Outcome.UNDECIDED), Outcome.UNDECIDED,
                      f"the model is undefined at rho = {rho} (noise variance 1 - rho^2 <= 0); not evaluated",
                      assumptions=assumptions, counterexample=undefined_rho_record(rho),
                      conclusion_without_assumptions="not evaluated: the model does not exist there")
