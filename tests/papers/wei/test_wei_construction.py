"""W.T1 (W Theorem 1): the construction's attention -> BMA posterior as beta -> inf (within the
construction's own error bound; the rate e^{-2 beta} is a finding); prediction -> pi(.|x_pa) as L
grows. PASS on defaults, FAIL on wrong variants, ASSUMPTION_UNMET (never a crash) when pi has a
zero entry."""
import numpy as np
import pytest

from sim.papers.wei.claims.construction import W_T1, _fit_rate, attention_error_bound, decide_tv_limit
from sim.priors import Point
from sim.verdict import FindingKind, Outcome, Verdict

# The Monte Carlo grid reaches L = 48: the deciding check asks TV(L_max) <= TV(L_min) / 2, which L = 16 need not show.
SMALL = {"n_matrices": 1, "dims": (2, 3), "n_contexts": 6, "L": 3, "H": 4, "mc_L": (1, 4, 48), "mc_prompts": 120,
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


@pytest.mark.parametrize("claimed", [4.0, 2.5, 1.5])
def test_a_wrong_claimed_rate_is_a_failing_finding_not_the_verdict(run, claimed):
    """The fitted rates sit within rate_tol = 0.1 of 2; a claim 0.5 off (five tolerances) is refuted as a finding."""
    res = run(W_T1.variant(rate=claimed), tiers=("exact",))
    assert res.verdict is Verdict.PASS  # W states the limit, not the rate
    rate = next(f for f in res.tiers[0].findings if f.kind is FindingKind.STRICTER)
    assert rate.verdict is Verdict.FAIL
    cex = rate.counterexample
    assert cex["claimed rate"] == claimed and abs(cex["fitted rate"] - 2) < 0.1


def test_the_rate_two_is_a_passing_finding(run):
    res = run(W_T1, tiers=("exact",))
    rate = next(f for f in res.tiers[0].findings if f.kind is FindingKind.STRICTER)
    assert rate.verdict is Verdict.PASS and rate.counterexample is None


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


# ------------------------------------------------------------------- negative controls (issue 20) --
def test_montecarlo_controls_all_fail_and_are_reported(run):
    """The uniform mixture (W = 0) and the anti-BMA attention (W = -log pi) go through the tier's own
    deciding check (decide_tv_limit) and FAIL it; the construction PASSes."""
    mc = run(W_T1, tiers=("montecarlo",)).tiers[0]
    assert mc.verdict is Verdict.PASS, mc.summary
    assert [c.name.split(" (")[0] for c in mc.controls] == ["uniform mixture", "anti-BMA construction"]
    for c in mc.controls:
        assert c.verdict is Verdict.FAIL, (c.name, c.deciding)
        assert "TV(L=1) - 2 TV(L=48)" in c.deciding and c.numbers[0].value < 0


def test_the_anti_bma_construction_fails_the_montecarlo_tier(run):
    """A wrong mechanism in the real torch model: W_KQ = blockdiag(-log pi) sends the layer-2 attention to
    the least likely position, and the prediction moves away from pi(.|x_pa) as L grows."""
    res = run(W_T1.variant(W_block=lambda pi: -np.log(pi)), tiers=("montecarlo",))
    assert res.verdict is Verdict.FAIL, res.tiers[0].summary


def test_the_hand_built_layer_is_the_construction_at_large_beta():
    """attention_mixture (the controls' layer 2) with W = log pi is the torch construction's mixture output."""
    from sim.papers.wei.claims.construction import _build, _forward, attention_mixture
    from sim.sampling import random_recursive_parents, sample_w_prompts

    rng = np.random.default_rng(3)
    pi = np.array([[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.1, 0.2, 0.7]])
    tokens = sample_w_prompts(rng, pi, random_recursive_parents(rng, 5, 40), 6)  # (40, 7, 5)
    logp, _ = _forward(_build(pi, 6, 5, 30.0, {"W_block": np.log}, "mixture"), tokens)
    assert np.abs(np.exp(logp) - attention_mixture(tokens, pi, np.log(pi), 6)).max() < 1e-9


def test_decide_tv_limit_needs_the_error_to_head_for_zero():
    """The boundary of the deciding check on paired synthetic TVs: a decay to 0 holds; a plateau, and a
    decrease that has levelled off above half its start, are violations; a decrease still falling at
    the end of the grid but not yet at half is undecided (a finite L does not refute a limit)."""
    from sim.papers.wei.claims.construction import decide_tv_limit

    rng = np.random.default_rng(0)
    common = rng.normal(0, 0.005, 400)  # the prompts' own difficulty, shared across L (paired)

    def tvs(f, Ls):  # per-prompt TVs: the curve, the shared part, and a small part of each L's own
        return {L: f(L) + common + rng.normal(0, 0.002, 400) for L in Ls}

    Ls = (1, 4, 16, 48)
    to_zero = tvs(lambda L: 0.1 * np.exp(-L / 16), Ls)
    plateau = tvs(lambda L: 0.1 + 0 * L, Ls)
    assert decide_tv_limit(to_zero, 0, 3.0)["outcome"] is Outcome.HELD
    assert decide_tv_limit(plateau, 0, 3.0)["outcome"] is Outcome.VIOLATED
    levels_off = lambda L: 0.06 + 0.04 * np.exp(-L / 8)  # noqa: E731
    dec = decide_tv_limit(tvs(levels_off, Ls + (96,)), 0, 3.0)
    assert all(e.value > 0 for _, _, e in dec["steps"][:-1])  # it does decrease, step by step...
    assert not dec["still_falling"]  # ...then levels off, above half its start: a plateau
    assert dec["outcome"] is Outcome.VIOLATED and dec["halving_outcome"] is Outcome.VIOLATED
    slow = decide_tv_limit(tvs(lambda L: 0.1 / (1 + L / 96), Ls), 0, 3.0)
    assert slow["halving_outcome"] is Outcome.VIOLATED and slow["still_falling"]
    assert slow["outcome"] is Outcome.UNDECIDED and "larger L decides" in slow["line"]
    # the same slow decay, looked at far enough along L, holds
    assert decide_tv_limit(tvs(lambda L: 0.1 / (1 + L / 96), Ls + (96, 192, 384)), 0, 3.0)["outcome"] is Outcome.HELD


def test_the_l_grid_doubles_up_to_the_cap_and_the_halving_z_is_bonferroni():
    from scipy import stats

    from sim.sequential import bonferroni_z as halving_z
    from sim.sequential import doubling_grid

    assert doubling_grid((16, 1, 4, 48), 48) == [1, 4, 16, 48]
    assert doubling_grid((1, 4, 16, 48), 192) == [1, 4, 16, 48, 96, 192]
    assert doubling_grid((1, 4, 16, 48), 150) == [1, 4, 16, 48, 96, 150]
    with pytest.raises(ValueError, match="W.T1 setting mc_L_cap = 40 is below the largest L of the grid \\(48\\)"):
        doubling_grid((1, 48), 40, "W.T1 setting mc_L_cap")
    assert halving_z(3.0, 1) == 3.0
    assert stats.norm.sf(halving_z(3.0, 3)) == pytest.approx(stats.norm.sf(3.0) / 3)


def test_the_montecarlo_tier_looks_further_along_l_while_not_yet_at_half(run):
    """A grid that stops at L = 4 is not yet at half; the tier doubles L_max up to mc_L_cap, reports
    the grid it used, and decides there. Without room to extend it cannot PASS."""
    short = run(W_T1, tiers=("montecarlo",), mc_L=(1, 4), mc_L_cap=4).tiers[0]
    assert short.verdict is not Verdict.PASS, short.summary
    longer = run(W_T1, tiers=("montecarlo",), mc_L=(1, 4), mc_L_cap=64).tiers[0]
    assert longer.verdict is Verdict.PASS, longer.summary
    looked = [n.name for n in longer.numbers if n.name.startswith("mean TV(prediction, pi(.|x_pa)) at L=")]
    assert len(looked) > 2 and "extended to L=" in longer.summary and "Bonferroni over 5 looks" in longer.summary


def test_decide_tv_limit_decides_the_halving_at_its_own_z():
    """The halving TV(L_0) - 2 TV(L_max) > 0 is decided at z_halving when one is given: a t-statistic of 4.5 is
    HELD at z = 3 but not at z_halving = 6, and then the limit is not HELD either."""
    from sim.papers.wei.claims.construction import decide_tv_limit

    rng = np.random.default_rng(1)
    tv = {4: 1.0 + 0.2 * rng.standard_normal(200), 8: 0.465 + 0.05 * rng.standard_normal(200)}
    at_z = decide_tv_limit(tv, seed=0, z=3.0)
    t = at_z["halving"].value / at_z["halving"].stderr
    assert 3.0 < t < 6.0 and at_z["halving_outcome"] is Outcome.HELD
    strict = decide_tv_limit(tv, seed=0, z=3.0, z_halving=6.0)
    assert strict["halving_outcome"] is Outcome.UNDECIDED and strict["outcome"] is not Outcome.HELD


def _pair(mean, se):
    """Two per-prompt values with sample mean ``mean`` and standard error exactly ``se`` (n = 2)."""
    return np.array([mean + se, mean - se])


def test_decide_tv_limit_records_the_seed_and_honours_z():
    """Every Monte Carlo number carries its seed: the steps and the halving record the seed passed in.
    z is honoured at the steps: one step of 2.5 s.e. (and a halving of 2.4 s.e.) is HELD at z = 2 and
    UNDECIDED at z = 3, compare's default."""
    tv = {1: _pair(0.26, 0.1), 2: np.array([0.01, 0.01])}  # step 0.25 +- 0.1, halving 0.24 +- 0.1
    dec = decide_tv_limit(tv, seed=7, z=2.0)
    assert [e.seed for _, _, e in dec["steps"]] == [7] and dec["halving"].seed == 7
    assert dec["outcome"] is Outcome.HELD
    assert decide_tv_limit(tv, seed=7, z=3.0)["outcome"] is Outcome.UNDECIDED


def test_decide_tv_limit_line_names_the_smallest_step_by_its_lower_bound():
    """The line names the step whose lower bound value - z s.e. is smallest, with its own L's: here the
    second step (0.3 +- 0.05, lower bound 0.15), not the first (0.25 +- 0.005, lower bound 0.235) although
    the first has the smaller value and the smaller upper bound."""
    tv = {64: np.zeros(2), 16: _pair(0.3, 0.05)}
    tv[4] = tv[16] + _pair(0.25, 0.005)
    dec = decide_tv_limit(tv, seed=0, z=3.0)
    assert dec["outcome"] is Outcome.HELD
    assert "; smallest step TV(L=16) - TV(L=64) = 0.3 ± 0.05 (needs > 0)" in dec["line"], dec["line"]


def test_decide_tv_limit_line_keeps_the_halving_and_notes_still_falling_only_when_not_at_half():
    """The "still falling" note is added only when the halving is violated *and* the last step still
    falls; it names the largest L and is appended to the halving/step line, not in its place."""
    Ls = (1, 4, 16, 48)
    slow = {L: m + _pair(0.0, 0.001 * (k + 1)) for k, (L, m) in enumerate(zip(Ls, (0.10, 0.09, 0.08, 0.07)))}
    dec = decide_tv_limit(slow, seed=0, z=3.0)
    assert dec["halving_outcome"] is Outcome.VIOLATED and dec["still_falling"] and dec["outcome"] is Outcome.UNDECIDED
    assert dec["line"].startswith("TV(L=1) - 2 TV(L=48) = -0.04 ± ")
    assert dec["line"].endswith("; not yet at half but still falling at L=48 (a larger L decides)"), dec["line"]
    # still falling but already at half: HELD, and no note
    fast = {L: m + _pair(0.0, 0.001 * (k + 1)) for k, (L, m) in enumerate(zip(Ls, (0.10, 0.06, 0.03, 0.01)))}
    dec = decide_tv_limit(fast, seed=0, z=3.0)
    assert dec["still_falling"] and dec["outcome"] is Outcome.HELD
    assert "still falling" not in dec["line"], dec["line"]


def test_an_output_off_the_bma_predictive_fails_the_exact_tier_though_its_attention_is_right(run, monkeypatch):
    """W.T1's exact tier has two criteria: the attention within the bound at every beta, and the mixture
    prediction within it of bma_predictive at the largest beta. A model that outputs the logits reading
    (same attention, a different predictor: > 1e-3 off, test_passes_on_defaults_with_rate_two_and_figures)
    must FAIL on the second alone."""
    from sim.papers.wei.claims import construction

    build = construction._build
    monkeypatch.setattr(construction, "_build",
                        lambda pi, L, H, beta, params, output, device="cpu": build(pi, L, H, beta, params, "logits",
                                                                                  device))
    t = run(W_T1, tiers=("exact",)).tiers[0]
    assert t.verdict is Verdict.FAIL, t.summary
    cex = t.counterexample
    # the attention stays within its bound at every beta: only the prediction is off
    assert all(e <= b for e, b in zip(cex["max |attention - posterior|"],
                                      cex["error bound (construction, -> 0 as beta -> inf)"]))
    assert cex["max |prediction - bma_predictive| at largest beta"] > 1e-3


def test_the_montecarlo_halving_is_decided_at_the_bonferroni_z_over_the_looks_the_grid_may_take(run, monkeypatch):
    """The grid (1, 4) with cap 64 may look at L = 4, 8, 16, 32, 64: five looks, so the halving is
    decided at the one-sided z whose tail is a fifth of z's (docstring of the tier and the claim)."""
    from scipy import stats

    from sim.papers.wei.claims import construction

    seen = []
    decide = construction.decide_tv_limit

    def spy(tv, seed, z, z_halving=None):
        seen.append((z, z_halving))
        return decide(tv, seed, z, z_halving)

    monkeypatch.setattr(construction, "decide_tv_limit", spy)
    run(W_T1, tiers=("montecarlo",), mc_L=(1, 4), mc_L_cap=64)
    assert seen and len({s for s in seen}) == 1
    z, zh = seen[0]
    assert stats.norm.sf(zh) == pytest.approx(stats.norm.sf(z) / 5, rel=1e-9)
