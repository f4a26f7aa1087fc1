"""Tests of N's Bayes baselines (sim.papers.nichani.task): counts against theory's per-prompt
estimator, the importance-sampling posterior predictive against exact quadrature (S = 2), and
the Bayes loss against an independent Monte Carlo computation (joint sampling of pi, prompt,
target and the empirical conditional entropy of the target given the prompt)."""
import itertools
import math

import numpy as np
import pytest

from sim.papers.nichani.task import (bayes_loss_bracket, best_mixture_losses, multiparent_add_alpha,
                                     population_losses, posterior_predictive_is, unigram_batch)
from sim.papers.nichani.task import n_graph
from sim.papers.nichani.training import NTask, sample_task
from theory.dirichlet import add_alpha_batch, add_alpha_predictive, bayes_quadrature_s2, edge_count_rows


def test_add_alpha_matches_theory_per_prompt_and_n_codes_variant_by_hand():
    rng = np.random.default_rng(0)
    S, T = 4, 9
    for name in ("chain", "icl", "random"):
        par = n_graph(name, T, rng)
        x = rng.integers(0, S, (50, T))
        got = add_alpha_batch(x, par, 0.3, S)
        want = np.array([add_alpha_predictive(xx, par, 0.3, S) for xx in x])
        np.testing.assert_allclose(got, want, atol=1e-15)
    # N's code counts roots as children of s_(T-2): prompt (0, 1, 0 | query 0), roots 0 and 2 (icl-like)
    x = np.array([[0, 1, 0, 0]])
    par = [-1, 0, -1, -1]
    assert edge_count_rows(x, par, 2).tolist() == [[0.0, 1.0]]  # edge 0->1 with parent 0 == query
    # roots 0 and 2 read s_(T-2) = s_2 = 0 == query: they count as children with tokens 0 and 0
    assert edge_count_rows(x, par, 2, root_source="last").tolist() == [[2.0, 1.0]]
    with pytest.raises(ValueError, match="root_source"):
        edge_count_rows(x, par, 2, root_source="first")


def test_unigram_and_losses_by_hand():
    x = np.array([[0, 0, 1, 2]])  # context 0, 0, 1; query 2
    np.testing.assert_allclose(unigram_batch(x, 1.0, 3), [[3 / 6, 2 / 6, 1 / 6]])
    assert population_losses([[0.5, 0.5, 0.0]], [[0.5, 0.5, 0.0]])[0] == pytest.approx(math.log(2))
    assert population_losses([[1.0, 0.0]], [[0.5, 0.5]])[0] == math.inf


@pytest.mark.parametrize("name", ["chain", "icl", "random"])
def test_is_predictive_matches_exact_quadrature_s2(name):
    T, alpha = 6, 0.5
    par = n_graph(name, T, np.random.default_rng(3))
    x = np.array(list(itertools.product((0, 1), repeat=T)))
    est, se, ess = posterior_predictive_is(x, par, alpha, 2, 4000, np.random.default_rng(4))
    exact = np.array([bayes_quadrature_s2(xx, par, alpha).predictive for xx in x])
    z = np.abs(est - exact) / np.maximum(se, 1e-12)
    # 64 prompts x 2 entries, standard errors from 8 batch means: a 6-sigma miss would be a bug
    assert (np.abs(est - exact) <= 6 * se + 2e-4).all(), (z.max(), np.abs(est - exact).max())
    assert (ess > 100).all()
    np.testing.assert_allclose(est.sum(1), 1.0, atol=1e-12)


def test_is_predictive_is_a_probability_and_its_error_shrinks():
    S, T = 4, 8
    par = n_graph("icl", T)
    x = np.random.default_rng(5).integers(0, S, (10, T))
    e1, se1, _ = posterior_predictive_is(x, par, 0.2, S, 400, np.random.default_rng(6))
    e2, se2, _ = posterior_predictive_is(x, par, 0.2, S, 6400, np.random.default_rng(6))
    np.testing.assert_allclose(e1.sum(1), 1.0, atol=1e-12)
    assert (e1 > 0).all() and (e2 > 0).all()
    assert se2.mean() < 0.5 * se1.mean()  # ~ 1/sqrt(16)
    assert (np.abs(e1 - e2) <= 6 * np.hypot(se1, se2) + 1e-4).all()


def test_bayes_loss_against_independent_monte_carlo_s2():
    """The Bayes loss on the chain (S=2, T=4, alpha=0.5) three ways: exact (quadrature over all
    prompts), the bracket of bayes_loss_bracket on sampled prompts, and an independent joint
    simulation: the empirical conditional entropy H(y | prompt) from 400k (pi, prompt, y) draws."""
    S, T, alpha = 2, 4, 0.5
    par = n_graph("chain", T)
    prompts = np.array(list(itertools.product((0, 1), repeat=T)))
    quad = [bayes_quadrature_s2(x, par, alpha) for x in prompts]
    prob = np.array([q.prompt_probability for q in quad])
    assert prob.sum() == pytest.approx(1.0, abs=1e-10)
    exact = float(sum(p * -(q.predictive * np.log(q.predictive)).sum() for p, q in zip(prob, quad)))
    # independent Monte Carlo: joint frequencies of (prompt, y)
    task = NTask(S, T, tuple(par.tolist()), alpha=alpha)
    rng = np.random.default_rng(7)
    n = 400_000
    x, pis = sample_task(task, rng, n)
    rows = pis[np.arange(n), x[:, -1]]
    y = (rng.random(n) < rows[:, 1]).astype(int)
    cell = x @ (2 ** np.arange(T)[::-1])
    joint = np.zeros((2 ** T, 2))
    np.add.at(joint, (cell, y), 1.0)
    pj = joint / n
    px = pj.sum(1, keepdims=True)
    cond = np.divide(pj, px, out=np.zeros_like(pj), where=px > 0)
    h_mc = -float((pj * np.log(np.where(cond > 0, cond, 1.0))).sum())
    assert abs(h_mc - exact) < 0.005  # plug-in bias ~ 16 / (2 n) and sampling error ~ 1e-3
    # our estimator on sampled prompts brackets the same number
    xb, pb = sample_task(task, np.random.default_rng(8), 3000)
    br = bayes_loss_bracket(xb, pb, par, alpha, S, n_samples=400, seed=9)
    assert br.lower.value - 3 * br.lower.stderr <= exact <= br.upper.value + 3 * br.upper.stderr
    assert 0 <= br.width < 0.01
    # a deliberately wrong baseline (N's code's count, roots as children of s_(T-2)) is caught
    l_code = population_losses(add_alpha_batch(xb, par, alpha, S, root_source="last"),
                               pb[np.arange(len(xb)), xb[:, -1]])
    l_up = population_losses(posterior_predictive_is(xb, par, alpha, S, 400, np.random.default_rng(9))[0],
                             pb[np.arange(len(xb)), xb[:, -1]])
    d = l_code - l_up
    assert d.mean() > 4 * d.std(ddof=1) / math.sqrt(d.size)


def test_best_mixture_losses_floor_by_hand_and_against_brute_force():
    # one token present: the mixture must be that token
    r = np.array([[0.7, 0.3]])
    got = best_mixture_losses(r, np.array([[True, False]]), eps=0.1)
    assert got[0] == pytest.approx(-(0.7 * math.log(1.1) + 0.3 * math.log(0.1)))
    # both present, small eps: f ~ r
    got = best_mixture_losses(r, np.array([[True, True]]), eps=1e-9)
    assert got[0] == pytest.approx(-(0.7 * math.log(0.7) + 0.3 * math.log(0.3)), abs=1e-6)
    rng = np.random.default_rng(10)
    rows = rng.dirichlet(np.full(4, 0.5), size=30)
    pres = rng.random((30, 4)) < 0.6
    pres[:, 0] = True
    got = best_mixture_losses(rows, pres, eps=0.2)
    grid = np.array([g for g in itertools.product(np.linspace(0, 1, 41), repeat=4) if abs(sum(g) - 1) < 1e-9])
    for b in range(30):
        ok = grid[(grid[:, ~pres[b]] == 0).all(1)]
        brute = (-(rows[b] * np.log(ok + 0.2)).sum(1)).min()
        assert got[b] <= brute + 1e-12 and got[b] >= brute - 0.01


def test_multiparent_add_alpha_by_hand():
    sets = [(), (), (0, 1), (1, 2), (2, 3)]  # trigram, T = 4, target node 4 has parents (2, 3)
    x = np.array([[0, 1, 0, 1]])
    # positions with parent tokens (0, 1): node 2 -> 0 and node 3 has parents (1, 0): no match
    np.testing.assert_allclose(multiparent_add_alpha(x, sets, 1.0, 2), [[2 / 3, 1 / 3]])
    # conditioning on the last parent only (token 1): nodes 2 (parent 1 = 1) and 3 (parent 2 = 0): node 2
    np.testing.assert_allclose(multiparent_add_alpha(x, sets, 1.0, 2, use=(1,)), [[2 / 3, 1 / 3]])
    with pytest.raises(ValueError, match="length T"):
        multiparent_add_alpha(x, sets[:-1], 1.0, 2)
