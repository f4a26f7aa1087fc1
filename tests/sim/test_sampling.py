"""Samplers against the exact laws of theory/, numpy against torch, and purpose-split randomness."""
import numpy as np
import pytest
import torch

from sim.sampling import (categorical, dirichlet_rows, random_recursive_parents,
                          sample_n_prompts, sample_n_prompts_torch, sample_tree_sequences, sample_w_prompts,
                          sample_w_prompts_torch)
from theory import CausalTree, pairwise_joint, stationary

Z = 4.5  # per-cell z threshold, Bonferroni-safe for the few dozen cells tested here


def _assert_freq_matches(counts, probs, n):
    """Multinomial cell counts within Z standard errors of n * probs."""
    se = np.sqrt(n * probs * (1 - probs)) + 1e-12
    z = np.abs(counts - n * probs) / se
    assert z.max() < Z, (z.max(), counts, n * probs)


def test_recursive_parents_are_uniform_on_earlier_positions():
    rng = np.random.default_rng(0)
    par = random_recursive_parents(rng, 6, size=60000)
    assert (par[:, 0] == -1).all()
    for h in range(1, 6):
        counts = np.bincount(par[:, h], minlength=h)
        _assert_freq_matches(counts, np.full(h, 1 / h), 60000)


def test_categorical_matches_probs():
    rng = np.random.default_rng(1)
    p = np.array([0.1, 0.0, 0.6, 0.3])
    x = categorical(rng.random(50000), np.broadcast_to(p, (50000, 4)))
    _assert_freq_matches(np.bincount(x, minlength=4), p, 50000)
    assert not (x == 1).any()  # zero-probability states never drawn


def test_tree_sequences_match_exact_pairwise_joint():
    rng = np.random.default_rng(2)
    pi = rng.dirichlet(np.ones(3), size=3)
    tree = CausalTree([-1, 0, 0, 1, 3])
    n = 40000
    x = sample_tree_sequences(rng, pi, tree, n)
    for i, j in [(4, 0), (2, 3), (4, 2)]:
        J = pairwise_joint(pi, tree, i, j)
        counts = np.zeros((3, 3))
        np.add.at(counts, (x[:, i], x[:, j]), 1)
        _assert_freq_matches(counts.ravel(), J.ravel(), n)


def test_w_prompts_numpy_marginals_and_shapes():
    rng = np.random.default_rng(3)
    pi = rng.dirichlet(np.ones(3), size=3)
    parents = np.broadcast_to(np.array([-1, 0, 1, 1]), (20000, 4)).copy()
    x = sample_w_prompts(rng, pi, parents, L=2)
    assert x.shape == (20000, 3, 4)
    J = pairwise_joint(pi, parents[0], 3, 1)
    counts = np.zeros((3, 3))
    np.add.at(counts, (x[:, 1, 3], x[:, 1, 1]), 1)
    _assert_freq_matches(counts.ravel(), J.ravel(), 20000)


def test_w_prompts_torch_matches_exact_law():
    g = torch.Generator().manual_seed(4)
    rng = np.random.default_rng(4)
    pi = rng.dirichlet(np.ones(3), size=3)
    B = 20000
    parents = torch.tensor([[-1, 0, 0, 2]]).expand(B, 4)
    x = sample_w_prompts_torch(g, torch.tensor(pi).expand(B, 3, 3), parents, L=1).numpy()
    J = pairwise_joint(pi, [-1, 0, 0, 2], 3, 2)
    counts = np.zeros((3, 3))
    np.add.at(counts, (x[:, 0, 3], x[:, 0, 2]), 1)
    _assert_freq_matches(counts.ravel(), J.ravel(), B)


def _w_prompts_by_definition(gen, pis, parents, L, roots):
    """The torch sampler's draws written position by position: the same uniforms, each position's
    law (its parent's row of pi, or the root law) and one inverse-CDF draw from it."""
    B, H = parents.shape
    u = torch.rand((B, L + 1, H), generator=gen, dtype=pis.dtype)
    x = torch.empty((B, L + 1, H), dtype=torch.long)
    for b in range(B):
        for h in range(H):
            p = int(parents[b, h])
            for l in range(L + 1):
                law = roots[b] if h == 0 or p < 0 else pis[b, x[b, l, p]]
                x[b, l, h] = int((u[b, l, h] >= law.cumsum(-1)[:-1]).sum())
    return x


@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_w_prompts_torch_are_the_inverse_cdf_draws_of_each_position(shared, dtype):
    """Token for token (not only in law): the vectorised sampler reads, at every position, the law
    its parent's token (or the root law, at position 0 and at any other root) gives, for a shared
    pi and for one pi per prompt."""
    rng = np.random.default_rng(11)
    B, d, L, H = 40, 4, 2, 7
    if shared:
        pi = rng.dirichlet(np.ones(d), size=d)
        pis = torch.as_tensor(pi, dtype=dtype).expand(B, d, d)
        roots = torch.as_tensor(stationary(pi), dtype=dtype).expand(B, d)
    else:
        pis = torch.as_tensor(rng.dirichlet(np.ones(d), size=(B, d)), dtype=dtype)
        roots = torch.as_tensor(rng.dirichlet(np.ones(d), size=B), dtype=dtype)
    parents = torch.as_tensor(random_recursive_parents(rng, H, size=B))
    parents[: B // 2, 4] = -1  # a second root in half the prompts
    x = sample_w_prompts_torch(torch.Generator().manual_seed(5), pis, parents, L, roots=roots)
    want = _w_prompts_by_definition(torch.Generator().manual_seed(5), pis, parents, L, roots)
    assert torch.equal(x, want)


def test_n_prompts_roots_stationary_query_uniform_target_from_pi():
    rng = np.random.default_rng(5)
    pi = rng.dirichlet(np.ones(3), size=3)
    B = 30000
    pis = np.broadcast_to(pi, (B, 3, 3)).copy()
    tree = [-1, 0, -1, 2, -1]  # position 4 is the query
    x, y = sample_n_prompts(rng, pis, tree)
    mu = stationary(pi)
    _assert_freq_matches(np.bincount(x[:, 2], minlength=3), mu, B)  # a non-query root ~ mu_pi
    _assert_freq_matches(np.bincount(x[:, 4], minlength=3), np.full(3, 1 / 3), B)  # the query ~ Unif
    q0 = x[:, 4] == 0
    _assert_freq_matches(np.bincount(y[q0], minlength=3), pi[0], int(q0.sum()))  # target ~ pi(.|query)


def test_n_prompts_torch_agrees_in_law_with_numpy():
    rng = np.random.default_rng(6)
    pi = rng.dirichlet(np.ones(3), size=3)
    B = 30000
    g = torch.Generator().manual_seed(6)
    x, y = sample_n_prompts_torch(g, torch.tensor(pi).expand(B, 3, 3).contiguous(), [-1, 0, 1, -1])
    J = pairwise_joint(pi, [-1, 0, 1], 2, 1)
    counts = np.zeros((3, 3))
    np.add.at(counts, (x[:, 2].numpy(), x[:, 1].numpy()), 1)
    _assert_freq_matches(counts.ravel(), J.ravel(), B)


def test_dirichlet_rows_small_alpha_never_underflows_and_has_right_mean():
    rng = np.random.default_rng(7)
    pis = dirichlet_rows(rng, 0.1, 4000, 10)
    assert np.isfinite(pis).all() and np.allclose(pis.sum(-1), 1)
    m = pis[:, 0, 0]
    assert abs(m.mean() - 0.1) < Z * m.std() / np.sqrt(m.size)  # E = alpha / (d alpha) = 1/d


def test_randomness_is_split_by_purpose():
    """Drawing more sequences does not change the trees drawn from the tree stream."""
    a = random_recursive_parents(np.random.default_rng(11), 8, size=5)
    rng_seq = np.random.default_rng(12)
    sample_tree_sequences(rng_seq, np.full((2, 2), 0.5), [-1, 0], 1000)
    b = random_recursive_parents(np.random.default_rng(11), 8, size=5)
    assert np.array_equal(a, b)
