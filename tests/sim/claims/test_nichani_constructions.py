"""Tests of claims N.K7, N.K8, N.K9 (sim.claims.nichani.constructions)."""
import numpy as np
import pytest

from sim.claims import get
from sim.claims.nichani.constructions import _transposed_map, multiparent_graph, sample_multiparent_prompts
from sim.models import empirical_transition_estimator
from sim.runner import RunConfig, evaluate_claim
from sim.verdict import Verdict

K8_SMALL = {"sizes": ((2, 5),), "n_task": 3000, "n_task_model": 100}
K9_SMALL = {"sizes": ((2, 5),), "n_task": 3000, "tiers": ("exact",)}  # trained tier: test_nichani_trained.py


def _run(claim, tmp_path, prior=None, **overrides):
    return evaluate_claim(claim, RunConfig(profile="quick", seed=0, overrides={claim.id: overrides}), tmp_path,
                          prior=prior)


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


# ------------------------------------------------------------------------------ N.K8 --
def test_k8_literal_matrices_fail_and_the_repair_passes(tmp_path):
    res = _run(get("N.K8"), tmp_path, **K8_SMALL)
    t = res.tiers[0]
    assert res.verdict is Verdict.FAIL
    cex = t.counterexample
    est, ok = empirical_transition_estimator(cex["prompt"], cex["parents"], cex["S"])
    assert ok and np.allclose(est, cex["empirical estimator"])
    assert np.abs(np.array(cex["readout at the largest beta"]) - est).max() > 0.3
    readings = {r["name"].split(" (")[0].split(" [")[0]: r["verdict"] for r in t.readings}
    assert readings["literal Knowl 8 matrices"] == "FAIL" and readings["with the root-key penalty"] == "PASS"
    frac = next(n for n in t.numbers if n.name.endswith("misses the estimator, literal"))
    assert 0.1 < frac.value < 0.22  # ~15% of defined prompts on N's chain task
    assert t.figures
    # the hand example: chain [1, 0, 0 | 1] -> estimator [1, 0], literal limit [0.5, 0.5]; repaired: exact
    hand = {n.name.rsplit(", ", 1)[1].split(":")[0]: n.value for n in t.numbers if n.name.startswith("N's hand")}
    assert hand["literal"] == pytest.approx(0.5, abs=1e-9) and hand["strict"] < 1e-9


def test_k8_repaired_passes_and_a_wrong_estimator_fails(tmp_path):
    res = _run(get("N.K8").variant(strict=True), tmp_path / "a", **K8_SMALL)
    assert res.verdict is Verdict.PASS
    rate = next(n for n in res.tiers[0].numbers if n.name.endswith("strict"))
    assert rate.value > 0.5  # error ~ e^{-c beta} with c near 1

    def smoothed(x, tree, S):
        est, ok = empirical_transition_estimator(x, tree, S)
        return 0.9 * est + 0.1 / S, ok

    res = _run(get("N.K8").variant(strict=True, estimator=smoothed), tmp_path / "b", **K8_SMALL)
    assert res.verdict is Verdict.FAIL and res.tiers[0].counterexample


def test_k8_slow_beta1_schedule_breaks_the_assumption(tmp_path):
    res = _run(get("N.K8").variant(strict=True), tmp_path, schedule="slow-beta1", **K8_SMALL)
    t = res.tiers[0]
    assert t.verdict is Verdict.ASSUMPTION_UNMET
    assert "violated" in t.conclusion_without_assumptions


# ------------------------------------------------------------------------------ N.K9 --
def test_k9_literal_fails_on_the_hand_example_and_the_repair_passes(tmp_path):
    res = _run(get("N.K9"), tmp_path, **K9_SMALL)
    t = res.tiers[0]
    assert res.verdict is Verdict.FAIL
    cex = t.counterexample
    assert cex["prompt"] == [0, 0, 1, 0, 0] and np.allclose(cex["empirical estimator"], [0, 1])
    assert np.allclose(cex["readout at the largest beta"], [0.75, 0.25], atol=1e-9)
    verdicts = [r["verdict"] for r in t.readings]
    assert verdicts == ["FAIL", "PASS", "FAIL"]  # literal, repaired, repaired vs N's code's estimator
    res = _run(get("N.K9").variant(strict=True), tmp_path / "b", **K9_SMALL)
    assert res.verdict is Verdict.PASS


def test_k9_repair_does_not_compute_n_codes_estimator(tmp_path):
    res = _run(get("N.K9").variant(strict=True, include_last=True), tmp_path, **K9_SMALL)
    assert res.verdict is Verdict.FAIL and res.tiers[0].counterexample["estimator counts the last prompt position"]


def test_k9_slow_beta1_schedule_breaks_the_assumption(tmp_path):
    res = _run(get("N.K9").variant(strict=True), tmp_path, schedule="slow-beta1", **K9_SMALL)
    assert res.tiers[0].verdict is Verdict.ASSUMPTION_UNMET


def test_multiparent_graphs_and_sampler():
    assert multiparent_graph("ngram", 4) == [(), (), (0, 1), (1, 2), (2, 3)]
    assert multiparent_graph("notebook", 5) == [(), (), (0, 1), (1, 2), (1, 3), (2, 4)]
    sets = multiparent_graph("notebook", 12)
    x = sample_multiparent_prompts(np.random.default_rng(0), 3, sets, 0.1, 4000)
    assert x.shape == (4000, 12) and x.min() >= 0 and x.max() <= 2
    # roots uniform (N's InContextDAG); with alpha = 0.1 a node mostly repeats what its parents predict
    assert np.allclose(np.bincount(x[:, 0], minlength=3) / 4000, 1 / 3, atol=0.03)
    with pytest.raises(ValueError, match="unknown"):
        multiparent_graph("star", 4)
