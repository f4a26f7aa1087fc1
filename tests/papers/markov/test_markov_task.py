"""Tests of sim.papers.markov.task: the K-chain task, the strategies against brute force and Bayes
integrals, a mislabelled strategy table being caught, KL, read-outs and one tiny run."""
import math

import numpy as np
import pytest
from scipy import integrate

from sim.papers.markov import runs as mr
from sim.papers.markov import task as mi
from sim.verdict import Outcome


def _table(names=mi.ALL_STRATEGIES):
    return {n: (lambda n: lambda x, **kw: mi.predict(n, x, **kw))(n) for n in names}


# ------------------------------------------------------------------------------ the task ---
def test_chains_are_nested_in_K_and_row_stochastic():
    P4, mu4 = mi.draw_chains(5, 4, alpha=0.7, chain_seed=3)
    P9, mu9 = mi.draw_chains(5, 9, alpha=0.7, chain_seed=3)
    np.testing.assert_array_equal(P4, P9[:4])
    np.testing.assert_allclose(P9.sum(axis=2), 1.0, atol=1e-12)
    np.testing.assert_allclose(np.einsum("ka,kab->kb", mu9, P9), mu9, atol=1e-12)  # stationary
    assert not np.allclose(mi.draw_chains(5, 4, alpha=0.7, chain_seed=4)[0], P4)


def test_chains_from_a_user_prior():
    from sim.priors import Point

    M = np.array([[0.9, 0.1], [0.3, 0.7]])
    P, mu = mi.draw_chains(2, 3, prior=Point(M))
    np.testing.assert_allclose(P, np.broadcast_to(M, (3, 2, 2)))
    np.testing.assert_allclose(mu[0], [0.75, 0.25])
    with pytest.raises(ValueError, match="bound to d=2"):
        mi.draw_chains(3, 2, prior=Point(M))


def test_first_token_is_stationary_and_transitions_follow_the_chain():
    P = np.array([[[0.9, 0.1], [0.2, 0.8]]])
    mu = np.array([[2 / 3, 1 / 3]])
    x, k = mi.sample_sequences(np.random.default_rng(0), P, mu, 40000, 3)
    assert (k == 0).all()
    f0 = (x[:, 0] == 0).mean()
    assert abs(f0 - 2 / 3) < 5 * math.sqrt(2 / 9 / 40000)  # uniform first token (0.5) would fail
    after0 = x[:, 1][x[:, 0] == 0]
    assert abs((after0 == 1).mean() - 0.1) < 5 * math.sqrt(0.09 / len(after0))


def test_edelman_stationary_helper_reading_is_uniform_for_few_states():
    # E's helper returns (P^16).mean(axis=-1) for C < 5: each row of P^16 sums to 1, so every
    # entry is 1/C; the stationary law is the mean over the rows (axis -2).
    P = np.array([[0.9, 0.1], [0.2, 0.8]])
    P16 = np.linalg.matrix_power(P, 16)
    np.testing.assert_allclose(P16.mean(axis=-1), [0.5, 0.5])
    np.testing.assert_allclose(P16.mean(axis=-2), [2 / 3, 1 / 3], atol=1e-3)


# ---------------------------------------------------------------------------- strategies ---
@pytest.mark.parametrize("C,K,alpha,seed", [(2, 1, 1.0, 0), (3, 4, 0.3, 1), (5, 3, 2.0, 2)])
def test_every_strategy_matches_its_brute_force_definition(C, K, alpha, seed):
    P, mu = mi.draw_chains(C, K, alpha=0.5, chain_seed=seed)
    x, _ = mi.sample_sequences(np.random.default_rng(seed), P, mu, 5, 9)
    for name in mi.ALL_STRATEGIES:
        got = mi.predict(name, x, C=C, alpha=alpha, P=P, mu=mu)
        assert got.shape == (5, 9, C)
        np.testing.assert_allclose(got.sum(axis=2), 1.0, atol=1e-12)
        for i in range(5):
            for t in range(9):
                ref = mi.reference_predictive(name, x[i, :t + 1], C=C, alpha=alpha, P=P, mu=mu)
                np.testing.assert_allclose(got[i, t], ref, atol=1e-12, err_msg=f"{name} at seq {i}, t={t}")


def test_known_values_by_hand():
    x = np.array([[0, 1, 1, 0, 1]])
    g2 = mi.predict_g2(x, 2, 1.0)
    # after 0 1 1 0: current state 0, transitions out of 0 seen: 0->1 once -> (0+1, 1+1)/(1+2)
    np.testing.assert_allclose(g2[0, 3], [1 / 3, 2 / 3])
    # after 0 1 1: current 1, transitions out of 1: 1->1 once -> (0+1, 1+1)/3
    np.testing.assert_allclose(g2[0, 2], [1 / 3, 2 / 3])
    g1 = mi.predict_g1(x, 2, 0.5)
    np.testing.assert_allclose(g1[0, 4], [(2 + 0.5) / 6, (3 + 0.5) / 6])
    np.testing.assert_allclose(mi.predict_g2(x, 2, 1.0)[0, 0], [0.5, 0.5])  # no transition yet


def _beta_predictive(n_to_1, n_to_0, alpha):
    """P(next = 1) for a row with a Beta(alpha, alpha) prior, by numerical integration."""
    def like(p):
        return p ** n_to_1 * (1 - p) ** n_to_0 * p ** (alpha - 1) * (1 - p) ** (alpha - 1)

    num = integrate.quad(lambda p: p * like(p), 0, 1)[0]
    return num / integrate.quad(like, 0, 1)[0]


@pytest.mark.parametrize("alpha", [0.5, 1.0, 3.0])
def test_g2_is_the_bayes_predictive_of_dirichlet_rows(alpha):
    rng = np.random.default_rng(5)
    x = rng.integers(0, 2, size=(3, 12))
    g2 = mi.predict_g2(x, 2, alpha)
    for i in range(3):
        for t in range(12):
            a = x[i, t]
            trans = [(x[i, s], x[i, s + 1]) for s in range(t)]
            n1 = sum(1 for u, v in trans if u == a and v == 1)
            n0 = sum(1 for u, v in trans if u == a and v == 0)
            assert g2[i, t, 1] == pytest.approx(_beta_predictive(n1, n0, alpha), abs=1e-7)


def test_g1_is_the_bayes_predictive_of_an_iid_sequence():
    x = np.array([[1, 1, 0, 1, 1, 1]])
    g1 = mi.predict_g1(x, 2, 0.7)
    for t in range(6):
        n1 = int((x[0, :t + 1] == 1).sum())
        assert g1[0, t, 1] == pytest.approx(_beta_predictive(n1, t + 1 - n1, 0.7), abs=1e-7)


def test_m2_is_the_bayes_predictor_of_the_training_mixture():
    # exact: P(x_{t+1} = b | prefix) = sum_k P(prefix, b | k) / sum_k P(prefix | k), by enumeration
    P, mu = mi.draw_chains(3, 4, alpha=0.5, chain_seed=7)
    x = np.array([[2, 0, 0, 1, 2, 2]])
    m2 = mi.predict_m2(x, P, mu)
    for t in range(6):
        def seq_prob(seq, k):
            p = mu[k, seq[0]]
            for s in range(len(seq) - 1):
                p *= P[k, seq[s], seq[s + 1]]
            return p

        pre = list(x[0, :t + 1])
        joint = [sum(seq_prob(pre + [b], k) for k in range(4)) for b in range(3)]
        np.testing.assert_allclose(m2[0, t], np.array(joint) / sum(joint), atol=1e-12)


def test_one_chain_memorisers_are_the_chain_itself():
    P, mu = mi.draw_chains(4, 1, chain_seed=2)
    x, _ = mi.sample_sequences(np.random.default_rng(1), P, mu, 3, 6)
    np.testing.assert_allclose(mi.predict_m2(x, P, mu), P[0][x], atol=1e-12)
    np.testing.assert_allclose(mi.predict_m1(x, P, mu), np.broadcast_to(mu[0], (3, 6, 4)), atol=1e-12)


def test_m2_posterior_concentrates_on_the_generating_chain():
    P, mu = mi.draw_chains(10, 8, alpha=0.5, chain_seed=0)
    x, k = mi.sample_sequences(np.random.default_rng(0), P, mu, 4, 400, chain_index=np.array([0, 3, 5, 7]))
    m2 = mi.predict_m2(x, P, mu)
    np.testing.assert_allclose(m2[:, -1], P[k, x[:, -1]], atol=1e-6)


def test_streamed_mixture_matches_one_chunk_and_survives_underflow():
    P, mu = mi.draw_chains(3, 7, alpha=0.2, chain_seed=1)
    x, _ = mi.sample_sequences(np.random.default_rng(2), P, mu, 3, 2000)  # likelihoods far below 1e-308
    for fn in (mi.predict_m1, mi.predict_m2):
        a, b = fn(x, P, mu, chunk=2), fn(x, P, mu, chunk=1000)
        assert np.isfinite(a).all()
        np.testing.assert_allclose(a, b, atol=1e-12)


def test_the_audit_passes_the_true_table_and_catches_mislabels():
    assert mi.audit_strategies(_table()) == {}
    swapped = _table()
    swapped["G2"], swapped["M2"] = swapped["M2"], swapped["G2"]
    assert set(mi.audit_strategies(swapped)) == {"G2", "M2"}
    swapped = _table()
    swapped["G1"], swapped["M1"] = swapped["M1"], swapped["G1"]
    assert set(mi.audit_strategies(swapped)) == {"G1", "M1"}
    wrong_alpha = _table(("G2",))
    wrong_alpha["G2"] = lambda x, C, alpha, **kw: mi.predict_g2(x, C, alpha + 0.1)
    assert set(mi.audit_strategies(wrong_alpha)) == {"G2"}
    off_by_one = {"G1": lambda x, C, alpha, **kw: np.concatenate(
        [np.full((x.shape[0], 1, C), 1.0 / C), mi.predict_g1(x, C, alpha)[:, :-1]], axis=1)}
    assert set(mi.audit_strategies(off_by_one)) == {"G1"}


def test_unknown_strategy_and_missing_chains_are_errors():
    x = np.zeros((1, 3), dtype=int)
    with pytest.raises(ValueError, match="unknown strategy 'G3'"):
        mi.predict("G3", x, C=2)
    with pytest.raises(ValueError, match="M2 needs the training chains"):
        mi.predict("M2", x, C=2)


# ------------------------------------------------------------------------------------ KL ---
def test_kl_per_sequence():
    p = np.array([[[0.5, 0.5], [1.0, 0.0]]])
    q = np.array([[[0.25, 0.75], [0.5, 0.5]]])
    expected = (0.5 * math.log(2) + 0.5 * math.log(0.5 / 0.75) + math.log(2)) / 2
    assert mi.kl_per_sequence(p, np.log(q))[0] == pytest.approx(expected)
    assert mi.kl_per_sequence(q, np.log(q))[0] == pytest.approx(0.0, abs=1e-15)


# ------------------------------------------------------------------------------ read-outs ---
def test_eval_schedule_and_readouts():
    assert mi.eval_schedule(100, 50, 0) == [0, 50, 100]
    sched = mi.eval_schedule(1000, 500, 4)
    assert sched[0] == 0 and sched[-1] == 1000 and 10 in sched and 100 in sched
    rec = {"steps": [0, 10, 20, 30], "eval": {"ood": {"G1": [0.1, 0.1, 0.2, 0.3], "G2": [0.3, 0.2, 0.1, 0.05],
                                                       "M1": [1, 1, 1, 1], "M2": [1, 1, 1, 1]}}}
    assert mi.nearest(rec, "ood")[0] == "G2"
    assert mi.nearest(rec, "ood", index=0) == ("G1", pytest.approx(0.2))
    assert mi.crossing_step(rec, "ood", "G2", "G1") == pytest.approx(15.0)
    assert mi.crossing_step(rec, "ood", "G1", "G2") is None


def test_run_spec_rejects_bad_settings():
    with pytest.raises(ValueError, match="unknown run settings \\['widht'\\]"):
        mi.MarkovRunSpec.from_dict({"widht": 3})
    with pytest.raises(ValueError, match="K must be a positive integer or 'inf'"):
        mi.MarkovRunSpec(K=0)
    with pytest.raises(ValueError, match="M1/M2 need a finite set"):
        mi.MarkovRunSpec(K="inf")


def test_the_early_stop_waits_for_the_margin_it_is_given():
    """At init the model predicts about uniformly, so "uniform" is nearest at step 0: nearest is enough
    to stop there, but not a margin of a million paired standard errors (the run goes on to the end)."""
    params = dict(C=3, K="inf", N=8, width=8, steps=6, batch=4, n_eval=6, eval_every=3, eval_log_points=0,
                  strategies=["uniform", "G1", "G2"], threads=1, stop_when_nearest="uniform", stop_patience=1)
    nearest = mi.run_markov(params)
    assert nearest["stopped_at"] == 0 and nearest["steps"] == [0]
    held_back = mi.run_markov({**params, "stop_margin_z": 1e6})
    assert held_back["stopped_at"] is None and held_back["steps"] == [0, 3, 6]
    with pytest.raises(ValueError, match="stop_margin_z must be a finite number >= 0"):
        mi.MarkovRunSpec(stop_margin_z=-1.0)


def test_a_run_stops_once_placed_and_the_claim_reads_the_judgement_that_stopped_it():
    """At init the model predicts about uniformly: placed at "uniform" with margin 0, so a run told
    to stop once placed there stops at step 0, and G.1's reading of its last evaluation (with the
    separations the claim computes afresh from the run's parameters) is that same HELD; at a
    margin of a million standard errors it is never placed and trains to the end."""
    from sim.papers.markov.placement import absolute_placement, judge_end

    params = dict(C=3, K=2, N=8, width=8, steps=6, batch=4, n_eval=6, eval_every=3, eval_log_points=0,
                  strategies=["uniform", "G1", "G2", "M1", "M2"], threads=1, stop_when_placed=["uniform"],
                  stop_set="ood", stop_patience=1)
    rec = mi.run_markov(params)
    assert rec["stopped_at"] == 0 and rec["steps"] == [0]
    seps = mr.EvalSets(params).separations()
    assert judge_end(absolute_placement(rec, "ood", seps, z=0.0), ["uniform"], 0.0) is Outcome.HELD
    held_back = mi.run_markov({**params, "stop_margin_z": 1e6})
    assert held_back["stopped_at"] is None and held_back["steps"] == [0, 3, 6]
    # two evaluations in a row needed: the run goes one evaluation further than with one
    assert mi.run_markov({**params, "stop_patience": 2})["stopped_at"] == 3
    assert rec["spec"]["stop_when_placed"] == ["uniform"]


@pytest.mark.parametrize("bad, message", [
    ({"stop_when_placed": ["G2"], "stop_when_nearest": "G2"}, "two stopping rules; give one"),
    ({"stop_when_placed": ["M3"]}, "names strategies outside"),
    ({"stop_when_placed": ["G2"], "K": "inf", "strategies": ["G1", "G2"], "stop_set": "id"},
     "stop_set='id' is not an evaluation set of this run \\(ood\\)"),
    ({"stop_set": "ood", "ood": False}, "is not an evaluation set of this run \\(id\\)"),
    ({"stop_patience": 0}, "stop_patience must be a positive integer"),
])
def test_the_stopping_rules_refuse_settings_that_cannot_mean_anything(bad, message):
    with pytest.raises(ValueError, match=message):
        mi.MarkovRunSpec(**{"K": 2, **bad})


def test_a_tiny_run_is_reproducible_and_complete():
    params = dict(C=3, K=2, N=8, width=8, steps=6, batch=4, n_eval=6, eval_every=3, eval_log_points=0,
                  strategies=["uniform", "G1", "G2", "M1", "M2"], threads=1)
    a, b = mi.run_markov(params), mi.run_markov(params)
    assert a["steps"] == [0, 3, 6]
    assert a["eval"] == b["eval"]
    for which in ("id", "ood"):
        assert set(a["eval"][which]) >= {"G2", "G2_se", "M2", "loss"}
        assert all(v >= 0 for v in a["eval"][which]["M2"])
    assert a["strategy_loss"]["id"]["M2"] < a["strategy_loss"]["id"]["uniform"]


# ------------------------------------------------------------------ one run placed (judge_end) ---
def _placed(phase="G2", runner_up="M2", *, d=1.0, radius=20.0, d_se=3.0, radius_se=4.0, margin=1.0, se=0.1):
    """A hand-built :func:`absolute_placement`: ``d``'s and the radius's errors combine to 5 (3, 4 in
    quadrature), so at z = 2 "close" needs ``radius - d > 10``."""
    return {"phase": phase, "runner_up": runner_up, "d": d, "radius": radius, "d_se": d_se,
            "radius_se": radius_se, "margin": margin, "se": se}


def test_judge_end_placed_at_a_wanted_phase_is_held_and_at_another_violated():
    from sim.papers.markov.placement import judge_end

    assert judge_end(_placed(), ["G2"], 2.0) is Outcome.HELD
    assert judge_end(_placed(), ("M1", "G2"), 2.0) is Outcome.HELD  # any of the wanted phases
    # placed with margin at the other regime's strategy, or at the uniform plateau
    assert judge_end(_placed(), ["M1", "M2"], 2.0) is Outcome.VIOLATED
    assert judge_end(_placed("uniform", "G1"), ["G2"], 2.0) is Outcome.VIOLATED


def test_judge_end_none_of_the_above_is_read_with_both_errors_in_quadrature():
    """close is ``d <= radius`` beyond z * hypot(d_se, radius_se) = 2 * 5 at z = 2 (radius 20): d = 8.9 (11.1
    inside) is placed, d = 11 (9 inside) is within the error, d = 31 (11 outside) is none of the above, even at a
    wanted phase nearest by a wide margin."""
    from sim.papers.markov.placement import judge_end

    assert judge_end(_placed(d=8.9), ["G2"], 2.0) is Outcome.HELD
    assert judge_end(_placed(d=11.0), ["G2"], 2.0) is Outcome.UNDECIDED  # only d_se (margin 6) would place it
    assert judge_end(_placed(d=29.0), ["G2"], 2.0) is Outcome.UNDECIDED  # 9 outside: within the error
    assert judge_end(_placed(d=31.0), ["G2"], 2.0) is Outcome.VIOLATED
    assert judge_end(_placed(d=31.0), ["M2"], 2.0) is Outcome.VIOLATED  # whatever is wanted
    # at the boundary (exactly z * 5 inside or outside) the reading is not beyond the error
    assert judge_end(_placed(d=10.0), ["G2"], 2.0) is Outcome.UNDECIDED
    assert judge_end(_placed(d=30.0), ["G2"], 2.0) is Outcome.UNDECIDED


def test_judge_end_z_is_honoured_for_both_the_radius_and_the_margin():
    """d = 6 is 14 inside the radius (2.8 errors of 5), the margin 0.25 is 2.5 of its s.e. 0.1: placed at z = 2,
    within the error at z = 3 on either count alone."""
    from sim.papers.markov.placement import judge_end

    assert judge_end(_placed(d=6.0, margin=1.0), ["G2"], 2.0) is Outcome.HELD
    assert judge_end(_placed(d=6.0, margin=1.0), ["G2"], 3.0) is Outcome.UNDECIDED
    assert judge_end(_placed(d=1.0, margin=0.25), ["G2"], 2.0) is Outcome.HELD
    assert judge_end(_placed(d=1.0, margin=0.25), ["G2"], 3.0) is Outcome.UNDECIDED
    assert judge_end(_placed(d=1.0, margin=0.25), ["M2"], 3.0) is Outcome.UNDECIDED  # not sure it is not M2


def test_judge_end_a_margin_within_its_error_is_enough_only_when_the_runner_up_is_wanted_too():
    """Nearest M2, M1 a close runner-up (margin 0.1 = one s.e.): undecided between them, unless both are wanted
    (the pair is then one reading) - and only both: one of the two wanted is not enough."""
    from sim.papers.markov.placement import judge_end

    close_pair = _placed("M2", "M1", margin=0.1)
    assert judge_end(close_pair, ["M1", "M2"], 2.0) is Outcome.HELD
    assert judge_end(close_pair, ["M2"], 2.0) is Outcome.UNDECIDED  # the runner-up is not wanted
    assert judge_end(close_pair, ["M1"], 2.0) is Outcome.UNDECIDED  # the nearest is not wanted
    assert judge_end(close_pair, ["G2"], 2.0) is Outcome.UNDECIDED  # neither: not a violation within the error
    # a margin of exactly z s.e. is not beyond it
    assert judge_end(_placed(margin=0.2), ["G2"], 2.0) is Outcome.UNDECIDED
    assert judge_end(_placed(margin=0.2000001), ["G2"], 2.0) is Outcome.HELD


# ------------------------------------------------- interventions on training, kept models ---
TINY = dict(C=3, K=2, N=8, width=8, steps=6, batch=4, n_eval=6, eval_every=3, eval_log_points=0,
            strategies=["uniform", "G1", "G2", "M1", "M2"], threads=1)
#: G's slowed first attention layer: the parameters of layer 1's attention scores.
LAYER1_SCORES = [["blocks.0.Wq", 0.1], ["blocks.0.Wk", 0.1], ["blocks.0.rel", 0.1]]


def test_training_interventions_at_their_identity_change_nothing():
    """Rate factors 1 and task injection with probability 0 give the run without them, every
    evaluation equal (rate factor 1: to the bit; no injection: the same code path). Away from the
    identity each changes the run: the slowed layer-1 scores and an injected task."""
    from sim.sweep import deterministic_part

    def numbers(rec):
        return deterministic_part({k: v for k, v in rec.items() if k != "spec"})

    base = mi.run_markov(TINY)
    assert numbers(mi.run_markov({**TINY, "lr_factors": [[p, 1.0] for p, _ in LAYER1_SCORES]})) == numbers(base)
    assert numbers(mi.run_markov({**TINY, "inject_p": 0.0})) == numbers(base)
    slowed = mi.run_markov({**TINY, "lr_factors": LAYER1_SCORES})
    injected = mi.run_markov({**TINY, "inject_p": 1.0})
    assert slowed["eval"] != base["eval"] and injected["eval"] != base["eval"]
    assert slowed["spec"]["lr_factors"] == LAYER1_SCORES and injected["spec"]["inject_p"] == 1.0
    with pytest.raises(ValueError, match="inject_p must be a probability"):
        mi.MarkovRunSpec(K=2, inject_p=1.5)
    with pytest.raises(ValueError, match="task injection .* needs a finite set"):
        mi.MarkovRunSpec(K="inf", strategies=("G1", "G2"), inject_p=0.5)


def test_injection_draws_its_own_stream_and_leaves_the_batches_alone():
    """The injected sequences are chosen from the run's ``inject`` stream: the training batches
    (the ``data`` stream) are those of the run without injection, with each sequence's chain."""
    spec = mi.MarkovRunSpec(**{k: v for k, v in TINY.items()})
    P, mu = mi.run_chains(spec)
    plain, with_chains = mi.batch_sampler(spec, P, mu), mi.batch_sampler(spec, P, mu, chains=True)
    for _ in range(mi.PREFETCH + 2):  # across a prefetch boundary
        x, k = with_chains()
        assert np.array_equal(plain(), x) and k.shape == (spec.batch,) and set(k.tolist()) <= {0, 1}
    with pytest.raises(ValueError, match="chains=True needs a finite set"):
        mi.batch_sampler(mi.MarkovRunSpec(K="inf", strategies=("G1",)), chains=True)


def test_keep_models_hands_back_the_final_and_plateau_models_with_the_same_record():
    """``keep_models``: the record is the one the run writes without it, and the kept weights are
    the model at its last evaluation (a model rebuilt from them predicts what the record
    measured) and, where the run has a 1-point plateau, the one in its middle."""
    import torch

    from sim.papers.markov.model import MarkovLM
    from sim.papers.markov.placement import plateau_index
    from sim.sweep import Kept, deterministic_part

    kept = mi.run_markov({**TINY, "keep_models": True})
    assert isinstance(kept, Kept)
    assert deterministic_part(kept.record) == deterministic_part(mi.run_markov(TINY))
    models = kept.objects
    assert models["final_step"] == kept.record["steps"][-1]
    i = plateau_index(kept.record, "ood")
    assert (models["plateau"] is None) == (i is None)
    spec = mi.MarkovRunSpec(**TINY)
    m = MarkovLM(spec.model_config())
    m.load_state_dict({n: torch.from_numpy(v) for n, v in models["final"].items()})
    m.eval()
    x, preds, _ = mi.evaluation_sets(spec, *mi.run_chains(spec))["id"]
    with torch.no_grad():
        logq = torch.log_softmax(m(torch.as_tensor(x)).double(), -1).numpy()
    assert abs(mi.kl_per_sequence(preds["M2"], logq).mean() - kept.record["eval"]["id"]["M2"][-1]) < 1e-5


def test_plateau_index_is_the_middle_of_the_longest_one_point_stretch():
    from sim.papers.markov.placement import plateau_index

    def rec(path):
        phases = ["uniform", "G1", "G2", "M1", "M2"]
        ev = {p: [0.1 if p == near else 0.5 for near in path] for p in phases}
        ev["pair_se"] = [[[0.01] * 5 for _ in phases] for _ in path]
        return {"steps": list(range(len(path))), "pair_order": phases, "eval": {"ood": ev}}

    assert plateau_index(rec(["uniform", "M1", "G2", "G1", "M1", "M1", "G2"]), "ood") == 4  # stretch 3..5
    assert plateau_index(rec(["uniform", "G1", "G1", "G2"]), "ood") == 1  # the earlier of two middles
    assert plateau_index(rec(["uniform", "M2", "M2"]), "ood") is None
    assert plateau_index({**rec(["G1"]), "pair_order": ["uniform", "G1", "G2", "M1", "M2"]}, "ood",
                         one_point=("X",)) is None


def test_stop_rules_stop_at_the_first_rule_that_holds_and_refuse_what_cannot_hold():
    """At init the model is placed at "uniform" on both sets: a rule on either stops the run at
    step 0 (with G.1's rule on the other set unmet), a rule that never holds lets it train on."""
    params = {**TINY, "stop_patience": 1, "stop_margin_z": 0.0}
    assert mi.run_markov({**params, "stop_rules": [["ood", ["uniform"]]]})["stopped_at"] == 0
    either = mi.run_markov({**params, "stop_when_placed": ["M2"], "stop_set": "id",
                            "stop_rules": [["ood", ["uniform"]]]})
    assert either["stopped_at"] == 0 and either["spec"]["stop_rules"] == [["ood", ["uniform"]]]
    assert mi.run_markov({**params, "stop_rules": [["id", ["M2"]]], "stop_margin_z": 1e6})["stopped_at"] is None
    for bad in ([["test", ["G2"]]], [["id", ["M3"]]], [["id", []]]):
        with pytest.raises(ValueError, match="stop rule"):
            mi.MarkovRunSpec(K=2, stop_rules=bad)
    with pytest.raises(ValueError, match="two stopping rules"):
        mi.MarkovRunSpec(K=2, stop_rules=[["id", ["M2"]]], stop_when_nearest="M2")


def test_kept_runs_finds_what_a_sweep_kept_and_trains_the_rest_once(tmp_path):
    """A claim's kept models are found by the run's parameters without training; a run no claim kept
    is trained on the grid runner (its record written like every job's) and kept, so a second look
    trains nothing; a claim that reuses another finds that claim's models in its records."""
    from sim.claims.base import Claim, Context, Source

    def claim(cid, reuses=()):
        return Claim(id=cid, title=cid, source=Source("G", "-", "-"), statement="-", assumptions=(), checks={},
                     reuses=reuses,
                     settings={p: {"workers": 1} for p in ("quick", "standard", "paper")})

    ctx = Context(claim=claim("T"), profile="quick", seed=0, out_dir=tmp_path)
    mr.clear_kept()
    swept = {**TINY, "keep_models": True}
    rec = mr.sweep_records(ctx, "k", [swept])[0]
    other = {**swept, "seed": 5}
    (r1, m1), (r2, m2) = mr.kept_runs(ctx, "t", [swept, other])
    assert r1 == rec and m1["final_step"] == rec["steps"][-1]
    assert r2["spec"]["seed"] == 5
    assert [e["status"] for e in ctx.job_log] == ["trained", "trained"]  # the swept one was not trained again
    assert len(list((tmp_path / "jobs" / "T" / "runs").glob("*.json"))) == 2
    mr.kept_runs(ctx, "t", [other, swept])
    assert len(ctx.job_log) == 2
    mr.clear_kept()  # a later process: the models come from T's records
    later = Context(claim=claim("U", reuses=("T",)), profile="quick", seed=0, out_dir=tmp_path)
    (r3, m3), = mr.kept_runs(later, "t", [other])
    assert r3 == r2 and [e["status"] for e in later.job_log] == ["reused"]
    assert all(np.array_equal(m3["final"][n], v) for n, v in m2["final"].items())
    with pytest.raises(ValueError, match="keep_models=True"):
        mr.kept_runs(ctx, "t", [TINY])
    mr.clear_kept()
