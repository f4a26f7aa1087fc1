"""Tests of claim N.K3 (sim.papers.nichani.claims.gradient): the gradient at init is a chi-square MI."""
import math

import numpy as np
import pytest

from sim.claims import get
from sim.papers.nichani.claims.gradient import (_middle_terms, _symmetry_defects, gamma_parts, skewed_prior,
                                         symmetric_finite_prior)
from sim.papers.nichani.task import n_graph
from sim.priors import Point
from sim.runner import RunConfig, evaluate_claim
from sim.verdict import Verdict
from theory import nichani_gradient_signal

SMALL = {"dims": (2, 3), "T": 5, "graphs": ("chain", "icl"), "prior_specs": ((0.5, 0.3, 1), (50.0, 0.5, 1)),
         "mc_T": (8, 32), "mc_graphs": ("chain",), "mc_chunks": 10, "mc_chunk": 1000, "max_examples": 25,
         "max_T": 5}


def _run(claim, tmp_path, prior=None, **overrides):
    cfg = RunConfig(profile="quick", seed=0, overrides={claim.id: {**SMALL, **overrides}})
    return evaluate_claim(claim, cfg, tmp_path, prior=prior)


def _tier(res, name):
    return next(t for t in res.tiers if t.tier == name)


def test_finite_priors_meet_assumption_3_and_the_skewed_prior_by_hand():
    base = np.array([[[0.7, 0.2, 0.1], [0.3, 0.3, 0.4], [0.1, 0.1, 0.8]]])
    fp = symmetric_finite_prior(base, 0.1)
    assert _symmetry_defects(fp) == (pytest.approx(0, abs=1e-15), 0.0)
    # without balancing the orbit's mean is a I + b 11^T with trace tr(base) = 1.8, not uniform
    mean_dev, defect = _symmetry_defects(symmetric_finite_prior(base, 0.1, uniform_mean=False))
    assert defect == 0.0 and mean_dev == pytest.approx((1.8 - 1) / 3, abs=1e-12)
    sk = skewed_prior(0.01)
    parts = gamma_parts(sk, n_graph("chain", 5))
    assert parts["gamma (lower bound) = S min pi"] == pytest.approx(0.06)
    assert parts["gamma"] == pytest.approx(0.06)
    m = _middle_terms(sk)
    g = nichani_gradient_signal(sk.pis, n_graph("chain", 5), sk.weights)
    # Knowl 3's intermediate bound with Dobrushin alpha and unweighted B exceeds the actual gap here
    assert g[1, 0] - g[1, 1] < m["dobrushin"]
    assert g[1, 0] - g[1, 1] >= m["eta_chi2"] >= m["sqrt_eta_chi2"]


def test_default_passes_and_reports_the_findings(tmp_path):
    """The intermediate bound's three readings and g[i,i] = 0 are findings of the exact tier; the
    exact prefactor is a finding of the Monte Carlo tier. None of them decides."""
    from sim.verdict import FindingKind

    res = _run(get("N.K3"), tmp_path)
    assert res.verdict is Verdict.PASS, [(t.tier, t.verdict, t.summary) for t in res.tiers]
    ex = _tier(res, "exact")
    literal = {f.detail.split(":")[0]: f.verdict for f in ex.findings if f.kind is FindingKind.LITERAL}
    assert literal["Dobrushin alpha, unweighted B"] is Verdict.FAIL
    assert literal["alpha = eta_chi2, weighted B"] is Verdict.PASS
    assert literal["alpha = sqrt(eta_chi2), weighted B"] is Verdict.PASS
    diag = next(f for f in ex.findings if f.kind is FindingKind.UNSTATED)
    assert diag.verdict is Verdict.PASS and diag.numbers[0].value <= 1e-12
    assert ex.readings == []
    bf = next(n for n in ex.numbers if n.name.startswith("max |g (theory)"))
    assert bf.value < 1e-12
    mc = _tier(res, "montecarlo")
    assert mc.figures and any(n.name.startswith("cos(autograd") for n in mc.numbers)
    scale = next(f for f in mc.findings if f.kind is FindingKind.LITERAL)
    assert "beta0/(S T)" in scale.reading and scale.numbers
    assert res.headline.startswith("PASS")


def test_gap_bound_tightness_and_closest_approach_are_reported(tmp_path):
    """Issue 18: the exact tier reports inf gap / (gamma^3/(2S)) per floor with its witness and figure; the
    property tier reports the closest approach of its climbing search."""
    from sim.verdict import FindingKind

    res = _run(get("N.K3"), tmp_path, tiers=("exact", "property"))
    ex = _tier(res, "exact")
    tight = next(f for f in ex.findings if f.kind is FindingKind.STRICTER)
    assert tight.verdict is Verdict.PASS and all(n.value >= 1 for n in tight.numbers)
    assert "upper bound on the infimum" in tight.numbers[0].note
    w = tight.witness
    assert w["gap / bound"] == pytest.approx(w["smallest gap"] / w["bound"]) and all(w["assumptions"].values())
    assert any("tightness-gap-to-bound" in f for f in ex.figures)
    prop = _tier(res, "property")
    closest = next(n for n in prop.numbers if n.name.startswith("closest approach: smallest margin"))
    headroom = next(n for n in prop.numbers if n.name.startswith("headroom"))
    assert closest.value >= 0 and closest.value <= headroom.value - 1 + 1e-12  # polish only improves on the draws


def test_a_wrong_signal_fails_the_identity(tmp_path, monkeypatch):
    """g with the parent's entry doubled (a wrong formula for g_{i,p(i)} = I_chi2) fails the exact tier."""
    from sim.papers.nichani.claims import gradient

    real = gradient.nichani_gradient_signal

    def doubled(pis, parents, weights):
        g = real(pis, parents, weights).copy()
        for i, p in enumerate(parents):
            if p >= 0:
                g[i, p] *= 2
        return g

    monkeypatch.setattr(gradient, "nichani_gradient_signal", doubled)
    ex = _tier(_run(get("N.K3"), tmp_path, tiers=("exact",)), "exact")
    assert ex.verdict is Verdict.FAIL
    assert ex.counterexample["conclusion"] in ("g[i,p(i)] == E[I_chi2(s_i; s_p(i) | pi)]",
                                               "theory.gradients g == enumeration of all S^T sequences")


def test_a_linear_gap_bound_is_refuted(tmp_path):
    claim = get("N.K3").variant(gap_bound=lambda gamma, S: gamma / (2 * S))
    res = _run(claim, tmp_path)
    ex, prop = _tier(res, "exact"), _tier(res, "property")
    assert ex.verdict is Verdict.FAIL and ex.counterexample["smallest gap"] < ex.counterexample["bound"]
    assert prop.verdict is Verdict.FAIL and prop.counterexample["smallest gap"] < prop.counterexample["bound"]


def test_flipped_gradient_sign_fails_the_montecarlo_tier(tmp_path):
    res = _run(get("N.K3").variant(sign=1.0), tmp_path)
    mc = _tier(res, "montecarlo")
    assert mc.verdict is Verdict.FAIL and mc.counterexample


def test_without_uniform_mean_the_diagonal_is_not_zero(tmp_path):
    res = _run(get("N.K3"), tmp_path, uniform_mean=False)
    ex = _tier(res, "exact")
    assert ex.verdict is Verdict.ASSUMPTION_UNMET
    bad = {a.name: a.holds for a in ex.assumptions}
    assert bad["permutation symmetry and uniform mean E[pi] = 11^T/S"] is False
    assert "violated" in ex.conclusion_without_assumptions
    assert ex.counterexample["conclusion"] in ("g[i,i] == 0",
                                               "g[i,p(i)] - g[i,j] >= bound(gamma, S) for j <= i, j != p(i)")


def test_a_prior_with_a_zero_entry_breaks_the_lower_bound(tmp_path):
    pi = np.array([[0.0, 0.6, 0.4], [0.3, 0.3, 0.4], [0.5, 0.2, 0.3]])
    res = _run(get("N.K3"), tmp_path, prior=Point(pi))
    ex = _tier(res, "exact")
    assert ex.verdict is Verdict.ASSUMPTION_UNMET
    holds = {a.name: a.holds for a in ex.assumptions}
    assert holds["lower bound: min pi(s'|s) > gamma/S, gamma > 0"] is False
    assert ex.conclusion_without_assumptions


def test_a_user_prior_with_uniform_mean_is_balanced_in_every_tier(tmp_path):
    """floor(dirichlet(1), gamma=0.3) meets N Knowl 10: its finite stand-in is the orbit of draws,
    balanced to E[trace pi] = 1 as the exact tier does (it used to be left unbalanced in the Monte
    Carlo tier, where g[i,i] != 0 then let the diagonal beat the parent), and every tier PASSes."""
    from sim.priors import parse_prior

    res = _run(get("N.K3"), tmp_path, prior=parse_prior("floor(dirichlet(alpha=1), gamma=0.3)"), dims=(3,),
               graphs=("chain",))
    assert res.verdict is Verdict.PASS, [(t.tier, t.verdict, t.summary) for t in res.tiers]
    mc = _tier(res, "montecarlo")
    assert {a.name for a in mc.assumptions} >= {"permutation symmetry and uniform mean E[pi] = 11^T/S",
                                                "lower bound: min pi(s'|s) > gamma/S, gamma > 0"}


def test_finite_stand_in_follows_the_prior(tmp_path):
    """Not symmetric -> not symmetrised; symmetric with a non-uniform mean -> orbit, not balanced;
    a finite support -> the prior's own atoms."""
    from sim.papers.nichani.claims.gradient import user_finite_prior
    from sim.priors import parse_prior
    from sim.claims.base import Context

    def ctx_for(spec):
        return Context(get("N.K3"), "quick", 0, tmp_path, prior=parse_prior(spec), overrides=SMALL)

    fp, facts = user_finite_prior(ctx_for("banded(dirichlet(alpha=1), width=1)"), 3, "pi", 2)
    assert facts.symmetric is False and fp.pis.shape[0] == 2 and "not symmetrised" in fp.label
    fp, facts = user_finite_prior(ctx_for("sticky(dirichlet(alpha=1), stay=0.8)"), 3, "pi", 2)
    assert facts.symmetric and facts.mean_uniform is False and fp.balance_atom is None and fp.pis.shape[0] == 12
    assert _symmetry_defects(fp)[0] > 0.1  # the mean is not uniform: assumption 3 fails on the stand-in too
    fp, facts = user_finite_prior(ctx_for("symmetrize(point([[0.9, 0.1], [0.2, 0.8]]))"), 2, "pi", 2)
    assert "own atoms" in facts.construction and fp.pis.shape[0] == 2
    fp, facts = user_finite_prior(ctx_for("point([[1, 0], [0, 1]])"), 2, "pi", 2)
    assert fp is None and facts.left_out == 1  # two closed classes: g is undefined


@pytest.mark.parametrize("spec", ["point([[1,0],[0.5,0.5]])", "doubly_stochastic(k=3)"])
def test_reducible_draws_do_not_crash_and_name_knowl_2(tmp_path, spec):
    from sim.priors import parse_prior

    res = _run(get("N.K3"), tmp_path, prior=parse_prior(spec), dims=(3,))
    assert res.verdict is Verdict.ASSUMPTION_UNMET, [(t.tier, t.verdict, t.summary, t.error) for t in res.tiers]
    for t in res.tiers:
        if t.tier == "certified":  # its own stated domain, not the prior's draws: not run under a prior
            assert t.verdict is Verdict.NOT_RUN
            continue
        assert t.verdict is Verdict.ASSUMPTION_UNMET and t.conclusion_without_assumptions
        assert any(a.holds is False for a in t.assumptions)
    prop = _tier(res, "property")
    assert any(n.name.startswith("evaluations: search among draws breaking") for n in prop.numbers)


@pytest.mark.parametrize("delta, verdict", [(1e-13, Verdict.PASS), (3e-10, Verdict.FAIL)])
def test_identity_roundoff_tolerance_a_parent_chi2_off_by_3e_10_fails(tmp_path, monkeypatch, delta, verdict):
    """ROUNDOFF (1e-12) separates round-off from an error in Knowl 3's identity g[i,p(i)] = E[I_chi2]:
    a parent chi2 off by 1e-13 still PASSes, off by 3e-10 FAILs (a tolerance widened 1000x would pass it)."""
    from sim.papers.nichani.claims import gradient

    real = gradient.nichani_parent_chi2
    monkeypatch.setattr(gradient, "nichani_parent_chi2", lambda *a, **k: real(*a, **k) + delta)
    ex = _tier(_run(get("N.K3"), tmp_path, tiers=("exact",)), "exact")
    assert ex.verdict is verdict, ex.summary
    if verdict is Verdict.FAIL:
        assert ex.counterexample["conclusion"] == "g[i,p(i)] == E[I_chi2(s_i; s_p(i) | pi)]"
        assert ex.counterexample["max |error|"] == pytest.approx(delta, rel=1e-3)


def test_jackknife_of_a_mean_is_its_sample_standard_error():
    """For a linear statistic the delete-one jackknife s.e. sqrt((n-1)/n sum (loo - mean loo)^2) equals the sample
    standard error std(ddof=1)/sqrt(n): 1, 2, 3, 4 -> (2.5, 0.6455)."""
    from sim.papers.nichani.claims.gradient import _jackknife

    chunks = np.array([1.0, 2.0, 3.0, 4.0])
    value, se = _jackknife(lambda x: float(x), chunks)
    assert value == 2.5 and se == pytest.approx(np.std(chunks, ddof=1) / 2, rel=1e-14)


def test_jackknife_of_a_nonlinear_statistic_recomputes_it_without_each_chunk():
    """The square of the mean of 1, 2, 3, 4: 6.25 on all chunks; without each chunk the means are 3, 8/3, 7/3, 2,
    squares 81/9, 64/9, 49/9, 36/9 around 230/36, so s.e. = sqrt(3/4 x (94^2 + 26^2 + 34^2 + 86^2)) / 36 = 3.233
    (adding a chunk instead of leaving it out gives another spread)."""
    from sim.papers.nichani.claims.gradient import _jackknife

    value, se = _jackknife(lambda x: float(x) ** 2, np.array([1.0, 2.0, 3.0, 4.0]))
    assert value == 6.25 and se == pytest.approx(math.sqrt(0.75 * (94 ** 2 + 26 ** 2 + 34 ** 2 + 86 ** 2)) / 36,
                                                 rel=1e-12)


def test_jackknife_averages_matrix_chunks_over_the_chunk_axis():
    """As the gradient check uses it: chunks (n, T, T), a cosine to F of their mean; delete-one means via np.delete."""
    from sim.papers.nichani.claims.gradient import _jackknife

    rng = np.random.default_rng(7)
    G, F = rng.normal(size=(5, 3, 3)) + 1.0, rng.normal(size=(3, 3))

    def cos(M):
        return float((M * F).sum() / np.sqrt((M * M).sum() * (F * F).sum()))

    loo = np.array([cos(np.delete(G, i, axis=0).mean(0)) for i in range(5)])
    value, se = _jackknife(cos, G)
    assert value == pytest.approx(cos(G.mean(0)), rel=1e-12)
    assert se == pytest.approx(np.sqrt(0.8 * ((loo - loo.mean()) ** 2).sum()), rel=1e-9)


def _chunks(rows, noise, n=8, seed=0):
    """``n`` chunks of a (T, T) gradient: ``rows`` (the mean) plus independent noise of size ``noise``."""
    rng = np.random.default_rng(seed)
    return np.asarray(rows, float)[None] + noise * rng.standard_normal((n,) + np.shape(rows))


def test_gradient_checks_judge_the_parent_in_every_non_root_row_from_the_first():
    """The argmax conclusion covers every non-root context row, row 1 included: on a chain of T = 4 whose
    row 1 puts more negative gradient on key 1 than on its parent 0 the check is VIOLATED, naming row 1."""
    from sim.papers.nichani.claims.gradient import _gradient_checks
    from sim.verdict import Outcome

    G = np.zeros((4, 4))
    G[1, :2] = [-0.1, -1.0]  # row 1: -G is 0.1 at the parent 0, 1.0 at key 1
    G[2, :3] = [-0.1, -1.0, -0.2]  # row 2: the parent 1 wins
    meas = [(4, np.array([-1, 0, 1, -1]), np.zeros((4, 4)), _chunks(G, 0.01))]
    checks, _ = _gradient_checks("chain", meas, 3.0, 0, {}, {})
    (check,) = checks
    assert check.outcome is Outcome.VIOLATED and check.record["worst row i"] == 1


def test_gradient_checks_the_cosine_growth_carries_both_ends_errors():
    """cos(autograd, formula) grows from T_min to T_max only beyond z standard errors of the difference, the
    two ends' errors in quadrature: a noisy T_min (cosine error s0) and an exact T_max (s1 = 0) leave a growth
    smaller than 3 s0 undecided."""
    from sim.papers.nichani.claims.gradient import _gradient_checks
    from sim.verdict import Outcome

    # every position a root: no parent rows, only the two cosine conclusions
    meas = [(3, np.full(3, -1), np.eye(3), _chunks(np.eye(3) + 0.3, 0.5)),
            (5, np.full(5, -1), np.eye(5), _chunks(np.eye(5), 0.0))]
    checks, _ = _gradient_checks("chain", meas, 3.0, 0, {}, {})
    growth = next(c for c in checks if c.record["conclusion"].startswith("the formula's direction improves"))
    c0, s0 = growth.record["cos at T_min"], growth.record["stderr"][0]
    assert growth.record["stderr"][1] == 0.0 and 0 < 1.0 - c0 < 3 * s0  # the premise: within 3 s0 of cos 1
    assert growth.outcome is Outcome.UNDECIDED
