"""Tests of theory.joint: path formulas against enumeration of all d^n sequences."""
import importlib.util
import itertools
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, strategies as st

from theory import (
    CausalTree,
    TheoryError,
    all_pairwise_joints,
    channel,
    closed_classes,
    marginal,
    marginals,
    pairwise_joint,
    sequence_pmf,
    stationary,
)
from theory.joint import MAX_ENUMERATION, as_tree, root_law
from theory.strategies import causal_trees, prob_vectors, stochastic_matrices

ATOL = 1e-12


@st.composite
def small_models(draw, *, min_entry=0.0):
    """(pi, tree, root) with d**n <= 729: trees and forests, pi with zeros, stationary or explicit root."""
    d = draw(st.integers(1, 3), label="d")
    n = draw(st.integers(1, 6), label="n")
    tree = draw(st.one_of(causal_trees(n), causal_trees(n, forest=True)), label="tree")
    pi = draw(stochastic_matrices(d, min_entry=min_entry / d), label="pi")
    root = draw(st.one_of(st.none(), prob_vectors(d)), label="root")
    return pi, tree, root


def _stationary_is_unique(pi) -> bool:
    return len(closed_classes(pi)) == 1


def _pair_from_pmf(pmf, i, j):
    """P(x_i, x_j) by summing the full joint over every other position."""
    n = pmf.ndim
    if i == j:
        return np.diag(pmf.sum(axis=tuple(k for k in range(n) if k != i)))
    P = pmf.sum(axis=tuple(k for k in range(n) if k not in (i, j)))
    return P if i < j else P.T


# -- enumeration oracle ---------------------------------------------------------------------------
@given(small_models())
def test_sequence_pmf_matches_product_over_edges(model):
    pi, tree, root = model
    if root is None and not _stationary_is_unique(pi):
        with pytest.raises(TheoryError, match="closed classes"):
            sequence_pmf(pi, tree)
        return
    nu = stationary(pi) if root is None else root
    pmf = sequence_pmf(pi, tree, root=root)
    d, par = pi.shape[0], tree.parents.tolist()
    assert pmf.shape == (d,) * tree.n
    assert abs(pmf.sum() - 1) < ATOL
    for x in itertools.product(range(d), repeat=tree.n):
        p = 1.0
        for h, parent in enumerate(par):
            p *= nu[x[h]] if parent < 0 else pi[x[parent], x[h]]
        assert abs(pmf[x] - p) < 1e-15


# -- exact vs enumeration ---------------------------------------------------------------------------
@given(small_models())
def test_marginals_and_joints_match_enumeration(model):
    pi, tree, root = model
    if root is None and not _stationary_is_unique(pi):
        for call in (lambda: marginal(pi, tree, 0), lambda: marginals(pi, tree),
                     lambda: pairwise_joint(pi, tree, 0, 0), lambda: all_pairwise_joints(pi, tree)):
            with pytest.raises(TheoryError, match="closed classes"):
                call()
        return
    pmf = sequence_pmf(pi, tree, root=root)
    n = tree.n
    all_m = marginals(pi, tree, root=root)
    all_J = all_pairwise_joints(pi, tree, root=root)
    assert all_m.shape == (n, pi.shape[0]) and all_J.shape == (n, n) + pi.shape
    for i in range(n):
        expected_m = pmf.sum(axis=tuple(k for k in range(n) if k != i))
        np.testing.assert_allclose(marginal(pi, tree, i, root=root), expected_m, rtol=0, atol=ATOL)
        np.testing.assert_allclose(all_m[i], expected_m, rtol=0, atol=ATOL)
        for j in range(n):
            expected = _pair_from_pmf(pmf, i, j)
            np.testing.assert_allclose(pairwise_joint(pi, tree, i, j, root=root), expected, rtol=0, atol=ATOL)
            np.testing.assert_allclose(all_J[i, j], expected, rtol=0, atol=ATOL)


@given(small_models())
def test_joint_marginals_symmetry_and_channels(model):
    pi, tree, root = model
    if root is None and not _stationary_is_unique(pi):
        root = np.full(pi.shape[0], 1 / pi.shape[0])
    J = all_pairwise_joints(pi, tree, root=root)
    m = marginals(pi, tree, root=root)
    for i in range(tree.n):
        for j in range(tree.n):
            np.testing.assert_allclose(J[i, j].sum(axis=1), m[i], rtol=0, atol=ATOL)
            np.testing.assert_allclose(J[i, j].sum(axis=0), m[j], rtol=0, atol=ATOL)
            np.testing.assert_array_equal(J[i, j], J[j, i].T)
            K, p = channel(pi, tree, i, j, root=root)
            np.testing.assert_allclose(K.sum(axis=1), 1.0, rtol=0, atol=ATOL)
            np.testing.assert_allclose(p, m[i], rtol=0, atol=ATOL)
            np.testing.assert_allclose(p[:, None] * K, J[i, j], rtol=0, atol=ATOL)
            np.testing.assert_allclose(p @ K, m[j], rtol=0, atol=ATOL)
            # rows that carry no mass are filled with the output marginal
            np.testing.assert_allclose(K[p == 0], np.broadcast_to(m[j], K[p == 0].shape), rtol=0, atol=ATOL)


@given(stochastic_matrices(st.integers(1, 4), min_entry=0.0), causal_trees(st.integers(1, 8)))
def test_stationary_root_keeps_every_marginal(pi, tree):
    if not _stationary_is_unique(pi):
        return
    mu = stationary(pi)
    np.testing.assert_allclose(marginals(pi, tree), np.broadcast_to(mu, (tree.n, pi.shape[0])), rtol=0, atol=ATOL)


# -- known values ------------------------------------------------------------------------------------
PI = np.array([[0.9, 0.1], [0.4, 0.6]])  # stationary law (0.8, 0.2)


def test_known_chain_joint():
    tree = CausalTree([-1, 0, 1])
    np.testing.assert_allclose(stationary(PI), [0.8, 0.2], rtol=0, atol=1e-15)
    np.testing.assert_allclose(pairwise_joint(PI, tree, 0, 1), [[0.72, 0.08], [0.08, 0.12]], rtol=0, atol=1e-15)
    # two steps: diag(mu) pi^2, pi^2 = [[0.85, 0.15], [0.6, 0.4]]
    np.testing.assert_allclose(pairwise_joint(PI, tree, 0, 2), [[0.68, 0.12], [0.12, 0.08]], rtol=0, atol=1e-15)


def test_known_siblings_and_explicit_root():
    tree = CausalTree([-1, 0, 0])
    nu = [0.5, 0.5]
    # P(x1 = a, x2 = b) = sum_u nu(u) pi(u, a) pi(u, b)
    expected = 0.5 * np.outer(PI[0], PI[0]) + 0.5 * np.outer(PI[1], PI[1])
    np.testing.assert_allclose(pairwise_joint(PI, tree, 1, 2, root=nu), expected, rtol=0, atol=1e-15)
    np.testing.assert_allclose(marginal(PI, tree, 1, root=nu), [0.65, 0.35], rtol=0, atol=1e-15)


def test_forest_components_are_independent():
    tree = CausalTree([-1, 0, -1, 2])
    nu = [0.3, 0.7]
    J = pairwise_joint(PI, tree, 1, 3, root=nu)
    m = np.array(nu) @ PI
    np.testing.assert_allclose(J, np.outer(m, m), rtol=0, atol=1e-15)


def test_channel_zero_mass_rows():
    pi = np.array([[1.0, 0.0], [0.5, 0.5]])  # state 0 absorbing: stationary (1, 0)
    K, p = channel(pi, CausalTree([-1, 0]), 0, 1)
    np.testing.assert_array_equal(p, [1.0, 0.0])
    np.testing.assert_allclose(K, [[1.0, 0.0], [1.0, 0.0]], rtol=0, atol=1e-16)


def test_root_law_and_as_tree():
    np.testing.assert_allclose(root_law(PI, None), [0.8, 0.2], rtol=0, atol=1e-15)
    np.testing.assert_array_equal(root_law(PI, [0.0, 1.0]), [0.0, 1.0])
    t = CausalTree([-1, 0])
    assert as_tree(t) is t and as_tree([-1, 0]) == t


# -- bad inputs -------------------------------------------------------------------------------------
def test_sequence_pmf_refuses_big_sizes():
    n = int(np.floor(np.log(MAX_ENUMERATION) / np.log(2))) + 1
    with pytest.raises(TheoryError, match=rf"d\*\*n = 2\*\*{n} sequences exceeds the limit {MAX_ENUMERATION}"):
        sequence_pmf(PI, CausalTree(range(-1, n - 1)))
    assert sequence_pmf(PI, CausalTree(range(-1, n - 2))).size == 2 ** (n - 1)


@pytest.mark.parametrize("call, match", [
    (lambda: marginal(PI, [-1, 2, 0], 0), r"node 1: parent 2 comes after it"),
    (lambda: marginal(PI, 5, 0), r"tree must be a CausalTree or a parent array, got int"),
    (lambda: marginal(PI, [-1, 0], 2), r"node 2 is out of range"),
    (lambda: pairwise_joint(PI, [-1, 0], 0, 3), r"j 3 is out of range"),
    (lambda: marginals([[0.5, 0.6], [0.5, 0.5]], [-1, 0]), r"pi row 0 sums to"),
    (lambda: all_pairwise_joints(PI, [-1, 0], root=[1.0]), r"root has length 1, expected 2"),
    (lambda: all_pairwise_joints(PI, [-1, 0], root=[0.5, 0.6]), r"root sums to"),
    (lambda: channel(np.eye(2), [-1, 0], 0, 1), r"2 closed classes"),
    (lambda: sequence_pmf(PI, [-1, 0], root=[-0.5, 1.5]), r"root\[0\] = -0.5 is negative"),
])
def test_bad_inputs_named(call, match):
    with pytest.raises(TheoryError, match=match):
        call()


# -- the benchmark's two paths agree (tiny sizes) ---------------------------------------------------
def _bench_theory():
    """Load benchmarks/bench_theory.py by path: the project root need not be on sys.path."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_theory.py"
    spec = importlib.util.spec_from_file_location("bench_theory_under_test", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


BENCH = _bench_theory()


@given(st.one_of(causal_trees(st.integers(1, 7)), causal_trees(st.integers(1, 7), forest=True)),
       stochastic_matrices(st.integers(1, 4)), st.data())
def test_benchmark_vectorised_and_baseline_paths_agree(tree, pi, data):
    root = data.draw(prob_vectors(pi.shape[0]))
    J, I = BENCH.pairwise_chi2_vectorised(pi, tree, root=root)
    Jb = BENCH.pairwise_chi2_baseline(pi, tree, root=root)[0]
    np.testing.assert_allclose(J, Jb, rtol=0, atol=ATOL)
    # Both paths share the formula of theory.mutual_information; where P_x P_y underflows
    # to 0 under a positive joint entry it returns inf (see test_information's xfail
    # test_mi_finite_when_marginal_product_underflows), so those joints are left out here.
    m = J.sum(axis=3)
    underflow = (m[:, :, :, None] * J.sum(axis=2)[:, :, None, :] == 0) & (J > 0)
    assume(not underflow.any())
    Ib = BENCH.pairwise_chi2_baseline(pi, tree, root=root)[1]
    np.testing.assert_allclose(I, Ib, rtol=0, atol=ATOL)


def test_benchmark_bma_paths_agree_small():
    rng = np.random.default_rng(3)
    pi = BENCH.random_transition_matrix(4, rng)
    contexts = rng.integers(0, 4, size=(5, 3, 7))
    base = BENCH.bma_posteriors_baseline(contexts, pi)
    np.testing.assert_allclose(BENCH.bma_posteriors_per_h(contexts, pi), base, rtol=0, atol=ATOL)
    np.testing.assert_allclose(BENCH.bma_posteriors_matrix(contexts, pi), base, rtol=0, atol=ATOL)
    rows = BENCH.run(quick=True)
    assert all(r.agree for r in rows)
