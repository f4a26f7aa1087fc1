"""W.L1 (BMA closed form) and W.P1 (column-shift invariance): pass, wrong variants FAIL with a
counterexample, broken assumptions give ASSUMPTION_UNMET."""
import numpy as np
import pytest

from sim.claims import get
from sim.verdict import Verdict
from theory import bma_posterior

SMALL_L1 = dict(n_matrices=1, dims=(2, 3), H=5, L=(1, 4), max_d=3, max_H=5, max_examples=25)


def _transposed(context, pi, h):
    """A wrong closed form: log pi(x_h' | x_h) instead of log pi(x_h | x_h')."""
    pt = (pi.T + 1e-3) / (pi.T + 1e-3).sum(axis=1, keepdims=True)
    return bma_posterior(context, pt, h)


def test_w_l1_passes(run_claim):
    res = run_claim(get("W.L1"), **SMALL_L1)
    assert res.verdict is Verdict.PASS, [(t.tier, t.summary) for t in res.tiers]
    exact = next(t for t in res.tiers if t.tier == "exact")
    assert exact.numbers[0].value <= 1e-10


def test_w_l1_wrong_closed_form_fails_with_counterexample(run_claim):
    res = run_claim(get("W.L1").variant(closed_form=_transposed), tiers=("exact", "property"), **SMALL_L1)
    assert res.verdict is Verdict.FAIL
    for t in res.tiers:
        assert t.verdict is Verdict.FAIL
        cex = t.counterexample
        assert cex["pi"] and cex["context"] and cex["max_abs_diff"] > 1e-10
        # the counterexample re-checks by hand: the true posterior differs from the reported closed form
        assert np.allclose(bma_posterior(np.array(cex["context"]), np.array(cex["pi"]), cex["h"]),
                           cex["brute_force"], atol=1e-10)


def test_w_l1_symbolic_wrong_closed_form_fails(run_claim):
    import sympy

    def transposed(pi, context, h):  # the injected symbolic closed form: wrong argument order
        return [sympy.Mul(*[pi[row[h]][row[c]] for row in context]) for c in range(h)]

    res = run_claim(get("W.L1").variant(symbolic_closed_form=transposed), tiers=("symbolic",))
    assert res.verdict is Verdict.FAIL and res.tiers[0].counterexample


def test_w_l1_non_uniform_parent_prior_is_assumption_unmet(run_claim):
    res = run_claim(get("W.L1"), tiers=("exact",), parent_prior="recency", **SMALL_L1)
    assert res.verdict is Verdict.ASSUMPTION_UNMET
    assert "looks necessary" in res.tiers[0].conclusion_without_assumptions


def test_w_p1_passes_and_row_shift_moves_attention(run_claim):
    """The row-shift half is W's unstated converse: a finding (PASS), not part of the deciding reading."""
    from sim.verdict import FindingKind

    res = run_claim(get("W.P1"), n_instances=50)
    assert res.verdict is Verdict.PASS and res.headline == "PASS"
    for t in res.tiers:
        assert [(f.kind, f.verdict) for f in t.findings] == [(FindingKind.UNSTATED, Verdict.PASS)]
        assert not any("row shift" in r["name"] for r in t.readings)
    exact = next(t for t in res.tiers if t.tier == "exact")
    assert exact.findings[0].numbers[0].value > 1e-3


def test_w_l1_reports_both_conditionings_as_criteria(run_claim):
    res = run_claim(get("W.L1"), tiers=("exact",), **SMALL_L1)
    names = {r["name"]: r["verdict"] for r in res.tiers[0].readings}
    assert names == {"posterior given the context only == closed form": "PASS",
                     "posterior given the context and target prefix == closed form": "PASS"}
    assert res.tiers[0].findings == []


def test_w_p1_claiming_row_shift_invariance_fails(run_claim):
    res = run_claim(get("W.P1").variant(shift="row"), n_instances=50)
    assert res.verdict is Verdict.FAIL
    assert all(t.counterexample for t in res.tiers)


def test_w_p1_continuous_inputs_break_the_assumption(run_claim):
    res = run_claim(get("W.P1"), tiers=("exact",), n_instances=50, inputs="continuous")
    assert res.verdict is Verdict.ASSUMPTION_UNMET
    assert "looks necessary" in res.tiers[0].conclusion_without_assumptions


def _off_by(delta):
    """The true closed form with ``delta`` moved from the largest posterior entry to the next one
    (still a probability vector): an error of exactly ``delta`` wherever ``h >= 2``."""
    def closed(context, pi, h):
        p = bma_posterior(context, pi, h).copy()
        i = int(np.argmax(p))
        p[i] -= delta
        p[(i + 1) % h] += delta
        return p
    return closed


@pytest.mark.parametrize("tier", ["exact", "property"])
def test_w_l1_tolerance_is_tied_to_roundoff_a_closed_form_off_by_3e_10_fails(run_claim, tier):
    """BMA_TOL (1e-10) sits between round-off and a real error, in each tier that compares numbers: the true
    closed form agrees with brute-force Bayes to ~1e-15, a closed form off by 3e-11 still PASSes, one off by
    3e-10 FAILs (a tolerance widened 1000x would let it PASS)."""
    settings = dict(SMALL_L1, n_matrices=1, L=(2,))
    res = run_claim(get("W.L1"), tiers=(tier,), **settings)
    assert res.verdict is Verdict.PASS
    if tier == "exact":
        assert res.tiers[0].numbers[0].value < 1e-13
    assert run_claim(get("W.L1").variant(closed_form=_off_by(3e-11)), tiers=(tier,), **settings).verdict \
        is Verdict.PASS
    res = run_claim(get("W.L1").variant(closed_form=_off_by(3e-10)), tiers=(tier,), **settings)
    assert res.verdict is Verdict.FAIL
    if tier == "exact":
        assert res.tiers[0].counterexample["max_abs_diff"] == pytest.approx(3e-10, rel=1e-3)


def _rounded_to_float32(context, pi, h):
    """The true closed form rounded through float32 (torch's default dtype: an easy slip)."""
    return bma_posterior(context, pi, h).astype(np.float32).astype(np.float64)


def test_w_l1_a_closed_form_in_float32_fails_its_float64_tolerance(run_claim):
    """A second, independent guard on BMA_TOL: float32 keeps ~7 digits, so rounding a posterior through it moves
    entries by up to half a float32 ulp (2^-25 ~ 3e-8 below 1), far above float64 round-off (~1e-15). The exact
    tier must FAIL it, naming an error between float64's and float32's rounding scales."""
    res = run_claim(get("W.L1").variant(closed_form=_rounded_to_float32), tiers=("exact",), **SMALL_L1)
    assert res.verdict is Verdict.FAIL
    assert 1e-12 < res.tiers[0].counterexample["max_abs_diff"] <= 2.0 ** -25


def _brute_force_wrong_only_with_a_prefix(monkeypatch):
    """Make the claim module's brute force move 1e-6 of mass from h' = 0 to h' = 1 when it is given a target prefix."""
    import sim.papers.wei.claims.bma as bma_claims

    true_bruteforce = bma_claims.bma_posterior_bruteforce

    def wrong_with_a_prefix(context, pi, h, *, target_prefix=None, **kw):
        p = true_bruteforce(context, pi, h, target_prefix=target_prefix, **kw)
        if target_prefix is not None and h >= 2:
            p = p.copy()
            p[0] -= 1e-6
            p[1] += 1e-6
        return p

    monkeypatch.setattr(bma_claims, "bma_posterior_bruteforce", wrong_with_a_prefix)


def test_w_l1_checks_the_posterior_given_a_target_prefix_too(run_claim, monkeypatch):
    """W.L1's second reading conditions the brute force on the target's prefix as well: a brute force that is
    wrong only when given a prefix (by 1e-6) makes the exact tier FAIL, and the context-only reading is untouched."""
    _brute_force_wrong_only_with_a_prefix(monkeypatch)
    res = run_claim(get("W.L1"), tiers=("exact",), n_matrices=1, dims=(2,), H=5, L=(2,))
    t = res.tiers[0]
    assert res.verdict is Verdict.FAIL
    readings = {r["name"].split(" ==")[0]: r["verdict"] for r in t.readings}
    assert readings == {"posterior given the context only": "PASS",
                        "posterior given the context and target prefix": "FAIL"}


def test_w_l1_property_tier_conditions_on_the_target_prefix_too(run_claim, monkeypatch):
    """The property tier compares the closed form with brute-force Bayes given the context AND the
    target prefix (the claim's statement): a brute force wrong only when given a prefix (by 1e-6,
    10^4 tolerances) must make that tier FAIL on its own."""
    _brute_force_wrong_only_with_a_prefix(monkeypatch)
    res = run_claim(get("W.L1"), tiers=("property",), n_matrices=1, dims=(2,), H=4, L=(1, 2), max_d=2,
                    max_H=4, max_examples=10)
    assert res.verdict is Verdict.FAIL, res.tiers[0].summary
    assert res.tiers[0].counterexample["max_abs_diff"] > 1e-7
