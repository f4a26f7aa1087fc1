"""G.1, G.2 and E.1 (sim.claims.gibson, sim.claims.edelman): how a claim reads its training runs.

The runs are replaced by synthetic records (the shape :func:`sim.markov_icl.train_markov`
writes) whose KL curves put the model where each test needs it, so the verdict logic is
tested in milliseconds; tests/sim/test_markov_icl.py and tests/sim/test_sweep.py train real
models. Each claim: PASS when the runs sit where the claim says, FAIL with a counterexample
when they sit elsewhere with margin (a deliberately wrong reading of the claim), INCONCLUSIVE
within the error, ASSUMPTION_UNMET for a broken assumption, and a mislabelled strategy table
is caught before anything trains.
"""
import numpy as np
import pytest

from sim.claims import _markov_runs as mr
from sim.claims.edelman import E_1
from sim.claims.gibson import G_1, G_2, k1_bracket
from sim.priors import Floor, Dirichlet
from sim.verdict import Verdict

from .conftest import tier


def fake_record(path_ood, path_id=None, *, strategies, margin=0.2, se=0.01, steps=(0, 100, 200, 400)):
    """A run whose nearest strategy at evaluation ``i`` is ``path[i]``, ahead of the rest by ``margin``."""
    steps = list(steps)

    def block(path):
        row = {s: [] for s in strategies}
        for near in path:
            for s in strategies:
                row[s].append(0.05 if s == near else 0.05 + margin)
        for s in strategies:
            row[s + "_se"] = [se] * len(path)
        row["pair_se"] = [[[se] * len(strategies) for _ in strategies] for _ in path]
        row["loss"] = [1.0] * len(path)
        return row

    ev = {"ood": block(path_ood)}
    if path_id is not None:
        ev["id"] = block(path_id)
    loss = {which: {**{s: 1.0 for s in strategies}, "pair_se": {}} for which in ev}
    loss["ood"]["uniform"] = 1.2  # unigram statistics are informative
    if "unigram" in strategies:
        loss["ood"]["pair_se"]["unigram-uniform"] = 0.01
    return {"steps": steps, "train_loss": [None] * len(steps), "eval": ev, "pair_order": list(strategies),
            "strategy_loss": loss, "stopped_at": None, "spec": {"synthetic": True}, "chain_seed": 0,
            "seeds": {"init": 1, "eval": 2}, "timing": {"train_seconds": 0.0}}


@pytest.fixture
def runs(monkeypatch):
    """``runs(fn)``: each claim's sweep returns ``fn(params)`` for every run it asks for."""
    def install(fn):
        asked = []

        def fake(ctx, name, params_list):
            asked.extend(params_list)
            return [fn(p) for p in params_list]

        monkeypatch.setattr(mr, "sweep_records", fake)
        return asked
    return install


G1_SMALL = {"K": (2, 1024), "seeds": (0, 1)}
G_PHASES = mr.PHASES


def g1_run(few, many):
    return lambda p: fake_record([few] * 4 if p["K"] == 2 else [many] * 4, ["M2"] * 4, strategies=G_PHASES)


# ---------------------------------------------------------------------------- G.1 --
def test_g1_passes_when_few_chains_memorise_and_many_generalise(run_claim, runs):
    asked = runs(g1_run("M2", "G2"))
    res = run_claim(G_1, **G1_SMALL)
    t = tier(res, "trained")
    assert res.verdict is Verdict.PASS, t.summary
    assert {p["K"] for p in asked} == {2, 1024} and len(asked) == 4
    assert len(t.figures) == 3
    assert any("settings the paper leaves open" in r["name"] for r in t.readings)


def test_g1_wrong_reading_fails_with_the_run_that_contradicts_it(run_claim, runs):
    runs(g1_run("M2", "G2"))
    wrong = G_1.variant(few_chains_phase=("G2",), many_chains_phase=("M1", "M2"))  # phases swapped
    res = run_claim(wrong, **G1_SMALL)
    t = tier(res, "trained")
    assert res.verdict is Verdict.FAIL
    assert t.counterexample["nearest_ood"] == "M2" and t.counterexample["K"] == 2


def test_g1_within_the_error_is_inconclusive(run_claim, runs):
    runs(lambda p: fake_record(["M2" if p["K"] == 2 else "G2"] * 4, ["M2"] * 4, strategies=G_PHASES, margin=0.01,
                               se=0.01))
    res = run_claim(G_1, **G1_SMALL)
    assert res.verdict is Verdict.INCONCLUSIVE and tier(res, "trained").budget


def test_g1_with_a_prior_that_is_not_dirichlet_is_assumption_unmet(run_claim, runs):
    runs(g1_run("M2", "G2"))
    res = run_claim(G_1, prior=Floor(Dirichlet(1.0), gamma=0.3), **G1_SMALL)
    t = tier(res, "trained")
    assert res.verdict is Verdict.ASSUMPTION_UNMET and t.conclusion_without_assumptions


def test_a_mislabelled_strategy_table_is_caught_before_training(run_claim, runs):
    asked = runs(g1_run("M2", "G2"))
    swapped = G_1.variant(labels={"uniform": "uniform", "G1": "G1", "G2": "M2", "M1": "M1", "M2": "G2"})
    res = run_claim(swapped, **G1_SMALL)
    t = tier(res, "trained")
    assert res.verdict is Verdict.ERROR and "disagree with their definitions" in t.error
    assert "G2" in t.error and not asked  # nothing was trained


def test_k1_bracket():
    br = k1_bracket([2, 16, 128, 1024], [1.0, 1.0, 0.0, 0.0])
    assert (br["lower"], br["upper"]) == (16, 128) and 16 < br["estimate"] < 128
    assert k1_bracket([2, 1024], [1.0, 1.0])["upper"] is None


# ---------------------------------------------------------------------------- G.2 --
def test_g2_tau_law_is_fitted_and_a_wrong_exponent_fails(run_claim, runs):
    def tau_run(p):  # crossing G1 -> G2 at tau = 5 N / log N
        tau = 5 * p["N"] / np.log(p["N"])
        steps = [0, tau * 0.5, tau * 1.5, tau * 3]
        return fake_record(["G1", "G1", "G2", "G2"], strategies=("uniform", "G1", "G2"), steps=steps)

    runs(tau_run)
    settings = {"N_grid": (16, 32, 64, 128), "seeds": (0, 1)}
    res = run_claim(G_2, **settings)
    t = tier(res, "trained")
    # part (b) needs the paper profile's K grid, so the claim stays undecided; part (a) holds
    assert res.verdict is Verdict.INCONCLUSIVE and "paper profile" in t.budget
    tau = next(r for r in t.readings if r["name"].startswith("tau_2Gen ~ N / log N"))
    assert tau["verdict"] == "held"
    b = next(n for n in t.numbers if n.name.startswith("exponent b"))
    assert abs(b.value - 1.0) < 0.1
    bad = run_claim(G_2.variant(tau_exponent=2.0), **settings)
    assert bad.verdict is Verdict.FAIL and tier(bad, "trained").counterexample["claimed_exponent"] == 2.0


# ---------------------------------------------------------------------------- E.1 --
E_STAGES = ("uniform", "unigram", "bigram")


def test_e1_passes_when_the_stages_come_in_order(run_claim, runs):
    runs(lambda p: fake_record(["uniform", "unigram", "bigram", "bigram"], strategies=E_STAGES))
    res = run_claim(E_1, seeds=(0, 1))
    t = tier(res, "trained")
    assert res.verdict is Verdict.PASS, t.summary
    assert len(t.figures) == 2


def test_e1_fails_when_a_stage_is_skipped(run_claim, runs):
    runs(lambda p: fake_record(["uniform", "bigram", "bigram", "bigram"], strategies=E_STAGES))
    res = run_claim(E_1, seeds=(0,))
    t = tier(res, "trained")
    assert res.verdict is Verdict.FAIL and t.counterexample["run"]["nearest_sequence"] == ["uniform", "bigram"]


def test_e1_wrong_order_fails(run_claim, runs):
    runs(lambda p: fake_record(["uniform", "unigram", "bigram", "bigram"], strategies=E_STAGES))
    res = run_claim(E_1.variant(stages=("uniform", "bigram", "unigram")), seeds=(0,))
    assert res.verdict is Verdict.FAIL


def test_e1_still_before_the_last_stage_is_inconclusive(run_claim, runs):
    runs(lambda p: fake_record(["uniform", "uniform", "unigram", "unigram"], strategies=E_STAGES))
    res = run_claim(E_1, seeds=(0,))
    assert res.verdict is Verdict.INCONCLUSIVE and "steps" in tier(res, "trained").budget


def test_e1_with_fixed_chains_is_assumption_unmet(run_claim, runs):
    runs(lambda p: fake_record(["uniform", "unigram", "bigram", "bigram"], strategies=E_STAGES))
    res = run_claim(E_1, seeds=(0,), K=8)
    t = tier(res, "trained")
    assert res.verdict is Verdict.ASSUMPTION_UNMET and t.conclusion_without_assumptions.startswith("held")
