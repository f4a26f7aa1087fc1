"""Helpers for the paper homes' claim tests: run one claim with small settings and return its result."""
import pytest

from sim.runner import RunConfig, evaluate_claim


@pytest.fixture
def run_claim(tmp_path):
    def _run(claim, *, prior=None, seed=0, **overrides):
        cfg = RunConfig(profile="quick", seed=seed, overrides={claim.id: overrides})
        return evaluate_claim(claim, cfg, tmp_path, prior=prior)

    return _run


def tier(result, name):
    return next(t for t in result.tiers if t.tier == name)
