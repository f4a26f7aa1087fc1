"""Helpers for the paper homes' claim tests: run one claim with small settings and return its result."""
import pytest

from sim.runner import RunConfig, evaluate_claim


@pytest.fixture
def run_claim(tmp_path):
    calls = []

    def _run(claim, *, prior=None, seed=0, **overrides):
        # the first call writes to tmp_path, each later one to a folder of its own: a test that swaps a fake
        # trainer between calls must not find the job records the call before wrote (sim.claims.jobs.run_jobs
        # reuses them, as a resumed run does)
        calls.append(claim.id)
        out = tmp_path if len(calls) == 1 else tmp_path / f"run{len(calls)}"
        out.mkdir(exist_ok=True)
        cfg = RunConfig(profile="quick", seed=seed, overrides={claim.id: overrides})
        return evaluate_claim(claim, cfg, out, prior=prior)

    return _run


def tier(result, name):
    return next(t for t in result.tiers if t.tier == name)
