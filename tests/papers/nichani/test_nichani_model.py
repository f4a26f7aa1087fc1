"""Tests of sim.papers.nichani.model: reduced model, disentangled transformer, Knowl 8/9 constructions."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from theory.strategies import causal_trees
from sim.models import run_with_cache
from sim.papers.nichani.model import (
    DisentangledTransformer,
    ReducedModel,
    empirical_multiparent_estimator,
    empirical_transition_estimator,
    nichani_construction,
    nichani_construction_limit,
    nichani_multiparent_construction,
    nichani_multiparent_construction_limit,
)

F64 = torch.float64
# root keys converge at rate e^{-beta gap}, gap >= 1/T^2 between prefix fractions, so beta runs to 4096
BETAS = [4.0 * 2**k for k in range(11)]


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _prompts(seed, B, T, S):
    return np.random.default_rng(seed).integers(0, S, (B, T))


def _softmax(z):
    z = z - z.max(-1, keepdims=True)
    return np.exp(z) / np.exp(z).sum(-1, keepdims=True)


def _errors(build, x, reference, rows):
    """max |readout - reference| over ``rows`` for each beta in BETAS (float64 models)."""
    errs = []
    for beta in BETAS:
        with torch.no_grad():
            out = build(beta)(torch.as_tensor(x)).numpy()
        errs.append(np.abs(out - reference)[rows].max())
    return errs


def _assert_converges(errs, tol=1e-12, floor=1e-14):
    """Strictly decreasing until float64 round-off (``floor``), and below ``tol`` at the end."""
    assert all(b < a or b <= floor for a, b in zip(errs, errs[1:])), errs
    assert errs[-1] < tol, errs


# ---------------------------------------------------------------------- estimators --
def test_single_parent_estimator_and_limits_by_hand():
    # chain 0 -> 1 -> 2, query 3; edges (s0 -> s1) = (1 -> 0), (s1 -> s2) = (0 -> 0); s_T = 1
    par, x = [-1, 0, 1, -1], [1, 0, 0, 1]
    est, ok = empirical_transition_estimator(x, par, 2)
    assert ok and np.array_equal(est, [1.0, 0.0])
    # the paper's construction: root 0 has s_0 = s_T, so key 0 ties with the edge 0 -> 1
    assert np.allclose(nichani_construction_limit(x, par, 2), [0.5, 0.5])
    assert np.allclose(nichani_construction_limit(x, par, 2, strict=True), [1.0, 0.0])
    with torch.no_grad():
        out = nichani_construction(par, 2, 100.0, 100.0, dtype=F64)(torch.tensor([x]))[0]
    assert np.allclose(out.numpy(), [0.5, 0.5], atol=1e-12)
    # s_T = 0 never a parent token in [1, 1, 1, 0]: undefined
    est, ok = empirical_transition_estimator([1, 1, 1, 0], par, 2)
    assert not ok and np.isnan(est).all()


def test_estimator_ignores_the_query_parent_entry_and_batches():
    x = _prompts(0, 30, 5, 3)
    a, oka = empirical_transition_estimator(x, [-1, 0, 0, 2, -1], 3)
    b, okb = empirical_transition_estimator(x, [-1, 0, 0, 2, 3], 3)  # query entry ignored
    assert np.array_equal(oka, okb) and np.array_equal(a[oka], b[okb])
    one, ok1 = empirical_transition_estimator(x[4], [-1, 0, 0, 2, -1], 3)
    assert ok1 == oka[4] and (not ok1 or np.array_equal(one, a[4]))


@given(tree=causal_trees(st.integers(2, 8), forest=True), seed=st.integers(0, 2**16), S=st.integers(2, 4))
def test_estimator_matches_edge_count_loop(tree, seed, S):
    x = _prompts(seed, 6, tree.n, S)
    est, ok = empirical_transition_estimator(x, tree, S)
    par = list(tree.parents)
    for b in range(6):
        counts = np.zeros(S)
        for i in range(tree.n - 1):
            if par[i] >= 0 and x[b, par[i]] == x[b, -1]:
                counts[x[b, i]] += 1
        assert ok[b] == (counts.sum() > 0)
        if ok[b]:
            assert np.allclose(est[b], counts / counts.sum())


def test_multiparent_estimator_by_hand():
    sets = [(), (), (0, 1), (1, 2), (2, 3), (3, 4)]  # trigram on 5 prompt positions, target node 5
    # target parents (s3, s4) = (0, 0); only i = 2 has (s0, s1) = (0, 0), with s2 = 1
    x = [0, 0, 1, 0, 0]
    est, ok = empirical_multiparent_estimator(x, sets, 2)
    assert ok and np.array_equal(est, [0.0, 1.0])
    # the paper's construction also averages s4 (the query key) and the roots 0, 1 (all tokens 0)
    assert np.allclose(nichani_multiparent_construction_limit(x, sets, 2), [0.75, 0.25])
    assert np.allclose(nichani_multiparent_construction_limit(x, sets, 2, strict=True), [0.0, 1.0])
    # include_last: i = 4 with its own parents (s2, s3) counts too (N's reference code)
    est, ok = empirical_multiparent_estimator([1, 1, 0, 0, 0], sets, 2)
    assert not ok and np.isnan(est).all()
    est, ok = empirical_multiparent_estimator([1, 1, 0, 0, 0], sets, 2, include_last=True)
    assert ok and np.array_equal(est, [1.0, 0.0])


def test_bad_graphs_are_rejected():
    with pytest.raises(ValueError, match="increasing"):
        empirical_multiparent_estimator([0, 1, 0], [(), (), (1, 0), (1, 2)], 2)
    with pytest.raises(ValueError, match="exactly k = 2"):
        empirical_multiparent_estimator([0, 1, 0], [(), (0,), (0, 1), (1, 2)], 2)
    with pytest.raises(ValueError, match="target node 3 has no parents"):
        nichani_multiparent_construction([(), (0,), (1,), ()], 2, 1.0, 1.0)
    with pytest.raises(ValueError, match="length 3 but the tree has 4"):
        empirical_transition_estimator([0, 1, 0], [-1, 0, 1, -1], 2)
    with pytest.raises(ValueError, match="0..1"):
        empirical_transition_estimator([0, 2, 0, 1], [-1, 0, 1, -1], 2)
    with pytest.raises(ValueError, match="node 2"):  # CausalTree: forward edge
        nichani_construction([-1, 0, 3, -1], 2, 1.0, 1.0)


# -------------------------------------------------------- Knowl 8: one-parent construction --
@settings(max_examples=20)
@given(tree=causal_trees(st.integers(3, 8), forest=True), seed=st.integers(0, 2**16), S=st.integers(2, 4))
def test_construction_converges_to_its_limit_and_strict_to_the_estimator(tree, seed, S):
    x = _prompts(seed, 40, tree.n, S)
    est, ok = empirical_transition_estimator(x, tree, S)
    lim = nichani_construction_limit(x, tree, S)
    rows = np.ones(len(x), dtype=bool)
    _assert_converges(_errors(lambda b: nichani_construction(tree, S, b, b, dtype=F64), x, lim, rows))
    if ok.any():
        _assert_converges(_errors(lambda b: nichani_construction(tree, S, b, b, strict=True, dtype=F64),
                                  x, est, ok))
        # the limit is the estimator unless a root j < T-1 has s_0 = ... = s_j = s_T
        roots = [j for j in range(tree.n - 1) if tree.parents[j] < 0]
        degenerate = np.array([any((x[b, : j + 1] == x[b, -1]).all() for j in roots) for b in range(len(x))])
        clean = ok & ~degenerate
        assert np.allclose(lim[clean], est[clean], atol=1e-14)


def test_paper_construction_differs_from_estimator_on_a_chain():
    """Knowl 8's matrices: key 0 (a root) joins the average whenever s_0 = s_T."""
    T, S = 8, 3
    par = [-1] + list(range(T - 1))
    x = _prompts(1, 400, T, S)
    est, ok = empirical_transition_estimator(x, par, S)
    lim = nichani_construction_limit(x, par, S)
    bad = ok & (np.abs(lim - est).max(-1) > 1e-9)
    assert np.array_equal(bad, ok & (x[:, 0] == x[:, -1]))
    assert 0.2 < bad.mean() < 0.45  # ~ P(s_0 = s_T) = 1/3 among defined prompts


def test_wrong_parent_in_layer1_is_caught():
    par = [-1, 0, 1, 1, 3, -1]
    S = 3
    x = _prompts(2, 200, len(par), S)
    est, ok = empirical_transition_estimator(x, par, S)
    model = nichani_construction(par, S, 64.0, 64.0, strict=True, dtype=F64)
    with torch.no_grad():
        right = model(torch.as_tensor(x)).numpy()
        assert np.abs(right - est)[ok].max() < 1e-12
        A1 = model.A[0]
        A1[0, S + 4, S + 3] = 0.0  # node 4: parent 3 -> 2 (wrong)
        A1[0, S + 4, S + 2] = 64.0
        wrong = model(torch.as_tensor(x)).numpy()
    assert np.abs(wrong - est)[ok].max() > 0.1


def test_reduced_model_with_adjacency_equals_the_construction():
    """Two independent implementations: ReducedModel(beta1 adj, beta2 I) == Knowl 8's 2-layer model."""
    par, S, T = [-1, 0, 0, 2, -1, 4, -1], 3, 7
    x = torch.as_tensor(_prompts(3, 50, T, S))
    for b1, b2 in [(0.5, 2.0), (3.0, 1.0), (20.0, 7.0)]:
        A1 = torch.zeros(T, T, dtype=F64)
        for i, p in enumerate(par):
            if p >= 0:
                A1[i, p] = b1
        reduced = ReducedModel(A1, b2 * torch.eye(S, dtype=F64))
        with torch.no_grad():
            assert torch.allclose(reduced(x), nichani_construction(par, S, b1, b2, dtype=F64)(x), atol=1e-13)


# ---------------------------------------------------------- Knowl 9: k-parent construction --
@pytest.mark.parametrize("sets", [
    [(), (), (0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6)],  # trigram, T = 7
    [(), ()] + [((i - 1) // 2, i - 1) for i in range(2, 9)],  # N's multi_parent notebook graph, T = 8
    [(), (), (), (0, 1, 2), (), (1, 3, 4), (0, 2, 4), (3, 5, 6)],  # k = 3 with roots in the middle
])
def test_multiparent_construction_converges(sets):
    S, T = 2, len(sets) - 1
    x = _prompts(4, 300, T, S)
    est, ok = empirical_multiparent_estimator(x, sets, S)
    lim = nichani_multiparent_construction_limit(x, sets, S)
    assert ok.sum() > 20
    all_rows = np.ones(len(x), dtype=bool)
    _assert_converges(_errors(lambda b: nichani_multiparent_construction(sets, S, b, b, dtype=F64),
                              x, lim, all_rows))
    _assert_converges(_errors(lambda b: nichani_multiparent_construction(sets, S, b, b, strict=True, dtype=F64),
                              x, est, ok))
    assert np.allclose(nichani_multiparent_construction_limit(x, sets, S, strict=True)[ok], est[ok])
    # the paper's matrices: the query key always matches, so s_{T-1} is in every average
    assert (np.abs(lim - est)[ok].max(-1) > 1e-9).mean() > 0.3


def test_multiparent_heads_split_the_parents():
    sets = [(), (), (0, 1), (1, 2), (2, 3), (3, 4)]
    model = nichani_multiparent_construction(sets, 2, 30.0, 30.0, dtype=F64)
    _, cache = run_with_cache(model, torch.tensor([[0, 1, 1, 0, 1]]))
    for head in range(2):
        a = cache[f"layer1.head{head}.pattern"][0]  # (T, T)
        for i in range(2, 4):
            assert a[i, sets[i][head]] > 1 - 1e-9
        assert a[4, sets[5][head]] > 1 - 1e-9  # the query copies the target's parents


def test_multiparent_wrong_head_assignment_is_caught():
    sets = [(), (), (0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]
    S, T = 3, 6
    x = _prompts(5, 300, T, S)
    est, ok = empirical_multiparent_estimator(x, sets, S)
    model = nichani_multiparent_construction(sets, S, 64.0, 64.0, strict=True, dtype=F64)
    with torch.no_grad():
        assert np.abs(model(torch.as_tensor(x)).numpy() - est)[ok].max() < 1e-12
        q = S + T - 1  # the query row: swap which head copies which target parent
        model.A[0][0, q, S + 4], model.A[0][0, q, S + 5] = 0.0, 64.0
        model.A[0][1, q, S + 5], model.A[0][1, q, S + 4] = 0.0, 64.0
        wrong = model(torch.as_tensor(x)).numpy()
    assert np.nanmax(np.abs(wrong - est)[ok]) > 0.1


# ------------------------------------------------------------------------ reduced model --
def test_reduced_model_init_uniform_attention_and_finite_gradient():
    S, T, B = 3, 6, 32
    model = ReducedModel.init(S, T, beta0=0.1, dtype=F64)
    x = torch.as_tensor(_prompts(6, B, T, S))
    probs, cache = run_with_cache(model, x)
    a1 = cache["layer1.pattern"]
    want = torch.tril(torch.ones(T, T, dtype=F64)) / torch.arange(1, T + 1, dtype=F64)[:, None]
    assert torch.allclose(a1, want)
    assert torch.allclose(probs.sum(-1), torch.ones(B, dtype=F64))
    pis = torch.as_tensor(np.random.default_rng(7).dirichlet(np.ones(S), size=(B, S)))
    for loss in (model.loss(x, pis=pis), model.loss(x, targets=x[:, 0])):
        (g,) = torch.autograd.grad(loss, model.A1)
        assert torch.isfinite(g).all()
        assert torch.all(g.triu(1) == 0)  # masked entries get no gradient
        assert g.tril().abs().max() > 0


def test_reduced_model_matches_knowl6_formula():
    """f = X^T softmax( softmax(MASK(A1)) X A2^T e_{s_T} ), with a non-symmetric A2."""
    S, T = 3, 5
    rng = np.random.default_rng(8)
    A1, A2 = rng.normal(size=(T, T)), rng.normal(size=(S, S)) * 2
    model = ReducedModel(torch.as_tensor(A1), torch.as_tensor(A2))
    x = _prompts(9, 20, T, S)
    with torch.no_grad():
        got = model(torch.as_tensor(x)).numpy()
    masked = np.where(np.tril(np.ones((T, T))) > 0, A1, -np.inf)
    for b in range(20):
        X = np.eye(S)[x[b]]  # (T, S)
        want = X.T @ _softmax(_softmax(masked) @ X @ A2.T @ np.eye(S)[x[b, -1]])
        assert np.allclose(got[b], want, atol=1e-13)


def test_reduced_model_loss_forms():
    S, T = 3, 4
    model = ReducedModel.init(S, T, beta0=1.0, dtype=F64)
    x = torch.as_tensor(_prompts(10, 8, T, S))
    pis = torch.as_tensor(np.random.default_rng(11).dirichlet(np.ones(S), size=(8, S)))
    f = model(x)
    row = pis[torch.arange(8), x[:, -1]]
    assert torch.isclose(model.loss(x, pis=pis), -(row * torch.log(f + T ** -0.5)).sum(-1).mean())
    assert torch.isclose(model.loss(x, pis=pis, eps=0.0), -(row * torch.log(f)).sum(-1).mean())
    y = x[:, 1]
    assert torch.isclose(ReducedModel.init(S, T, 1.0, t_eff=16.0, dtype=F64).loss(x, targets=y),
                         -torch.log(f[torch.arange(8), y] + 0.25).mean())
    with pytest.raises(ValueError, match="exactly one"):
        model.loss(x)


# -------------------------------------------------------------- disentangled transformer --
def _naive_disentangled(model, tokens):
    """Loop-by-loop N Knowl 7 forward in numpy: h_l = [h_{l-1}, attn_i(h_{l-1})...], readout at T-1."""
    S, T = model.S, model.T
    out = []
    for x in tokens:
        n = len(x)
        h = np.concatenate([np.eye(S)[x], np.eye(T)[:n]], axis=1)
        for A_l in model.A:
            blocks = [h]
            for A in A_l.detach().numpy():
                o = np.zeros_like(h)
                for i in range(n):
                    a = _softmax(np.array([h[i] @ A @ h[j] for j in range(i + 1)]))
                    o[i] = sum(a[j] * h[j] for j in range(i + 1))
                blocks.append(o)
            h = np.concatenate(blocks, axis=1)
        out.append(model.W_O.detach().numpy() @ h[-1])
    return np.array(out)


@pytest.mark.parametrize("heads", [[1], [2], [1, 1], [2, 1]])
def test_disentangled_matches_loop_reference(heads):
    S, T = 3, 4
    model = DisentangledTransformer.init(S, T, heads, generator=_gen(12), scale=0.3, dtype=F64)
    w = S + T
    for m in heads:
        w *= 1 + m
    assert model.widths[-1] == w and model.W_O.shape == (S, w)
    x = _prompts(13, 10, T, S)
    with torch.no_grad():
        got = model(torch.as_tensor(x)).numpy()
        short = model(torch.as_tensor(x[:, :3])).numpy()  # prompts shorter than T
    assert np.allclose(got, _naive_disentangled(model, x), atol=1e-12)
    assert np.allclose(short, _naive_disentangled(model, x[:, :3]), atol=1e-12)


def test_disentangled_zero_init_hooks_and_loss():
    S, T, B = 3, 5, 4
    model = DisentangledTransformer.init(S, T, [1, 2])
    x = torch.as_tensor(_prompts(14, B, T, S))
    logits, cache = run_with_cache(model, x)
    assert torch.equal(logits, torch.zeros(B, S))
    assert sorted(cache) == sorted(f"layer{l}.head{i}.{k}" for l, m in [(1, 1), (2, 2)] for i in range(m)
                                   for k in ("scores", "pattern"))
    uniform = torch.tril(torch.ones(T, T)) / torch.arange(1, T + 1)[:, None]
    for name, t in cache.items():
        if name.endswith("pattern"):
            assert torch.allclose(t, uniform.expand(B, T, T))
    assert torch.isclose(model.loss(x, targets=x[:, 0]), torch.log(torch.tensor(3.0)))
    probs = torch.full((B, S), 1 / S)
    assert torch.isclose(model.loss(x, probs=probs), torch.log(torch.tensor(3.0)))
    model.loss(x, targets=x[:, 0]).backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())
    assert model.W_O.grad.abs().max() > 0
