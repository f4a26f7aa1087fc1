"""The verifier never ERRORs on a draw it made itself: every property tier, at several master
seeds (seed 13 once drew an entry of 1.1e-308 that theory.stationary could not handle)."""
import pytest

from sim.claims import all_claims
from sim.runner import RunConfig, evaluate_claim

PROPERTY_CLAIMS = [c for c in all_claims() if "property" in c.checks]


@pytest.mark.parametrize("seed", [13, 2026, 90210])
@pytest.mark.parametrize("claim", PROPERTY_CLAIMS, ids=lambda c: c.id)
def test_property_tiers_never_error_on_their_own_draws(tmp_path, claim, seed):
    cfg = RunConfig(profile="quick", seed=seed, overrides={claim.id: {"tiers": ("property",), "max_examples": 30}})
    res = evaluate_claim(claim, cfg, tmp_path)
    assert [t.tier for t in res.tiers] == ["property"]
    assert res.tiers[0].verdict.value != "ERROR", res.tiers[0].error
