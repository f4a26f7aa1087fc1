"""A user's own prior-dependent claim, written the way a researcher would (docs/tutorials/prior.md).

Loaded with ``icl-verify prior SPEC --plugin tests/sim/data/user_prior_claims.py``. It draws
its matrices through ``sim.claims.inputs.draw_matrices`` and ``sim.claims.base.matrices_strategy``,
so ``icl-verify prior`` hands it the user's prior; ``prior_dependent=True`` is what makes
``icl-verify prior`` select it.

USER.DOBRUSHIN: if every entry of pi is at least gamma/d with gamma > 0, the Dobrushin
coefficient is at most 1 - gamma (so the chain contracts strictly). Where gamma = 0 the bound
says nothing, and the check asks whether strict contraction (Dobrushin < 1) survives.
"""
from hypothesis import strategies as st

from sim.claims.base import Claim, Context, InstanceCheck, Source, matrices_strategy, property_tier, summarize_instances
from sim.claims.inputs import draw_matrices, record_matrix
from sim.verdict import Outcome
from theory import dobrushin

GAMMA = "min pi >= gamma/d with gamma > 0"


def _check(pi, slack):
    gamma = pi.shape[0] * float(pi.min())
    eta = dobrushin(pi)
    if gamma > 0:
        bound = 1.0 - gamma
        margin = bound + slack - eta
        return gamma, eta, bound, (Outcome.HELD if margin >= -1e-12 else Outcome.VIOLATED), margin
    margin = 1.0 - eta  # where the lemma is silent: does strict contraction (eta < 1) survive?
    return gamma, eta, 1.0, (Outcome.HELD if margin > 1e-12 else Outcome.VIOLATED), margin


def _exact(ctx: Context):
    checks = []
    for d in ctx.settings["dims"]:
        for pi in draw_matrices(ctx, ctx.settings["n_matrices"], d):
            gamma, eta, bound, out, margin = _check(pi, ctx.params["slack"])
            checks.append(InstanceCheck({GAMMA: gamma > 0}, out, margin,
                                        {"pi": record_matrix(pi), "gamma": gamma, "dobrushin": eta, "bound": bound}))
    return summarize_instances("exact", checks, [GAMMA], what="Dobrushin(pi) <= 1 - gamma")


def _property(ctx: Context):
    strategy = matrices_strategy(ctx, st.integers(2, 4), min_entry_fraction=st.floats(0.05, 1.0))

    def violates(pi):
        return _check(pi, ctx.params["slack"])[3] is Outcome.VIOLATED

    def record(pi):
        gamma, eta, bound, _, _ = _check(pi, ctx.params["slack"])
        return {"pi": record_matrix(pi), "gamma": gamma, "dobrushin": eta, "bound": bound}

    return property_tier(ctx, strategy, violates, record, what="Dobrushin(pi) <= 1 - gamma",
                         assumptions_of=lambda pi: {GAMMA: float(pi.min()) > 0})


_ALL = ("quick", "standard", "paper")
CLAIMS = [
    Claim(id="USER.DOBRUSHIN", title="A user's claim: a floor makes the chain contract",
          source=Source("USER", "test file", "min pi >= gamma/d => Dobrushin(pi) <= 1 - gamma"),
          statement="Every drawn pi with gamma = d min pi > 0 has Dobrushin coefficient <= 1 - gamma; where gamma = 0, "
                    "strict contraction (Dobrushin < 1) is checked instead.",
          assumptions=(GAMMA,), checks={"exact": _exact, "property": _property},
          settings={p: {"tiers": ("exact", "property"), "dims": (2, 3), "n_matrices": 20, "max_examples": 60}
                    for p in _ALL},
          params={"slack": 0.0}, prior_dependent=True),
]
