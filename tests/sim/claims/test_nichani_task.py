"""Tests of claim N.T (sim.claims.nichani.task): N's task sampler and its Bayes predictor."""
import numpy as np
import pytest

from sim.claims import get
from sim.claims.nichani.task import (_rank_gof, add_alpha_batch, n_graph, sampler_query_from_mu,
                                     sampler_uniform_roots)
from sim.priors import Dirichlet, Floor
from sim.runner import RunConfig, evaluate_claim
from sim.sampling import batched_stationary, dirichlet_rows
from sim.verdict import Verdict
from theory.dirichlet import add_alpha_predictive

SMALL = {"exact_T": 4, "alphas": (0.1,), "graphs": ("chain",), "n_sampler": 6000, "freq_tol": 0.05,
         "n_loss": 6000, "n_is_prompts": 0}


def _run(claim, tmp_path, prior=None, **overrides):
    cfg = RunConfig(profile="quick", seed=0, overrides={claim.id: {**SMALL, **overrides}})
    return evaluate_claim(claim, cfg, tmp_path, prior=prior)


def _tier(res, name):
    return next(t for t in res.tiers if t.tier == name)


# ----------------------------------------------------------------------------- helpers --
def test_graphs_match_n_reference_code():
    # N's single_parent.py: chain dag = arange(T-1) - 1; icl dag[1::2] = 2 * arange((T-1)//2); query appended
    assert n_graph("chain", 6).tolist() == [-1, 0, 1, 2, 3, -1]
    assert n_graph("icl", 6).tolist() == [-1, 0, -1, 2, -1, -1]
    assert n_graph("icl", 7).tolist() == [-1, 0, -1, 2, -1, 4, -1]
    par = n_graph("random", 30, np.random.default_rng(0))
    assert par[-1] == -1 and all(-1 <= p < i for i, p in enumerate(par))
    with pytest.raises(ValueError, match="unknown graph"):
        n_graph("star", 5)


def test_add_alpha_batch_matches_theory_and_reproduces_the_reference_root_indexing():
    rng = np.random.default_rng(1)
    par = n_graph("icl", 7)
    x = rng.integers(0, 3, (40, 7))
    got = add_alpha_batch(x, par, 0.3, 3)
    ref = np.array([add_alpha_predictive(row, par, 0.3, 3) for row in x])
    assert np.allclose(got, ref, atol=1e-15)
    # chain [1, 0, 1 | q=1]: edges (1->0), (0->1); roots: position 0. N's code reads seq[-1] = s_2 = 1 == q for
    # root 0, so it also counts s_0 = 1 as a child of the query token: counts n(1, .) = [1, 1] instead of [1, 0].
    x = np.array([[1, 0, 1, 1]])
    par = n_graph("chain", 4)
    assert np.allclose(add_alpha_batch(x, par, 1.0, 2), [[2 / 3, 1 / 3]])
    assert np.allclose(add_alpha_batch(x, par, 1.0, 2, root_source="last"), [[2 / 4, 2 / 4]])


def test_rank_gof_accepts_the_right_law_and_rejects_a_wrong_one():
    rng = np.random.default_rng(2)
    pis = dirichlet_rows(rng, 0.5, 20000, 4)
    mu = batched_stationary(pis)
    u = rng.random(20000)
    right = (u[:, None] >= mu.cumsum(1)[:, :-1]).sum(1)
    wrong = rng.integers(0, 4, 20000)
    assert _rank_gof(mu, mu, right)["p_value"] > 1e-3
    assert _rank_gof(mu, mu, wrong)["p_value"] < 1e-12


# ---------------------------------------------------------------------------- claim --
def test_default_fails_on_the_mu_pi_reading_and_passes_the_independent_one(tmp_path):
    res = _run(get("N.T"), tmp_path)
    ex = _tier(res, "exact")
    assert ex.verdict is Verdict.FAIL and res.verdict is Verdict.FAIL
    cex = ex.counterexample
    assert cex["root law"].startswith("mu_pi") and len(cex["prompt"]) == 4
    assert cex["max |difference|"] > 0.1  # the roots are informative about pi, far beyond round-off
    readings = {r["name"]: r["verdict"] for r in ex.readings}
    assert readings["roots ~ mu_pi (N's task) [decides]"] == "FAIL"
    assert readings["roots independent of pi (conjugacy)"] == "PASS"
    gaps = [n.value for n in ex.numbers if n.name.startswith("expected log-loss gap")]
    assert gaps and all(g > 1e-4 for g in gaps)
    assert all(abs(n.value - 1) < 1e-10 for n in ex.numbers if n.name.startswith("sum of P(prompt)"))
    assert _tier(res, "montecarlo").verdict is Verdict.PASS


def test_independent_reading_passes_and_a_wrong_predictor_fails(tmp_path):
    claim = get("N.T").variant(root_law="independent")
    res = _run(claim, tmp_path / "a")
    assert _tier(res, "exact").verdict is Verdict.PASS
    wrong = claim.variant(predictor=lambda x, tree, alpha, S: add_alpha_predictive(x, tree, 2 * alpha, S))
    ex = _tier(_run(wrong, tmp_path / "b"), "exact")
    assert ex.verdict is Verdict.FAIL and ex.counterexample["prompt"]


def test_a_non_dirichlet_prior_breaks_the_assumption_and_the_conclusion(tmp_path):
    claim = get("N.T").variant(root_law="independent")
    res = _run(claim, tmp_path, prior=Floor(Dirichlet(1.0), gamma=0.6), prior_samples=4000)
    ex = _tier(res, "exact")
    assert ex.verdict is Verdict.ASSUMPTION_UNMET
    assert "violated" in ex.conclusion_without_assumptions and ex.counterexample


@pytest.mark.parametrize("sampler,check", [(sampler_uniform_roots, "non-query root"),
                                           (sampler_query_from_mu, "query")])
def test_wrong_samplers_are_caught(tmp_path, sampler, check):
    res = _run(get("N.T").variant(sampler=sampler), tmp_path)
    mc = _tier(res, "montecarlo")
    assert mc.verdict is Verdict.FAIL
    assert mc.counterexample["check"].startswith(check) and mc.counterexample["p_value"] < 1e-6


def test_reference_code_overstates_the_chain_bayes_loss(tmp_path):
    res = _run(get("N.T"), tmp_path, n_loss=40000)
    mc = _tier(res, "montecarlo")
    num = next(n for n in mc.numbers if n.name == "overstatement of the Bayes loss by N's code, chain")
    assert num.stderr > 0 and num.value - 3 * num.stderr > 0.008 and num.value + 3 * num.stderr < 0.018
    lstar = next(n for n in mc.numbers if n.name.startswith("L* = psi"))
    assert lstar.value == pytest.approx(0.8465392755, abs=1e-9)


def test_importance_sampling_reading_is_reported(tmp_path):
    res = _run(get("N.T"), tmp_path, n_is_prompts=15, is_samples=400)
    mc = _tier(res, "montecarlo")
    (reading,) = [r for r in mc.readings if r["name"].startswith("add-alpha is Bayes at N's sizes")]
    assert reading["verdict"] in ("FAIL", "INCONCLUSIVE") and "nats" in reading["detail"]


def test_draws_without_a_unique_stationary_law_are_left_out_and_named(tmp_path):
    """A sparse prior has reducible and periodic draws: N Knowl 2's assumptions fail by name with
    per-draw counts, draws without a unique mu_pi are left out (N's task is undefined there) and
    counted, and the sampler is still checked on the draws that break Knowl 2 but have a unique
    mu_pi."""
    from sim.priors import parse_prior

    res = _run(get("N.T"), tmp_path, prior=parse_prior("sparse(dirichlet(alpha=0.5), threshold=0.1)"),
               prior_samples=3000, S=3, n_sampler=4000)
    assert res.verdict is Verdict.ASSUMPTION_UNMET, [(t.tier, t.verdict, t.summary, t.error) for t in res.tiers]
    for t in res.tiers:
        holds = {a.name: a for a in t.assumptions}
        irr = holds["irreducible: one communicating class, so mu_pi is unique and positive (N Knowl 2)"]
        assert irr.holds is False and ("draws" in irr.detail or "samples" in irr.detail)
        assert t.conclusion_without_assumptions
    # the draws that break Knowl 2 but have a unique mu_pi were evaluated, not dropped
    mc = _tier(res, "montecarlo")
    assert mc.conclusion_without_assumptions.split(" ")[0] in ("held", "undecided", "violated")


@pytest.mark.parametrize("spec, name", [("point([[0,1],[1,0]])", "aperiodic"), ("point([[1,0],[0.5,0.5]])",
                                                                               "irreducible")])
def test_periodic_and_reducible_point_priors_break_knowl_2(tmp_path, spec, name):
    from sim.priors import parse_prior

    res = _run(get("N.T"), tmp_path, prior=parse_prior(spec), prior_samples=500)
    assert res.verdict is Verdict.ASSUMPTION_UNMET, [(t.tier, t.verdict, t.summary, t.error) for t in res.tiers]
    for t in res.tiers:
        failed = [a.name for a in t.assumptions if a.holds is False]
        assert any(f.startswith(name) for f in failed)
        assert t.conclusion_without_assumptions
