"""W.T2 (W Theorem 2): the BMA parent error decays exponentially in L at the Chernoff rate.
PASS on defaults; the expected-LLR (KL) exponent and twice Chernoff FAIL; identical rows (no
identifiability) are ASSUMPTION_UNMET with the decay violated; too small a budget is
INCONCLUSIVE with the budget that decides it."""
import math

import numpy as np
import pytest

from sim.claims.wei.identifiability import W_T2, _equivalence, _is_estimate, _wls_rate
from sim.priors import Point
from sim.verdict import Outcome, Verdict
from theory import chernoff_exponent, llr_law, pairwise_error_exact

SMALL = {"n_matrices": 2, "dims": (2, 3), "H": 5, "mc_H": 5, "br_maxL": 120, "plain_L": (4, 16, 64, 256),
         "plain_contexts": 300, "is_samples": 6000, "cross_contexts": 2500, "cross_exact_maxL": 100}


@pytest.fixture
def run(run_claim):
    return lambda claim, prior=None, **over: run_claim(claim, prior=prior, **{**SMALL, **over})


def test_passes_and_measures_the_chernoff_rate(run, tmp_path):
    res = run(W_T2)
    assert res.verdict is Verdict.PASS, [(t.tier, t.verdict, t.summary, t.error) for t in res.tiers]
    mc = next(t for t in res.tiers if t.tier == "montecarlo")
    nums = {n.name: n for n in mc.numbers}
    exact_rate = nums["hardest pair: Chernoff exponent (exact)"].value
    measured = nums["measured rate (WLS on log P + log(L)/2)"]
    assert abs(measured.value - exact_rate) < 0.1 * exact_rate and measured.stderr > 0 and measured.seed is not None
    assert len(mc.readings) == 4 and all(r["verdict"] == "PASS" for r in mc.readings)
    assert mc.figures and (tmp_path / mc.figures[0]).exists()
    exact = next(t for t in res.tiers if t.tier == "exact")
    assert any(r["verdict"] == "PASS" and "Bahadur-Rao" in r["name"] for r in exact.readings)


@pytest.mark.parametrize("name, exponent", [
    ("expected LLR (KL)", lambda v, p: float(-(v * p).sum())),
    ("twice Chernoff", lambda v, p: 2 * chernoff_exponent(v, p).rate),
])
def test_wrong_exponents_fail(run, name, exponent):
    res = run(W_T2.variant(exponent=exponent))
    assert res.verdict is Verdict.FAIL, name
    for t in res.tiers:
        assert t.verdict is Verdict.FAIL and t.counterexample, (name, t.tier, t.summary)
    mc = next(t for t in res.tiers if t.tier == "montecarlo")
    assert "measured decay rate (IS) within tolerance of the claimed exponent" in mc.counterexample["violated"]


def test_identical_rows_no_identifiability(run):
    res = run(W_T2, prior=Point(np.array([[0.2, 0.3, 0.5]] * 3)))
    assert res.verdict is Verdict.ASSUMPTION_UNMET
    for t in res.tiers:
        assert t.verdict is Verdict.ASSUMPTION_UNMET
        assert "violated" in t.conclusion_without_assumptions  # the decay fails: the assumption is needed


def test_small_budget_is_inconclusive_with_a_budget(run):
    res = run(W_T2, tiers=("montecarlo",), is_samples=200, rel_tol=0.01)
    t = res.tiers[0]
    assert t.verdict is Verdict.INCONCLUSIVE and "is_samples" in t.budget


def test_importance_sampling_is_unbiased_against_the_exact_law():
    pi = np.array([[0.7, 0.3], [0.35, 0.65]])
    tree = [-1, 0, 1, 0]
    v, p = llr_law(pi, tree, 2, 0)
    ch = chernoff_exponent(v, p)
    for L in (10, 60):
        exact = pairwise_error_exact(v, p, L)
        est = _is_estimate(v, p, L, ch.t_star, 20000, np.random.default_rng(L), L)
        assert abs(est.value - exact) <= 4 * est.stderr
        # a biased estimator (tilt weights dropped) is caught by the same comparison
        wrong = _is_estimate(v, p, L, 0.0, 20000, np.random.default_rng(L), L)  # t = 0 is plain MC: still unbiased
        assert abs(wrong.value - exact) <= 4 * wrong.stderr + 1e-12


def test_wls_rate_and_equivalence_logic():
    Ls = np.array([50, 100, 150, 200])
    P = 0.3 * np.exp(-0.02 * Ls) / np.sqrt(Ls)
    rate, se, c, chi2 = _wls_rate(Ls, P, 0.01 * P)
    assert abs(rate - 0.02) < 1e-12 and math.isclose(math.exp(c), 0.3) and chi2 < 1e-12
    assert _equivalence(0.0200, 1e-4, 0.02, 0.002, 3.0) is Outcome.HELD
    assert _equivalence(0.0300, 1e-4, 0.02, 0.002, 3.0) is Outcome.VIOLATED
    assert _equivalence(0.0200, 1e-3, 0.02, 0.002, 3.0) is Outcome.UNDECIDED  # interval wider than the tolerance


def test_lattice_bahadur_rao_form_is_the_limit_for_a_symmetric_2x2_pi():
    """A symmetric 2 x 2 pi puts Z on a lattice (0, +-log(a/(1-a))): the non-lattice Bahadur-Rao
    form misses the exact error by a bounded factor, the lattice form converges to it."""
    from sim.claims.wei.identifiability import _lattice, _log_prefactor
    from theory import bahadur_rao_prefactor

    pi = np.array([[0.8, 0.2], [0.2, 0.8]])
    v, p = llr_law(pi, [-1, 0, 0, 1], 2, 1)
    lattice = _lattice(v)
    assert lattice is not None and lattice[0] == pytest.approx(math.log(4)) and lattice[1] == pytest.approx(0)
    rate = chernoff_exponent(v, p).rate
    gaps = {}
    for L in (40, 320):
        logP = pairwise_error_exact(v, p, L, log=True)
        gaps[L] = (abs(logP - (_log_prefactor(v, p, L, lattice) - rate * L)),
                   abs(logP - (math.log(bahadur_rao_prefactor(v, p, L)) - rate * L)))
    assert gaps[320][0] < 0.03 and gaps[320][0] < gaps[40][0]  # lattice form: converging
    assert gaps[320][1] > 0.25  # non-lattice form: off by a bounded factor that does not vanish
    assert _lattice([0.0, 1.797, -1.537]) is None  # incommensurate atoms: non-lattice


def test_decay_check_passes_on_a_lattice_pair_and_fails_a_wrong_exponent():
    from sim.claims.wei.identifiability import _decay_check
    from theory import CausalTree

    pi = np.array([[0.8, 0.2], [0.2, 0.8]])
    pair = (pi, CausalTree([-1, 0, 0, 1]), 2, 1, chernoff_exponent(*llr_law(pi, [-1, 0, 0, 1], 2, 1)).rate, None)
    out, rec, *_ = _decay_check(pair, lambda v, p: chernoff_exponent(v, p).rate, (1.5, 3, 4.5, 6), 200, 0.1, 0.1)
    assert out is Outcome.HELD and rec["Bahadur-Rao form"].startswith("lattice")
    out, rec, *_ = _decay_check(pair, lambda v, p: 1.2 * chernoff_exponent(v, p).rate, (1.5, 3, 4.5, 6), 200, 0.1,
                                0.1)
    assert out is Outcome.VIOLATED


def test_reducible_draws_take_the_uniform_root_and_do_not_crash(run):
    """Two closed classes: the stationary law is not unique, so both tiers use the uniform root
    law (named in the records); pi has zeros and the parent is not identifiable there."""
    res = run(W_T2, prior=Point(np.array([[1.0, 0.0], [0.0, 1.0]])))
    assert res.verdict is Verdict.ASSUMPTION_UNMET, [(t.tier, t.verdict, t.summary, t.error) for t in res.tiers]
    for t in res.tiers:
        assert t.verdict is Verdict.ASSUMPTION_UNMET and t.conclusion_without_assumptions
        assert t.counterexample["root_law"] != "stationary"


def test_mass_below_one_at_the_largest_l_is_inconclusive_not_a_fail(run):
    """Theorem 2 is a limit: an E[post(pa)] below 1 - eps at the largest L asks for a larger L."""
    res = run(W_T2, tiers=("montecarlo",), plain_L=(2, 4), mass_eps=1e-6)
    t = res.tiers[0]
    assert t.verdict is Verdict.INCONCLUSIVE and "plain_L up to" in t.budget
