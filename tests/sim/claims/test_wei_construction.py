"""W.T1 (W Theorem 1): the construction's attention -> BMA posterior as beta -> inf (within the
construction's own error bound; the rate e^{-2 beta} is a finding); prediction -> pi(.|x_pa) as L
grows. PASS on defaults, FAIL on wrong variants, ASSUMPTION_UNMET (never a crash) when pi has a
zero entry."""
import numpy as np
import pytest

from sim.claims.wei.construction import W_T1, _fit_rate, attention_error_bound
from sim.priors import Point
from sim.verdict import FindingKind, Verdict

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
    att = nums["max |attention - BMA posterior| at largest beta"]
    assert att.value <= att.tolerance < 1e-8  # within the construction's bound, which is tiny at beta = 14
    assert nums["smallest bound / error over betas and matrices (>= 1: within the bound)"].value >= 1
    for key in ("fitted rate in beta (min over matrices)", "fitted rate in beta (max over matrices)"):
        assert abs(nums[key].value - 2.0) < 0.05  # the copy error falls like e^{-2 beta}
    assert nums["max |mixture prediction - bma_predictive| at largest beta"].value < 1e-8
    # The rate is a stricter-criterion finding; the logits output lies outside W's setting and is a
    # different predictor from the BMA predictive (reported, not hidden).
    f = {x.kind: x for x in exact.findings}
    assert f[FindingKind.STRICTER].verdict is Verdict.PASS
    assert f[FindingKind.OUTSIDE].verdict is Verdict.FAIL
    assert nums["logits reading: max |prediction - bma_predictive|"].value > 1e-3
    assert "logits output differs" in res.headline and res.headline.startswith("PASS (finding")
    mc = next(t for t in res.tiers if t.tier == "montecarlo")
    tv = [n.value for n in mc.numbers if n.name.startswith("mean TV") and "mixture" in n.name]
    assert tv == sorted(tv, reverse=True) and tv[-1] < tv[0]
    assert [x.kind for x in mc.findings] == [FindingKind.OUTSIDE]
    for t in res.tiers:
        assert t.figures and all((tmp_path / f).exists() for f in t.figures)


def test_error_bound_vanishes_and_is_not_vacuous_at_large_beta():
    bounds = [attention_error_bound(b, 4, 5, 3, 5.0) for b in (4, 8, 14, 30)]
    assert bounds == sorted(bounds, reverse=True)
    assert bounds[2] < 1e-8 and bounds[3] < 1e-11  # float64 round-off only at beta = 30


def test_transposed_W_is_caught(run):
    res = run(W_T1.variant(W_block=lambda pi: np.log(pi).T), tiers=("exact",))
    assert res.verdict is Verdict.FAIL
    cex = res.tiers[0].counterexample
    assert cex and cex["max |attention - posterior|"][-1] > 1e-3
    assert cex["max |attention - posterior|"][-1] > cex["error bound (construction, -> 0 as beta -> inf)"][-1]


def test_a_row_shifted_W_is_caught(run):
    """W + b 1^T (a row shift; W.P1: not an invariance) moves the attention off the posterior."""
    res = run(W_T1.variant(W_block=lambda pi: np.log(pi) + np.arange(pi.shape[0])[:, None]), tiers=("exact",))
    assert res.verdict is Verdict.FAIL


def test_a_column_shifted_W_still_passes(run):
    """W + 1 a^T (W.P1's invariance) leaves the attention at the posterior."""
    res = run(W_T1.variant(W_block=lambda pi: np.log(pi) + np.arange(pi.shape[0])[None, :]), tiers=("exact",))
    assert res.verdict is Verdict.PASS


def test_claimed_rate_four_is_a_failing_finding_not_the_verdict(run):
    res = run(W_T1.variant(rate=4.0), tiers=("exact",))
    assert res.verdict is Verdict.PASS  # W states the limit, not the rate
    rate = next(f for f in res.tiers[0].findings if f.kind is FindingKind.STRICTER)
    assert rate.verdict is Verdict.FAIL
    cex = rate.counterexample
    assert cex["claimed rate"] == 4.0 and abs(cex["fitted rate"] - 2) < 0.1


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


def test_an_unmeasurable_rate_is_an_inconclusive_finding_not_a_fail(run):
    """A near-deterministic pi (min pi = 1e-9, as Dirichlet(0.1) draws can be): the attention error
    is below the round-off floor from the first fitted beta on, so the rate cannot be measured.
    The limit itself holds (the error is within the bound at every beta): PASS; the rate finding
    says it was not measurable."""
    pi = np.array([[1e-9, 1 - 1e-9], [1 - 1e-9, 1e-9]])
    res = run(W_T1, prior=Point(pi), tiers=("exact",))
    t = res.tiers[0]
    assert t.verdict is Verdict.PASS, t.summary
    rate = next(f for f in t.findings if f.kind is FindingKind.STRICTER)
    assert rate.verdict is Verdict.INCONCLUSIVE and "not measurable" in rate.detail
    assert any(n.name == "matrices whose rate is not measurable" and n.value == 1 for n in t.numbers)
