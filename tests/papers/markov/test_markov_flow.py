"""G.7 (sim.papers.markov.claims.flow): the G1 -> G2 flow on the SA-transformer.

The trained runs are replaced by a fake ``train_tau`` whose trajectories flow where each test needs
them (the biases' Monte Carlo runs for real, on a few hundred short sequences), so the verdict logic
runs in a second; one test trains real, tiny runs to show that G.7 reads G.2's runs from memory.
Each reading: PASS when beta and delta grow over the plateau and the coefficients are positive; the
shuffled-sequence model and the reversed trajectories FAIL the same check; a wrong sign FAILs.
"""
import math

import numpy as np
import pytest

from sim.papers.markov import sa_transformer as sa
from sim.papers.markov.claims.flow import G_7, decide_expansion, decide_flow, plateau_changes, reversed_runs
from sim.papers.markov.claims.gibson import G_2
from sim.verdict import Outcome, Verdict

from ..conftest import tier

# one worker: the SA-transformer jobs run in this process, where the tests' fakes and counters are installed
SMALL = dict(sa_N_grid=(16, 32), sa_seeds=4, expansion_N=(16, 32), expansion_n=1024, landscape_n=64, control_N=32,
             workers=1)


def fake_record(N, seeds, task):
    """A record in train_tau's form: on the chains beta and delta grow on the plateau and the run crosses
    into G2 at tau = 100 + 5 i; on shuffled sequences beta drifts down, delta stays, no crossing."""
    steps = list(range(0, 301, 10))
    t = np.asarray(steps, float)
    rec = {"steps": steps, "kl_G1": [], "kl_G2": [], "tau": [], "seeds": list(seeds),
           "trajectory": {k: [] for k in ("delta", "beta", "v", "loss")}, "settings": {"N": N, "task": task},
           "seconds": 0.0}
    for i in range(len(seeds)):
        if task == "markov":
            tau = 100.0 + 5 * i
            beta = 0.01 + 0.004 * t + 4 / (1 + np.exp(-(t - tau) / 8))
            delta = 0.005 + 0.002 * t + 5 / (1 + np.exp(-(t - tau) / 8))
            g1, g2 = 0.1 + 0.8 * (t > tau), 0.9 - 0.8 * (t > tau)
        else:
            tau = None
            beta, delta = 0.01 - 0.001 * t * (1 + 0.1 * i), 0.007 + 0.0001 * np.sin(t + i)
            g1, g2 = 0.1 + 0 * t, 0.9 + 0 * t
        rec["tau"].append(tau)
        rec["kl_G1"].append(list(g1))
        rec["kl_G2"].append(list(g2))
        for k, v in (("beta", beta), ("delta", delta), ("v", 5 + 0 * t), ("loss", 1.9 - 0.8 * (g2 < g1))):
            rec["trajectory"][k].append(list(v))
    return rec


@pytest.fixture
def fake_runs(monkeypatch):
    calls = []

    def fake(*, N, seeds, task="markov", **kw):
        calls.append({"N": N, "seeds": list(seeds), "task": task, **kw})
        return fake_record(N, seeds, task)

    monkeypatch.setattr(sa, "train_tau", fake)
    return calls


def test_g7_passes_when_the_biases_are_positive_and_the_runs_flow_and_every_control_fails(run_claim, fake_runs):
    res = run_claim(G_7, **SMALL)
    t = tier(res, "trained")
    assert res.verdict is Verdict.PASS, t.summary
    assert [r["verdict"] for r in t.readings[:2]] == ["held", "held"]
    assert {c.name: c.verdict for c in t.controls} == {"shuffled sequences (no bigram structure)": Verdict.FAIL,
                                                       "the trained trajectories run backwards": Verdict.FAIL}
    # the decisive runs are G.2's (its seeds and settings), the control's are trained on shuffled sequences
    sa_calls = [c for c in fake_runs if c["task"] == "markov"]
    assert sorted(c["N"] for c in sa_calls) == [16, 32] and all(len(c["seeds"]) == 4 for c in sa_calls)
    shuffled = [c for c in fake_runs if c["task"] == "shuffled"]
    assert [c["N"] for c in shuffled] == [32] and shuffled[0]["max_steps"] == math.ceil(3.0 * 115.0)
    # the biases by Monte Carlo: positive, with their errors; c_delta exactly 0 is the literal finding
    cb = [n for n in t.numbers if "c_beta (" in n.name]
    assert len(cb) == 2 and all(n.value > 3 * n.stderr > 0 for n in cb)
    (lit,) = t.findings
    assert str(lit.kind) == "literal statement" and lit.verdict is Verdict.FAIL and "c_delta = 0 exactly" in lit.detail
    assert G_7.reuses == ("G.2",) and res.primary_reading["lines"] == "156-160" and len(t.figures) == 1


@pytest.mark.parametrize("wrong", [{"delta_sign": -1.0}, {"beta_sign": -1.0}])
def test_g7_a_wrong_direction_of_the_flow_fails(run_claim, fake_runs, wrong):
    bad = run_claim(G_7.variant(**wrong), **SMALL)
    assert bad.verdict is Verdict.FAIL and tier(bad, "trained").counterexample


def test_g7_reads_g2s_runs_from_its_records_and_trains_only_its_control():
    """Real, tiny runs: G.2 trains the SA-transformer; G.7 evaluated after it in the same run folder finds
    every one of them in G.2's job records (train_tau's in-process cache emptied in between) and trains
    only the shuffled-sequence control."""
    import pathlib
    import tempfile

    from sim.runner import RunConfig, evaluate_claim

    sa.clear_cache()
    small = dict(sa_N_grid=(8, 12, 16, 24), sa_seeds=2, sa_batch=16, sa_max_steps=400, sa_n_eval=64, workers=1)
    out = pathlib.Path(tempfile.mkdtemp())
    cfg = RunConfig(profile="quick", seed=3, overrides={
        "G.2": small, "G.7": {**SMALL, **small, "control_N": 8, "expansion_N": (16,), "expansion_n": 256,
                              "landscape_n": 16}})
    trained = []
    real = sa._train_tau
    try:
        sa._train_tau = lambda **kw: trained.append(kw["task"]) or real(**kw)
        evaluate_claim(G_2, cfg, out)
        n_g2 = len(trained)
        sa.clear_cache()
        res = evaluate_claim(G_7, cfg, out)
    finally:
        sa._train_tau = real
        sa.clear_cache()
    assert n_g2 == 4 and trained[n_g2:] == ["shuffled"]
    assert res.verdict in (Verdict.PASS, Verdict.INCONCLUSIVE)  # tiny runs: decided or not, never FAIL
    assert tier(res, "trained").readings[1]["verdict"] != "violated"


def test_decide_flow_needs_every_run_into_g2_and_reads_the_seeds_error():
    good = fake_record(16, [1, 2, 3], "markov")
    assert decide_flow([good], 3.0)[0] is Outcome.HELD
    stuck = fake_record(16, [1, 2, 3], "markov")
    stuck["tau"][1] = None  # flowed the right way, did not drop within the budget
    assert decide_flow([stuck], 3.0)[0] is Outcome.UNDECIDED
    assert decide_flow(reversed_runs([good]), 3.0)[0] is Outcome.VIOLATED
    assert decide_flow([fake_record(16, [1, 2, 3, 4], "shuffled")], 3.0)[0] is Outcome.VIOLATED
    # two seeds far apart: the Student-t margin with one degree of freedom leaves it open
    wide = fake_record(16, [1, 2], "markov")
    wide["trajectory"]["delta"][1] = [-v for v in wide["trajectory"]["delta"][1]]
    assert decide_flow([wide], 3.0)[0] is Outcome.UNDECIDED
    ch = plateau_changes(good)[0]
    assert ch["crossed"] and ch["end"] == 100.0 and ch["d_beta"] == pytest.approx(0.4 + 2.0, abs=0.05)


def test_decide_expansion_reads_each_coefficient_against_its_monte_carlo_error():
    rng = np.random.default_rng(0)

    def smp(cb, cbd, n=400):
        return {"N": 8, "c_beta": cb + 0.01 * rng.standard_normal(n), "c_beta_delta": cbd + 0.01 * rng.standard_normal(n)}

    assert decide_expansion([smp(0.01, 0.02)], 3.0)[0] is Outcome.HELD
    assert decide_expansion([smp(-0.01, 0.02)], 3.0)[0] is Outcome.VIOLATED
    assert decide_expansion([smp(0.01, 0.0005)], 3.0)[0] is Outcome.UNDECIDED  # 1 se: not shown
    assert decide_expansion([smp(0.01, 0.02)], 3.0, signs=(1.0, -1.0))[0] is Outcome.VIOLATED
