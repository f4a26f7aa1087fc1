"""Tests of N's mechanism probes (sim.papers.nichani.probes) on models whose mechanism is known:
N's constructions (Knowls 8 and 9) and reduced models with a hand-set first layer."""
import numpy as np
import pytest
import torch

from sim.papers.nichani.model import (DisentangledTransformer, ReducedModel, nichani_construction,
                                nichani_multiparent_construction)
from sim.papers.nichani.probes import (adjacency_pattern, detection_score, head_attention, head_parent_masses, head_split,
                                mean_attention, multiparent_patterns, parent_attention, parent_probe, pattern_mass,
                                position_attention, root_uniformity)

F64 = torch.float64
PARENTS = [-1, 0, 1, -1, 3, 1, -1]  # query (position 6) a root


def _tokens(S, T, n=64, seed=0):
    return torch.as_tensor(np.random.default_rng(seed).integers(0, S, (n, T)))


def test_adjacency_pattern_by_hand():
    P = adjacency_pattern(PARENTS)
    want = np.zeros((7, 7))
    for i, p in [(1, 0), (2, 1), (4, 3), (5, 1)]:
        want[i, p] = 1
    np.testing.assert_array_equal(P, want)
    # the query's parent entry is ignored (it is a root by N's task)
    np.testing.assert_array_equal(adjacency_pattern([-1, 0, 1, 2]), adjacency_pattern([-1, 0, 1, -1]))


@pytest.mark.parametrize("bad, msg", [([0, 0], "p\\(i\\) < i"), ([-1, -2, 0], "-1 <= p"), ([[-1, 0]], "length T")])
def test_bad_parents_raise(bad, msg):
    with pytest.raises(ValueError, match=msg):
        adjacency_pattern(bad)


def test_pattern_mass_and_detection_score_by_hand():
    A = np.tril(np.ones((3, 3)))
    A /= A.sum(1, keepdims=True)  # uniform causal attention
    P = adjacency_pattern([-1, 0, 1])
    rows, mass = pattern_mass(A, P)
    assert rows.tolist() == [1] and mass.tolist() == [0.5]
    assert detection_score(A, P) == 0.5
    with pytest.raises(ValueError, match="disagree"):
        pattern_mass(A, np.zeros((2, 2)))
    with pytest.raises(ValueError, match="no entries"):
        detection_score(A, np.zeros((3, 3)))


def test_construction_attends_to_parents_in_both_readings():
    S, T = 3, len(PARENTS)
    model = nichani_construction(PARENTS, S, beta1=30.0, beta2=5.0, dtype=F64)
    x = _tokens(S, T)
    for attn, reading in ((mean_attention(model, x), "prompts"), (position_attention(model), "positions")):
        pa = parent_attention(attn, PARENTS, reading=reading)
        assert pa.positions.tolist() == [1, 2, 4, 5] and pa.parents.tolist() == [0, 1, 3, 1]
        assert pa.min > 1 - 1e-9 and pa.all_argmax_on_parent
        assert detection_score(attn, adjacency_pattern(PARENTS)) > 1 - 1e-9
        assert root_uniformity(attn, PARENTS) < 1e-12  # Knowl 8: root rows average the prefix
    probe = parent_probe(PARENTS, tokens=x)
    assert probe(model) > 1 - 1e-9


def test_wrong_graph_scores_low_and_argmax_misses():
    S = 3
    model = nichani_construction(PARENTS, S, beta1=30.0, beta2=5.0, dtype=F64)
    other = [-1, 0, 0, -1, 0, 4, -1]  # different parents at positions 2, 4, 5
    pa = parent_attention(position_attention(model), other)
    assert not pa.all_argmax_on_parent
    assert pa.min < 1e-9 and pa.worst_position in (2, 4, 5)
    assert parent_probe(other, reading="positions")(model) < 1e-9


def test_reduced_model_readings_coincide_and_roots_uniform():
    T, S = len(PARENTS), 4
    A1 = torch.as_tensor(8.0 * adjacency_pattern(PARENTS))
    model = ReducedModel(A1, torch.eye(S, dtype=F64))
    x = _tokens(S, T)
    np.testing.assert_allclose(mean_attention(model, x), position_attention(model), atol=1e-15)
    pa = parent_attention(position_attention(model), PARENTS)
    # softmax of 8 against i zeros: e^8 / (e^8 + i)
    want = np.exp(8) / (np.exp(8) + pa.positions)
    np.testing.assert_allclose(pa.mass, want, rtol=1e-12)
    assert root_uniformity(position_attention(model), PARENTS) < 1e-15
    A1[3, 0] = 5.0  # a root row that is not uniform
    tv = root_uniformity(position_attention(ReducedModel(A1, torch.eye(S, dtype=F64))), PARENTS)
    assert tv > 0.5


def test_mean_attention_matches_a_direct_computation():
    S, T = 3, 5
    g = torch.Generator().manual_seed(0)
    model = DisentangledTransformer.init(S, T, [1, 1], generator=g, scale=0.7, dtype=F64)
    x = _tokens(S, T, n=7)
    h = model.embed(x)
    scores = h @ model.A[0][0] @ h.transpose(1, 2)
    scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    want = torch.softmax(scores, -1).mean(0).detach().numpy()
    np.testing.assert_allclose(mean_attention(model, x), want, atol=1e-14)
    # the position reading ignores the token blocks
    pos = model.A[0][0, S:, S:].masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    np.testing.assert_allclose(position_attention(model), torch.softmax(pos, -1).detach().numpy(), atol=1e-15)


def test_multiparent_patterns_and_head_split_on_the_construction():
    S, T = 2, 6
    sets = [(), ()] + [(i - 2, i - 1) for i in range(2, T + 1)]  # trigram
    P = multiparent_patterns(sets)
    assert P.shape == (2, T, T)
    assert P[0, T - 1, T - 2] == 1 and P[1, T - 1, T - 1] == 1  # the query copies the target's parents
    assert P[0, 3, 1] == 1 and P[1, 3, 2] == 1 and P[:, :2].sum() == 0
    model = nichani_multiparent_construction(sets, S, beta1=30.0, beta2=5.0, dtype=F64)
    x = _tokens(S, T)
    att = head_attention(model, x)
    M = head_parent_masses(att, sets)
    assert M.shape == (2, 2)
    np.testing.assert_allclose(np.diag(M), 1.0, atol=1e-9)
    sp = head_split(M, threshold=0.9)
    assert sp.split and sp.assignment.tolist() == [0, 1]
    # swapped heads: still a split, other assignment
    sw = head_split(M[::-1], threshold=0.9)
    assert sw.split and sw.assignment.tolist() == [1, 0]
    # two heads on the same parent: not a split
    same = head_split(np.array([M[0], M[0]]), threshold=0.9)
    assert not same.distinct and not same.split
    # the position reading agrees for this construction (its token blocks are zero)
    np.testing.assert_allclose(head_attention(model, reading="positions"), att, atol=1e-12)


def test_head_split_threshold_and_errors():
    sp = head_split(np.array([[0.6, 0.1], [0.2, 0.45]]), threshold=0.5)
    assert sp.distinct and not sp.split
    with pytest.raises(ValueError, match="masses must be"):
        head_split(np.zeros(3))
    with pytest.raises(ValueError, match="needs a batch"):
        head_attention(DisentangledTransformer.init(2, 3, [2, 1]))
    with pytest.raises(ValueError, match="needs a probe batch"):
        parent_probe([-1, 0, -1])
