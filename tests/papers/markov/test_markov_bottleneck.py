"""G.6 and G.8 (sim.papers.markov.claims.bottleneck): the task-recognition head's bottleneck at K2* and
its generalisation with capacity.

The runs are replaced by synthetic records (the form train_task_heads writes) whose placements put
each model where the test needs it: on G.6's law (K2* growing with D_phi and the decoder, entry into M2
after A (K2* - K)^-2 steps) the claim PASSes and its wrong-law controls FAIL; a wrong exponent FAILs;
scattered delays leave gamma undecided by its bootstrap error. G.8 PASSes when the large circuit sits at
G2 on held-out chains, with the small one and the untrained model as controls that FAIL.
tests/papers/markov/test_task_head.py trains the real model.
"""
import math

import numpy as np
import pytest

from sim.papers.markov import task_head as th
from sim.papers.markov.claims.bottleneck import (G_6, G_8, control_k2, decide_growth, delay_of, entry_step, first_step,
                                                 fit_delays, judge_at, judge_delay_law, judge_exponent, profile_sse,
                                                 refine_ks, seeds_to_tell, wrong_gamma_delays)
from sim.verdict import Outcome, Verdict

from ..conftest import tier

MEM = ("uniform", "G1", "G2", "M1", "M2")


@pytest.fixture
def run_claim(run_claim):
    """The shared fixture with one worker: the architectures' jobs are handed to the runner together, and
    the fake trainers below live in this process."""
    return lambda claim, **kw: run_claim(claim, **{"workers": 1, **kw})

FRESH = ("uniform", "G1", "G2")


def placed_record(path, *, sets=("id", "ood"), strategies=MEM, steps=None, seed=1, margin=0.3, near=0.05):
    """A record whose nearest strategy at evaluation i is path[i] (KL ``near``, the others ``near + margin``),
    strategies 1 nat apart (radius 0.5), standard errors 0.01, on every set of ``sets``."""
    steps = list(steps if steps is not None else range(0, 50 * len(path), 50))

    def block(p):
        row = {s: [near if s == q else near + margin for q in p] for s in strategies}
        row.update({s + "_se": [0.01] * len(p) for s in strategies})
        row["pair_se"] = [[[0.01] * len(strategies)] * len(strategies)] * len(p)  # shared rows: never written
        row["loss"] = [1.0] * len(p)
        return row

    seps = {w: {a: {b: (1.0, 0.01) for b in strategies if b != a} for a in strategies} for w in sets}
    n = 64
    return {"steps": steps, "eval": {w: block(path) for w in sets}, "pair_order": list(strategies), "separations": seps,
            "spec": {"seed": seed}, "final_nll": {w: [1.5] * n for w in sets},
            "strategy_nll": {w: {s: list(1.4 + 0.01 * np.arange(n) % 0.02 + (0.3 if s == "G1" else 0.0))
                                 for s in strategies} for w in sets}}


def k2_of(cfg):
    return 8.0 + 2.0 * cfg.d_phi + cfg.decoder_width / 16  # D_phi=2, dec 64: 16; D_phi=16: 44; dec 256: 28


def fake_heads(monkeypatch, delay=lambda K, K2, seed: 6000.0 * (K2 - K) ** -2.0, steps=4000):
    """train_task_heads' stand-in for G.6: every run passes uniform -> M1 -> G2 (from step 100) and enters
    M2 delay(K, K2*, seed) steps later when K < K2* and that is within the budget; otherwise it stays at G2."""
    calls = []

    def fake(config, runs, **kw):
        calls.append({"config": config, "runs": list(runs), **kw})
        K2 = k2_of(config)
        budget = kw.get("steps", steps)
        out = []
        for r in runs:
            d = delay(r["K"], K2, r["seed"]) if r["K"] < K2 else math.inf
            # evaluations every 50 steps and a thousandth of a step either side of each switch: the
            # interpolated crossings are the switches themselves
            grid = sorted(set(range(0, budget + 1, 50)) | {99.999, 100.001} |
                          ({100 + d - 0.001, 100 + d + 0.001} if 100 + d < budget else set()))
            path = ["uniform" if t < 50 else "M1" if t < 100 else "G2" if t < 100 + d else "M2" for t in grid]
            out.append(placed_record(path, steps=grid, seed=r["seed"]))
        return out

    monkeypatch.setattr(th, "train_task_heads", fake)
    return calls


G6_SMALL = dict(tiers=("trained",), seeds=3, K_grid=(8, 10, 11, 12, 13, 14, 16, 24), bootstrap=60)


def test_g6_passes_on_the_law_and_every_wrong_law_fails(run_claim, monkeypatch):
    rng = np.random.default_rng(0)
    jitter = {}
    calls = fake_heads(monkeypatch, delay=lambda K, K2, sd: 6000.0 * (K2 - K) ** -2.0 * jitter.setdefault(
        (K, sd), math.exp(0.03 * rng.standard_normal())))
    res = run_claim(G_6, **G6_SMALL)
    t = tier(res, "trained")
    assert res.verdict is Verdict.PASS, t.summary
    growth = [r for r in t.readings if r["name"].startswith("K2* grows")]
    assert [r["verdict"] for r in growth] == ["held", "held"]
    gamma = next(n for n in t.numbers if "gamma in" in n.name)
    assert gamma.value == pytest.approx(2.0, abs=0.15) and gamma.stderr < 0.3
    assert all(c.verdict is Verdict.FAIL for c in t.controls) and len(t.controls) == 4
    assert {(c["config"].d_phi, c["config"].decoder_width) for c in calls} == {(2, 64), (16, 64), (2, 256)}
    assert res.primary_reading["lines"] == "148-152" and len(t.figures) == 1
    assert t.findings[0].verdict is Verdict.NOT_RUN  # the full transformer is the paper profile's


def test_g6_a_wrong_exponent_fails_and_capacity_that_shrinks_k2_fails(run_claim, monkeypatch):
    fake_heads(monkeypatch)
    bad = run_claim(G_6.variant(gamma=3.0, gamma_rivals=(1.0, 2.0)), **G6_SMALL)
    assert bad.verdict is Verdict.FAIL and tier(bad, "trained").counterexample["fit"]["gamma"] == pytest.approx(2, abs=0.2)
    # the capacity arms the other way round: the larger model's K2* below the smaller's
    swapped = ({"d_phi": 16, "decoder_width": 64}, {"d_phi": 2, "decoder_width": 64}, {"d_phi": 2, "decoder_width": 256})
    res = run_claim(G_6, **{**G6_SMALL, "arms": swapped})
    assert res.verdict is Verdict.FAIL
    assert next(r for r in tier(res, "trained").readings if "D_phi" in r["name"])["verdict"] == "violated"


def test_g6_is_not_run_in_quick_and_says_which_profile_decides():
    assert G_6.tiers_for("quick") == () and G_6.decided_by == "standard" and "standard" in G_6.pending
    assert G_8.tiers_for("quick") == () and G_8.decided_by == "standard"


def test_g6_delay_exponent_is_decided_beyond_its_bootstrap_error_not_on_the_point_fit():
    """(Moved from G.2, whose G2 -> M2 delay this was.) Delays on G's law (gamma 2, K2* 7000) HOLD,
    while delays scattered by a factor up to 4 between seeds leave gamma undecided whatever the point
    fit lands on (a comparison without the error would decide it)."""
    Ks = (500, 1000, 2000, 3000, 4000, 5000, 6000)
    exact = [(K, sd, 4e9 * (7000 - K) ** -2.0) for K in Ks for sd in range(4)]
    f = fit_delays(exact, np.random.default_rng(1), 60)
    assert f["gamma"] == pytest.approx(2.0, abs=1e-3) and f["K2"] == pytest.approx(7000, rel=0.01)
    assert judge_exponent(f["gamma"], max(f["gamma_se"], 0.05), 2.0, (1.0, 3.0), 3.0)[0] is Outcome.HELD
    scatter = {0: 0.25, 1: 4.0, 2: 0.5, 3: 2.0}
    noisy = [(K, sd, 4e9 * (7000 - K) ** -2.0 * scatter[sd] ** (K / 3000)) for K in Ks for sd in range(4)]
    f = fit_delays(noisy, np.random.default_rng(1), 60)
    assert f["gamma_se"] > 0.5 and judge_exponent(f["gamma"], f["gamma_se"], 2.0, (1.0, 3.0), 3.0)[0] is Outcome.UNDECIDED


def test_judge_exponent_reads_the_claim_inside_and_the_rivals_outside():
    assert judge_exponent(2.1, 0.35, 2.0, (1.0, 3.0), 3.0)[0] is Outcome.UNDECIDED  # 2.1 ± 1.05 holds 3 too
    assert judge_exponent(2.1, 0.1, 2.0, (1.0, 3.0), 3.0)[0] is Outcome.HELD
    assert judge_exponent(2.5, 0.1, 2.0, (1.0, 3.0), 3.0)[0] is Outcome.VIOLATED
    assert judge_exponent(2.0, math.inf, 2.0, (1.0, 3.0), 3.0)[0] is Outcome.UNDECIDED


def test_control_k2_is_the_fit_when_identified_else_one_step_past_the_last_delay():
    pts = [(8, 0, 1.0), (12, 0, 2.0), (16, 0, 3.0)]
    assert control_k2({"K2": 21.5, "at_bound": False}, pts, (8, 12, 16, 24)) == 21.5
    # one step (the spacing of the two highest K with delays) past the last delay ...
    assert control_k2({"K2": 1600.0, "at_bound": True}, pts, (8, 12, 16, 24, 32)) == 20
    assert control_k2({"K2": 1600.0, "at_bound": True}, pts, (8, 12, 16)) == 20
    # ... and no further than the next K tried, whose runs gave no delay
    assert control_k2({"K2": 1600.0, "at_bound": True}, pts, (32, 8, 12, 16, 18)) == 18


def test_wrong_gamma_delays_keep_the_anchor_and_each_runs_factor():
    pts = [(K, sd, 100.0 * (20 - K) ** -2.0 * (1.1 if sd else 0.9)) for K in (4, 8, 12, 16) for sd in (0, 1)]
    fake = wrong_gamma_delays(pts, 20.0, 1.0)
    by = {(k, sd): t for k, sd, t in fake}
    assert by[4, 1] / by[4, 0] == pytest.approx(1.1 / 0.9)  # the runs' spread kept
    gm = lambda k: math.sqrt(by[k, 0] * by[k, 1])  # noqa: E731
    assert gm(4) == pytest.approx(100.0 * 16 ** -2.0 * math.sqrt(0.99)) and gm(16) / gm(4) == pytest.approx(16 / 4)
    f = fit_delays(fake, np.random.default_rng(0), 40, k_max=40.0)
    assert f["gamma"] == pytest.approx(1.0, abs=0.15)


def test_the_capacity_control_fails_against_any_small_model_that_enters_m2_on_the_grid():
    from sim.papers.markov.claims.bottleneck import shrunk_bracket

    below = shrunk_bracket((8, 16, 32))
    assert below == {"lower": None, "upper": 8, "estimate": None}
    assert decide_growth({"lower": 16, "upper": 32}, below)[0] is Outcome.VIOLATED
    assert decide_growth({"lower": None, "upper": 8}, below)[0] is Outcome.UNDECIDED  # the small one enters nowhere


def test_decide_growth_needs_a_k_the_small_model_fails_and_the_large_one_passes():
    b = lambda lo, hi: {"lower": lo, "upper": hi, "estimate": None}  # noqa: E731
    assert decide_growth(b(12, 16), b(16, 32))[0] is Outcome.HELD
    assert decide_growth(b(12, 16), b(12, 16))[0] is Outcome.UNDECIDED  # the same bracket: within the grid
    assert decide_growth(b(16, 32), b(12, 16))[0] is Outcome.VIOLATED
    assert decide_growth(b(32, None), b(64, None))[0] is Outcome.UNDECIDED  # off the grid


def test_entry_step_is_the_start_of_the_last_streak_in_m2_and_the_delay_counts_from_g2():
    rec = placed_record(["uniform", "G2", "M1", "M2", "M2"], steps=[0, 50, 100, 150, 200])
    # nearest by 0.3 nats at each evaluation, by -0.3 at the one before: the crossing halfway between them
    assert entry_step(rec, "M2", "id") == 125.0 and first_step(rec, "G2", "id") == 25.0 and delay_of(rec) == 100.0
    assert entry_step(placed_record(["uniform", "M2", "M1"]), "M2", "id") is None
    assert delay_of(placed_record(["uniform", "M1", "M2"])) is None  # no G2 phase: no G2 -> M2 delay


def fake_g8(monkeypatch, large_end="G2", small_end="G1"):
    def fake(config, runs, **kw):
        end = large_end if config.d_phi >= 100 else small_end
        return [placed_record(["uniform", "G1", end, end], sets=("ood",), strategies=FRESH, seed=r["seed"])
                for r in runs]

    monkeypatch.setattr(th, "train_task_heads", fake)


def test_g8_passes_when_the_large_circuit_sits_at_g2_on_unseen_chains_and_its_controls_fail(run_claim, monkeypatch):
    fake_g8(monkeypatch)
    res = run_claim(G_8, tiers=("trained",), seeds=2)
    t = tier(res, "trained")
    assert res.verdict is Verdict.PASS, t.summary
    assert [c.verdict for c in t.controls] == [Verdict.FAIL, Verdict.FAIL]
    assert res.primary_reading["lines"] == "170" and str(t.findings[0].kind) == "stricter criterion"
    assert any("held-out loss minus G2's" in n.name for n in t.numbers)


def test_g8_fails_when_the_large_circuit_stays_at_g1_and_a_wrong_target_fails(run_claim, monkeypatch):
    fake_g8(monkeypatch, large_end="G1")
    assert run_claim(G_8, tiers=("trained",), seeds=2).verdict is Verdict.FAIL
    fake_g8(monkeypatch)
    assert run_claim(G_8.variant(reaches="G1"), tiers=("trained",), seeds=2).verdict is Verdict.FAIL
    res = run_claim(G_8, tiers=("trained",), seeds=2, large={"d_phi": 16, "decoder_width": 64})
    assert res.verdict is Verdict.ASSUMPTION_UNMET  # a task vector too small to hold the counts


def test_a_model_between_two_other_strategies_is_not_at_g2():
    """G.8's small circuit sits near uniform and G1 (which one, within the error): it is not at G2, which
    trails both by far, so the check FAILs it rather than leaving it open as G.1's reading would."""
    rec = placed_record(["uniform"], sets=("ood",), strategies=FRESH)
    rec["eval"]["ood"]["G1"] = [0.05 + 0.005]  # the runner-up within its paired error (0.01)
    out, pl = judge_at(rec, "G2", "ood", 3.0)
    assert pl["phase"] == "uniform" and out is Outcome.VIOLATED
    rec["eval"]["ood"]["G2"] = [0.05 + 0.02]  # G2 only 2 paired s.e. behind: open
    assert judge_at(rec, "G2", "ood", 3.0)[0] is Outcome.UNDECIDED
    assert judge_at(placed_record(["G2"], sets=("ood",), strategies=FRESH), "G2", "ood", 3.0)[0] is Outcome.HELD


def test_g6_delays_that_identify_no_finite_k2_leave_the_law_undecided(run_claim, monkeypatch):
    """Delays growing gently with K (no divergence): the best K2* is the search's bound, so the law is
    UNDECIDED, never judged on the exponent such a fit returns; with entries at only three K the
    three-parameter law is not fitted at all."""
    fake_heads(monkeypatch, delay=lambda K, K2, sd: 500.0 * (1 + K / 100))
    t = tier(run_claim(G_6, **G6_SMALL), "trained")
    law = next(r for r in t.readings if r["name"].startswith("Delta tau"))
    assert law["verdict"] == "undecided" and "no finite K2*" in law["detail"]
    # the wrong-exponent controls diverge at the grid's first K past the last delay (14 -> 16: the small
    # circuit's runs stop entering M2 there), where the fit sees them and tells their exponents from 2
    wrong = [c for c in t.controls if c.name.startswith("delays on a law")]
    assert [c.verdict for c in wrong] == [Verdict.FAIL, Verdict.FAIL] and all("K2* = 16" in c.mechanism for c in wrong)
    fake_heads(monkeypatch)
    t = tier(run_claim(G_6, **{**G6_SMALL, "K_grid": (8, 10, 12, 24), "refine_points": 0}), "trained")
    law = next(r for r in t.readings if r["name"].startswith("Delta tau"))
    assert law["verdict"] == "undecided" and "fewer than 4 values of K" in law["detail"]


def test_g6_refines_inside_the_delay_arms_bracket_with_seeds_of_its_own(run_claim, monkeypatch):
    """A coarse grid whose delays stop at three K (8, 10, 12; the small circuit's K2* is 16): the
    refinement trains the delay arm one K at a time past 12, inside its bracket [12, 24], with a longer
    budget and seeds of its own, and its entries at K = 13, 14 and 15 give the law more K."""
    rng = np.random.default_rng(2)
    jitter = {}
    calls = fake_heads(monkeypatch, delay=lambda K, K2, sd: 6000.0 * (K2 - K) ** -2.0 * jitter.setdefault(
        (K, sd), math.exp(0.03 * rng.standard_normal())))
    t = tier(run_claim(G_6, **{**G6_SMALL, "K_grid": (8, 10, 12, 24), "refine_seeds": 3}), "trained")
    fine = [c for c in calls if c["steps"] == G_6.settings["standard"]["refine_steps"]]
    assert len(fine) == 1 and (fine[0]["config"].d_phi, fine[0]["config"].decoder_width) == (2, 64)
    assert sorted({r["K"] for r in fine[0]["runs"]}) == [13, 14, 15, 16] == refine_ks({"lower": 12, "upper": 24}, 4)
    first = {(r["seed"], r["chain_seed"]) for c in calls if c is not fine[0] for r in c["runs"]}
    assert not first & {(r["seed"], r["chain_seed"]) for r in fine[0]["runs"]}  # no trajectory counted twice
    law = next(r for r in t.readings if r["name"].startswith("Delta tau"))
    assert law["verdict"] == "held", law["detail"]
    assert "K = [13, 14, 15, 16] inside [12, 24]" in next(r["detail"] for r in t.readings
                                                          if r["name"].startswith("refinement"))
    assert refine_ks({"lower": 28, "upper": 32}, 4) == [29, 30, 31, 32] == refine_ks({"lower": 28, "upper": 32}, 9)
    assert refine_ks({"lower": 32, "upper": 48}, 4) == [33, 34, 35, 36]
    assert refine_ks({"lower": 32, "upper": None}, 4) == [] == refine_ks({"lower": 28, "upper": 32}, 0)


def test_profile_sse_is_zero_on_the_law_and_positive_on_another_exponent():
    K = [8.0, 12, 16, 20, 24, 28]
    ly = [1.3 - 2.0 * math.log(32 - k) for k in K]
    assert profile_sse(K, ly, 2.0) < 1e-10
    assert profile_sse(K, ly, 1.0) > 1e-2 and profile_sse(K, ly, 3.0) > 1e-2


def test_seeds_to_tell_scales_with_the_scatter_and_falls_with_a_k_nearer_k2():
    K = [8, 12, 16, 20, 24, 28]
    p = seeds_to_tell(K, 32.0, 2.0, (1.0, 3.0), 0.2, 3.0)
    assert set(p["pairs"]) == {"2 against 1", "2 against 3", "1 against 2", "3 against 2"}
    assert p["primary"] == max(p["pairs"]["2 against 1"], p["pairs"]["2 against 3"])
    assert p["control"] == max(p["pairs"]["1 against 2"], p["pairs"]["3 against 2"])
    assert seeds_to_tell(K, 32.0, 2.0, (1.0, 3.0), 0.4, 3.0)["control"] >= 4 * p["control"] - 4  # ~ sd^2
    assert seeds_to_tell(K + [30, 31], 32.0, 2.0, (1.0, 3.0), 0.2, 3.0)["control"] < p["control"]
    far = seeds_to_tell(K, 48.0, 2.0, (1.0, 3.0), 0.2, 3.0)  # the grid stops far below K2*: little curvature
    assert far["control"] > 5 * p["control"]


def test_seeds_to_tell_sizes_the_likelihood_ratio_it_claims_to():
    """With the seeds it asks for, Monte Carlo delays on the law of exponent 2 (log-normal scatter of the
    sd given) give a likelihood-ratio statistic against exponent 3 whose mean is the noncentral chi^2's,
    about z^2 + 1: the number is sized to reach z, neither far above nor below."""
    K, sd, z = [8, 12, 16, 20, 24, 28], 0.25, 3.0
    m = seeds_to_tell(K, 32.0, 2.0, (3.0,), sd, z)["pairs"]["2 against 3"]
    rng = np.random.default_rng(5)
    Kr = np.repeat(np.asarray(K, float), m)
    stats = []
    for _ in range(60):
        ly = -2.0 * np.log(32.0 - Kr) + rng.normal(0.0, sd, Kr.size)
        best = min(profile_sse(Kr, ly, g) for g in np.linspace(0.5, 6.0, 45))
        stats.append((profile_sse(Kr, ly, 3.0) - best) / sd ** 2)
    mean, se = float(np.mean(stats)), float(np.std(stats, ddof=1) / math.sqrt(len(stats)))
    # noncentrality m S / sd^2 lies in [z^2, z^2 m / (m - 1)] (m rounded up); the chi^2_1 adds 1 to the mean
    assert z ** 2 + 1 - 3 * se <= mean <= z ** 2 * m / (m - 1) + 1 + 3 * se, (m, mean, se)


def test_a_fit_short_of_its_bound_whose_bootstrap_reaches_it_identifies_no_k2():
    """The point fit stops at a finite K2*, but a sixth or more of the resamples run to the search's bound:
    gamma is then the slope of an exponential in K, so the law is UNDECIDED and the controls' divergence
    goes one step past the last delay, not to that K2*."""
    fit = {"gamma": 2.0, "gamma_se": 0.1, "K2": 167.0, "at_bound": False, "identified": False, "bound_share": 0.32}
    out, text = judge_delay_law(fit, 2.0, (1.0, 3.0), 3.0)
    assert out is Outcome.UNDECIDED and "32% of the bootstrap's resamples" in text
    assert judge_delay_law({**fit, "identified": True}, 2.0, (1.0, 3.0), 3.0)[0] is Outcome.HELD
    pts = [(28, 0, 1.0), (31, 0, 2.0), (32, 0, 3.0)]
    assert control_k2(fit, pts, (8, 32, 48)) == 33 and control_k2({**fit, "identified": True}, pts, (48,)) == 167.0
    # on an exact law the resamples stay off the bound: identified
    exact = [(K, sd, 4e3 * (40 - K) ** -2.0) for K in (8, 16, 24, 30, 34, 37) for sd in range(3)]
    f = fit_delays(exact, np.random.default_rng(3), 40)
    assert f["identified"] and f["bound_share"] == 0.0 and f["K2"] == pytest.approx(40, rel=1e-3)
