"""Tests for theory.largedev: the law of the BMA log-likelihood ratio and its large deviations (W.T2)."""
import itertools
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from theory.errors import TheoryError
from theory.information import f_divergence
from theory.joint import pairwise_joint, sequence_pmf
from theory.largedev import (
    ChernoffResult,
    MapErrorExponent,
    bahadur_rao_log_error,
    bahadur_rao_prefactor,
    chernoff_exponent,
    llr_law,
    map_error_exponent,
    pairwise_error_exact,
    pairwise_error_exact_path,
)


# ----------------------------------------------------------------------------- helpers
def stochastic(d, min_entry=0.0, allow_zero=False):
    row = st.lists(st.floats(0.0 if allow_zero else 0.02, 1.0), min_size=d, max_size=d)

    def norm(rows):
        m = np.array(rows)
        m[m.sum(axis=1) == 0] = 1.0
        m = m / m.sum(axis=1, keepdims=True)
        return (1 - d * min_entry) * m + min_entry
    return st.lists(row, min_size=d, max_size=d).map(norm)


@st.composite
def laws(draw, k_min=2, k_max=5):
    k = draw(st.integers(k_min, k_max))
    vals = draw(st.lists(st.floats(-3.0, 3.0).map(lambda x: round(x, 3)), min_size=k, max_size=k, unique=True))
    w = np.array(draw(st.lists(st.floats(0.05, 1.0), min_size=k, max_size=k)))
    return np.array(vals), w / w.sum()


def law_from_enumeration(pi, tree, h, comp, root=None):
    """The law of Z from the full joint pmf of all positions (brute force)."""
    pmf = sequence_pmf(pi, tree, root=root)
    pa = [p for p in tree][h]
    out = {}
    with np.errstate(divide="ignore"):
        logpi = np.log(pi)
    for x in itertools.product(range(pi.shape[0]), repeat=len(tree)):
        w = pmf[x]
        if w == 0:
            continue
        z = 0.0 if x[comp] == x[pa] else logpi[x[comp], x[h]] - logpi[x[pa], x[h]]
        key = -math.inf if z == -math.inf else round(z, 9)
        out[key] = out.get(key, 0.0) + w
    keys = sorted(out)
    return np.array(keys), np.array([out[k] for k in keys])


def brute_force_error(values, probs, L):
    """P(S_L >= 0) by summing over all k^L atom sequences (tiny L only)."""
    fin = np.isfinite(values)
    scale = np.abs(values[fin]).max()
    total = 0.0
    for seq in itertools.product(range(len(values)), repeat=L):
        s = sum(values[i] for i in seq)
        if s >= -1e-9 * L * scale:
            total += math.prod(probs[i] for i in seq)
    return total


def mean_z(values, probs):
    if np.any(~np.isfinite(values) & (probs > 0)):
        return -math.inf
    return float(values @ probs)


PI2 = np.array([[0.7, 0.3], [0.2, 0.8]])
PI3 = np.array([[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.25, 0.15, 0.6]])


# ----------------------------------------------------------------------------- the law of Z
@pytest.mark.parametrize("pi,tree,h,comp,root", [
    (PI2, [-1, 0, 0, 1], 3, 0, None),
    (PI2, [-1, 0, 0, 1], 3, 2, [0.9, 0.1]),
    (PI3, [-1, 0, 1, 0, 2], 4, 0, None),
    (PI3, [-1, 0, 1, 0, 2], 4, 3, [0.5, 0.5, 0.0]),
    (PI3, [-1, 0, 0, 2], 3, 1, None),
    # zeros in pi: pi(x_h', x_h) = 0 gives Z = -inf
    (np.array([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.5, 0.0, 0.5]]), [-1, 0, 1, 1], 3, 2, None),
])
def test_llr_law_matches_sequence_enumeration(pi, tree, h, comp, root):
    v, p = llr_law(pi, tree, h, comp, root=root)
    v_ref, p_ref = law_from_enumeration(pi, tree, h, comp, root=root)
    assert np.all(np.diff(v[np.isfinite(v)]) > 0) and np.all(p > 0)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    assert len(v) == len(v_ref)
    fin = np.isfinite(v_ref)
    assert np.array_equal(np.isfinite(v), fin)
    np.testing.assert_allclose(v[fin], v_ref[fin], atol=1e-8)
    np.testing.assert_allclose(p, p_ref, atol=1e-12)


def test_llr_law_expected_value_is_minus_expected_kl_w_lemma4():
    # -E[Z] = sum_{a,b} P(x_h'=a, x_pa=b) KL(pi[b] || pi[a]) >= 0 (W Lemma 4's gap).
    tree, h, comp = [-1, 0, 1, 0, 2], 4, 3
    v, p = llr_law(PI3, tree, h, comp)
    J = pairwise_joint(PI3, tree, comp, 2)
    expected = sum(J[a, b] * f_divergence(PI3[b], PI3[a], "kl") for a in range(3) for b in range(3))
    assert -mean_z(v, p) == pytest.approx(expected, rel=1e-12)
    assert expected > 0


@given(stochastic(3, min_entry=0.1 / 3), st.integers(2, 5), st.data())
def test_rate_positive_for_full_support_pi(pi, H, data):
    parents = [-1] + [data.draw(st.integers(0, j - 1)) for j in range(1, H)]
    h = data.draw(st.integers(1, H - 1))
    comps = [c for c in range(h) if c != parents[h]]
    assume(comps)
    comp = data.draw(st.sampled_from(comps))
    v, p = llr_law(pi, parents, h, comp)
    ez = mean_z(v, p)
    assert ez <= 1e-15  # W Lemma 4 (non-strict form, every pi)
    # pi with floor has distinct rows a.s.; when E[Z] < 0 the Chernoff rate is > 0 and finite.
    res = chernoff_exponent(v, p)
    assert np.isfinite(res.rate) and res.rate >= 0
    if ez < -1e-9:
        assert res.rate > 0
        assert 0 < res.t_star <= 1 + 1e-9  # full support: minimiser inside [0, 1]
        assert res.rate <= -ez + 1e-12  # Jensen: log M(t) >= t E[Z]


def test_sibling_and_grandparent_competitors_have_equal_rates():
    # With a stationary root, M_sibling(t) = M_grandparent(1 - t), so the Chernoff rates agree.
    tree = [-1, 0, 1, 1]  # h = 2: parent 1, grandparent 0; node 3 is a sibling of 2
    rate_gp = chernoff_exponent(*llr_law(PI3, tree, 2, 0)).rate
    rate_sib = chernoff_exponent(*llr_law(PI3, tree, 3, 2)).rate
    assert rate_gp == pytest.approx(rate_sib, rel=1e-10)
    # ... but not the same law (and not the same rate with a non-stationary root).
    assert not np.allclose(llr_law(PI3, tree, 2, 0)[1][:3], llr_law(PI3, tree, 3, 2)[1][:3])
    root = [0.8, 0.1, 0.1]
    assert chernoff_exponent(*llr_law(PI3, tree, 2, 0, root=root)).rate != pytest.approx(
        chernoff_exponent(*llr_law(PI3, tree, 3, 2, root=root)).rate, rel=1e-3)


# ----------------------------------------------------------------------------- Chernoff
def test_chernoff_two_point_closed_form():
    # Z = +a w.p. q, -b w.p. 1-q: t* = log((1-q) b / (q a)) / (a + b).
    a, b, q = 1.3, 0.7, 0.2
    t = math.log((1 - q) * b / (q * a)) / (a + b)
    rate = -math.log(q * math.exp(t * a) + (1 - q) * math.exp(-t * b))
    res = chernoff_exponent([a, -b], [q, 1 - q])
    assert isinstance(res, ChernoffResult)
    assert res.t_star == pytest.approx(t, rel=1e-12)
    assert res.rate == pytest.approx(rate, rel=1e-12)
    assert res.log_mgf_min == pytest.approx(-rate, rel=1e-12)
    assert abs(res.tilted_mean) < 1e-12
    # tilted law: weights q e^{ta} : (1-q) e^{-tb}, equal first moments -> variance a b
    assert res.tilted_var == pytest.approx(a * b, rel=1e-10)


def test_chernoff_edge_cases():
    assert chernoff_exponent([1.0, -1.0], [0.5, 0.5]).rate == 0.0  # E Z = 0
    assert chernoff_exponent([2.0, -1.0], [0.5, 0.5]).rate == 0.0  # E Z > 0
    r = chernoff_exponent([-1.0, -0.5], [0.5, 0.5])
    assert r.rate == math.inf and r.t_star == math.inf
    assert pairwise_error_exact([-1.0, -0.5], [0.5, 0.5], 5) == 0.0
    # max Z = 0: P(S_L >= 0) = P(Z = 0)^L exactly and the rate is -log P(Z = 0).
    r = chernoff_exponent([-1.0, 0.0], [0.7, 0.3])
    assert r.rate == pytest.approx(-math.log(0.3)) and r.t_star == math.inf
    assert pairwise_error_exact([-1.0, 0.0], [0.7, 0.3], 7) == pytest.approx(0.3 ** 7, rel=1e-12)
    # -inf atom with a positive finite part: rate = -log P(Z finite), t* = 0.
    r = chernoff_exponent([-math.inf, 1.0, -0.5], [0.4, 0.3, 0.3])
    assert r.rate == pytest.approx(-math.log(0.6)) and r.t_star == 0.0
    # all mass at -inf
    assert chernoff_exponent([-math.inf], [1.0]).rate == math.inf
    assert pairwise_error_exact([-math.inf], [1.0], 3) == 0.0
    assert pairwise_error_exact([-math.inf], [1.0], 0) == 1.0


def test_chernoff_minimiser_beyond_one_with_zeros_in_pi():
    # With zeros in pi, E[Z e^Z] over the finite atoms can be < 0: the minimiser lies beyond t = 1.
    pi = np.array([[0.0, 0.5, 0.5], [0.0, 1.0, 0.0], [0.4, 0.0, 0.6]])
    v, p = llr_law(pi, [-1, 0, 1], 2, 0, root=[1 / 3, 1 / 3, 1 / 3])
    res = chernoff_exponent(v, p)
    t = np.linspace(0, 20, 200001)
    fin = np.isfinite(v)
    logM = np.log(np.exp(np.outer(t, v[fin])) @ p[fin])
    assert -logM.min() == pytest.approx(res.rate, abs=1e-8)
    assert t[np.argmin(logM)] == pytest.approx(res.t_star, abs=1e-3)
    assert res.t_star > 1.5
    # restricting t to [0, 1] would understate the exponent
    assert -logM[t <= 1].min() < res.rate - 0.01


@settings(max_examples=40)
@given(laws(), st.integers(1, 12))
def test_chernoff_bound_holds_for_every_L(law, L):
    v, p = law
    res = chernoff_exponent(v, p)
    P = pairwise_error_exact(v, p, L)
    assert P <= math.exp(-L * res.rate) * (1 + 1e-9) + 1e-300
    # the rate is the sup over t of -log M(t): no grid point does better
    t = np.linspace(0, 10, 2001)
    logM = np.log(np.exp(np.outer(t, v)) @ p)
    assert res.rate >= -logM.min() - 1e-9


# ----------------------------------------------------------------------------- exact error probability
@settings(max_examples=30)
@given(laws(k_max=4), st.integers(0, 5))
def test_pairwise_error_exact_matches_brute_force(law, L):
    v, p = law
    ref = brute_force_error(v, p, L) if L > 0 else 1.0
    for method in ("convolution", "multinomial", "auto"):
        assert pairwise_error_exact(v, p, L, method=method) == pytest.approx(ref, rel=1e-10, abs=1e-300)
    lg = pairwise_error_exact(v, p, L, log=True)
    assert lg == (math.log(ref) if ref > 0 else -math.inf) or lg == pytest.approx(math.log(ref), rel=1e-10)


@settings(max_examples=25)
@given(laws(k_max=4), st.lists(st.integers(0, 6), min_size=1, max_size=4))
def test_pairwise_error_exact_path_matches_the_one_L_oracle(law, Ls):
    v, p = law
    path = pairwise_error_exact_path(v, p, Ls)
    for L, lp in zip(Ls, path):
        ref = pairwise_error_exact(v, p, L, log=True)
        assert lp == ref or lp == pytest.approx(ref, rel=1e-10, abs=1e-12)


def test_pairwise_error_exact_path_gaps():
    # the law of the BMA log-odds: log P as the one-L oracle gives it, and positive gaps
    v, p = llr_law(PI2, [-1, 0, 0, 1], 3, 0)
    logP, gaps = pairwise_error_exact_path(v, p, [1, 30, 60], gap_window=5.0)
    assert np.allclose(logP, [pairwise_error_exact(v, p, L, log=True) for L in (1, 30, 60)], rtol=1e-10)
    assert gaps.shape == (3,) and np.all(gaps > 0)
    # two atoms -1 and log 4: S_2 in {-2, log 4 - 1, 2 log 4}; the gaps on [0, w] count the first point beyond w
    logP, gaps = pairwise_error_exact_path([-1.0, math.log(4)], [0.8, 0.2], [0, 1, 2], gap_window=[0.5, 10.0])
    assert gaps.shape == (3, 2) and np.allclose(gaps[0], 0.0)  # S_0 = 0
    assert np.allclose(gaps[1], math.log(4))
    assert np.allclose(gaps[2], math.log(4) + 1)  # from log 4 - 1 to 2 log 4, in both windows
    assert logP[2] == pytest.approx(math.log(2 * 0.8 * 0.2 + 0.04))
    with pytest.raises(TheoryError):
        pairwise_error_exact_path([-1.0, 1.0], [0.5, 0.5], [3], gap_window=0.0)


def test_pairwise_error_exact_with_llr_law_ties_and_inf_atoms():
    # The law from llr_law has an exact 0 atom and +-v pairs: ties must count as S >= 0.
    v, p = llr_law(PI2, [-1, 0, 0, 1], 3, 0)
    for L in range(1, 6):
        assert pairwise_error_exact(v, p, L) == pytest.approx(brute_force_error(v, p, L), rel=1e-10)
    assert pairwise_error_exact(v, p, 1) > p[v < 0].sum() * 0  # ties included
    assert pairwise_error_exact(v, p, 1) == pytest.approx(p[v >= 0].sum(), rel=1e-12)
    pi = np.array([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.5, 0.0, 0.5]])
    v, p = llr_law(pi, [-1, 0, 1, 1], 3, 2)
    assert v[0] == -math.inf
    for L in (1, 2, 3):
        assert pairwise_error_exact(v, p, L) == pytest.approx(brute_force_error(v, p, L), rel=1e-10)
    # convolution and multinomial agree at moderate L on a structured law
    v, p = llr_law(PI3, [-1, 0, 1, 0, 2], 4, 3)
    assert pairwise_error_exact(v, p, 6, method="convolution") == pytest.approx(
        pairwise_error_exact(v, p, 6, method="multinomial"), rel=1e-10)


def test_log_error_rate_converges_and_bahadur_rao_matches_at_L_100():
    # A non-lattice law (incommensurate values).
    v = np.array([-1.0, 0.3 * math.sqrt(2), 0.5 * math.sqrt(3), -0.1 * math.pi])
    p = np.array([0.4, 0.2, 0.1, 0.3])
    res = chernoff_exponent(v, p)
    slopes = []
    for L in (10, 40, 100):
        logP = pairwise_error_exact(v, p, L, log=True)
        slopes.append(-logP / L)
        if L == 100:
            br = bahadur_rao_log_error(v, p, L)
            assert abs(br - logP) / abs(logP) < 0.02  # within 2 % in log at L = 100
            assert math.exp(br) == pytest.approx(math.exp(-L * res.rate) * bahadur_rao_prefactor(v, p, L))
    # -(1/L) log P decreases towards the rate from above; the bare slope is still far off at L = 100
    assert slopes[0] > slopes[1] > slopes[2] > res.rate
    assert slopes[2] - res.rate > 0.01


def test_d2_llr_law_exact_decay_against_rate():
    v, p = llr_law(PI2, [-1, 0, 0, 1], 3, 0)
    res = chernoff_exponent(v, p)
    logP = pairwise_error_exact(v, p, 150, log=True)  # convolution: O(L^2) distinct sums
    br = bahadur_rao_log_error(v, p, 150)
    assert abs(br - logP) / abs(logP) < 0.02
    assert -logP / 150 > res.rate


def test_wrong_exponent_expected_llr_is_caught():
    # Using -E[Z] = E KL(pi_pa || pi_h') (the Stein / expected-LLR exponent) instead of the
    # Chernoff rate mispredicts the decay; the Chernoff rate with Bahadur-Rao predicts it.
    v, p = llr_law(PI2, [-1, 0, 0, 1], 3, 0)
    rate = chernoff_exponent(v, p).rate
    wrong = -mean_z(v, p)
    assert wrong > 2 * rate
    L = 150
    logP = pairwise_error_exact(v, p, L, log=True)
    prefactor = math.log(bahadur_rao_prefactor(v, p, L))
    assert abs((-L * rate + prefactor) - logP) < 0.05 * abs(logP)
    assert abs((-L * wrong + prefactor) - logP) > 0.5 * abs(logP)


# ----------------------------------------------------------------------------- MAP error
def test_map_error_exponent_and_union_bound_exact():
    tree, h = [-1, 0, 1, 1], 3  # parent 1; competitors 0 and 2
    res = map_error_exponent(PI2, tree, h)
    assert isinstance(res, MapErrorExponent)
    assert set(res.rates) == {0, 2}
    assert res.rate == min(res.rates.values()) and res.rates[res.competitor] == res.rate
    # Exact P(some competitor >= parent) by multinomial enumeration over example outcomes.
    pmf = sequence_pmf(PI2, tree)
    outcomes = list(itertools.product(range(2), repeat=4))
    w = np.array([pmf[x] for x in outcomes])
    lp = np.log(PI2)
    z = np.array([[lp[x[c], x[h]] - lp[x[1], x[h]] for c in (0, 2)] for x in outcomes])
    L = 4
    p_err = 0.0
    for cut in itertools.combinations(range(L + len(outcomes) - 1), len(outcomes) - 1):  # stars and bars
        edges = (-1,) + cut + (L + len(outcomes) - 1,)
        counts = [edges[i + 1] - edges[i] - 1 for i in range(len(outcomes))]
        s = np.array(counts) @ z
        if np.any(s >= -1e-9):
            p_err += math.factorial(L) / math.prod(math.factorial(c) for c in counts) * math.prod(
                wi ** c for wi, c in zip(w, counts))
    pair = [pairwise_error_exact(*llr_law(PI2, tree, h, c), L) for c in (0, 2)]
    assert max(pair) - 1e-12 <= p_err <= sum(pair) + 1e-12
    # h = 1 has no competitor
    r1 = map_error_exponent(PI2, tree, 1)
    assert r1.rate == math.inf and r1.competitor is None and r1.rates == {}


def test_chernoff_degenerate_laws_give_their_whole_result():
    """Every field of the result in each branch that needs no minimisation."""
    assert chernoff_exponent([-math.inf], [1.0]) == ChernoffResult(math.inf, math.inf, -math.inf, -math.inf, 0.0)
    # max Z < 0: S_L < 0 surely; the tilted mean is max Z, reached as t -> inf
    assert chernoff_exponent([-1.0, -0.5, -math.inf], [0.5, 0.3, 0.2]) == ChernoffResult(
        math.inf, math.inf, -math.inf, -0.5, 0.0)
    # max Z = 0: inf_t M(t) = P(Z = 0), approached as t -> inf, where the tilt is a point mass at 0
    r = chernoff_exponent([-1.0, 0.0], [0.7, 0.3])
    assert (r.t_star, r.tilted_mean, r.tilted_var) == (math.inf, 0.0, 0.0)
    assert r.log_mgf_min == pytest.approx(math.log(0.3), rel=1e-15) and r.rate == -r.log_mgf_min
    # E Z >= 0 on the finite atoms: t* = 0, M(0+) = P(Z finite); the tilt at 0 is the finite atoms' law,
    # here 4 and -2 with mass 1/2 each (mean 1, variance 9: the moments are on Z's own scale)
    r = chernoff_exponent([-math.inf, 4.0, -2.0], [0.4, 0.3, 0.3])
    assert r.t_star == 0.0 and r.log_mgf_min == pytest.approx(math.log(0.6), rel=1e-15)
    assert r.rate == -r.log_mgf_min
    assert r.tilted_mean == pytest.approx(1.0, rel=1e-15) and r.tilted_var == pytest.approx(9.0, rel=1e-15)


@pytest.mark.parametrize("a, b, q", [(1.3, 0.7, 0.2), (0.01, 2.0, 0.3), (5.0, 0.1, 0.001), (1.0, 1.0, 0.49)])
def test_chernoff_minimiser_to_its_stated_precision(a, b, q):
    """brentq runs to xtol 1e-14 on the unit scale: t* agrees with the closed form to 1e-13 relative,
    including minimisers beyond 1 (found by doubling the bracket)."""
    t = math.log((1 - q) * b / (q * a)) / (a + b)
    res = chernoff_exponent([a, -b], [q, 1 - q])
    assert res.t_star == pytest.approx(t, rel=1e-13)
    assert res.rate == pytest.approx(-math.log(q * math.exp(t * a) + (1 - q) * math.exp(-t * b)), rel=1e-13)


@settings(max_examples=60, deadline=None)
@given(laws(), st.integers(-300, 300))
def test_chernoff_rate_does_not_change_when_z_is_rescaled(law, exponent):
    """I(cZ) = I(Z) and t*(cZ) = t*(Z) / c for c > 0: a law on the scale 1e-300 is no harder than one on 1
    (the bracket used to give up at t = 1e12, i.e. on every law below the scale ~1e-12)."""
    v, p = law
    c = 10.0 ** exponent
    base, scaled = chernoff_exponent(v, p), chernoff_exponent(v * c, p)
    assert scaled.rate == pytest.approx(base.rate, rel=1e-12, abs=1e-15)
    if 0 < base.t_star < math.inf:
        assert scaled.t_star * c == pytest.approx(base.t_star, rel=1e-12)
        assert scaled.tilted_mean / c == pytest.approx(0.0, abs=1e-12 * np.abs(v).max())


def test_chernoff_with_max_z_below_the_resolution_of_its_scale_is_refused():
    with pytest.raises(TheoryError, match=r"max Z = 4.94e-324 is below the float64 resolution of the law's scale "
                                          r"max \|Z\| = 1e\+308; the law is degenerate"):
        chernoff_exponent([5e-324, -1e308], [0.4, 0.6])


def test_llr_law_of_a_competitor_that_always_differs_from_the_parent_is_all_minus_infinity():
    """A period-2 chain: the grandparent never equals the parent, and pi(x_gp, x_h) = 0, so Z = -inf surely
    (the merge's scale has no finite value to read)."""
    v, p = llr_law([[0.0, 1.0], [1.0, 0.0]], [-1, 0, 1], 2, 0)
    assert v.tolist() == [-math.inf] and p.tolist() == [1.0]


def test_llr_law_with_zeros_in_pi_warns_of_nothing():
    """log 0 and -inf - -inf occur on atoms of mass 0; neither may leak a RuntimeWarning to the caller."""
    import warnings

    pi = np.array([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.5, 0.0, 0.5]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        v, p = llr_law(pi, [-1, 0, 1], 2, 0)
    assert v[0] == -math.inf and p.sum() == pytest.approx(1.0, abs=1e-15)


@pytest.mark.parametrize("x, delta, merged", [(0.4, 1.5e-12, False), (0.4, 0.5e-12, True),
                                              (0.9933, 3e-12, True), (0.9933, 8e-12, False)])
def test_llr_law_merges_values_within_its_relative_tolerance_only(x, delta, merged):
    """Values closer than 1e-12 * max(1, max |Z|) are one atom; values further apart stay two.

    Two states, h' the grandparent: the atoms are 0 and +-g0, +-g1 with g_c = log pi[0, c] - log pi[1, c].
    Rows [x, 1 - x] and [1 - x + e, x - e] make g1 = -g0 + delta: five atoms, or three when delta is
    within the tolerance. |Z| is about 0.4 for x = 0.4 (tolerance 1e-12) and 5 for x = 0.9933 (5e-12)."""
    e = delta / abs(1 / x - 1 / (1 - x))
    pi = np.array([[x, 1 - x], [1 - x + e, x - e]])
    g0, g1 = math.log(pi[0, 0]) - math.log(pi[1, 0]), math.log(pi[0, 1]) - math.log(pi[1, 1])
    tol = 1e-12 * max(1.0, abs(g0), abs(g1))
    assert (abs(g0 + g1) < tol / 1.4) if merged else (abs(g0 + g1) > 1.4 * tol)  # clear of the tolerance
    v, p = llr_law(pi, [-1, 0, 1], 2, 0)
    assert len(v) == (3 if merged else 5)
    assert p.sum() == pytest.approx(1.0, abs=1e-15)


# ----------------------------------------------------------------------------- bad input
def test_bad_positions_rejected():
    tree = [-1, 0, 0, 1]
    with pytest.raises(TheoryError, match="h = 0 is a root"):
        llr_law(PI2, tree, 0, 0)
    with pytest.raises(TheoryError, match="competitor 1 is the true parent of h = 3"):
        llr_law(PI2, tree, 3, 1)
    with pytest.raises(TheoryError, match=r"competitor 3 must come before h = 3 \(candidates are 0..2\)"):
        llr_law(PI2, tree, 3, 3)
    with pytest.raises(TheoryError, match="h 7 is out of range"):
        llr_law(PI2, tree, 7, 0)
    with pytest.raises(TheoryError, match=r"^competitor 9 is out of range for a tree with 4 nodes \(0..3\)$"):
        llr_law(PI2, tree, 3, 9)
    with pytest.raises(TheoryError, match="forest|root"):
        map_error_exponent(PI2, [-1, -1, 0], 1)
    with pytest.raises(TheoryError, match="row 0 sums to"):
        llr_law([[0.5, 0.4], [0.5, 0.5]], tree, 3, 0)


def test_bad_laws_rejected():
    with pytest.raises(TheoryError, match=r"values\[1\] = inf is not allowed"):
        chernoff_exponent([0.0, math.inf], [0.5, 0.5])
    with pytest.raises(TheoryError, match=r"values\[0\] = nan"):
        chernoff_exponent([math.nan, 1.0], [0.5, 0.5])
    with pytest.raises(TheoryError, match="probs sums to 0.9"):
        pairwise_error_exact([1.0, -1.0], [0.5, 0.4], 3)
    with pytest.raises(TheoryError, match=r"probs\[0\] = -0.1"):
        chernoff_exponent([1.0, -1.0], [-0.1, 1.1])
    with pytest.raises(TheoryError, match="one length"):
        chernoff_exponent([1.0, -1.0, 0.0], [0.5, 0.5])
    with pytest.raises(TheoryError, match="L must be an integer >= 0"):
        pairwise_error_exact([1.0, -1.0], [0.5, 0.5], -1)
    with pytest.raises(TheoryError, match="L must be an integer"):
        pairwise_error_exact([1.0, -1.0], [0.5, 0.5], True)
    with pytest.raises(TheoryError, match="unknown method"):
        pairwise_error_exact([1.0, -1.0], [0.5, 0.5], 3, method="fft")
    with pytest.raises(TheoryError, match="MAX_COMPOSITIONS"):
        pairwise_error_exact(np.linspace(-1, 0.5, 19), np.full(19, 1 / 19), 60, method="multinomial")
    with pytest.raises(TheoryError, match=r"t\* = 0"):
        bahadur_rao_prefactor([1.0, -0.5], [0.5, 0.5], 10)
    with pytest.raises(TheoryError, match=r"t\* = inf"):
        bahadur_rao_log_error([-1.0, 0.0], [0.5, 0.5], 10)
    with pytest.raises(TheoryError, match="L must be an integer >= 1"):
        bahadur_rao_prefactor([1.0, -2.0], [0.3, 0.7], 0)


# -- second, independent checks: known values and identities ------------------------------------------
def _symmetric_two_point(q):
    """Z = +1 w.p. q, -1 w.p. 1 - q (q < 1/2): t* = log((1-q)/q)/2, the tilted law is uniform on
    {-1, +1} (sigma* = 1) and the rate is -log(2 sqrt(q (1 - q)))."""
    return [1.0, -1.0], [q, 1 - q]


@pytest.mark.parametrize("q", [0.1, 0.3, 0.45])
def test_chernoff_minimiser_symmetric_two_point_known_value(q):
    res = chernoff_exponent(*_symmetric_two_point(q))
    assert res.t_star == pytest.approx(0.5 * math.log((1 - q) / q), rel=1e-12)
    assert res.rate == pytest.approx(-math.log(2 * math.sqrt(q * (1 - q))), rel=1e-12)
    assert res.tilted_var == pytest.approx(1.0, rel=1e-12) and abs(res.tilted_mean) < 1e-12


@pytest.mark.parametrize("seed", range(4))
def test_chernoff_minimiser_is_the_bounded_scalar_minimum_of_the_log_mgf(seed):
    """Identity: rate = -min_{t >= 0} log E e^{tZ}, checked against scipy's bounded scalar minimiser on
    a random law with E Z < 0 < max Z; t* is where the log-mgf is smallest."""
    from scipy.optimize import minimize_scalar

    rng = np.random.default_rng(seed)
    v = rng.normal(-0.5, 1.0, size=6)
    v[0] = abs(v[0]) + 0.1  # some positive atom
    p = rng.dirichlet(np.ones(6))
    if p @ v >= 0:
        v -= (p @ v) + 0.2  # make E Z < 0 while keeping max Z > 0
    assert v.max() > 0 > p @ v
    res = chernoff_exponent(v, p)
    log_mgf = lambda t: math.log(float(p @ np.exp(t * v)))
    opt = minimize_scalar(log_mgf, bounds=(0.0, 50.0), method="bounded", options={"xatol": 1e-12})
    assert res.rate == pytest.approx(-opt.fun, rel=1e-9)
    assert res.t_star == pytest.approx(opt.x, rel=1e-5)
    assert res.log_mgf_min == pytest.approx(log_mgf(res.t_star), rel=1e-12)
    assert log_mgf(res.t_star * 0.99) > res.log_mgf_min and log_mgf(res.t_star * 1.01) > res.log_mgf_min


def test_bahadur_rao_prefactor_known_value_and_one_over_sqrt_L():
    """For the symmetric two-point law the prefactor is 1 / (t* sqrt(2 pi L)); quadrupling L halves it,
    and the log error is -L I + log(prefactor) at the same L."""
    q = 0.2
    v, p = _symmetric_two_point(q)
    t_star, rate = 0.5 * math.log((1 - q) / q), -math.log(2 * math.sqrt(q * (1 - q)))
    for L in (1, 7, 40):
        assert bahadur_rao_prefactor(v, p, L) == pytest.approx(1 / (t_star * math.sqrt(2 * math.pi * L)), rel=1e-12)
        assert bahadur_rao_prefactor(v, p, 4 * L) == pytest.approx(bahadur_rao_prefactor(v, p, L) / 2, rel=1e-12)
        assert bahadur_rao_log_error(v, p, L) == pytest.approx(
            -L * rate + math.log(bahadur_rao_prefactor(v, p, L)), rel=1e-12)
    for approximation in (bahadur_rao_prefactor, bahadur_rao_log_error):
        with pytest.raises(TheoryError, match=r"L must be an integer >= 1 \(number of context examples\), got 0"):
            approximation(v, p, 0)


@pytest.mark.parametrize("h, comp", [(2, 0), (3, 0), (3, 2)])
def test_llr_law_is_oriented_competitor_over_parent(h, comp):
    """Z = log pi(x_h | x_comp) - log pi(x_h | x_pa): x_h is independent of an earlier non-parent given
    its parent, so E e^Z = 1 exactly, while the reversed ratio has E e^{-Z} > 1 (Jensen); and
    E Z = E log pi(x_h | x_comp) - E log pi(x_h | x_pa) (W Lemma 4's scores, computed elsewhere)."""
    from theory.bma import expected_loglik

    pi = np.array([[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.1, 0.2, 0.7]])
    parents = [-1, 0, 1, 1]
    v, p = llr_law(pi, parents, h, comp)
    assert float(p @ np.exp(v)) == pytest.approx(1.0, abs=1e-12)
    assert float(p @ np.exp(-v)) > 1.0 + 1e-3
    assert float(p @ v) == pytest.approx(
        expected_loglik(pi, parents, comp, h) - expected_loglik(pi, parents, parents[h], h), abs=1e-12)


# --------------------------------------------------- pairwise_error_exact_path, path by path
def test_exact_path_at_no_l_at_l_zero_and_in_any_order():
    assert pairwise_error_exact_path([-1.0, 2.0], [0.5, 0.5], []).shape == (0,)
    logP = pairwise_error_exact_path([-1.0, 2.0], [0.5, 0.5], [2, 0, 1, 2])
    assert logP.tolist() == pytest.approx([math.log(0.75), 0.0, math.log(0.5), math.log(0.75)])
    with pytest.raises(TheoryError, match=r"L must be an integer >= 0 \(number of context examples\), got -1"):
        pairwise_error_exact_path([-1.0, 2.0], [0.5, 0.5], [1, -1])


def test_exact_path_of_a_law_with_no_finite_value():
    """Z = -inf surely: S_0 = 0 (log P = 0, gap 0), every L >= 1 has P = 0 and the whole window as its gap."""
    logP, gaps = pairwise_error_exact_path([-math.inf], [1.0], [0, 1, 3], gap_window=[0.5, 2.0])
    assert logP.tolist() == [0.0, -math.inf, -math.inf]
    assert gaps.dtype == np.float64 and gaps.tolist() == [[0.0, 0.0], [0.5, 2.0], [0.5, 2.0]]


def test_exact_path_gaps_reach_exactly_the_first_point_beyond_the_window():
    """S_1 in {-1, 1, 3, 10}: the window [0, 1] holds 1; the first point beyond it is 3 (gap 2), not 10;
    a window ending exactly on a support point (w = 3) also takes the next one (10: gap 7)."""
    v, p = [-1.0, 1.0, 3.0, 10.0], [0.25] * 4
    _, gaps = pairwise_error_exact_path(v, p, [1], gap_window=[1.0, 3.0, 20.0])
    assert gaps.tolist() == [[2.0, 7.0, 7.0]]
    _, gaps = pairwise_error_exact_path(v, p, [1], gap_window=0.5)
    assert gaps.dtype == np.float64 and gaps.tolist() == [1.0]  # none in [0, 0.5]: 0 to the first beyond, 1


def test_exact_path_ties_count_within_their_scaled_tolerance():
    """S_4 = 3 (1e3 - 1e-6) - 3e3 = -3e-6 is a tie at the scale max|Z| = 3e3 (tolerance 1e-9 * 4 * 3e3
    = 1.2e-5, the rule pairwise_error_exact states), so P(S_4 >= 0) = 4 p^3 q + p^4."""
    p = 0.4
    v, probs = [-3e3, 1e3 - 1e-6], [1 - p, p]
    want = math.log(4 * p ** 3 * (1 - p) + p ** 4)
    assert pairwise_error_exact_path(v, probs, [4])[0] == pytest.approx(want, rel=1e-12)
    assert pairwise_error_exact(v, probs, 4, log=True) == pytest.approx(want, rel=1e-12)
    # beyond the tolerance (an offset of 1e-5 per atom: S_4 = -3e-5) the tie is gone
    assert pairwise_error_exact_path([-3e3, 1e3 - 1e-5], probs, [4])[0] == pytest.approx(math.log(p ** 4), rel=1e-12)


def test_exact_path_log_probability_never_exceeds_zero_and_warns_of_nothing():
    import warnings

    rng = np.random.default_rng(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(50):
            probs = rng.dirichlet(np.ones(7))
            logP = pairwise_error_exact_path(rng.uniform(0.0, 1.0, 7), probs, [1, 2, 5])  # all mass >= 0
            assert np.all(logP <= 0.0) and np.allclose(logP, 0.0, atol=1e-14)
        assert pairwise_error_exact_path([-1.0, -2.0], [0.5, 0.5], [1, 4]).tolist() == [-math.inf, -math.inf]


@pytest.mark.parametrize("window", [[], [[1.0]], -1.0, [1.0, math.inf], [math.nan]])
def test_exact_path_refuses_a_window_that_is_not_positive_numbers(window):
    with pytest.raises(TheoryError, match=r"^gap_window must be finite numbers > 0, got "):
        pairwise_error_exact_path([-1.0, 1.0], [0.5, 0.5], [1], gap_window=window)


def test_multinomial_limit_is_exactly_max_compositions(monkeypatch):
    """k = 3 atoms, L = 5: C(L+k-1, k-1) = C(7, 2) = 21 count vectors: at the limit 21 the sum is
    taken (and equals the convolution's), one below it is refused with the count in the message."""
    import theory.largedev as ld

    v, p = [-1.0, 0.5, 2.0], [0.5, 0.3, 0.2]
    monkeypatch.setattr(ld, "MAX_COMPOSITIONS", 21)
    assert pairwise_error_exact(v, p, 5, method="multinomial") == pytest.approx(
        pairwise_error_exact(v, p, 5, method="convolution"), rel=1e-12)
    monkeypatch.setattr(ld, "MAX_COMPOSITIONS", 20)
    with pytest.raises(TheoryError, match=r"^the multinomial sum has C\(L\+k-1, k-1\) = C\(7, 2\) = 21 count vectors, "
                                          r"above MAX_COMPOSITIONS = 20; use method='convolution' or a smaller L$"):
        pairwise_error_exact(v, p, 5, method="multinomial")


def test_map_error_exponent_uses_the_root_law_it_is_given_and_names_h():
    """With the root law given, every competitor's LLR law (and so its rate) is the one llr_law gives
    under that root law; it differs from the stationary default here."""
    tree, h = [-1, 0, 1, 1], 3
    root = np.array([0.9, 0.1])
    res = map_error_exponent(PI2, tree, h, root=root)
    for c in (0, 2):
        assert res.rates[c] == chernoff_exponent(*llr_law(PI2, tree, h, c, root=root)).rate
    assert res.rates[0] != pytest.approx(map_error_exponent(PI2, tree, h).rates[0], rel=1e-6)
    with pytest.raises(TheoryError, match=r"^h 4 is out of range for a tree with 4 nodes \(0\.\.3\)$"):
        map_error_exponent(PI2, tree, 4)
    with pytest.raises(TheoryError, match=r"^position h = 0 is a root: it has no parent to identify$"):
        map_error_exponent(PI2, tree, 0)


def test_bahadur_rao_names_why_the_chernoff_point_is_not_interior():
    import re

    head = "Bahadur-Rao needs an interior Chernoff point 0 < t* < inf; here "
    for law, why in ((([-1.0, 2.0], [0.5, 0.5]), "E[Z] >= 0 on the finite atoms (t* = 0): P(S_L >= 0) does not "
                                                 "decay like exp(-L I)/sqrt(L)"),
                     (([-1.0, 0.0], [0.5, 0.5]), "max Z <= 0 (t* = inf): P(S_L >= 0) is P(Z = 0)^L or 0 exactly")):
        for f in (bahadur_rao_prefactor, bahadur_rao_log_error):
            with pytest.raises(TheoryError, match="^" + re.escape(head + why) + "$"):
                f(*law, 10)


@pytest.mark.parametrize("method", ["multinomial", "convolution", "path"])
def test_a_sum_exactly_at_the_tie_threshold_counts_as_a_tie(method):
    """The tie rule is ``S >= -1e-9 L max|Z|``, boundary included: Z in {1, -1e-9} (max |Z| = 1, L = 1)
    puts S_1 = -1e-9 exactly on the threshold, so P(S_1 >= 0) = 1; at -1.5e-9 it is P(Z = 1)."""
    def logP(v):
        if method == "path":
            return pairwise_error_exact_path(v, [0.25, 0.75], [1])[0]
        return pairwise_error_exact(v, [0.25, 0.75], 1, method=method, log=True)

    assert logP([1.0, -1e-9]) == 0.0
    assert logP([1.0, -1.5e-9]) == pytest.approx(math.log(0.25), rel=1e-15)


@pytest.mark.parametrize("scale", [1e-6, 1.0, 1e6])
def test_convolution_merges_round_off_duplicates_at_every_scale(scale):
    """The law of S_3 for Z in scale * {0.1, 0.2, 0.3, 0.7} has one atom per distinct integer sum of
    three of {1, 2, 3, 7} (in tenths): sums equal up to round-off are merged (within 1e-11 * max|Z|)
    and sums 0.1 * scale apart are not, at every scale."""
    from theory.largedev import _convolution_steps

    tenths = [1, 2, 3, 7]
    want = {a + b + c for a in tenths for b in tenths for c in tenths}
    v = scale * np.array([0.1, 0.2, 0.3, 0.7])
    *_, (n, vals, logp) = _convolution_steps(v, np.log(np.full(4, 0.25)), 3, float(np.abs(v).max()))
    assert n == 3 and vals.size == len(want)
    assert np.allclose(vals / scale * 10, sorted(want), rtol=0, atol=1e-9)
    assert math.isclose(float(np.exp(logp).sum()), 1.0, rel_tol=1e-12)


def test_convolution_atom_limit_is_exactly_max_atoms(monkeypatch):
    """Z in {0, 1} takes n + 1 values at step n: at MAX_ATOMS = 4, S_3 (4 values) is allowed and S_4 is
    refused with the count and L in the message."""
    import re

    import theory.largedev as ld

    monkeypatch.setattr(ld, "MAX_ATOMS", 4)
    assert pairwise_error_exact([0.0, 1.0], [0.5, 0.5], 3, method="convolution") == 1.0
    with pytest.raises(TheoryError, match="^" + re.escape("the law of S_n has 5 distinct values, above MAX_ATOMS = 4; "
                                                          "the values of Z are too unstructured for L = 4: use a "
                                                          "smaller L") + "$"):
        pairwise_error_exact([0.0, 1.0], [0.5, 0.5], 4, method="convolution")


def test_exact_path_reads_a_window_given_as_text_or_integers():
    _, gaps = pairwise_error_exact_path([-1.0, 1.0], [0.5, 0.5], [2], gap_window=3)
    assert gaps.dtype == np.float64 and gaps.tolist() == [2.0]
    with pytest.raises(TheoryError, match=r"^gap_window could not be read as an array of numbers: "):
        pairwise_error_exact_path([-1.0, 1.0], [0.5, 0.5], [1], gap_window="wide")


def test_merge_sorted_merges_values_at_most_tol_apart_and_minus_infinities():
    from theory.largedev import _merge_sorted

    lp = np.log([0.1, 0.1, 0.2, 0.25, 0.35])
    vals, logp = _merge_sorted(np.array([-np.inf, -np.inf, 0.0, 1e-12, 3e-12]), lp, 1e-12)
    assert vals.tolist() == [-np.inf, 0.0, 3e-12]  # 1e-12 - 0 = tol exactly: merged; 2e-12 apart: not
    assert np.allclose(np.exp(logp), [0.2, 0.45, 0.35], rtol=1e-14, atol=0)
    empty, empty_lp = _merge_sorted(np.zeros(0), np.zeros(0), 1e-12)
    assert empty.size == 0 and empty_lp.size == 0


def test_validate_law_messages_zero_atoms_and_normalisation():
    import re

    from theory.markov import ROW_SUM_ATOL

    shape = "values and probs must be non-empty 1-d arrays of one length, got shapes "
    for v, p, shapes in (([[1.0, -1.0]], [[0.5, 0.5]], "(1, 2) and (1, 2)"), ([], [], "(0,) and (0,)"),
                         ([1.0, -1.0], [[0.5, 0.5]], "(2,) and (1, 2)")):
        with pytest.raises(TheoryError, match="^" + re.escape(shape + shapes) + "$"):
            chernoff_exponent(v, p)
    with pytest.raises(TheoryError, match="^" + re.escape("probs sums to 0.9 (off by -0.1); a law must sum to 1") + "$"):
        chernoff_exponent([1.0, -1.0], [0.5, 0.4])
    # an atom of probability 0 is dropped: Z = 2 never happens, so S_L >= 0 is impossible
    assert chernoff_exponent([-1.0, 2.0], [1.0, 0.0]).rate == math.inf
    assert pairwise_error_exact([-1.0, 2.0], [1.0, 0.0], 3) == 0.0
    # probabilities within ROW_SUM_ATOL of summing to 1 are normalised, not used as given
    eps = ROW_SUM_ATOL / 4
    assert pairwise_error_exact([1.0, -1.0], [0.5 + eps, 0.5 + eps], 1) == pytest.approx(0.5, rel=1e-15)


def test_auto_method_takes_the_multinomial_sum_up_to_max_compositions_only(monkeypatch):
    """k = 3 atoms, L = 3: C(5, 2) = 10 count vectors and 10 distinct sums. With MAX_ATOMS = 5 the
    convolution refuses, so "auto" must take the multinomial sum while 10 <= MAX_COMPOSITIONS; at
    MAX_COMPOSITIONS = 9 it must take the convolution (and the multinomial sum refuses)."""
    import theory.largedev as ld

    v, p = [-1.0, 0.3, 0.7], [0.5, 0.3, 0.2]
    want = pairwise_error_exact(v, p, 3, method="multinomial")
    monkeypatch.setattr(ld, "MAX_ATOMS", 5)
    with pytest.raises(TheoryError, match="distinct values, above MAX_ATOMS = 5"):
        pairwise_error_exact(v, p, 3, method="convolution")
    monkeypatch.setattr(ld, "MAX_COMPOSITIONS", 10)
    assert pairwise_error_exact(v, p, 3) == want
    monkeypatch.setattr(ld, "MAX_ATOMS", 10)
    monkeypatch.setattr(ld, "MAX_COMPOSITIONS", 9)
    with pytest.raises(TheoryError, match="above MAX_COMPOSITIONS = 9"):
        pairwise_error_exact(v, p, 3, method="multinomial")
    assert pairwise_error_exact(v, p, 3) == pytest.approx(want, rel=1e-13)


def test_exact_probability_is_clipped_to_one_against_round_off():
    """A law with all its mass at Z >= 0 has P(S_L >= 0) = 1; summed by convolution, this one comes
    out as log P = +2.2e-16, which is clipped to 0."""
    rng = np.random.default_rng(3)
    for _ in range(2):  # the second draw of this stream is the law found by a search
        p, v = rng.dirichlet(np.ones(7)), rng.uniform(0, 1, 7)
    assert pairwise_error_exact(v, p, 2, method="convolution", log=True) == 0.0
    assert pairwise_error_exact(v, p, 2, method="convolution") == 1.0


@pytest.mark.parametrize("method", ["convolution", "multinomial"])
def test_merged_sums_whose_probabilities_are_1e400_apart_add_without_overflow(method):
    """Atoms -1, +1 (mass ~1/2 each) and 0 (mass 1e-200). At L = 2 the sum 0 is reached by (-1, +1),
    mass 1/2, and by (0, 0), mass 1e-400: merging them adds log-probabilities ~921 apart, which
    log-sum-exp must shift by the larger. By hand P(S_2 >= 0) = P(+1, +1) + P(-1, +1) + P(+1, -1) + O(1e-200)
    = 1/4 + 1/2 = 3/4."""
    v, p = [-1.0, 0.0, 1.0], [0.5, 1e-200, 0.5]
    assert pairwise_error_exact(v, p, 2, method=method) == pytest.approx(0.75, rel=1e-12)
    # The merge in llr_law itself: two atoms of one value, masses 1 and 1e-320 (shift by the max).
    from theory.largedev import _merge_sorted

    vals, logp = _merge_sorted(np.array([0.0, 0.0]), np.array([0.0, -740.0]), 1e-12)
    assert vals.tolist() == [0.0] and logp[0] == pytest.approx(0.0, abs=1e-300)
