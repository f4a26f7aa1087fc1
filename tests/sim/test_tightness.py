"""sim.tightness: the optimiser reaches known optima, labels what it found, is deterministic; the
property tier climbs (hypothesis.target) and polishes, so a bound sharpened only near the boundary
of its assumptions FAILs; a user's plugin claim with a margin gets its closest approach."""
import json
import math

import numpy as np
import pytest

from sim.claims import load_plugin
from sim.claims.base import Context
from sim.papers.wei.claims.information import W_L3, _bracket_ratio, _channel_and_input, _l3_ratio_to_bound
from sim.tightness import (EXACT_LABEL, INF_LABEL, SUP_LABEL, Tightness, floored_rows, floored_rows_inverse, label_for,
                           optimise, report_tightness)
from sim.verdict import FindingKind, Outcome, TierResult, Verdict
from theory import CausalTree, dobrushin, eta_chi2, eta_kl, f_divergence, stationary_positive


def test_floored_rows_meet_the_floor_and_invert():
    rng = np.random.default_rng(3)
    for d, floor in ((2, 0.01), (3, 0.1), (4, 0.0)):
        z = 3.0 * rng.standard_normal(d * d)
        pi = floored_rows(z, d, floor)
        np.testing.assert_allclose(pi.sum(axis=1), 1.0, rtol=0, atol=1e-15)
        assert pi.min() >= floor
        np.testing.assert_allclose(floored_rows(floored_rows_inverse(pi, floor), d, floor), pi, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="leaves no room"):
        floored_rows(np.zeros(4), 2, 0.5)
    with pytest.raises(ValueError, match="below the floor"):
        floored_rows_inverse(np.array([[0.001, 0.999], [0.5, 0.5]]), 0.01)


def _bsc_chi2_ratio(e):
    """``chi2(qK || pK) / chi2(q || p)`` over input laws ``(p, q)``: its supremum for the binary
    symmetric channel is the chi-square contraction ``eta_chi2 = (1 - 2e)^2`` (at uniform p)."""
    K = np.array([[1 - e, e], [e, 1 - e]])

    def project(case, z):
        p, q = floored_rows(z, 2, 0.0)
        return p, q

    def ratio(x):
        p, q = x
        den = f_divergence(q, p, "chi2")
        return f_divergence(q @ K, p @ K, "chi2") / den if den > 1e-14 else math.nan

    return ratio, project


@pytest.mark.parametrize("e", [0.1, 0.3])
def test_optimiser_reaches_the_chi2_contraction_of_a_binary_symmetric_channel(e):
    ratio, project = _bsc_chi2_ratio(e)
    t = optimise(ratio, lambda rng: (None, rng.standard_normal(4)), project, starts=4, budget=400, seed=0,
                 describe=lambda x: {"p": x[0].tolist(), "q": x[1].tolist()})
    assert abs(t.value - (1 - 2 * e) ** 2) <= 1e-6
    assert t.value <= (1 - 2 * e) ** 2 + 1e-12  # a supremum: never above it
    assert t.label == SUP_LABEL and "lower bound on the supremum" in t.label
    assert set(t.witness) == {"p", "q"} and t.starts == 4 and t.evaluations > 4


@pytest.mark.parametrize("e", [0.05, 0.2, 0.7])
def test_bracket_optimiser_reaches_the_binary_symmetric_channel_closed_form(e):
    """W.L3's bracket objective over input laws p for the binary symmetric channel K = [[1-e, e], [e, 1-e]]:
    dobrushin(K) = |1 - 2e| and sup_p eta_chi2(K, p) = (1 - 2e)^2 (at uniform p), so the optimum of
    eta_chi2 / dobrushin is |1 - 2e|; eta_KL's lower end lies in [eta_chi2, dobrushin] there."""
    K = np.array([[1 - e, e], [e, 1 - e]])
    assert dobrushin(K) == pytest.approx(abs(1 - 2 * e), abs=1e-15)

    def project(case, z):  # K fixed; p = softmax(z), through the claim's own parameterisation
        return K, _channel_and_input(2, np.concatenate([np.zeros(4), z]), 0.0)[1]

    t = optimise(lambda x: _bracket_ratio("chi2", *x), lambda rng: (None, 2.0 * rng.standard_normal(2)), project,
                 starts=3, budget=200, seed=1, describe=lambda x: {"p": x[1].tolist()})
    assert abs(t.value - abs(1 - 2 * e)) <= 1e-9 and t.value <= abs(1 - 2 * e) + 1e-12
    p = np.array(t.witness["p"])
    assert eta_chi2(K, p) == pytest.approx((1 - 2 * e) ** 2, abs=1e-9)
    np.testing.assert_allclose(p, [0.5, 0.5], atol=1e-3)
    kl = eta_kl(K, p, restarts=0)
    assert eta_chi2(K, p) - 1e-12 <= kl.lower <= dobrushin(K) + 1e-12
    assert _bracket_ratio("kl", K, p) == pytest.approx(kl.lower / dobrushin(K))


def test_channel_and_input_meet_the_floor_and_reach_the_simplex():
    K, p = _channel_and_input(3, np.arange(12.0) - 6, 0.01)
    assert K.shape == (3, 3) and K.min() >= 0.01 and np.allclose(K.sum(axis=1), 1)
    assert p.shape == (3,) and p.sum() == pytest.approx(1) and p.min() > 0
    assert np.isnan(_bracket_ratio("chi2", np.full((2, 2), 0.5), np.array([0.5, 0.5])))  # identical rows: no ratio


def test_labels_say_bound_unless_exact():
    assert label_for("sup") == "best found by optimisation (a lower bound on the supremum)"
    assert label_for("inf") == INF_LABEL and "upper bound on the infimum" in INF_LABEL
    assert label_for("sup", exact=True) == EXACT_LABEL
    assert Tightness(1.0, "inf", {}, "x", 1, 1, 0, exact=True).label == EXACT_LABEL
    with pytest.raises(ValueError, match="sense"):
        label_for("max")


def test_optimise_is_deterministic_at_a_fixed_seed():
    ratio, project = _bsc_chi2_ratio(0.2)
    sampler = lambda rng: (None, 3.0 * rng.standard_normal(4))  # noqa: E731
    runs = [optimise(ratio, sampler, project, starts=2, budget=60, seed=7, describe=lambda x: {"q": x[1].tolist()})
            for _ in range(2)]
    assert runs[0].value == runs[1].value and runs[0].witness == runs[1].witness
    assert runs[0].evaluations == runs[1].evaluations
    with pytest.raises(ValueError, match="at least one start"):
        optimise(ratio, None, project, starts=0, budget=10, seed=0)


def _chain_l3(floor, seed):
    """W.L3's ratio / bound on the 2-state chain 0 -> 1 -> 2 with h' = 0, from random starts only."""
    value = _l3_ratio_to_bound(W_L3.params)
    case = (2, (-1, 0, 1), 2, 0)

    def project(c, z):
        return floored_rows(z, 2, floor), CausalTree(np.array(c[1])), c[2], c[3]

    return optimise(lambda x: value(*x, stationary_positive(x[0])),
                    lambda rng: (case, 2.0 * rng.standard_normal(4)), project, starts=3, budget=300, seed=seed,
                    describe=lambda x: {"pi": x[0].tolist()})


@pytest.mark.parametrize("seed", [0, 1])
def test_w_l3_ratio_on_the_two_state_chain_reaches_its_supremum(seed):
    t = _chain_l3(0.01, seed)
    assert t.value >= 0.94
    pi = np.array(t.witness["pi"])
    # the extremal matrix: symmetric, every off-diagonal (or diagonal) pair at the floor
    np.testing.assert_allclose(pi, pi.T, atol=1e-4)
    assert pi.min() == pytest.approx(0.01, abs=1e-4)


def _ctx(claim, tmp_path, seed=0, **overrides):
    return Context(claim=claim, profile="quick", seed=seed, out_dir=tmp_path, overrides=overrides)


def test_report_tightness_adds_numbers_a_finding_a_figure_and_fails_on_a_broken_optimum(tmp_path):
    ctx = _ctx(W_L3, tmp_path)
    level = [Tightness(0.9, "sup", {"pi": [[0.9, 0.1], [0.1, 0.9]]}, "opt", 2, 10, 5, level={"floor": 0.1}),
             Tightness(0.99, "sup", {"pi": [[0.99, 0.01], [0.01, 0.99]]}, "opt", 2, 10, 6, level={"floor": 0.01})]
    res = TierResult("exact", Verdict.PASS, Outcome.HELD, "held")
    report_tightness(ctx, res, level, quantity="sup r", parameter="floor", claimed=1.0, name="t", reading="how tight")
    assert [n.name for n in res.numbers][:2] == ["tightness: sup r at floor 0.1", "tightness: sup r at floor 0.01"]
    assert SUP_LABEL in res.numbers[0].note and json.dumps([[0.9, 0.1], [0.1, 0.9]]) in res.numbers[0].note
    f = res.findings[0]
    assert (f.kind, f.verdict) == (FindingKind.STRICTER, Verdict.PASS)
    assert f.witness["value"] == 0.99 and f.witness["level"] == {"floor": 0.01}
    assert (tmp_path / res.figures[0]).exists() and res.verdict is Verdict.PASS
    broken = TierResult("exact", Verdict.PASS, Outcome.HELD, "held")
    report_tightness(ctx, broken, [Tightness(1.2, "sup", {"pi": [[1.0]]}, "opt", 1, 1, 0, level={"floor": 0.1})],
                     quantity="sup r", parameter="floor", claimed=1.0, name="u", reading="how tight")
    assert broken.verdict is Verdict.FAIL and broken.findings[0].verdict is Verdict.FAIL
    assert broken.counterexample["sup r"] == 1.2


def _closest(res):
    return next(n for n in res.numbers if n.name.startswith("closest approach: smallest margin found"))


@pytest.mark.parametrize("seed", [0, 1, 2, 12345])
def test_a_bound_sharpened_near_the_boundary_is_failed_by_climbing_and_polishing(tmp_path, seed):
    """0.97 (1 - delta*gamma) is false only for min pi below about 0.004 (the supremum of ratio / bound is
    0.945 at 0.01, 0.992 at 0.001); the strategy draws min pi >= 0.05/d >= 0.0125, so no draw of the
    search itself violates it: only the polish (entries down to polish_floor) can."""
    sharp = W_L3.variant(bound=lambda delta, gamma: 0.97 * (1 - delta * gamma))
    res = sharp.checks["property"](_ctx(sharp, tmp_path, seed))
    assert res.verdict is Verdict.FAIL and "polishing" in res.summary
    cex = res.counterexample
    assert cex["I(x_h; x_h')"] > cex["claimed bound"] * cex["I(x_h; x_pa)"]
    assert cex["gamma"] > 0 and cex["delta"] > 0  # it meets every assumption
    assert _closest(res).value < 0


@pytest.mark.parametrize("seed", [0, 1, 2, 12345])
def test_the_true_bound_is_not_failed_and_the_closest_approach_is_reported(tmp_path, seed):
    res = W_L3.checks["property"](_ctx(W_L3, tmp_path, seed))
    assert res.verdict is Verdict.PASS
    closest = _closest(res)
    assert 0 <= closest.value < 0.05  # tight at the boundary: the polish comes close
    assert '"pi"' in closest.note and "polished by scipy Nelder-Mead" in closest.note
    names = [n.name for n in res.numbers]
    assert "closest approach: polish starts (closest examples of the search)" in names
    assert "closest approach: polish evaluations" in names


PLUGIN = '''
from hypothesis import strategies as st

from sim.claims.base import Claim, Source, matrices_strategy, property_tier
from theory import dobrushin


def _check(ctx):
    return property_tier(ctx, matrices_strategy(ctx, st.integers(2, 3)), violates=lambda pi: dobrushin(pi) > LIMIT,
                         record=lambda pi: {"pi": pi.tolist()}, what="Dobrushin coefficient <= LIMIT",
                         margin=lambda pi: LIMIT - dobrushin(pi))


CLAIMS = [Claim(id="MY.TIGHT", title="Dobrushin <= 1", source=Source("MY", "folklore"),
                statement="eta_TV(pi) <= 1", assumptions=(), checks={"property": _check},
                settings={p: {"tiers": ("property",), "max_examples": 60} for p in ("quick", "standard", "paper")})]
'''


@pytest.fixture
def registry_restored():
    """Plugin claims live in a module-level registry: leave it as it was."""
    import sim.claims as registry

    saved = (dict(registry._EXTRA), dict(registry._ORIGIN), dict(registry._DIGESTS))
    yield
    for store, old in zip((registry._EXTRA, registry._ORIGIN, registry._DIGESTS), saved):
        store.clear()
        store.update(old)


@pytest.mark.parametrize("limit, verdict", [(1.0, Verdict.PASS), (0.999, Verdict.FAIL)])
def test_a_plugin_claim_with_a_margin_gets_its_closest_approach(tmp_path, registry_restored, limit, verdict):
    path = tmp_path / "my_claims.py"
    path.write_text(PLUGIN.replace("LIMIT", repr(limit)))
    claim = next(c for c in load_plugin(path) if c.id == "MY.TIGHT")
    res = claim.checks["property"](_ctx(claim, tmp_path))
    assert res.verdict is verdict
    closest = _closest(res)
    # Dobrushin reaches 1 at rows with disjoint supports: the climb finds the boundary (margin ~ 0 or below)
    assert closest.value <= limit - 0.99 and "witness" in closest.note


def test_an_optimum_at_the_claimed_limit_is_tight_not_broken(tmp_path):
    """The claim holds iff sup <= 1 (inf >= 1): an optimum equal to the limit attains it and breaks nothing."""
    ctx = _ctx(W_L3, tmp_path)
    for sense in ("sup", "inf"):
        res = TierResult("exact", Verdict.PASS, Outcome.HELD, "held")
        report_tightness(ctx, res, [Tightness(1.0, sense, {"pi": [[1.0]]}, "opt", 1, 1, 0, level={"floor": 0.1})],
                         quantity=f"{sense} r", parameter="floor", claimed=1.0, name=f"at-{sense}", reading="how tight")
        assert res.verdict is Verdict.PASS and res.counterexample is None
        assert res.findings[0].verdict is Verdict.PASS


# -- the certified bracket ---------------------------------------------------------------------------
def _ctx_for_bracket(tmp_path):
    from sim.claims.base import Claim, Context, Source

    claim = Claim(id="T.B", title="t", source=Source("T", "test"), statement="s", assumptions=(), checks={},
                  settings={})
    return Context(claim=claim, profile="quick", seed=0, out_dir=tmp_path)


def _table(values, sense="sup"):
    from sim.tightness import Tightness

    return [Tightness(value=v, sense=sense, witness={"x": v}, optimiser="test", starts=1, evaluations=1, seed=0,
                      level={"floor": f}) for v, f in zip(values, (0.1, 0.01))]


def test_a_certified_bracket_reports_both_ends_and_the_gap(tmp_path):
    from sim.tightness import report_certified_bracket
    from sim.verdict import Outcome, TierResult, Verdict

    res = TierResult("certified", Verdict.PASS, Outcome.HELD, "s")
    report_certified_bracket(_ctx_for_bracket(tmp_path), res, _table([0.8, 0.9]), [(0.79, 0.801), (0.88, 0.95)],
                             quantity="sup f", parameter="floor", claimed=1.0, name="f", reading="certified f")
    nums = {n.name: (n.value, n.kind) for n in res.numbers}
    assert nums["certified tightness: sup f at floor 0.1: best optimised"] == (0.8, "property")
    assert nums["certified tightness: sup f at floor 0.1: certified upper bound"] == (0.801, "certified")
    assert nums["certified tightness: sup f at floor 0.01: gap"][0] == pytest.approx(0.05)
    (finding,) = res.findings
    assert finding.verdict is Verdict.PASS and "[0.8, 0.801] at floor 0.1 (gap 0.001)" in finding.detail
    assert res.figures and (tmp_path / res.figures[0]).exists()


def test_an_optimum_beyond_the_certified_bound_is_a_mismatch(tmp_path):
    from sim.tightness import BRACKET_ROUNDOFF, BracketMismatch, report_certified_bracket
    from sim.verdict import Outcome, TierResult, Verdict

    res = TierResult("certified", Verdict.PASS, Outcome.HELD, "s")
    kw = dict(quantity="sup f", parameter="floor", claimed=1.0, name="f", reading="r")
    report_certified_bracket(_ctx_for_bracket(tmp_path), res, _table([0.8 + BRACKET_ROUNDOFF / 2, 0.9]),
                             [(0.7, 0.8), (0.8, 0.9)], **kw)  # within round-off: fine
    with pytest.raises(BracketMismatch, match="lies beyond the certified upper bound"):
        report_certified_bracket(_ctx_for_bracket(tmp_path), res, _table([0.8 + 1e-6, 0.9]), [(0.7, 0.8), (0.8, 0.9)],
                                 **kw)
    with pytest.raises(BracketMismatch, match="certified lower bound"):
        report_certified_bracket(_ctx_for_bracket(tmp_path), res, _table([0.5, 0.4], sense="inf"),
                                 [(0.6, 0.7), (0.3, 0.5)], **kw)
