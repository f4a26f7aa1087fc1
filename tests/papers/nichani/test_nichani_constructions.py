"""Tests of claims N.K7, N.K8, N.K9 (sim.papers.nichani.claims.constructions)."""
import math

import numpy as np
import pytest
import torch

from sim.claims import get
from sim.papers.nichani.claims.constructions import (
    LIMIT_TOL,
    _transposed_map,
    limit_bound,
    limit_roundoff,
    mixed_readout,
    multiparent_graph,
    sample_multiparent_prompts,
)
from sim.papers.nichani.model import (
    DisentangledTransformer,
    empirical_multiparent_estimator,
    empirical_transition_estimator,
    nichani_construction,
    nichani_construction_limit,
    nichani_multiparent_construction,
    nichani_multiparent_construction_limit,
)
from sim.papers.nichani.standard import to_disentangled
from sim.runner import RunConfig, evaluate_claim
from sim.verdict import FindingKind, Verdict

K8_SMALL = {"sizes": ((2, 5),), "task_T": (20, 80, 320), "n_task": (8000, 4000, 2000), "model_T": (20,),
            "n_model": 16}
K9_SMALL = {"sizes": ((2, 5),), "task_T": (32, 128, 512), "n_task": (6000, 2000, 1000), "model_T": (32,),
            "n_model": 16, "tiers": ("exact", "montecarlo")}  # trained tier: test_nichani_trained.py


def _run(claim, tmp_path, prior=None, **overrides):
    return evaluate_claim(claim, RunConfig(profile="quick", seed=0, overrides={claim.id: overrides}), tmp_path,
                          prior=prior)


def _tier(res, name):
    return next(t for t in res.tiers if t.tier == name)


def _findings(res):
    return {f.kind: f for t in res.tiers for f in t.findings}


def _num(finding_or_tier, start):
    return next(n for n in finding_or_tier.numbers if n.name.startswith(start))


def _criteria(tier):
    return {r["name"].split(" (")[0]: r["verdict"] for r in tier.readings}


def test_every_claim_has_its_primary_reading():
    for cid, lines in (("N.K7", "180-184"), ("N.K8", "187-191"), ("N.K9", "199-205")):
        p = get(cid).primary
        assert p is not None and p.seed == "002" and p.lines == lines and p.review


# ------------------------------------------------------------------------------ N.K7 --
def test_k7_passes_both_directions(tmp_path):
    res = _run(get("N.K7"), tmp_path)
    assert res.verdict is Verdict.PASS
    assert all(n.value < 1e-12 for n in res.tiers[0].numbers)


def test_k7_transposed_map_is_caught(tmp_path):
    res = _run(get("N.K7").variant(to_disentangled=_transposed_map), tmp_path)
    t = res.tiers[0]
    assert t.verdict is Verdict.FAIL
    assert t.counterexample["direction"] == "standard -> disentangled"
    assert t.counterexample["max |difference| over all prompts"] > 1e-6


def test_k7_with_mlp_blocks_is_assumption_unmet(tmp_path):
    res = _run(get("N.K7"), tmp_path, mlp_hidden=6, heads=((1,), (1, 1)))
    t = res.tiers[0]
    assert t.verdict is Verdict.ASSUMPTION_UNMET
    assert "violated" in t.conclusion_without_assumptions  # the MLP changes the function: the map cannot ignore it


# ------------------------------------------------------------- the proven limit bound --
def test_limit_bound_holds_and_vanishes_only_when_beta2_e_minus_beta1_vanishes():
    par, S = np.array([-1, 0, 1, 2, -1]), 2
    x = np.array(list(np.ndindex(*(S,) * 5)))
    lim = nichani_construction_limit(x, par, S)
    for beta in (1.0, 8.0, 64.0, 512.0):
        with torch.no_grad():
            out = nichani_construction(par, S, beta, beta, dtype=torch.float64)(torch.as_tensor(x)).numpy()
        assert np.abs(out - lim).max() <= limit_bound(beta, beta, 5) + limit_roundoff(beta, 5)
    assert limit_bound(4096, 4096, 6) + limit_roundoff(4096, 6) < LIMIT_TOL
    assert limit_bound(2048, 2048, 6, c=6) < limit_bound(256, 256, 6, c=6) < 1e-2
    # beta1 = log(beta2) / 2: layer 1's leak, times beta2, grows without bound; the bound is vacuous
    assert limit_bound(0.5 * math.log(1024), 1024, 6) > 1 and limit_bound(0.5 * math.log(4096), 4096, 6) > 1e100


# ------------------------------------------------------------------------------ N.K8 --
def test_k8_passes_and_the_exact_identity_fails_as_a_finding(tmp_path):
    res = _run(get("N.K8"), tmp_path, **K8_SMALL)
    assert res.verdict is Verdict.PASS
    assert _tier(res, "exact").verdict is Verdict.PASS and _tier(res, "montecarlo").verdict is Verdict.PASS
    mc = _tier(res, "montecarlo")
    assert set(_criteria(mc).values()) == {"PASS"}
    rate = _num(mc, "rate: e(T) ~ T^p")
    assert rate.value < -0.5  # about 1/T
    seeds = [n.seed for n in mc.numbers if n.name.startswith("e(T=")]  # the fit is over these draws
    assert len(seeds) >= 2 and None not in seeds
    assert rate.note.startswith(f"over all T (seeds {', '.join(map(str, seeds))});")
    found = _findings(res)
    lit = found[FindingKind.LITERAL]
    assert lit.verdict is Verdict.FAIL
    frac = _num(lit, "defined prompts where the limit misses")
    assert 0.12 < frac.value < 0.2 and frac.stderr < 0.01  # ~16% of defined prompts on N's chain task, T=20
    # the cause, by intervention: root key 0 (s_0 = s_T), not the query's own key
    assert _num(lit, "misses with s_0 = s_T").value == 1.0
    assert _num(lit, "misses left when root key 0's score alone").value == 0.0
    assert _num(lit, "misses left when the query's own key's score alone").value == frac.value
    cex = lit.counterexample  # N's hand example: chain [1, 0, 0 | 1]
    assert cex["estimator"] == [1.0, 0.0] and cex["exact beta -> inf limit"] == [0.5, 0.5]
    assert found[FindingKind.OUTSIDE].verdict is Verdict.PASS  # the one-entry repair
    assert found[FindingKind.UNSTATED].verdict is Verdict.FAIL  # beta2 e^{-beta1} -> 0 is needed
    assert res.headline.startswith("PASS (findings: step 3's exact identity fails on")
    assert _tier(res, "exact").figures and mc.figures


def test_k8_a_readout_mixed_with_uniform_does_not_approach_the_estimator(tmp_path):
    build, lim = mixed_readout(nichani_construction, nichani_construction_limit, 0.1)
    res = _run(get("N.K8").variant(construction=build, limit=lim), tmp_path, **K8_SMALL)
    assert _tier(res, "exact").verdict is Verdict.PASS  # the pair is consistent: the torch model has that limit
    mc = _tier(res, "montecarlo")
    assert res.verdict is Verdict.FAIL and mc.verdict is Verdict.FAIL
    crit = _criteria(mc)
    assert crit["e(T) / eps(T) falls"] == "FAIL"  # e itself falls a little as hat pi gets smoother: not to 0
    assert mc.counterexample["criteria not met"]


def _grandparent(par):
    """A wrong-offset copy: each position copies its parent's parent (a root when the parent is a root)."""
    par = np.asarray(par)
    return np.where(par >= 0, par[np.maximum(par, 0)], -1)


def test_k8_a_wrong_offset_copy_fails(tmp_path):
    build = lambda par, S, b1, b2, **kw: nichani_construction(_grandparent(par), S, b1, b2, **kw)  # noqa: E731
    lim = lambda x, par, S: nichani_construction_limit(x, _grandparent(par), S)  # noqa: E731
    res = _run(get("N.K8").variant(construction=build, limit=lim), tmp_path, **K8_SMALL)
    assert res.verdict is Verdict.FAIL and _tier(res, "montecarlo").verdict is Verdict.FAIL
    assert _num(_tier(res, "montecarlo"), "e(T=320)").value > 0.3  # the two-step estimator stays far away


def test_k8_a_limit_that_is_not_the_constructions_fails_the_exact_tier(tmp_path):
    build = lambda par, S, b1, b2, **kw: nichani_construction(_grandparent(par), S, b1, b2, **kw)  # noqa: E731
    res = _run(get("N.K8").variant(construction=build), tmp_path, **{**K8_SMALL, "tiers": ("exact",)})
    t = _tier(res, "exact")
    assert res.verdict is Verdict.FAIL and t.counterexample
    assert t.counterexample["max |readout - limit|"] > t.counterexample["bound + round-off at this beta"]


def test_k8_a_construction_slower_than_its_proven_bound_fails_though_its_limit_is_right(tmp_path):
    """The construction at (beta1/4, beta2/4) has the same beta -> inf limit, reached more slowly: the exact tier
    checks the proven bound at every beta of the schedule, so it FAILs where the gap exceeds the bound at an
    intermediate beta, not only at the largest."""
    build = lambda par, S, b1, b2, **kw: nichani_construction(par, S, b1 / 4, b2 / 4, **kw)  # noqa: E731
    res = _run(get("N.K8").variant(construction=build), tmp_path, **{**K8_SMALL, "tiers": ("exact",)})
    t = _tier(res, "exact")
    assert res.verdict is Verdict.FAIL
    cex = t.counterexample
    assert cex["max |readout - limit|"] > cex["bound + round-off at this beta"]
    assert cex["(beta1, beta2)"][1] < 4096  # the bound breaks before the schedule's end (betas up to 4096 here)


def test_k8_a_smoothed_estimator_fails(tmp_path):
    def smoothed(x, tree, S):
        est, ok = empirical_transition_estimator(x, tree, S)
        return 0.9 * est + 0.1 / S, ok

    res = _run(get("N.K8").variant(estimator=smoothed), tmp_path, **{**K8_SMALL, "tiers": ("montecarlo",)})
    assert res.verdict is Verdict.FAIL


def test_k8_slow_beta1_schedule_breaks_the_assumption(tmp_path):
    res = _run(get("N.K8"), tmp_path, schedule="slow-beta1", **{**K8_SMALL, "tiers": ("exact",)})
    t = res.tiers[0]
    assert t.verdict is Verdict.ASSUMPTION_UNMET
    assert t.conclusion_without_assumptions


# ------------------------------------------------------------------------------ N.K9 --
def test_k9_passes_and_the_exact_identity_and_ns_code_fail_as_findings(tmp_path):
    res = _run(get("N.K9"), tmp_path, **K9_SMALL)
    assert res.verdict is Verdict.PASS
    mc = _tier(res, "montecarlo")
    assert set(_criteria(mc).values()) == {"PASS"}
    found = _findings(res)
    lit = found[FindingKind.LITERAL]
    assert lit.verdict is Verdict.FAIL
    frac = _num(lit, "defined prompts where the limit misses")
    assert 0.65 < frac.value < 0.82  # ~74% on N's notebook task, T=32
    # the cause, by intervention: the query's own key (it copies the target's parents), not the roots
    assert _num(lit, "misses left when the query's own key's score alone").value < 0.1
    assert _num(lit, "misses left when the root keys' scores alone").value == frac.value
    assert _num(lit, "misses left when the scores of the query's key").value == 0.0
    assert _num(lit, "the same on i.i.d. uniform tokens").value > 0.9  # ~94%: uniform tokens miss more, not less
    cex = lit.counterexample  # N's hand example: trigram [0, 0, 1, 0 | 0]
    assert cex["estimator"] == [0.0, 1.0] and np.allclose(cex["exact beta -> inf limit"], [0.75, 0.25])
    code = found[FindingKind.REFERENCE_CODE]
    assert code.verdict is Verdict.FAIL and 0.05 < _num(code, "prompts where N's code").value < 0.16
    assert found[FindingKind.OUTSIDE].verdict is Verdict.PASS
    assert found[FindingKind.UNSTATED].verdict is Verdict.FAIL
    assert res.headline.startswith("PASS (findings: the exact identity fails on")


def test_k9_a_readout_mixed_with_uniform_fails(tmp_path):
    """A plateau is seen once it stands above the estimator's own error in the T range: at these small n, a
    25% mix (plateau ~0.15 against eps(512) ~0.06); the quick profile's n also catch a 10% mix."""
    build, lim = mixed_readout(nichani_multiparent_construction, nichani_multiparent_construction_limit, 0.25)
    res = _run(get("N.K9").variant(construction=build, limit=lim), tmp_path, **K9_SMALL)
    assert _tier(res, "exact").verdict is Verdict.PASS
    assert res.verdict is Verdict.FAIL and _criteria(_tier(res, "montecarlo"))["e(T) / eps(T) falls"] == "FAIL"


def test_k9_heads_copying_the_wrong_parents_fail(tmp_path):
    """The construction built for the trigram graph, run on N's notebook task (p(i) = ((i-1)//2, i-1))."""
    def trigram(sets):
        return multiparent_graph("ngram", len(sets) - 1)

    build = lambda sets, S, b1, b2, **kw: nichani_multiparent_construction(trigram(sets), S, b1, b2, **kw)  # noqa
    lim = lambda x, sets, S: nichani_multiparent_construction_limit(x, trigram(sets), S)  # noqa: E731
    res = _run(get("N.K9").variant(construction=build, limit=lim), tmp_path, **{**K9_SMALL, "tiers": ("montecarlo",)})
    assert res.verdict is Verdict.FAIL


def test_k9_slow_beta1_schedule_breaks_the_assumption(tmp_path):
    res = _run(get("N.K9"), tmp_path, schedule="slow-beta1", **{**K9_SMALL, "tiers": ("exact",)})
    assert res.tiers[0].verdict is Verdict.ASSUMPTION_UNMET


def test_multiparent_graphs_and_sampler():
    assert multiparent_graph("ngram", 4) == [(), (), (0, 1), (1, 2), (2, 3)]
    assert multiparent_graph("notebook", 5) == [(), (), (0, 1), (1, 2), (1, 3), (2, 4)]
    sets = multiparent_graph("notebook", 12)
    x = sample_multiparent_prompts(np.random.default_rng(0), 3, sets, 0.1, 4000)
    assert x.shape == (4000, 12) and x.min() >= 0 and x.max() <= 2
    # roots uniform (N's InContextDAG); with alpha = 0.1 a node mostly repeats what its parents predict
    assert np.allclose(np.bincount(x[:, 0], minlength=3) / 4000, 1 / 3, atol=0.03)
    # the same draws with the target's true rows pi(. | s_p(T)_1, s_p(T)_2)
    x2, rows = sample_multiparent_prompts(np.random.default_rng(0), 3, sets, 0.1, 4000, rows=True)
    assert np.array_equal(x, x2) and rows.shape == (4000, 3) and np.allclose(rows.sum(1), 1)
    est, ok = empirical_multiparent_estimator(x2, sets, 3)
    assert ok.mean() > 0.6  # the target's parent pair is seen earlier in most prompts
    with pytest.raises(ValueError, match="unknown"):
        multiparent_graph("star", 4)


def _map_off_by(rel):
    """The right map with its readout scaled by ``1 + rel``: outputs off by ``rel * |y|``, patterns exact."""
    def fwd(model):
        dis = to_disentangled(model)
        return DisentangledTransformer(dis.S, dis.T, [A.detach() for A in dis.A], dis.W_O.detach() * (1 + rel))
    return fwd


def test_k7_tolerance_is_tied_to_roundoff_a_map_off_by_1e_9_relative_fails(tmp_path):
    """EXACT_TOL (1e-10) separates float64 round-off (the right map agrees to < 1e-12) from a real error:
    a readout off by 1e-9 relative (an output error of ~1e-9, far below 1e-7) FAILs, so a tolerance
    widened 1000x would let it PASS."""
    res = _run(get("N.K7").variant(to_disentangled=_map_off_by(1e-9)), tmp_path)
    t = res.tiers[0]
    assert t.verdict is Verdict.FAIL
    assert 1e-10 < t.counterexample["max |difference| over all prompts"] < 1e-8


def _map_in_float32(model):
    """The right map with its readout rounded through float32 (torch's default dtype), then back to float64."""
    dis = to_disentangled(model)
    W_O = dis.W_O.detach().to(torch.float32).to(dis.W_O.dtype)
    return DisentangledTransformer(dis.S, dis.T, [A.detach() for A in dis.A], W_O)


def test_k7_tolerance_refutes_a_readout_rounded_through_float32(tmp_path):
    """A second, independent guard on EXACT_TOL: a readout rounded through float32 moves the outputs by ~1e-8,
    far above float64 round-off (< 1e-12 for the right map), so N.K7 FAILs; a tolerance widened 1000x (1e-7)
    would pass it."""
    t = _run(get("N.K7").variant(to_disentangled=_map_in_float32), tmp_path).tiers[0]
    assert t.verdict is Verdict.FAIL
    assert 1e-10 < t.counterexample["max |difference| over all prompts"] < 1e-7


def test_k8_limit_is_reached_only_when_the_proven_bound_is_below_limit_tol(tmp_path):
    """LIMIT_TOL (1e-9) is where "the beta -> inf limit is reached" starts: at beta = 480 the proven
    bound on T = 5 prompts is ~4e-8, above it, so the exact tier cannot call the limit reached (a
    threshold 1000x wider would); at beta = 4096 it is below round-off, and the tier passes."""
    assert LIMIT_TOL < limit_bound(480, 480, 5) + limit_roundoff(480, 5) < 1e-6
    short = _run(get("N.K8"), tmp_path, betas=(1, 4, 16, 64, 256, 480), **{**K8_SMALL, "tiers": ("exact",)})
    assert _tier(short, "exact").verdict is Verdict.INCONCLUSIVE
    full = _run(get("N.K8"), tmp_path, **{**K8_SMALL, "tiers": ("exact",)})
    assert _tier(full, "exact").verdict is Verdict.PASS


def _head_swapped_map(model):
    """The right map with the two heads of a one-layer model swapped, and their W_O blocks with them: the same
    function of the prompt (the blocks are summed), but each head's attention pattern now sits on the other head."""
    dis = to_disentangled(model)
    A = [a.detach().clone() for a in dis.A]
    d0 = dis.widths[0]
    W = dis.W_O.detach()
    assert len(A) == 1 and A[0].shape[0] == 2 and W.shape[1] == 3 * d0
    return DisentangledTransformer(dis.S, dis.T, [A[0][[1, 0]]],
                                   torch.cat([W[:, :d0], W[:, 2 * d0:3 * d0], W[:, d0:2 * d0]], dim=1))


def test_k7_a_map_with_the_same_outputs_but_other_attention_patterns_fails(tmp_path):
    """N.K7 maps the model, not only its function: the head-swapped map reproduces the outputs to round-off, and
    FAILs on the attention patterns."""
    res = _run(get("N.K7").variant(to_disentangled=_head_swapped_map), tmp_path, heads=((2,),))
    t = res.tiers[0]
    assert t.verdict is Verdict.FAIL
    cex = t.counterexample
    assert cex["max |difference| over all prompts"] < 1e-12 and cex["max |attention pattern difference|"] > 0.1


def test_segment_slope_error_is_the_relative_errors_over_the_log_span():
    """The log-log slope from T = 10 to 100 (span log 10) of 0.1 +- 0.0114 -> 0.05 +- 0.0057: slope log(1/2)/log 10
    = -0.301 with s.e. hypot(0.114, 0.114)/log 10 = 0.070, so a fall at z = 3 is HELD (without the span, 0.161:
    UNDECIDED)."""
    from sim.montecarlo import Estimate
    from sim.papers.nichani.claims.constructions import _segment
    from sim.verdict import Outcome

    out, number, text = _segment("e", 10, 100, Estimate(0.1, 0.0114, 1000), Estimate(0.05, 0.0057, 1000), 3.0)
    assert out is Outcome.HELD and text == "-0.301 ± 0.070"
    assert number.stderr == pytest.approx(math.hypot(0.114, 0.114) / math.log(10), rel=1e-12)


def test_segment_zero_at_both_T_holds_with_a_flat_slope():
    """An error of 0 at both T has nothing left to fall: HELD, slope 0, reported as such."""
    from sim.montecarlo import Estimate
    from sim.papers.nichani.claims.constructions import _segment
    from sim.verdict import Outcome

    out, number, text = _segment("e", 10, 100, Estimate(0.0, 0.0, 1000), Estimate(0.0, 0.0, 1000), 3.0)
    assert out is Outcome.HELD and text == "0 at both T"
    assert (number.name, number.value, number.note) == ("e: slope T=10->100", 0.0, "0 at both T")


def test_segment_fall_to_zero_holds_with_slope_minus_infinity():
    """A positive error (0.5, below 1) that reaches 0 at the later T falls: HELD, slope -inf."""
    from sim.montecarlo import Estimate
    from sim.papers.nichani.claims.constructions import _segment
    from sim.verdict import Outcome

    out, number, text = _segment("e/eps", 10, 100, Estimate(0.5, 0.01, 1000), Estimate(0.0, 0.0, 1000), 3.0)
    assert out is Outcome.HELD and text == "falls to 0"
    assert (number.name, number.value, number.note) == ("e/eps: slope T=10->100", -math.inf, "falls to 0")


def test_segment_rise_from_zero_is_decided_on_the_later_error_with_z():
    """From 0 at T=10 to 0.02 +- 0.008 at T=100 the error rises (slope +inf): never HELD; the rise counts once the
    later value is beyond z standard errors of 0: at z = 2 (0.016) VIOLATED, at z = 3 (0.024) UNDECIDED."""
    from sim.montecarlo import Estimate
    from sim.papers.nichani.claims.constructions import _segment
    from sim.verdict import Outcome

    a, b = Estimate(0.0, 0.0, 1000), Estimate(0.02, 0.008, 1000)
    out, number, text = _segment("eps", 10, 100, a, b, 2.0)
    assert out is Outcome.VIOLATED and text == "rises from 0"
    assert (number.name, number.value, number.note) == ("eps: slope T=10->100", math.inf, "rises from 0")
    assert _segment("eps", 10, 100, a, b, 3.0)[0] is Outcome.UNDECIDED


def test_segment_slope_is_decided_against_zero_with_z_and_reported_as_montecarlo():
    """A rise 0.05 -> 0.1 (slope +0.301 +- 0.070) is VIOLATED; a fall 0.1 -> 0.05 with relative errors 0.195 each
    (s.e. hypot(0.195, 0.195) / log 10 = 0.120, 2.5 s.e.) is HELD at z = 2 and UNDECIDED at z = 3. The number
    is the Monte Carlo log-log slope with its error."""
    from sim.montecarlo import Estimate
    from sim.papers.nichani.claims.constructions import _segment
    from sim.verdict import Outcome

    rise, number, _ = _segment("e", 10, 100, Estimate(0.05, 0.0057, 1000), Estimate(0.1, 0.0114, 1000), 3.0)
    assert rise is Outcome.VIOLATED and number.value == pytest.approx(math.log(2) / math.log(10), rel=1e-12)
    assert (number.name, number.kind) == ("e: log-log slope T=10->100", "montecarlo")
    assert number.note == "d log(error) / d log T between independent draws"  # no seeds recorded, none named
    seeded = _segment("e", 10, 100, Estimate(0.05, 0.0057, 1000, seed=11), Estimate(0.1, 0.0114, 1000, seed=12), 3.0)
    assert seeded[1].note == "d log(error) / d log T between independent draws (seeds 11, 12)"
    a, b = Estimate(0.1, 0.0195, 1000), Estimate(0.05, 0.00975, 1000)
    assert _segment("e", 10, 100, a, b, 2.0)[0] is Outcome.HELD
    out, number, text = _segment("e", 10, 100, a, b, 3.0)
    assert out is Outcome.UNDECIDED and text == "-0.301 ± 0.120"
    assert number.stderr == pytest.approx(math.hypot(0.195, 0.195) / math.log(10), rel=1e-12)
