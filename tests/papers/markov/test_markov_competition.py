"""G.5 (sim.papers.markov.claims.competition): how the claim reads its runs.

The runs are replaced by synthetic records (the shape :func:`sim.papers.markov.task.train_markov`
writes) that end where each test needs them: memorised (placed at M2 on the training chains) or
generalised (placed at G2 on fresh chains), per K, seed and condition. PASS when the outcomes are
bimodal near K1* and both interventions let more seeds memorise; FAIL for the wrong direction, a
seed ending between the basins, or an intervention that lowers K1*; INCONCLUSIVE when the grid
has no K with both outcomes; the controls (a unimodal sweep, an intervention that moves K1* the
other way off the grid) FAIL, the sweep also where no K has both outcomes.
tests/papers/markov/test_markov_task.py trains real runs with each intervention.
"""
import numpy as np
import pytest

from sim.papers.markov import runs as mr
from sim.papers.markov.claims import competition as co
from sim.papers.markov.claims.competition import G_5
from sim.verdict import Outcome, Verdict

from ..conftest import tier
from .test_markov_claims import fake_record

SMALL = {"C": 3, "N": 12, "alpha": 0.5, "K": (2, 8, 32), "seeds": tuple(range(12)), "n_eval": 24, "steps": 10,
         "stop_once_committed": True}
#: memorised seeds per (condition, K) in the passing sweep: baseline K1* between 8 and 32, moved up by both
PASSING = {co.BASELINE: {2: 12, 8: 6, 32: 0}, co.SLOWED: {2: 12, 8: 12, 32: 12}, co.INJECTED: {2: 12, 8: 12, 32: 10}}


#: a model placed at its phase: KL 0.005 to it, well inside the none-of-the-above radius of SMALL's task
CLOSE = dict(strategies=mr.PHASES, near=0.005, se=0.001)


def _condition(p):
    return co.SLOWED if p.get("lr_factors") else co.INJECTED if p.get("inject_p") else co.BASELINE


@pytest.fixture
def run_claim(tmp_path):
    """G.5 is decided by the standard profile (quick does not run it)."""
    from sim.runner import RunConfig, evaluate_claim

    def _run(claim, *, seed=0, **overrides):
        cfg = RunConfig(profile="standard", seed=seed, overrides={claim.id: overrides})
        return evaluate_claim(claim, cfg, tmp_path)

    return _run


@pytest.fixture
def sweep(monkeypatch):
    """``sweep(memorised, spread=())``: run (condition, K, seed index) memorises (placed at M2 on its
    training chains, ``D = KL(M2) - KL(G2) = -0.2``) when the seed index is below
    ``memorised[condition][K]`` and generalises (``D = +0.2``) otherwise; at the (condition, K) in
    ``spread`` the seeds' ``D`` run evenly from -0.2 to +0.2 instead (a continuum)."""
    def install(memorised, spread=()):
        seeds = {}

        def fake(ctx, name, params_list):
            out = []
            for p in params_list:
                i = seeds.setdefault(p["seed"], len(seeds))
                cond = _condition(p)
                n, m = len(SMALL["seeds"]), memorised[cond][p["K"]]
                margin = 0.2 if (cond, p["K"]) not in spread else 0.02 + 0.18 * abs(i - m + 0.5) / (n / 2)
                if i < m:
                    out.append(fake_record(["uniform"] + ["M1"] * 3, ["uniform"] + ["M2"] * 3, margin=margin, **CLOSE))
                else:
                    out.append(fake_record(["uniform"] + ["G2"] * 3, ["uniform"] + ["G2"] * 3, margin=margin, **CLOSE))
            return out

        monkeypatch.setattr(mr, "sweep_records", fake)
    return install


def test_g5_is_decided_by_standard_and_quick_does_not_run_it(tmp_path):
    from sim.runner import RunConfig, evaluate_claim

    assert G_5.decided_by == "standard" and G_5.tiers_for("quick") == ()
    assert evaluate_claim(G_5, RunConfig(profile="quick"), tmp_path).verdict is Verdict.NOT_RUN


def test_g5_passes_when_bimodal_near_k1_and_both_interventions_raise_it(run_claim, sweep):
    sweep(PASSING)
    res = run_claim(G_5, **SMALL)
    t = tier(res, "trained")
    assert res.verdict is Verdict.PASS, (t.summary, [(c.name, c.verdict, c.deciding) for c in t.controls])
    assert [c.verdict for c in t.controls] == [Verdict.FAIL] * 2, [(c.name, c.deciding) for c in t.controls]
    assert "K = 8 (near K1*)" in t.controls[0].name
    assert "K=8: 6/12 memorised, 6/12 generalised" in t.readings[0]["detail"]
    assert len(t.figures) == 2


def test_g5_the_runs_are_the_same_seeds_under_each_condition(run_claim, monkeypatch):
    asked = []
    monkeypatch.setattr(mr, "sweep_records", lambda ctx, name, ps: asked.extend(ps) or
                        [fake_record(["G2"], ["G2"], strategies=mr.PHASES) for _ in ps])
    run_claim(G_5, **SMALL)
    by = {}
    for p in asked:
        by.setdefault(_condition(p), set()).add((p["K"], p["seed"], p["chain_seed"]))
    assert len(asked) == 3 * 3 * 12 and by[co.BASELINE] == by[co.SLOWED] == by[co.INJECTED]
    slowed = next(p for p in asked if _condition(p) == co.SLOWED)
    assert slowed["lr_factors"] == [["blocks.0.Wq", 0.1], ["blocks.0.Wk", 0.1], ["blocks.0.rel", 0.1]]
    assert next(p for p in asked if _condition(p) == co.INJECTED)["inject_p"] == 0.5
    assert not any("inject_p" in p or "lr_factors" in p for p in asked if _condition(p) == co.BASELINE)
    # each run stops once it has ended in a basin, by the reading that classifies it
    assert all(p["stop_rules"] == [["id", ["M1", "M2"]], ["ood", ["G2"]]] and p["stop_margin_z"] == 3.0
               for p in asked)


def test_g5_wrong_direction_fails(run_claim, sweep):
    sweep(PASSING)
    assert run_claim(G_5.variant(shift="down"), **SMALL).verdict is Verdict.FAIL


def test_g5_an_intervention_that_lowers_k1_fails(run_claim, sweep):
    sweep({**PASSING, co.INJECTED: {2: 0, 8: 0, 32: 0}})  # nobody memorises, not even at K = 2
    res = run_claim(G_5, **SMALL)
    assert res.verdict is Verdict.FAIL
    assert tier(res, "trained").readings[2]["verdict"] == "violated"


def test_g5_a_continuum_of_placements_near_k1_is_not_bimodal(run_claim, sweep):
    sweep(PASSING, spread={(co.BASELINE, 8)})
    res = run_claim(G_5, **SMALL)
    t = tier(res, "trained")
    assert res.verdict is Verdict.FAIL and t.readings[0]["verdict"] == "violated", t.readings[0]["detail"]


def test_bimodality_by_hand():
    def rows(ds, se=0.001):
        return [{"D": d, "D_se": se} for d in ds]

    assert co.bimodality(rows([-0.3, -0.28, -0.25, 0.2, 0.22]), 3.0)[0] is Outcome.HELD
    assert co.bimodality(rows(np.linspace(-0.3, 0.3, 12)), 3.0)[0] is Outcome.VIOLATED
    assert co.bimodality(rows([-0.3, -0.1, 0.2], se=0.2), 3.0)[0] is Outcome.UNDECIDED  # within the seeds' errors
    assert co.bimodality(rows([-0.3, 0.3]), 3.0)[0] is Outcome.UNDECIDED


def test_g5_a_grid_without_both_outcomes_at_one_k_is_inconclusive(run_claim, sweep):
    sweep({**PASSING, co.BASELINE: {2: 12, 8: 12, 32: 0}})
    res = run_claim(G_5, **SMALL)
    t = tier(res, "trained")
    assert res.verdict is Verdict.INCONCLUSIVE and "no K of the grid has both outcomes" in t.readings[0]["detail"]
    assert t.budget
    # the controls are still built and FAIL: the sweep at the K whose memorised fraction is nearest 1/2
    assert [c.verdict for c in t.controls] == [Verdict.FAIL] * 2, [(c.name, c.deciding) for c in t.controls]
    assert "K = 2 (at the K whose memorised fraction is nearest 1/2)" in t.controls[0].name


def test_the_shift_control_needs_a_k_where_a_full_move_clears_the_margin():
    def rows(m, n=4):
        return [{"outcome": co.MEMORISED if i < m else co.GENERALISED, "D": 0.0, "D_se": 0.0} for i in range(n)]

    base = {32: rows(4), 48: rows(3), 64: rows(0)}
    wrong, how = co.wrong_direction(base, "up")
    assert how == "no seed memorises at any K" and all(r["outcome"] == co.GENERALISED for v in wrong.values() for r in v)
    assert co.decide_shift(base, wrong, 3.0, "up")[0] is Outcome.VIOLATED  # 4/4 -> 0/4 at K = 32
    weak = {32: rows(3), 48: rows(2), 64: rows(0)}  # no K where 4 seeds can show a move beyond the margin
    assert co.decide_shift(weak, co.wrong_direction(weak, "up")[0], 3.0, "up")[0] is Outcome.UNDECIDED
    down, _ = co.wrong_direction(base, "down")
    assert co.decide_shift(base, down, 3.0, "down")[0] is Outcome.VIOLATED  # 0/4 -> 4/4 at K = 64
    assert co.nearest_half(base) == 48 and co.nearest_half({8: rows(2), 16: rows(2)}) == 8
    with pytest.raises(ValueError, match="direction"):
        co.wrong_direction(base, "sideways")


def test_decide_shift_uses_agresti_caffo_errors_bonferroni_over_k():
    def rows(k, n=12):
        return [{"outcome": co.MEMORISED if i < k else co.GENERALISED} for i in range(n)]

    out, _, r = co.decide_shift({64: rows(1)}, {64: rows(11)}, 3.0)
    assert out is Outcome.HELD and r[0]["diff"] == pytest.approx(10 / 12)
    p = 2 / 14
    assert r[0]["se"] == pytest.approx(np.sqrt(2 * p * (1 - p) / 14))
    assert co.decide_shift({64: rows(3)}, {64: rows(5)}, 3.0)[0] is Outcome.UNDECIDED
    # the same difference at one K of one, and of 40 K: the Bonferroni margin is wider with more K
    grid = {K: rows(0) for K in range(40)}
    one = co.decide_shift({0: rows(3)}, {0: rows(10)}, 3.0)[0]
    many = co.decide_shift({**grid, 0: rows(3)}, {**grid, 0: rows(10)}, 3.0)[0]
    assert (one, many) == (Outcome.HELD, Outcome.UNDECIDED)
    with pytest.raises(ValueError, match="direction"):
        co.decide_shift({}, {}, 3.0, "sideways")


def test_decide_shift_reads_seeds_in_neither_basin_as_not_yet_known():
    """An intervention whose seeds have not committed by the budget is no evidence that it moves K1*
    either way: its memorised fraction is the range [memorised, memorised + neither] / n."""
    def rows(m, neither=0, n=12):
        return [{"outcome": co.MEMORISED if i < m else co.NEITHER if i < m + neither else co.GENERALISED}
                for i in range(n)]

    assert co.decide_shift({48: rows(12)}, {48: rows(0)}, 3.0)[0] is Outcome.VIOLATED  # every seed generalised
    out, line, r = co.decide_shift({48: rows(12)}, {48: rows(0, neither=12)}, 3.0)
    assert out is Outcome.UNDECIDED and "1.00 -> 0.00-1.00" in line and r[0]["other"] == (0.0, 1.0)
    assert co.decide_shift({48: rows(0, neither=12)}, {48: rows(12)}, 3.0)[0] is Outcome.UNDECIDED
    assert co.decide_shift({48: rows(0, neither=1)}, {48: rows(12)}, 3.0)[0] is Outcome.HELD
    # "down" mirrors it: the baseline's undecided seeds may have memorised
    assert co.decide_shift({48: rows(1, neither=11)}, {48: rows(0)}, 3.0, "down")[0] is Outcome.UNDECIDED
    assert co.decide_shift({48: rows(11, neither=1)}, {48: rows(0)}, 3.0, "down")[0] is Outcome.HELD
    assert co.decide_shift({48: rows(0)}, {48: rows(12)}, 3.0, "down")[0] is Outcome.VIOLATED


def test_binomial_interval_is_clopper_pearson():
    from scipy import stats

    lo, hi = co.binomial_interval(0, 10, float(stats.norm.isf(0.025)))
    assert lo == 0.0 and hi == pytest.approx(1 - 0.025 ** 0.1, rel=1e-9)
    lo, hi = co.binomial_interval(5, 10, 2.0)
    assert 0 < lo < 0.5 < hi < 1 and lo == pytest.approx(1 - hi)
