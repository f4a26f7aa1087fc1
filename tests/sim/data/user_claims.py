"""User-defined claims, written the way a researcher would (docs/tutorials/own-claims.md).

Used by the tests: loaded with ``icl-verify run --plugin tests/sim/data/user_claims.py``.
``USER.MEAN`` checks a Monte Carlo mean against its exact value; ``USER.SLOW*`` take a
moment each so a run can be killed half-way in the resume test.
"""
import time

import numpy as np

from sim.claims.base import Claim, Context, Source
from sim.montecarlo import mean_estimate
from sim.verdict import Number, Outcome, TierResult, compare, tier_verdict
from theory import stationary
from theory.strategies import stochastic_matrices


def _mean_check(ctx: Context) -> TierResult:
    """E[x] of a draw from the stationary law of a random 3-state pi, against the exact mean."""
    rng_pi, rng_x = ctx.rng("pi"), ctx.rng("samples")
    pi = rng_pi.dirichlet(np.ones(3), size=3)
    mu = stationary(pi)
    exact = float(mu @ np.arange(3)) + ctx.params["offset"]
    x = rng_x.choice(3, size=ctx.settings["n"], p=mu)
    est = mean_estimate(x, seed=ctx.seed_for("samples"))
    tol = 0.05
    # |est - exact| <= tol, decided with the error bar
    out = compare(tol, abs(est.value - exact), stderr=est.stderr, z=ctx.z)
    cex = None if out is not Outcome.VIOLATED else {"pi": pi.tolist(), "estimate": est.value, "exact": exact}
    return TierResult("montecarlo", tier_verdict([], out), out, f"mean {est.value:.4f} vs exact {exact:.4f}",
                      numbers=[est.number("E[x]", tolerance=tol), Number("exact E[x]", exact)], counterexample=cex)


def _slow_check(ctx: Context) -> TierResult:
    time.sleep(ctx.settings.get("sleep", 0.6))
    value = float(ctx.rng("value").random())
    return TierResult("exact", tier_verdict([], Outcome.HELD), Outcome.HELD, f"drew {value!r}",
                      numbers=[Number("draw", value, seed=ctx.seed_for("value"))])


def _property_check(ctx: Context) -> TierResult:
    from hypothesis import strategies as st

    from sim.claims.base import search_counterexample

    bound = ctx.params["row_sum"]
    ex, tried = search_counterexample(st.integers(2, 4).flatmap(stochastic_matrices),
                                      lambda pi: abs(pi.sum(axis=1) - bound).max() > 1e-9,
                                      max_examples=50, seed=ctx.seed_for("property"))
    out = Outcome.HELD if ex is None else Outcome.VIOLATED
    return TierResult("property", tier_verdict([], out), out, f"searched {tried} matrices",
                      counterexample=None if ex is None else {"pi": ex.tolist()})


_ALL = ("quick", "standard", "paper")
CLAIMS = [
    Claim(id="USER.MEAN", title="A user's Monte Carlo claim", source=Source("USER", "test file"),
          statement="The sample mean of the stationary law matches the exact mean within 0.05.",
          assumptions=(), checks={"montecarlo": _mean_check},
          settings={p: {"tiers": ("montecarlo",), "n": 40000} for p in _ALL}, params={"offset": 0.0}),
    Claim(id="USER.ROWS", title="Strategies give stochastic rows", source=Source("USER", "test file"),
          statement="theory.strategies.stochastic_matrices rows sum to 1.", assumptions=(),
          checks={"property": _property_check}, settings={p: {"tiers": ("property",)} for p in _ALL},
          params={"row_sum": 1.0}),
] + [
    Claim(id=f"USER.SLOW{k}", title=f"Slow claim {k}", source=Source("USER", "test file"),
          statement="Takes a moment; draws one number from its own stream.", assumptions=(),
          checks={"exact": _slow_check}, settings={p: {"tiers": ("exact",)} for p in _ALL})
    for k in range(1, 5)
]
