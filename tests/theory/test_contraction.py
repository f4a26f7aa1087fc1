"""Tests for theory.contraction: Dobrushin, eta_chi2, eta_KL bracket (W Lemma 3)."""
import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

from theory.contraction import EtaKL, contraction_report, dobrushin, eta_chi2, eta_kl
from theory.errors import TheoryError
from theory.information import f_divergence

# A generic 3-state channel and input, shared by the tests that need one fixed case.
K3 = np.array([[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.1, 0.1, 0.8]])
P3 = np.array([0.5, 0.3, 0.2])


# ----------------------------------------------------------------------------- strategies
def prob_vectors(n, min_entry=0.0, allow_zero=False):
    """Probability vectors of length n; with allow_zero some entries may be exactly 0."""
    weights = st.lists(st.floats(0.0 if allow_zero else 0.01, 1.0), min_size=n, max_size=n)

    def norm(w):
        w = np.array(w)
        if w.sum() <= 0:
            w = np.ones(n)
        v = w / w.sum()
        return (1 - n * min_entry) * v + min_entry
    return weights.map(norm)


@st.composite
def channels(draw, n_in=None, n_out=None, min_entry=0.0, allow_zero=True):
    n_in = n_in or draw(st.integers(2, 4))
    n_out = n_out or draw(st.integers(2, 4))
    rows = [draw(prob_vectors(n_out, min_entry=min_entry, allow_zero=allow_zero)) for _ in range(n_in)]
    return np.array(rows)


@st.composite
def channel_and_input(draw, max_d=3, allow_zero=True):
    n_in = draw(st.integers(2, max_d))
    n_out = draw(st.integers(2, max_d))
    K = draw(channels(n_in, n_out, allow_zero=allow_zero))
    p = draw(prob_vectors(n_in, allow_zero=allow_zero))
    return K, p


def bsc(e):
    return np.array([[1 - e, e], [e, 1 - e]])


def kl_ratio(K, p, q):
    return f_divergence(q @ K, p @ K, "kl") / f_divergence(q, p, "kl")


# ----------------------------------------------------------------------------- known values
@pytest.mark.parametrize("e", [0.0, 0.05, 0.2, 0.37, 0.5, 0.8])
def test_bsc_uniform_input_known_values(e):
    K, p = bsc(e), np.array([0.5, 0.5])
    assert dobrushin(K) == pytest.approx(abs(1 - 2 * e), abs=1e-15)
    assert eta_chi2(K, p) == pytest.approx((1 - 2 * e) ** 2, abs=1e-12)
    res = eta_kl(K, p)
    assert isinstance(res, EtaKL)
    # eta_KL(BSC(e), uniform) = (1 - 2e)^2 exactly: the search must not find anything larger.
    assert res.lower == pytest.approx((1 - 2 * e) ** 2, abs=1e-9)
    assert res.estimate == res.lower
    assert res.upper == pytest.approx(abs(1 - 2 * e), abs=1e-15)


def test_identity_and_constant_channels():
    p = np.array([0.2, 0.3, 0.5])
    I = np.eye(3)
    assert dobrushin(I) == 1.0
    assert eta_chi2(I, p) == pytest.approx(1.0, abs=1e-12)
    r = eta_kl(I, p)
    assert r.lower == pytest.approx(1.0, abs=1e-12) and r.upper == 1.0
    C = np.tile([0.1, 0.6, 0.3], (3, 1))
    assert dobrushin(C) == 0.0
    assert eta_chi2(C, p) == pytest.approx(0.0, abs=1e-14)
    r = eta_kl(C, p)
    assert r.lower == pytest.approx(0.0, abs=1e-14) and r.upper == 0.0


def test_binary_erasure_channel_rectangular():
    eps = 0.3
    K = np.array([[1 - eps, eps, 0.0], [0.0, eps, 1 - eps]])
    p = np.array([0.35, 0.65])
    assert dobrushin(K) == pytest.approx(1 - eps)
    assert eta_chi2(K, p) == pytest.approx(1 - eps, abs=1e-12)
    r = eta_kl(K, p)  # eta_KL(BEC) = 1 - eps for every input
    assert r.lower == pytest.approx(1 - eps, abs=1e-9) and r.upper == pytest.approx(1 - eps)


def test_dobrushin_by_hand():
    K = np.array([[0.5, 0.5, 0.0], [0.1, 0.2, 0.7], [0.3, 0.3, 0.4]])
    # TV(0,1) = (0.4 + 0.3 + 0.7)/2 = 0.7; TV(0,2) = (0.2+0.2+0.4)/2 = 0.4; TV(1,2) = (0.2+0.1+0.3)/2 = 0.3
    assert dobrushin(K) == pytest.approx(0.7, abs=1e-15)
    assert dobrushin([[0.2, 0.8]]) == 0.0  # one row


def test_eta_chi2_by_hand_binary():
    # For a 2x2 channel, eta_chi2 = lambda^2 * px0 px1 / (py0 py1) with lambda = 1 - a - b.
    a, b, p1 = 0.1, 0.3, 0.25
    K = np.array([[1 - a, a], [b, 1 - b]])
    p = np.array([1 - p1, p1])
    py = p @ K
    assert eta_chi2(K, p) == pytest.approx((1 - a - b) ** 2 * p[0] * p[1] / (py[0] * py[1]), rel=1e-12)


def test_asymmetric_input_eta_kl_exceeds_eta_chi2_and_matches_grid():
    K, p = bsc(0.1), np.array([0.2, 0.8])
    r = eta_kl(K, p)
    ts = np.linspace(0.0, 1.0, 200001)
    ts = ts[np.abs(ts - 0.2) > 1e-6]
    Q = np.stack([ts, 1 - ts], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):  # vectorised KL with 0 log 0 = 0
        kl_in = np.nansum(Q * np.log(Q / p), axis=1)
        QK = Q @ K
        kl_out = np.nansum(QK * np.log(QK / (p @ K)), axis=1)
    best = float(np.max(kl_out / kl_in))
    assert best == pytest.approx(kl_ratio(K, p, Q[np.argmax(kl_out / kl_in)]), rel=1e-9)
    assert r.lower >= best - 1e-9  # the search finds at least the best grid point
    assert r.lower <= best + 1e-6  # and nothing beyond what the fine grid sees
    assert r.lower > eta_chi2(K, p) + 0.05  # strict gap: eta_KL != eta_chi2 here


def test_point_mass_input_and_zero_rows():
    K = np.array([[0.5, 0.5], [0.0, 1.0], [1.0, 0.0]])
    r = eta_kl(K, [0.0, 1.0, 0.0])
    assert (r.estimate, r.lower, r.upper) == (0.0, 0.0, 0.0)
    assert eta_chi2(K, [0.0, 1.0, 0.0]) == 0.0
    # Support {1, 2}: rows disjoint, so every coefficient is 1 there.
    r = eta_kl(K, [0.0, 0.4, 0.6])
    assert r.upper == 1.0 and r.lower == pytest.approx(1.0, abs=1e-9)
    assert eta_chi2(K, [0.0, 0.4, 0.6]) == pytest.approx(1.0, abs=1e-12)


def test_deterministic_given_seed_and_report_keys():
    K, p = K3, P3
    assert eta_kl(K, p, seed=3) == eta_kl(K, p, seed=3)
    rep = contraction_report(K, p)
    assert set(rep) == {"dobrushin", "eta_chi2", "eta_kl_lower", "eta_kl_upper", "eta_kl_estimate"}
    assert rep["eta_chi2"] <= rep["eta_kl_lower"] <= rep["eta_kl_upper"] <= rep["dobrushin"]
    assert "BFGS" in eta_kl(K, p).method


# ----------------------------------------------------------------------------- properties
@settings(max_examples=30)
@given(channel_and_input())
def test_bracket_and_upper_is_dobrushin_on_support(kp):
    K, p = kp
    r = eta_kl(K, p, restarts=4)
    c2 = eta_chi2(K, p)
    for x in (r.estimate, r.lower, r.upper, c2):
        assert np.isfinite(x)
    assert c2 <= r.lower + 1e-12
    assert r.lower <= r.upper + 1e-9
    S = p > 0
    assert r.upper == (dobrushin(K[S]) if S.sum() > 1 else 0.0)
    assert r.upper <= dobrushin(K) + 1e-15


@settings(max_examples=25)
@given(channel_and_input(allow_zero=False), st.lists(st.floats(0.0, 1.0), min_size=4, max_size=4))
def test_strong_dpi_holds_numerically(kp, qw):
    K, p = kp
    q = np.array(qw[:len(p)]) + 1e-3
    q /= q.sum()
    den_kl = f_divergence(q, p, "kl")
    den_chi = f_divergence(q, p, "chi2")
    r = eta_kl(K, p, restarts=4)
    c2 = eta_chi2(K, p)
    if den_kl > 1e-12:
        # SDPI with the guaranteed upper bound, and the searched lower bound beats this q.
        assert f_divergence(q @ K, p @ K, "kl") <= r.upper * den_kl * (1 + 1e-9) + 1e-15
        assert kl_ratio(K, p, q) <= r.lower + 1e-7
    # chi2 contraction: eta_chi2 is the exact sup of the chi2 ratio, and eta_chi2 <= dobrushin.
    assert f_divergence(q @ K, p @ K, "chi2") <= c2 * den_chi * (1 + 1e-9) + 1e-15
    assert f_divergence(q @ K, p @ K, "chi2") <= dobrushin(K) * den_chi * (1 + 1e-9) + 1e-15


@given(channels(), st.data())
def test_dobrushin_submultiplicative_and_tv_contraction(K1, data):
    K2 = data.draw(channels(n_in=K1.shape[1]))
    assert dobrushin(K1 @ K2) <= dobrushin(K1) * dobrushin(K2) + 1e-12
    p = data.draw(prob_vectors(K1.shape[0], allow_zero=True))
    q = data.draw(prob_vectors(K1.shape[0], allow_zero=True))
    assert f_divergence(q @ K1, p @ K1, "tv") <= dobrushin(K1) * f_divergence(q, p, "tv") + 1e-12


@given(channel_and_input())
def test_eta_chi2_is_sup_of_chi2_ratio_along_its_direction(kp):
    # The top non-trivial singular direction attains eta_chi2 (a q at which chi2 ratio = eta_chi2).
    K, p = kp
    S = np.flatnonzero(p > 0)
    if S.size < 2:
        return
    r = p @ K
    T = r > 0
    B = np.sqrt(p[S])[:, None] * K[np.ix_(S, np.flatnonzero(T))] / np.sqrt(r[T])
    B = B - np.outer(np.sqrt(p[S]), np.sqrt(r[T]))
    U, s, _ = np.linalg.svd(B)
    if s[0] < 1e-9:  # eta_chi2 = 0: no distinguished direction
        assert eta_chi2(K, p) < 1e-17
        return
    u = np.zeros_like(p)
    u[S] = U[:, 0] / np.sqrt(p[S])
    q = p * (1 + 0.5 * u / max(1e-300, np.abs(u).max()))
    den = f_divergence(q, p, "chi2")
    if den > 1e-12:
        assert f_divergence(q @ K, p @ K, "chi2") / den == pytest.approx(eta_chi2(K, p), abs=1e-9)


# ----------------------------------------------------------------------------- wrong variants are caught
def test_wrong_submultiplicativity_variant_has_counterexample():
    # dobrushin(K1 K2) <= dobrushin(K1) * dobrushin(K2)^2 is false; hypothesis finds a pair.
    pairs = st.tuples(channels(2, 2, allow_zero=False), channels(2, 2, allow_zero=False))
    K1, K2 = find(pairs, lambda kk: dobrushin(kk[0] @ kk[1]) > dobrushin(kk[0]) * dobrushin(kk[1]) ** 2 + 1e-6,
                  settings=settings(database=None, max_examples=2000))
    assert dobrushin(K1 @ K2) > dobrushin(K1) * dobrushin(K2) ** 2


def test_wrong_bracket_eta_kl_equals_eta_chi2_is_caught():
    # "eta_KL <= eta_chi2" is false in general: a KL ratio above eta_chi2 exists.
    def beats_chi2(args):
        e, p1, t = args
        K, p = bsc(e), np.array([1 - p1, p1])
        q = np.array([1 - t, t])
        if f_divergence(q, p, "kl") < 1e-9:
            return False
        return kl_ratio(K, p, q) > eta_chi2(K, p) + 1e-3

    e, p1, t = find(st.tuples(st.floats(0.01, 0.45), st.floats(0.05, 0.95), st.floats(0.0, 1.0)), beats_chi2,
                    settings=settings(database=None, max_examples=5000))
    assert beats_chi2((e, p1, t))


def test_wrong_chi2_constant_squared_is_caught():
    # chi2(qK||pK) <= eta_chi2^2 chi2(q||p) is false: eta_chi2 is attained, not its square.
    K, p = bsc(0.2), np.array([0.5, 0.5])
    q = np.array([0.5 + 1e-3, 0.5 - 1e-3])
    ratio = f_divergence(q @ K, p @ K, "chi2") / f_divergence(q, p, "chi2")
    assert ratio == pytest.approx(eta_chi2(K, p), rel=1e-9)
    assert ratio > eta_chi2(K, p) ** 2 + 0.1


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("fn", [dobrushin, lambda K: eta_chi2(K, [0.5, 0.5]), lambda K: eta_kl(K, [0.5, 0.5])])
def test_bad_channel_rejected(fn):
    with pytest.raises(TheoryError, match="row 1 sums to"):
        fn([[0.5, 0.5], [0.2, 0.7]])
    with pytest.raises(TheoryError, match=r"K\[0, 1\] = -0.1 is negative"):
        fn([[1.1, -0.1], [0.2, 0.8]])
    with pytest.raises(TheoryError, match="2-d"):
        fn([0.5, 0.5])


def test_bad_input_law_rejected():
    K = bsc(0.1)
    with pytest.raises(TheoryError, match="length 3, expected 2"):
        eta_chi2(K, [0.2, 0.3, 0.5])
    with pytest.raises(TheoryError, match="sums to"):
        eta_kl(K, [0.2, 0.3])
    with pytest.raises(TheoryError, match=r"p\[0\] = nan is not finite"):
        eta_chi2(K, [np.nan, 0.5])
    with pytest.raises(TheoryError, match="restarts must be a non-negative integer"):
        eta_kl(K, [0.5, 0.5], restarts=-1)


def test_dobrushin_is_the_largest_pairwise_tv_wherever_the_pair_sits():
    """Known value with the maximising pair last (rows 1 and 2: TV 0.9; rows 0-1: 0.6, rows 0-2: 0.4), and
    the identity dobrushin(K) = max over all row pairs of TV, invariant under row permutations."""
    K = np.array([[0.3, 0.3, 0.4], [0.9, 0.1, 0.0], [0.0, 0.2, 0.8]])
    assert dobrushin(K) == pytest.approx(0.9, abs=1e-15)
    rng = np.random.default_rng(5)
    for n_in, n_out in ((2, 3), (4, 2), (6, 5)):
        K = rng.dirichlet(np.full(n_out, 0.5), size=n_in)
        pairs = max(0.5 * np.abs(K[a] - K[b]).sum() for a in range(n_in) for b in range(n_in))
        assert dobrushin(K) == pytest.approx(pairs, abs=1e-15)
        assert dobrushin(K[rng.permutation(n_in)]) == pytest.approx(pairs, abs=1e-15)


def test_dobrushin_is_clipped_to_one_against_round_off():
    """Disjoint rows: TV = 1 exactly, but 0.5 * sum|K[0] - K[1]| rounds to 1 + 2.2e-16 here."""
    K = [[0.0036500040335817083, 0.4150996212546994, 0.4282310588678984, 0.1530193158438204, 0.0, 0.0, 0.0],
         [0.0, 0.0, 0.0, 0.0, 0.00276007306427708, 0.5653785854959871, 0.431861341439736]]
    assert 0.5 * np.abs(np.subtract(K[1], K[0])).sum() > 1.0
    assert dobrushin(K) == 1.0


def test_eta_kl_ignores_ratios_of_rounding_errors_near_a_subnormal_input_mass():
    """Found by hypothesis: a constant channel (eta_KL = 0) and p with an entry of 1.1e-308. The start
    (1 - t) delta_2 + t p, its logits clipped, puts q within round-off of p on the heavy entries, where
    both divergences are ~2e-62 of pure rounding, and their ratio 1.0 broke the Dobrushin bound 0. A
    KL(q || p) below its round-off floor carries no ratio."""
    K = np.array([[0.5, 0.5]] * 3)
    p = np.array([0.75, 0.986328125, 1.1125369292536007e-308])
    p = p / p.sum()
    res = eta_kl(K, p)
    assert res.estimate == res.lower == res.upper == 0.0
    # a channel that does contract still gets its ratio from the same kind of start
    K2 = np.array([[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]])
    res2 = eta_kl(K2, p)
    assert 0 < res2.lower <= res2.upper and res2.lower >= eta_chi2(K2, p) - 1e-15


@pytest.mark.parametrize("kwargs", [{}, {"restarts": 2, "seed": 0}, {"restarts": 2, "seed": 2}, {"restarts": 16, "seed": 2}])
def test_contraction_report_runs_eta_kl_with_its_restarts_and_seed(kwargs):
    """The report's eta_KL entries are eta_kl's at the same restarts and seed (defaults 16 and 0), to the bit:
    the multi-start optimiser's best point moves in the last digits with either."""
    K, p = K3, P3
    res = eta_kl(K, p, **{"restarts": 16, "seed": 0, **kwargs})
    rep = contraction_report(K, p, **kwargs)
    assert (rep["eta_kl_lower"], rep["eta_kl_upper"], rep["eta_kl_estimate"]) == (res.lower, res.upper, res.estimate)
    assert rep["dobrushin"] == dobrushin(K) and rep["eta_chi2"] == eta_chi2(K, p)


def test_kl_terms_to_round_off_on_both_sides_of_the_series_switch(recwarn):
    """Each term base * phi(e^lr - 1), phi(u) = (1 + u) log(1 + u) - u, against 50 digits (mpmath): within a few
    ulps where the Taylor series is used (|lr| < 0.05: its sum of 15 terms, to u^16), within 1e-12 beyond (the
    direct form q log(q/p) - q + p loses about two digits near the switch); q = 0 (lr = -inf) gives base."""
    import mpmath

    from theory.contraction import _kl_terms

    mpmath.mp.dps = 50
    series = np.array([-0.0499, -0.03, -1e-3, -1e-6, 1e-9, 1e-4, 0.01, 0.0499])
    direct = np.array([-0.05, 0.05, 0.3, -2.0, -30.0, 1.0])
    base = 0.37
    for lrs, rtol in ((series, 1e-15), (direct, 1e-12)):
        got = _kl_terms(np.full(lrs.shape, base), lrs)
        for lr, g in zip(lrs, got):
            u = mpmath.expm1(mpmath.mpf(float(lr)))
            exact = float(mpmath.mpf(base) * ((1 + u) * mpmath.log1p(u) - u))
            assert g == pytest.approx(exact, rel=rtol, abs=0), lr
    assert _kl_terms(np.array([0.25, 1e-300]), np.array([-np.inf, -np.inf])).tolist() == [0.25, 1e-300]
    assert not recwarn.list, [str(w.message) for w in recwarn.list]


def test_contraction_report_defaults_are_eta_kls():
    """Without arguments the report runs eta_kl at eta_kl's own defaults: the same bits on a dozen random
    channels (on some of them one more random start moves the estimate in its last digits)."""
    rng = np.random.default_rng(0)
    for _ in range(12):
        d = int(rng.integers(2, 5))
        K, p = rng.dirichlet(np.ones(d), size=d), rng.dirichlet(np.ones(d))
        assert contraction_report(K, p)["eta_kl_estimate"] == eta_kl(K, p).estimate


def test_eta_kl_method_names_its_starts_and_where_the_best_came_from():
    """2 starts along the singular direction, 4 vertex-p mixtures per state of the support and the random ones
    are counted; the best ratio is attributed to one of them (or to eta_chi2 at q -> p)."""
    import re

    K, p = K3, P3
    for restarts, seed in ((0, 0), (3, 7)):
        res = eta_kl(K, p, restarts=restarts, seed=seed)
        head, source = res.method.split("; best from: ")
        assert head == (f"max of eta_chi2 and the KL ratios at 3 vertices and {2 + 4 * 3 + restarts} optimiser starts "
                        f"(singular direction, vertex-p mixtures, {restarts} Dirichlet(1) with seed={seed}), "
                        "each refined by BFGS on logits")
        assert re.fullmatch(r"eta_chi2 \(limit q -> p\)|vertex delta_[0-2]|singular direction \([+-]\)( \+ BFGS)?|"
                            r"mixture \(1-t\) delta_[0-2] \+ t p, t=[0-9.e-]+( \+ BFGS)?|Dirichlet start \d+( \+ BFGS)?",
                            source), source


def test_eta_kl_restarts_and_point_masses():
    K = np.array([[0.6, 0.4], [0.2, 0.8]])
    assert eta_kl(K, [1.0, 0.0]) == EtaKL(0.0, 0.0, 0.0, "p is a point mass: no q != p with q << p; eta_KL = 0 by "
                                                         "convention")
    assert eta_kl(K, [0.5, 0.5], restarts=0).lower >= eta_chi2(K, [0.5, 0.5])
    for bad in (True, -1, 1.5):
        with pytest.raises(TheoryError, match=rf"^restarts must be a non-negative integer, got {bad!r}$"):
            eta_kl(K, [0.5, 0.5], restarts=bad)


# ----------------------------------------------------------------------------- the KL ratio's numerics
# A channel with one small entry (qK << pK on output 2 at q = delta_0) and a dyadic input that sums to 1
# exactly, so the 50-digit references below use the same p as float64.
K_SMALL = np.array([[0.7, 0.3 - 1e-12, 1e-12], [0.2, 0.3, 0.5], [0.25, 0.25, 0.5]])
P_DYADIC = np.array([0.5, 0.25, 0.25])


def _mp_kl_ratio_terms(K, p, q):
    """50-digit ``(qK, log(qK / pK), KL(qK || pK), KL(q || p))``; float64 entries are taken as exact, and ``q``
    may be given in mpmath numbers."""
    import mpmath

    mpmath.mp.dps = 50
    K = [[mpmath.mpf(v) for v in row] for row in K]
    p, q = [mpmath.mpf(v) for v in p], [mpmath.mpf(v) for v in q]
    qK = [sum(q[i] * K[i][j] for i in range(len(p))) for j in range(len(K[0]))]
    r = [sum(p[i] * K[i][j] for i in range(len(p))) for j in range(len(K[0]))]
    lout = [mpmath.log(a / b) for a, b in zip(qK, r)]
    num = sum(a * lo - a + b for a, b, lo in zip(qK, r, lout))
    den = sum(a * mpmath.log(a / b) - a + b for a, b in zip(q, p) if a > 0)
    return qK, lout, num, den


def _mp_softmax(p, z):
    """50-digit ``q = softmax(log p + z)`` for float64 ``p, z`` taken as exact."""
    import mpmath

    mpmath.mp.dps = 50
    w = [mpmath.mpf(float(pi)) * mpmath.exp(mpmath.mpf(float(zi))) for pi, zi in zip(p, z)]
    return [wi / sum(w) for wi in w]


def test_output_log_ratio_is_accurate_near_p_and_where_qk_is_far_below_pk():
    """log(qK / pK) to a few ulps relative on both sides of its switch: through log1p((q - p)K / pK) near p,
    where log(qK) - log(pK) would keep only ~1e-16 / |log ratio| of its digits, and through the direct
    difference where qK << pK, where 1 + (q - p)K / pK would keep only ~1e-16 / (qK / pK) of them."""
    from theory.contraction import _KLRatio

    f = _KLRatio(K_SMALL, P_DYADIC)
    near = P_DYADIC + 1e-7 * np.array([1.0, -0.5, -0.5])  # q - p is exact here (Sterbenz)
    far = np.array([1.0, 0.0, 0.0])  # qK / pK = 4e-12 on output 2
    for q in (near, far):
        _, lout = f._output_log_ratio(q, q - P_DYADIC)
        _, exact, _, _ = _mp_kl_ratio_terms(K_SMALL, P_DYADIC, q)
        for got, want in zip(lout, exact):
            assert got == pytest.approx(float(want), rel=1e-13, abs=0), (q, lout)


def test_kl_ratio_near_p_is_accurate_and_not_mistaken_for_round_off():
    """At logits z ~ 1e-6 (KL(q || p) ~ 1e-13, sixteen orders above the round-off floor ~1e-29) both divergences
    are accurate to 1e-14 relative against 50 digits (measured: one ulp), and the ratio is returned, not dropped
    as round-off."""
    from theory.contraction import _KLRatio

    f = _KLRatio(K_SMALL, P_DYADIC)
    z = 1e-6 * np.array([0.3, -1.0, 0.8])
    num, den, q, _, _ = f.evaluate_z(z)
    _, _, num_exact, den_exact = _mp_kl_ratio_terms(K_SMALL, P_DYADIC, _mp_softmax(P_DYADIC, z))
    assert num == pytest.approx(float(num_exact), rel=1e-14, abs=0)
    assert den == pytest.approx(float(den_exact), rel=1e-14, abs=0)
    assert den > 1e3 * f.roundoff_floor(z)
    neg_ratio, grad = f.ratio_and_grad(z)
    assert -neg_ratio == pytest.approx(float(num_exact / den_exact), rel=1e-14, abs=0) and np.any(grad != 0)
    # an explicit q a relative 1e-6 from p (log q - log p keeps ~10 digits there) also gets its ratio
    q = P_DYADIC * (1 + 1e-6 * np.array([1.0, -1.0, -1.0]))
    _, _, num_q, den_q = _mp_kl_ratio_terms(K_SMALL, P_DYADIC, q)
    assert f.ratio_q(q) == pytest.approx(float(num_q / den_q), rel=1e-8, abs=0)


@pytest.mark.parametrize("m", [2, 3, 5])
def test_kl_ratio_of_a_q_within_a_few_ulps_of_p_is_round_off(m):
    """q that differs from p by at most 4 ulps per entry: log q - log p is all rounding, so is KL(q || p), and no
    ratio is reported (measured: such a KL stays below 1/16 of the floor for every m). At z = 0, the same."""
    from theory.contraction import _KLRatio

    rng = np.random.default_rng(m)
    for _ in range(200):
        K, p = rng.dirichlet(np.ones(3), size=m), rng.dirichlet(np.ones(m))
        q = p.copy()
        for i, k in enumerate(rng.integers(-4, 5, size=m)):
            for _ in range(abs(k)):
                q[i] = np.nextafter(q[i], np.sign(k) * np.inf)
        f = _KLRatio(K, p)
        assert f.ratio_q(q) is None, (K, p, q)
    assert f.ratio_and_grad(np.zeros(m)) == (0.0, pytest.approx(np.zeros(m), abs=0))


def test_an_output_no_input_reaches_changes_nothing(recwarn):
    """Appending an output column of zeros (a symbol pK never emits) leaves every coefficient as it was, to the
    bit, and raises no floating-point warning: the column is dropped before log(pK) is taken."""
    K, p = bsc(0.1), np.array([0.2, 0.8])
    K0 = np.hstack([K, np.zeros((2, 1))])
    assert eta_kl(K0, p) == eta_kl(K, p)
    assert (dobrushin(K0), eta_chi2(K0, p)) == (dobrushin(K), eta_chi2(K, p))
    assert not recwarn.list, [str(w.message) for w in recwarn.list]


def test_vertices_with_zero_output_mass_raise_no_warning(recwarn):
    """A vertex delta_x whose row has zeros gives qK = 0 there (log(qK / pK) = -inf, the term pK): evaluated
    exactly, without a divide-by-zero warning."""
    K = np.array([[0.6, 0.4, 0.0], [0.0, 0.3, 0.7]])  # binary erasure-like: disjoint support corners
    res = eta_kl(K, [0.3, 0.7])
    assert 0.0 < res.lower <= res.upper
    assert "vertex" in res.method or "eta_chi2" in res.method
    assert not recwarn.list, [str(w.message) for w in recwarn.list]


# ----------------------------------------------------------------------------- eta_kl's starts
@pytest.mark.parametrize("K, p", [(K3, P3), (bsc(0.1), np.array([0.2, 0.8])),
                                  (np.array([[1.0, 0.0], [1.0, 0.0]]), np.array([0.5, 0.5]))],
                         ids=["3x3", "bsc", "one-output"])
def test_eta_kl_starts_are_the_documented_points(K, p):
    """The points eta_kl evaluates are those its docstring lists, in order: +-1e-3 u along the top singular
    direction (max |u| = 1, sum p u = 0, and the chi2 ratio of p (1 + 1e-3 u) is eta_chi2 itself; none when pK
    has one output), then per state the vertex and the four vertex-p mixtures, then the seeded Dirichlet draws."""
    from theory.contraction import _eta_kl_starts

    m, restarts, seed = len(p), 2, 5
    starts = _eta_kl_starts(K, p, np.arange(m), restarts=restarts, seed=seed)
    one_output = np.count_nonzero(p @ K) == 1
    labels = ([] if one_output else ["singular direction (+)", "singular direction (-)"])
    for i in range(m):
        labels += [f"vertex delta_{i}"] + [f"mixture (1-t) delta_{i} + t p, t={t:g}" for t in (1e-6, 0.1, 0.5, 0.9)]
    labels += [f"Dirichlet start {k}" for k in range(restarts)]
    assert [label for label, _, _ in starts] == labels
    assert [kind for _, kind, _ in starts] == ["vertex" if lb.startswith("vertex") else "logits" for lb in labels]
    points = dict((label, point) for label, _, point in starts)
    if not one_output:
        z = points["singular direction (+)"]
        assert np.array_equal(points["singular direction (-)"], -z) and np.abs(z).max() == 1e-3
        assert abs(p @ z) < 1e-17
        dq = (p * z) @ K  # q - p = p z exactly for q = p (1 + z): the chi2 ratio is a Rayleigh quotient
        chi2_ratio = np.sum(dq ** 2 / (p @ K)) / np.sum((p * z) ** 2 / p)
        assert chi2_ratio == pytest.approx(eta_chi2(K, p), rel=1e-12, abs=0)
    for i in range(m):
        assert np.array_equal(points[f"vertex delta_{i}"], np.eye(m)[i])
        for t in (1e-6, 0.1, 0.5, 0.9):
            w = p * np.exp(points[f"mixture (1-t) delta_{i} + t p, t={t:g}"])
            np.testing.assert_allclose(w / w.sum(), (1 - t) * np.eye(m)[i] + t * p, rtol=1e-14)
    rng = np.random.default_rng(seed)
    for k in range(restarts):
        expected = np.log(np.maximum(rng.dirichlet(np.ones(m)), 1e-300)) - np.log(p)
        assert np.array_equal(points[f"Dirichlet start {k}"], expected)


def test_eta_kl_starts_are_clipped_to_the_logit_box(recwarn):
    """An input mass of 1e-320: the mixture t = 1e-6 away from it puts t p = 0 there (logit -inf) and the one on it
    a logit of ~737; both are clipped to [-40, 40], and eta_kl still brackets."""
    from theory.contraction import _eta_kl_starts

    K = np.array([[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]])
    p = np.array([0.6, 0.4, 1e-320])
    starts = _eta_kl_starts(K, p, np.arange(3), restarts=0, seed=0)
    z = np.concatenate([point for _, kind, point in starts if kind == "logits"])
    assert np.all(np.isfinite(z)) and z.min() == -40.0 and z.max() == 40.0
    assert not recwarn.list, [str(w.message) for w in recwarn.list]  # log 0 -> -inf is expected, and clipped
    res = eta_kl(K, p)
    assert eta_chi2(K, p) <= res.lower <= res.upper


def test_z_channel_with_uniform_input_attains_eta_kl_at_a_vertex():
    """K = [[1, 0], [1/2, 1/2]], p uniform: the sup is at q = delta_0, KL((1, 0) || (3/4, 1/4)) / log 2 = log2(4/3)
    (a grid of 2e4 points over q finds nothing above it), and eta_kl names that vertex as its source."""
    K, p = np.array([[1.0, 0.0], [0.5, 0.5]]), np.array([0.5, 0.5])
    res = eta_kl(K, p)
    assert res.lower == pytest.approx(np.log2(4 / 3), rel=1e-14, abs=0)
    assert res.method.endswith("best from: vertex delta_0")
    ts = np.linspace(0.0, 1.0, 200001)[1:]
    ts = ts[np.abs(ts - 0.5) > 1e-6]
    grid = max(kl_ratio(K, p, np.array([t, 1 - t])) for t in ts[::10])
    assert grid <= res.lower + 1e-12 and eta_chi2(K, p) < res.lower - 0.05


def test_the_kl_ratios_gradient_is_its_derivative():
    """ratio_and_grad's analytic gradient (through the softmax Jacobian) against central differences of the ratio
    at generic logits: they agree to the differences' own error (~1e-9 at step 1e-6), and the function value is
    minus the ratio of the two divergences."""
    from theory.contraction import _KLRatio

    f = _KLRatio(K3, P3)
    rng = np.random.default_rng(11)
    for _ in range(5):
        z = rng.normal(size=3)
        val, grad = f.ratio_and_grad(z)
        num, den, _, _, _ = f.evaluate_z(z)
        assert val == -num / den
        step = 1e-6
        fd = np.array([(f.ratio_and_grad(z + step * e)[0] - f.ratio_and_grad(z - step * e)[0]) / (2 * step)
                       for e in np.eye(3)])
        np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-9)


def test_logits_far_above_the_mean_take_the_logsumexp_branch_accurately():
    """A logit 750 above the p-mean on an input of mass 1e-300 (beyond exp's range, where log1p(p expm1(z)) would
    overflow): q is then e^59 / (1 + e^59) on that input (1e-300 e^750), and both divergences match 50 digits."""
    from theory.contraction import _KLRatio

    K = np.array([[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]])
    p = np.array([0.5, 0.5 - 1e-300, 1e-300])
    f = _KLRatio(K, p)
    z = np.array([0.0, 0.0, 750.0])
    num, den, q, _, _ = f.evaluate_z(z)
    _, _, num_exact, den_exact = _mp_kl_ratio_terms(K, p, _mp_softmax(p, z))
    assert q[2] == pytest.approx(1.0, abs=1e-15) and den == pytest.approx(float(den_exact), rel=1e-13, abs=0)
    assert num == pytest.approx(float(num_exact), rel=1e-13, abs=0)


def test_a_ratio_above_the_dobrushin_bound_is_an_internal_error_not_a_result(monkeypatch):
    """KL(qK||pK) / KL(q||p) <= eta_TV(K) is a theorem; a ratio above it (beyond 1e-9 of round-off) can only be a
    bug, so eta_kl raises rather than return a bracket that is not one. Simulated by a Dobrushin bound set to half
    the ratio the search finds."""
    import theory.contraction as contraction

    found = eta_kl(K3, P3).lower
    monkeypatch.setattr(contraction, "dobrushin", lambda K: found / 2)
    with pytest.raises(TheoryError, match=r"internal error: KL ratio .* exceeds the Dobrushin bound .*please report"):
        eta_kl(K3, P3)


def test_eta_kl_credits_eta_chi2_when_no_evaluated_ratio_reaches_it():
    """BSC(0.45) with a uniform input: eta_KL = eta_chi2 = 0.01 is approached only as q -> p, and every evaluated
    ratio stays below it (the closest ends 9e-14 under), so the method names eta_chi2 as the source."""
    res = eta_kl(bsc(0.45), np.array([0.5, 0.5]))
    assert res.lower == eta_chi2(bsc(0.45), np.array([0.5, 0.5]))
    assert res.method.endswith("best from: eta_chi2 (limit q -> p)")


def test_eta_chi2_is_clipped_to_one_against_round_off():
    """A noiseless channel (each input to its own output): the squared singular value rounds to 1 + 1.8e-15 here,
    but eta_chi2 is a squared correlation, at most 1."""
    from theory.contraction import _chi2_operator

    K = np.zeros((5, 7))
    K[[0, 1, 2, 3, 4], [6, 0, 5, 2, 4]] = 1.0
    p = np.array([0.4192138692134466, 0.07384125455115208, 0.20570818373765395, 0.16060320388219057, 0.140633488615557])
    B, sp_, sr, _, _, _ = _chi2_operator(K, p)
    assert np.linalg.norm(B - np.outer(sp_, sr), 2) ** 2 > 1.0
    assert eta_chi2(K, p) == 1.0
