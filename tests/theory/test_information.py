"""Tests of theory.information: known values, the dit oracle, DPI (W Lemma 2), bad inputs.

Normalisations when comparing with dit 2.3 (an independent implementation):

- KL: ``dit.divergences.kullback_leibler_divergence`` and ``dit.shannon.mutual_information``
  are in bits (log base 2): ours (nats) = dit * ln 2.
- chi-square: ``dit.divergences.f_divergence(p, q, f)`` with ``f(t) = (t - 1)^2`` is
  ``sum q (p/q - 1)^2 = sum (p - q)^2 / q``, ours exactly (no log, no unit).
- TV: ``dit.divergences.variational_distance = (1/2) sum |p - q|``, ours exactly.
- Hellinger: ``dit.divergences.hellinger_distance = sqrt(1 - sum sqrt(p q))``, while ours is
  the squared Hellinger ``sum (sqrt p - sqrt q)^2 = 2 - 2 sum sqrt(p q)``: ours = 2 * dit^2.
- f-mutual informations other than KL: dit has none, so the joint and the product of its
  marginals (both built by dit: ``Distribution.marginal``) are compared with the divergences above.
"""
import math
import sys
from fractions import Fraction

import dit
import numpy as np
import pytest
from dit.divergences import f_divergence as dit_f_divergence
from dit.divergences import hellinger_distance, kullback_leibler_divergence, variational_distance
from hypothesis import Phase, find, given, settings, strategies as st

from theory import TheoryError, all_pairwise_joints, closed_classes, entropy, f_divergence, mutual_information
from theory.information import KINDS
from theory.strategies import causal_trees, prob_vectors, stochastic_matrices

# dit evaluates 0 log 0 and 0/0 on the way and relies on numpy's errors being ignored (it sets
# np.seterr(all="ignore") on import; tests/conftest.py puts the defaults back for every test):
# its own warnings are noise here, ours are not.
pytestmark = pytest.mark.filterwarnings(r"ignore::RuntimeWarning:dit\.")

LN2 = math.log(2.0)
# find() for wrong variants: derandomized, no example database, no shrinking (only the
# existence of a counterexample matters, and shrinking these composites is slow).
FIND = settings(max_examples=2000, derandomize=True, database=None, phases=[Phase.generate])


# -- strategies -----------------------------------------------------------------------------------
@st.composite
def pmf_pairs(draw, max_d=5):
    d = draw(st.integers(1, max_d))
    return draw(prob_vectors(d)), draw(prob_vectors(d))


@st.composite
def joints(draw, max_d=4):
    """A joint pmf of shape (dx, dy), zeros and tiny entries included."""
    dx, dy = draw(st.integers(1, max_d)), draw(st.integers(1, max_d))
    return draw(prob_vectors(dx * dy)).reshape(dx, dy)


@st.composite
def channels(draw, d_in, d_out):
    """A (d_in, d_out) row-stochastic channel K[x, y] = P(y | x)."""
    return np.stack([draw(prob_vectors(d_out)) for _ in range(d_in)])


@st.composite
def markov_chains(draw, max_d=4):
    """(P_X, K1, K2) for x -> y -> z with K1: x -> y and K2: y -> z."""
    dx, dy, dz = (draw(st.integers(1, max_d)) for _ in range(3))
    return draw(prob_vectors(dx)), draw(channels(dx, dy)), draw(channels(dy, dz))


def _chain_joints(px, K1, K2):
    """The joints of (x, y), (x, z), (y, z) for x -> y -> z."""
    xy = px[:, None] * K1
    return xy, xy @ K2, xy.sum(axis=0)[:, None] * K2


def _underflows(joint) -> bool:
    """P_x P_y rounds to 0 under a positive joint entry (see the xfail test below)."""
    prod = np.outer(joint.sum(axis=1), joint.sum(axis=0))
    return bool(np.any((prod == 0) & (joint > 0)))


# -- known values ----------------------------------------------------------------------------------
P2, Q2 = [0.3, 0.7], [0.6, 0.4]


def test_known_divergences_of_two_bernoullis():
    assert f_divergence(P2, Q2, "kl") == pytest.approx(0.3 * math.log(0.3 / 0.6) + 0.7 * math.log(0.7 / 0.4), rel=1e-14)
    assert f_divergence(P2, Q2, "chi2") == pytest.approx(0.09 / 0.6 + 0.09 / 0.4, rel=1e-14)  # 0.375
    assert f_divergence(P2, Q2, "tv") == pytest.approx(0.3, rel=1e-14)
    hell = (math.sqrt(0.3) - math.sqrt(0.6)) ** 2 + (math.sqrt(0.7) - math.sqrt(0.4)) ** 2
    assert f_divergence(P2, Q2, "hellinger") == pytest.approx(hell, rel=1e-14)
    assert f_divergence(P2, Q2) == f_divergence(P2, Q2, "kl")  # default kind


def test_known_chi2_mutual_information():
    joint = [[0.1, 0.2], [0.3, 0.4]]  # Px = (0.3, 0.7), Py = (0.4, 0.6)
    exact = (Fraction(1, 100) / Fraction(12, 100) + Fraction(4, 100) / Fraction(18, 100)
             + Fraction(9, 100) / Fraction(28, 100) + Fraction(16, 100) / Fraction(42, 100) - 1)
    assert mutual_information(joint, "chi2") == pytest.approx(float(exact), rel=1e-13)
    kl = sum(p * math.log(p / (px * py)) for p, px, py in
             [(0.1, 0.3, 0.4), (0.2, 0.3, 0.6), (0.3, 0.7, 0.4), (0.4, 0.7, 0.6)])
    assert mutual_information(joint, "kl") == pytest.approx(kl, rel=1e-13)


def test_known_values_of_a_copied_fair_bit():
    joint = np.diag([0.5, 0.5])
    assert mutual_information(joint, "kl") == pytest.approx(math.log(2), rel=1e-15)
    assert mutual_information(joint, "chi2") == pytest.approx(1.0, rel=1e-15)
    assert mutual_information(joint, "tv") == pytest.approx(0.5, rel=1e-15)
    assert mutual_information(joint, "hellinger") == pytest.approx(2 - math.sqrt(2), rel=1e-15)


def test_known_entropies():
    assert entropy(np.full(5, 0.2)) == pytest.approx(math.log(5), rel=1e-15)
    assert entropy([0.5, 0.25, 0.25]) == pytest.approx(1.5 * math.log(2), rel=1e-15)
    assert entropy([1.0, 0.0]) == 0.0
    assert entropy([[0.25, 0.25], [0.5, 0.0]]) == pytest.approx(1.5 * math.log(2), rel=1e-15)


def test_infinite_divergences_when_support_escapes():
    p, q = [0.5, 0.5, 0.0], [1.0, 0.0, 0.0]
    assert f_divergence(p, q, "kl") == math.inf
    assert f_divergence(p, q, "chi2") == math.inf
    assert f_divergence(p, q, "tv") == pytest.approx(0.5)
    assert f_divergence(p, q, "hellinger") == pytest.approx(2 - 2 * math.sqrt(0.5))
    assert f_divergence(q, p, "kl") == pytest.approx(math.log(2))  # q's support is inside p's


# -- the dit oracle ------------------------------------------------------------------------------
def _dit(pmf):
    """A one-variable dit Distribution on outcomes '0'..'d-1' (zeros kept)."""
    return dit.Distribution([str(i) for i in range(len(pmf))], list(pmf), trim=False)


def _dit_joint(joint):
    dx, dy = joint.shape
    outcomes = [f"{a}{b}" for a in range(dx) for b in range(dy)]
    return dit.Distribution(outcomes, joint.reshape(-1).tolist(), trim=False)


def _dit_product_of_marginals(dist, dx, dy):
    mx = {o[0]: p for o, p in zip(dist.marginal([0]).outcomes, dist.marginal([0]).pmf)}
    my = {o[0]: p for o, p in zip(dist.marginal([1]).outcomes, dist.marginal([1]).pmf)}
    outcomes = [f"{a}{b}" for a in range(dx) for b in range(dy)]
    return dit.Distribution(outcomes, [mx.get(o[0], 0.0) * my.get(o[1], 0.0) for o in outcomes], trim=False)


def _dit_divergence(P, Q, kind):
    if kind == "kl":
        return kullback_leibler_divergence(P, Q) * LN2
    if kind == "chi2":
        return dit_f_divergence(P, Q, lambda t: (t - 1.0) ** 2)
    if kind == "tv":
        return variational_distance(P, Q)
    return 2.0 * hellinger_distance(P, Q) ** 2


@given(pair=pmf_pairs())
def test_divergences_match_dit(pair):
    p, q = pair
    escapes = bool(np.any((p > 0) & (q == 0)))
    for kind in KINDS:
        ours = f_divergence(p, q, kind)
        if kind in ("kl", "chi2") and escapes:
            assert ours == math.inf, kind
            if kind == "kl":
                assert kullback_leibler_divergence(_dit(p), _dit(q)) == math.inf
            continue
        if kind == "chi2" and np.any(p[q > 0] / q[q > 0] > 1e150):
            # dit evaluates q f(p/q) with f(t) = (t-1)^2, which overflows here although the
            # divergence is finite; the oracle is then exact rational arithmetic (inf past the
            # largest float, as f_divergence gives, e.g. p = 1/3 against q = 1e-313).
            exact = sum((Fraction(a) - Fraction(b)) ** 2 / Fraction(b) for a, b in zip(p, q) if b > 0)
            oracle = float(exact) if exact <= Fraction(sys.float_info.max) else math.inf
        else:
            oracle = _dit_divergence(_dit(p), _dit(q), kind)
        assert ours == pytest.approx(oracle, rel=1e-9, abs=1e-12), kind


@given(joint=joints())
def test_mutual_information_matches_dit(joint):
    dist = _dit_joint(joint)
    product = _dit_product_of_marginals(dist, *joint.shape)
    for kind in KINDS:
        ours = mutual_information(joint, kind)
        if kind == "kl":
            oracle = dit.shannon.mutual_information(dist, [0], [1]) * LN2
        elif _underflows(joint):
            continue  # dit's product pmf underflows the same way; see the xfail test
        else:
            oracle = _dit_divergence(dist, product, kind)
        assert ours == pytest.approx(oracle, rel=1e-9, abs=1e-12), kind


# -- properties --------------------------------------------------------------------------------------
@given(pair=pmf_pairs())
def test_no_nan_and_non_negative_with_zeros(pair):
    p, q = pair
    for kind in KINDS:
        for value in (f_divergence(p, q, kind), f_divergence(p, p, kind)):
            assert not math.isnan(value) and value >= 0, kind
        assert f_divergence(p, p, kind) == pytest.approx(0.0, abs=1e-15), kind


@given(joint=joints())
def test_mutual_information_no_nan_symmetric_zero_for_products(joint):
    product = np.outer(joint.sum(axis=1), joint.sum(axis=0))
    product /= product.sum()
    for kind in KINDS:
        value = mutual_information(joint, kind)
        assert not math.isnan(value) and value >= 0, kind
        if not _underflows(joint):
            assert math.isfinite(value), kind
        assert mutual_information(joint.T, kind) == pytest.approx(value, rel=1e-12, abs=1e-15), kind
        assert mutual_information(product, kind) == pytest.approx(0.0, abs=1e-14), kind


@given(joint=joints())
def test_kl_mutual_information_is_entropy_identity(joint):
    h = entropy(joint.sum(axis=1)) + entropy(joint.sum(axis=0)) - entropy(joint)
    assert mutual_information(joint, "kl") == pytest.approx(h, abs=1e-12)
    assert 0 <= entropy(joint) <= math.log(joint.size) + 1e-12


@given(pair=pmf_pairs())
def test_classical_inequalities_between_kinds(pair):
    p, q = pair
    kl, chi2 = f_divergence(p, q, "kl"), f_divergence(p, q, "chi2")
    tv, h2 = f_divergence(p, q, "tv"), f_divergence(p, q, "hellinger")
    slack = 1e-12
    assert kl <= math.log1p(chi2) + slack  # KL <= log(1 + chi2) <= chi2
    assert math.log1p(chi2) <= chi2 + slack
    assert tv <= math.sqrt(kl / 2) + slack  # Pinsker
    assert h2 / 2 <= tv + slack  # 1 - BC <= TV <= sqrt(1 - BC^2), BC = 1 - H^2/2
    assert tv <= math.sqrt(max(0.0, h2 * (1 - h2 / 4))) + slack
    assert 0 <= h2 <= 2 + slack and 0 <= tv <= 1 + slack


def test_pinsker_with_a_smaller_constant_is_caught():
    # TV <= sqrt(KL / 4) is false: Pinsker's constant 1/2 is tight near p = q.
    pair = find(pmf_pairs(), lambda pq: f_divergence(*pq, "tv") > math.sqrt(f_divergence(*pq, "kl") / 4) + 1e-9,
                settings=FIND)
    p, q = pair
    assert f_divergence(p, q, "tv") > math.sqrt(f_divergence(p, q, "kl") / 4)


# -- DPI (W Lemma 2) ------------------------------------------------------------------------------
@given(chain=markov_chains())
def test_data_processing_inequality_on_a_markov_chain(chain):
    xy, xz, yz = _chain_joints(*chain)
    for kind in KINDS:
        I_xy, I_xz, I_yz = (mutual_information(j, kind) for j in (xy, xz, yz))
        tol = 1e-12 * max(1.0, I_xy, I_yz)  # round-off only
        assert I_xz <= I_xy + tol, kind  # x -> y -> z
        assert I_xz <= I_yz + tol, kind  # W Lemma 2 as written: I(y; z) >= I(x; z)


@pytest.mark.parametrize("kind", KINDS)
def test_dpi_reversed_is_caught(kind):
    chain = find(markov_chains(), lambda c: mutual_information(_chain_joints(*c)[1], kind)
                 < mutual_information(_chain_joints(*c)[0], kind) - 1e-6, settings=FIND)
    xy, xz, _ = _chain_joints(*chain)
    assert mutual_information(xz, kind) < mutual_information(xy, kind)


@pytest.mark.parametrize("kind", KINDS)
def test_dpi_with_a_factor_one_half_is_caught(kind):
    # I(x; z) <= 0.5 I(x; y) is false (take z a copy of y).
    chain = find(markov_chains(), lambda c: mutual_information(_chain_joints(*c)[1], kind)
                 > 0.5 * mutual_information(_chain_joints(*c)[0], kind) + 1e-6, settings=FIND)
    xy, xz, _ = _chain_joints(*chain)
    assert mutual_information(xz, kind) > 0.5 * mutual_information(xy, kind)


@st.composite
def tree_models(draw):
    d = draw(st.integers(1, 4))
    tree = draw(st.one_of(causal_trees(st.integers(2, 8)), causal_trees(st.integers(2, 8), forest=True)))
    pi = draw(stochastic_matrices(d))
    root = draw(st.one_of(st.none(), prob_vectors(d)))
    if root is None and len(closed_classes(pi)) != 1:
        root = draw(prob_vectors(d))  # the stationary law is not unique: use an explicit one
    return pi, tree, root


def _mi_matrix(J, kind):
    n = J.shape[0]
    return np.array([[mutual_information(J[i, j], kind) for j in range(n)] for i in range(n)])


@given(model=tree_models())
def test_dpi_on_the_tree(model):
    """W Lemma 2 on the tree: I(x_h; x_h') <= I(x_h; x_pa(h)) for every h' < h."""
    pi, tree, root = model
    J = all_pairwise_joints(pi, tree, root=root)
    for kind in KINDS:
        I = _mi_matrix(J, kind)
        for h in range(tree.n):
            pa = tree.parent(h)
            for hp in range(h):
                if pa is None:  # h is a root: every h' < h lies in another component
                    assert I[h, hp] <= 1e-14, (kind, h, hp)
                else:
                    assert I[h, hp] <= I[h, pa] + 1e-12 * max(1.0, I[h, pa]), (kind, h, hp)


@pytest.mark.parametrize("kind", KINDS)
def test_tree_dpi_with_the_previous_position_is_caught(kind):
    # Wrong variant: the previous position h-1 in place of the parent.
    def violates(model):
        pi, tree, root = model
        I = _mi_matrix(all_pairwise_joints(pi, tree, root=root), kind)
        return any(I[h, hp] > I[h, h - 1] + 1e-6 for h in range(1, tree.n) for hp in range(h))

    pi, tree, root = find(tree_models(), violates, settings=FIND)
    assert violates((pi, tree, root))


# -- underflow of the marginal product --------------------------------------------------------------
UNDERFLOW_JOINT = np.diag([1.0 - 1e-200, 1e-200])  # P_x P_y at (1, 1) is 1e-400 -> 0.0 in float64


@pytest.mark.parametrize("kind, expected", [
    # P_x P_y underflows under a positive joint entry; I_chi2 of a diagonal joint is (support - 1) = 1
    pytest.param("chi2", 1.0),
    pytest.param("kl", 1e-200 * 200 * math.log(10)),  # I_KL = H(x) = 1e-200 ln(1e200)
])
def test_mi_finite_when_marginal_product_underflows(kind, expected):
    assert mutual_information(UNDERFLOW_JOINT, kind) == pytest.approx(expected, rel=1e-9)


def test_kl_finite_when_ratio_overflows():
    # p/q = 0.5/5e-324 overflows before a log; log p - log q does not
    q_min = 5e-324  # 2**-1074, the smallest subnormal
    # KL = 0.5 ln(0.5 / 1) + 0.5 ln(0.5 / 2**-1074) = 0.5 ln 2 (1073 - 1) = 536 ln 2
    assert f_divergence([0.5, 0.5], [1.0, q_min], "kl") == pytest.approx(536 * math.log(2), rel=1e-12)


@pytest.mark.parametrize("kind", ["tv", "hellinger"])
def test_mi_finite_under_underflow_for_bounded_kinds(kind):
    assert math.isfinite(mutual_information(UNDERFLOW_JOINT, kind))


# -- bad inputs ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("call, match", [
    (lambda: f_divergence([1.5, -0.5], [0.5, 0.5]), r"p\[1\] = -0.5 is negative"),
    (lambda: f_divergence([0.5, 0.5], [np.nan, 1.0]), r"q\[0\] = nan is not finite"),
    (lambda: f_divergence([0.5, 0.5], [np.inf, 0.0]), r"q\[0\] = inf is not finite"),
    (lambda: f_divergence([0.5, 0.4], [0.5, 0.5]), r"p sums to 0.9 \(off by -0.1\)"),
    (lambda: f_divergence([0.5, 0.5], [0.2, 0.2, 0.6]), r"same shape, got \(2,\) and \(3,\)"),
    (lambda: f_divergence([0.5, 0.5], [0.5, 0.5], "js"), r"unknown divergence kind 'js'; expected one of kl, chi2"),
    (lambda: f_divergence([], []), r"p is empty"),
    (lambda: f_divergence(["a"], [1.0]), r"p could not be read"),
    (lambda: mutual_information([0.5, 0.5]), r"joint must be a 2-d pmf .* got shape \(2,\)"),
    (lambda: mutual_information(np.full((2, 2, 2), 0.125)), r"got shape \(2, 2, 2\)"),
    (lambda: mutual_information([[0.5, -0.1], [0.3, 0.3]]), r"joint\[0, 1\] = -0.1 is negative"),
    (lambda: mutual_information([[0.5, 0.5], [0.5, 0.5]]), r"joint sums to 2"),
    (lambda: mutual_information([[0.5, np.nan], [0.5, 0.0]]), r"joint\[0, 1\] = nan is not finite"),
    (lambda: mutual_information([[1.0]], "KL"), r"unknown divergence kind 'KL'"),
    (lambda: entropy([0.2, 0.2]), r"p sums to 0.4"),
    (lambda: entropy([-0.1, 1.1]), r"p\[0\] = -0.1 is negative"),
])
def test_bad_inputs_named(call, match):
    # theory.information prints an index list with numpy scalars, e.g. p[np.int64(1)] under
    # numpy 2; the position is right either way, so both spellings are accepted here.
    match = match.replace(r"\[0\]", _INDEX.format("0")).replace(r"\[1\]", _INDEX.format("1"))
    match = match.replace(r"\[0, 1\]", r"\[" + _ELEM.format("0") + ", " + _ELEM.format("1") + r"\]")
    with pytest.raises(TheoryError, match=match):
        call()


_ELEM = r"(?:np\.int64\()?{}\)?"
_INDEX = r"\[" + _ELEM + r"\]"


def test_no_floating_point_warning_reaches_the_caller():
    """chi2's overflow to +inf (a true value beyond the float range) and the log 0 of an independent
    pair's terms are expected: neither may leak a RuntimeWarning."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert f_divergence([0.5, 0.5], [1 - 1e-320, 1e-320], kind="chi2") == math.inf
        assert mutual_information(np.outer([0.3, 0.7], [0.4, 0.6]), kind="chi2") == pytest.approx(0.0, abs=1e-15)


def test_divergences_and_entropy_of_2d_pmfs_are_those_of_their_entries():
    p = np.array([[0.1, 0.2], [0.3, 0.4]])
    q = np.array([[0.25, 0.25], [0.4, 0.1]])
    for kind in KINDS:
        assert f_divergence(p, q, kind=kind) == pytest.approx(f_divergence(p.ravel(), q.ravel(), kind=kind), rel=1e-15)
    assert entropy(p) == pytest.approx(entropy(p.ravel()), rel=1e-15)
    assert f_divergence(p, np.array([[0.5, 0.5], [0.0, 0.0]])) == math.inf
