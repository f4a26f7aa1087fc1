"""W.E3 (K = L heads are the key) and W.E4 (absolute positions learn the same pattern): each passes on small
settings beside W.E1's runs, every negative control FAILs the same check, a wrong variant FAILs, and the
deciding code reads hand-made measurements as it should."""
import numpy as np
import pytest
import torch

from sim.claims import get
from sim.papers.wei.claims.architecture import (E3_CRITERIA, LOSS_READS, bma_examples, decide_w_e3,
                                                same_example_heads)
from sim.priors import Point
from sim.verdict import FindingKind, Outcome, Verdict

from ..conftest import tier

#: One pi with clear structure for every seed (each example informative), and W.E1's recipe made sharp
#: (copiers from the start: wH0 14, preference 6) on a small task. W.E3 and W.E4 share W.E1's runs at these
#: settings (kept in this process), and W.E3's K-head runs are kept for its wrong variant.
PI = Point(np.array([[0.7, 0.1, 0.1, 0.1], [0.1, 0.1, 0.7, 0.1], [0.1, 0.1, 0.1, 0.7], [0.1, 0.7, 0.1, 0.1]]))
SMALL = dict(d=4, L=3, H=8, seeds=4, seeds_start=4, n_eval=1024, steps1=100, batch1=64, steps2=150, batch2=128,
             wH0=14.0, perm_bias=6.0, workers=1)
SMALL_E3 = dict(SMALL, heads=(1, 2))
SMALL_E4 = dict(SMALL, tiers=("trained",))  # W.E4 is decided by the standard profile: quick runs no tier


# ============================================================================= W.E3 ==
def test_w_e3_passes_reports_the_copied_examples_and_every_control_fails(run_claim):
    res = run_claim(get("W.E3"), prior=PI, **SMALL_E3)
    t = tier(res, "trained")
    assert res.verdict is Verdict.PASS, t.summary
    crit = {r["name"]: r["verdict"] for r in t.readings}
    assert crit == {f"criterion: {c}, K={K}": "PASS" for K in (1, 2) for c in E3_CRITERIA}
    # which examples the heads copy, per seed
    copied = [n for n in t.numbers if n.name.endswith("examples the heads copy (per seed, head order)")]
    assert len(copied) == 2 and copied[1].note.count("seed") == 4 and "scores" in copied[1].note
    # the finding: the K-head models reach BMA on K (close > 0.8 of the structure-blind gap to it)
    assert [f.kind for f in t.findings] == [FindingKind.STRICTER] * 2 and {f.verdict for f in t.findings} == {Verdict.PASS}
    assert len(t.controls) == 2 and {c.verdict for c in t.controls} == {Verdict.FAIL}, [c.deciding for c in t.controls]
    assert "distinct examples per seed [-3, -3, -3, -3]" in t.controls[0].deciding  # the K = L model: 3 heads
    assert "distinct examples per seed [1, 1, 1, 1] (need 2" in t.controls[1].deciding  # two heads, one example
    assert [f.rsplit("/", 1)[-1] for f in t.figures] == ["W.E3-loss-vs-K.png", "W.E3-copied-examples.png"]


def test_w_e3_fails_at_or_above_bma_on_k_when_the_k_eq_l_models_loss_is_reported(run_claim):
    """The acceptance's wrong variant: no model copies all L examples through fewer heads, so the K-head
    model's reported loss is replaced by the K = L model's; it sits below BMA on K and FAILs that part."""
    res = run_claim(get("W.E3").variant(loss_read=LOSS_READS[1]), prior=PI, **SMALL_E3)
    t = tier(res, "trained")
    assert res.verdict is Verdict.FAIL, t.summary
    crit = {r["name"]: r["verdict"] for r in t.readings}
    assert crit["criterion: at or above BMA on K, K=1"] == crit["criterion: at or above BMA on K, K=2"] == "FAIL"
    assert "K=1: at or above BMA on K" in t.counterexample["failed criteria"]
    assert t.counterexample["loss read"] == LOSS_READS[1] and len(t.counterexample["per seed [K]"][2]) == 4


def _measurement(K, examples, loss, loss_full, bma_K, bma_full, copier=0.95, n=400, seed=0):
    rng = np.random.default_rng(seed)
    noise = rng.normal(0, 0.01, n)
    return {"K": K, "examples": examples, "copier": copier, "S": sorted(examples), "scores": [copier] * len(examples),
            "loss": loss + noise, "loss_full": loss_full + noise, "bma_K": bma_K + noise, "bma_full": bma_full + noise,
            "blind": bma_K + 0.05 + noise, "L": 4}


def _decide(ms, **kw):
    return decide_w_e3({2: ms}, [11, 12, 13, 14], 3.0, **kw)[0]


def test_decide_w_e3_by_hand():
    """At BMA on K (within the error) is 'at or above'; below it beyond the error is not; the K = L model
    standing in ties with itself and copies L examples; two heads on one example copy one."""
    at = [_measurement(2, [0, 3], 1.20, 1.10, 1.20, 1.10, seed=k) for k in range(4)]
    outs = _decide(at)
    assert set(outs.values()) == {Outcome.HELD}
    above = [_measurement(2, [1, 2], 1.25 + 0.01 * k, 1.10, 1.20, 1.10, seed=k) for k in range(4)]
    assert set(_decide(above).values()) == {Outcome.HELD}
    below = [_measurement(2, [1, 2], 1.15, 1.10, 1.20, 1.10, seed=k) for k in range(4)]
    assert _decide(below)[2, E3_CRITERIA[2]] is Outcome.VIOLATED and _decide(below)[2, E3_CRITERIA[1]] is Outcome.HELD
    stand_in = [{**m, "loss": m["loss_full"], "examples": [0, 1, 2, 3]} for m in at]
    assert set(_decide(stand_in).values()) == {Outcome.VIOLATED}
    one_example = [{**m, "examples": [3, 3]} for m in at]
    assert _decide(one_example)[2, E3_CRITERIA[0]] is Outcome.VIOLATED
    weak = [{**m, "copier": 0.3} for m in at]
    assert _decide(weak)[2, E3_CRITERIA[0]] is Outcome.VIOLATED
    # the wrong variant reads the K = L model's losses as the K-head model's
    assert _decide(at, loss_read=LOSS_READS[1])[2, E3_CRITERIA[2]] is Outcome.VIOLATED
    # no evidence lost with the uncopied examples on these prompts: no unit, undecided
    empty = [_measurement(2, [0, 3], 1.20, 1.10, 1.10, 1.10, seed=k) for k in range(4)]
    assert _decide(empty)[2, E3_CRITERIA[1]] is Outcome.UNDECIDED
    with pytest.raises(ValueError, match="loss_read"):
        _decide(at, loss_read="the best model")


def test_bma_examples_and_same_example_heads():
    assert bma_examples([4, 1], 2, 6) == [1, 4]
    assert bma_examples([3, 3, 3], 3, 5) == [0, 1, 3]  # one distinct example, completed by the lowest others
    assert bma_examples([5, 0, 2, 4], 2, 6) == [0, 5]  # more heads than K: the first K distinct
    from sim.papers.wei.model import WeiAbsolute, wei_construction
    from sim.papers.wei.probes import copier_report

    pi = np.full((3, 3), 1 / 3)
    for model in (wei_construction(pi, 3, 4, 10.0), WeiAbsolute.from_relative(wei_construction(pi, 3, 4, 10.0))):
        twin = same_example_heads(model)
        assert copier_report(model).example.tolist() == [0, 1, 2]
        assert copier_report(twin).example.tolist() == [0, 0, 0] and torch.equal(twin.W_KQ, model.W_KQ)


# ============================================================================= W.E4 ==
def test_w_e4_is_decided_by_the_standard_profile(run_claim):
    res = run_claim(get("W.E4"))
    assert res.verdict is Verdict.NOT_RUN and get("W.E4").decided_by == "standard"


def test_w_e4_passes_beside_the_rpe_model_and_every_control_fails(run_claim):
    res = run_claim(get("W.E4"), prior=PI, **SMALL_E4)
    t = tier(res, "trained")
    assert res.verdict is Verdict.PASS, t.summary
    crit = {r["name"]: r["verdict"] for r in t.readings}
    assert crit.pop("reported: the RPE model beside it (W.E1's runs, same seeds and prompts)") == "NOT_RUN"
    assert crit == {f"criterion: {k}": "PASS" for k in ("copier", "layer-2 attention ≈ BMA", "σ(W_OV) ≈ pi",
                                                         "block-diagonal W_KQ", "loss near BMA")}
    rpe = [n for n in t.numbers if n.name.startswith("RPE model beside it")]
    assert len(rpe) == 5 and all(n.n == 4 for n in rpe)
    # W.E1's four controls, built with absolute positions, FAIL the same check
    assert len(t.controls) == 4 and {c.verdict for c in t.controls} == {Verdict.FAIL}, [c.deciding for c in t.controls]
    assert [f.kind for f in t.findings] == [FindingKind.STRICTER, FindingKind.STRICTER, FindingKind.LITERAL]
    assert [f.rsplit("/", 1)[-1] for f in t.figures] == ["W.E4-attention-maps.png"]


def test_w_e4_wrong_threshold_fails(run_claim):
    """W.E1's 'closes >= 0.8 of the wrong mechanism's distance' made 0.9999: the absolute model's layer 2 is
    not that exact on small settings, and the check says so with a counterexample."""
    res = run_claim(get("W.E4").variant(gap_threshold=0.9999), prior=PI, **SMALL_E4)
    t = tier(res, "trained")
    assert res.verdict is Verdict.FAIL, t.summary
    assert "layer-2 attention ≈ BMA" in t.counterexample["failed criteria"]
    assert t.counterexample["positions"] == "absolute" and len(t.counterexample["runs"]) == 4


def test_w_e4_positions_setting_relative_reads_w_e1s_runs_themselves(run_claim):
    """The setting says how layer 1 sees positions; with W's RPE the model is W.E1's run itself, so its
    attention is the RPE model's exactly (the literal finding closes all of the blind attention's TV)."""
    t = tier(run_claim(get("W.E4"), prior=PI, positions="relative", **SMALL_E4), "trained")
    same = t.findings[2]
    assert same.kind is FindingKind.LITERAL and same.numbers[0].value == pytest.approx(1.0, abs=1e-12)
    assert "relative positions" in t.summary


def test_w_e4_trained_on_the_wrong_task_breaks_the_assumption_and_fails_layer_2(run_claim):
    """Trained with a separate tree per example (the context says nothing about the target's parents) and
    evaluated on W's task, layer 2 never learns to read the copies."""
    res = run_claim(get("W.E4"), task="independent-trees", **dict(SMALL_E4, steps1=40, steps2=40, n_eval=512))
    t = tier(res, "trained")
    assert res.verdict is Verdict.ASSUMPTION_UNMET, t.summary
    crit = {r["name"]: r["verdict"] for r in t.readings}
    assert crit["criterion: layer-2 attention ≈ BMA"] == "FAIL", crit
