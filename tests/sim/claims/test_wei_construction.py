"""W.T1 (W Theorem 1): the construction's attention -> BMA posterior at rate e^{-2 beta};
prediction -> pi(.|x_pa) as L grows. PASS on defaults, FAIL on wrong variants, ASSUMPTION_UNMET
(never a crash) when pi has a zero entry."""
import numpy as np
import pytest

from sim.claims.wei.construction import W_T1, _fit_rate
from sim.priors import Point
from sim.verdict import Verdict

SMALL = {"n_matrices": 1, "dims": (2, 3), "n_contexts": 6, "L": 3, "H": 4, "mc_L": (1, 4, 16), "mc_prompts": 120,
         "mc_matrices": 1, "mc_H": 5}


@pytest.fixture
def run(run_claim):
    return lambda claim, prior=None, **over: run_claim(claim, prior=prior, **{**SMALL, **over})


def test_passes_on_defaults_with_rate_two_and_figures(run, tmp_path):
    res = run(W_T1)
    assert res.verdict is Verdict.PASS, [(t.tier, t.verdict, t.summary, t.error) for t in res.tiers]
    exact = next(t for t in res.tiers if t.tier == "exact")
    nums = {n.name: n for n in exact.numbers}
    assert nums["max |attention - BMA posterior| at largest beta"].value < 1e-8
    for key in ("fitted rate in beta (min over matrices)", "fitted rate in beta (max over matrices)"):
        assert abs(nums[key].value - 2.0) < 0.05  # the copy error falls like e^{-2 beta}
    assert nums["max |mixture prediction - bma_predictive| at largest beta"].value < 1e-8
    # The logits reading is a different predictor from the BMA predictive (not hidden).
    assert nums["logits reading: max |prediction - bma_predictive|"].value > 1e-3
    assert any("logits" in r["name"] for r in exact.readings)
    mc = next(t for t in res.tiers if t.tier == "montecarlo")
    tv = [n.value for n in mc.numbers if n.name.startswith("mean TV") and "mixture" in n.name]
    assert tv == sorted(tv, reverse=True) and tv[-1] < tv[0]
    for t in res.tiers:
        assert t.figures and all((tmp_path / f).exists() for f in t.figures)


def test_transposed_W_is_caught(run):
    res = run(W_T1.variant(W_block=lambda pi: np.log(pi).T), tiers=("exact",))
    assert res.verdict is Verdict.FAIL
    cex = res.tiers[0].counterexample
    assert cex and cex["max |attention - posterior|"][-1] > 1e-3


def test_claimed_rate_four_is_caught(run):
    res = run(W_T1.variant(rate=4.0), tiers=("exact",))
    assert res.verdict is Verdict.FAIL
    cex = res.tiers[0].counterexample
    assert cex and cex["claimed rate"] == 4.0 and abs(cex["fitted rate (err ~ e^{-rate beta}, beta >= 4)"] - 2) < 0.1


@pytest.mark.parametrize("tier", ["exact", "montecarlo"])
def test_zero_entry_is_assumption_unmet_not_a_crash(run, tier):
    prior = Point(np.array([[0.0, 1.0], [0.4, 0.6]]))
    res = run(W_T1, prior=prior, tiers=(tier,))
    t = res.tiers[0]
    assert t.verdict is Verdict.ASSUMPTION_UNMET, (t.summary, t.error)
    assert "undefined" in (t.conclusion_without_assumptions + t.summary) or "not evaluated" in \
        t.conclusion_without_assumptions
    assert not any(a.holds for a in t.assumptions)


def test_rate_fit_ignores_roundoff_floor():
    betas = [4, 6, 8, 10, 12, 14, 16]
    errs = [3e-3 * np.exp(-2 * (b - 4)) for b in betas]
    errs[-1] = 1e-16  # round-off, left out of the fit
    rate, used = _fit_rate(betas, errs)
    assert abs(rate - 2.0) < 1e-9 and used == 6


def test_an_unmeasurable_rate_is_inconclusive_not_a_fail(run):
    """A near-deterministic pi (min pi = 1e-9, as Dirichlet(0.1) draws can be): the attention error
    is below the round-off floor from the first fitted beta on, so the rate cannot be measured.
    The rest of the conclusion holds; the rate is reported as not measurable, not as violated."""
    pi = np.array([[1e-9, 1 - 1e-9], [1 - 1e-9, 1e-9]])
    res = run(W_T1, prior=Point(pi), tiers=("exact",))
    t = res.tiers[0]
    assert t.verdict is Verdict.INCONCLUSIVE and "beta grid" in t.budget
    assert "undecided" in t.summary and "measurable on no matrix" in t.summary
    assert any(n.name == "matrices whose rate is not measurable" and n.value == 1 for n in t.numbers)
