"""Tests for theory.symbolic: sympy derivations of W Lemma 1, Props 1-2 and binary DPI (Lemma 2)."""
import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import find, settings
from hypothesis import strategies as st

from theory.continuous import gaussian_bma_constants
from theory.errors import TheoryError
from theory.information import mutual_information
from theory.symbolic import SymbolicResult, derive_dpi_binary, derive_w_l1, derive_w_p1, derive_w_p2


@pytest.fixture(scope="module")
def w_p2():
    return derive_w_p2()


# ----------------------------------------------------------------------------- W Lemma 1
def test_w_l1_holds_for_all_contexts_with_prefix():
    res = derive_w_l1()  # d = 2, H = 3, L = 2: all 64 contexts, every h, every target prefix
    assert isinstance(res, SymbolicResult)
    assert res.holds is True and res.residual == "0"
    assert res.constants["contexts"] == "64" and res.constants["trees"] == "2"
    assert res.constants["checks"] == str(64 * (1 + 2))
    assert res.constants["prefix_checks"] == str(64 * (2 + 4))


def test_w_l1_holds_on_larger_trees_for_given_contexts():
    res = derive_w_l1(d=2, H=4, L=1)  # 6 trees, 16 contexts, 224 target prefixes
    assert res.holds is True and res.constants["trees"] == "6" and res.constants["prefix_checks"] == "224"
    ctx = [[[0, 2, 1, 2]], [[1, 1, 0, 2]], [[2, 0, 0, 1]]]
    res = derive_w_l1(d=3, H=4, L=1, contexts=ctx, check_prefix=False)  # prefixes at d = 3 cost ~3 s each
    assert res.holds is True and res.constants["contexts"] == "3"


def test_w_l1_wrong_closed_form_is_caught():
    def transposed(pi, context, h):  # log pi(x_h' | x_h) instead of log pi(x_h | x_h')
        return [sp.Mul(*[pi[row[h]][row[k]] for row in context]) for k in range(h)]

    res = derive_w_l1(closed_form=transposed)
    assert res.holds is False and res.residual != "0"
    assert "differs from the closed form for context" in res.detail

    def single_example(pi, context, h):  # only the first example's likelihood
        return [pi[context[0][k]][context[0][h]] for k in range(h)]

    assert derive_w_l1(closed_form=single_example, check_prefix=False).holds is False


def test_w_l1_bad_inputs():
    with pytest.raises(TheoryError, match=r"contexts\[0\] must have shape \(L, H\) = \(2, 3\)"):
        derive_w_l1(contexts=[[[0, 1, 0]]])
    with pytest.raises(TheoryError, match=r"contexts\[1\] has token 2; tokens must be integers in 0..1"):
        derive_w_l1(contexts=[[[0, 1, 0], [1, 1, 1]], [[0, 2, 0], [1, 1, 1]]])
    with pytest.raises(TheoryError, match="d must be an integer in"):
        derive_w_l1(d=9)
    with pytest.raises(TheoryError, match="closed_form returned 1 weights for h = 2"):
        derive_w_l1(closed_form=lambda pi, ctx, h: [sp.Integer(1)], check_prefix=False)


# ----------------------------------------------------------------------------- W Proposition 1
def test_w_p1_column_shift_invariant_row_shift_not():
    res = derive_w_p1()
    assert res.holds is True and res.residual == "0"
    assert res.constants["column_shift_invariant"] == "True"
    assert res.constants["row_shift_invariant"] == "False"
    assert "-2*b_0 + 2*b_1" in res.constants["row_shift_counterexample"]
    # numeric: W = 0, b = e_1, L = 2: softmax (1/(1+e^2), e^2/(1+e^2))
    assert f"{1 / (1 + math.e ** 2):.6f}"[:7] in res.constants["row_shift_numeric"]


def test_w_p1_wrong_variant_row_shift_claim_fails():
    res = derive_w_p1(d=2, L=1, n_candidates=2, claim="row")
    assert res.holds is False and res.residual != "0"
    with pytest.raises(TheoryError, match="claim must be 'column'"):
        derive_w_p1(claim="both")


# ----------------------------------------------------------------------------- W Proposition 2
def test_w_p2_derived_constants_match_paper_and_numeric(w_p2):
    assert w_p2.holds is True and w_p2.residual == "0"
    rho = sp.Symbol("rho", real=True)
    c1 = sp.sympify(w_p2.constants["c1"], locals={"rho": rho})
    c2 = sp.sympify(w_p2.constants["c2"], locals={"rho": rho})
    assert sp.simplify(c1 - rho / (1 - rho ** 2)) == 0
    assert sp.simplify(c2 + rho ** 2 / (2 * (1 - rho ** 2))) == 0
    for r in (-0.8, 0.1, 0.37, 0.9):
        n1, n2 = gaussian_bma_constants(r)
        assert float(c1.subs(rho, r)) == pytest.approx(n1, rel=1e-12)
        assert float(c2.subs(rho, r)) == pytest.approx(n2, rel=1e-12)
    assert w_p2.constants["hessian_bilinear"] == "Matrix([[0, 0], [0, 0]])"
    assert w_p2.constants["c2_zeros"] == "[0]"


def test_w_p2_perturbed_constants_are_caught():
    res = derive_w_p2(claimed_c2=lambda rho: -rho ** 2 / (1 - rho ** 2))  # missing the 1/2
    assert res.holds is False and "c2 - claimed_c2" in res.residual
    res = derive_w_p2(claimed_c1=lambda rho: rho / (1 + rho ** 2))
    assert res.holds is False and "c1 - claimed_c1" in res.residual


# ----------------------------------------------------------------------------- W Lemma 2, binary
@pytest.mark.parametrize("kind", ["chi2", "tv"])
def test_dpi_binary_proved(kind):
    res = derive_dpi_binary(kind)
    assert res.holds is True and res.residual == "0"


@pytest.mark.parametrize("kind", ["kl", "hellinger"])
def test_dpi_binary_no_fake_proof(kind):
    res = derive_dpi_binary(kind)
    assert res.holds is None
    assert "no symbolic proof" in res.detail and res.residual != "0"


def _binary_joints(p, a, b, c, e):
    px = np.array([1 - p, p])
    K1 = np.array([[1 - a, a], [b, 1 - b]])
    K2 = np.array([[1 - c, c], [e, 1 - e]])
    Pxy = px[:, None] * K1
    Pxz = px[:, None] * (K1 @ K2)
    py = px @ K1
    Pyz = py[:, None] * K2
    return Pxy, Pyz, Pxz, py, py @ K2


def test_dpi_binary_certificates_agree_with_numeric_mi():
    rng = np.random.default_rng(0)
    for _ in range(50):
        p, a, b, c, e = rng.uniform(0.01, 0.99, size=5)
        Pxy, Pyz, Pxz, py, pz = _binary_joints(p, a, b, c, e)
        lam2 = 1 - c - e
        I = {k: mutual_information(P, "chi2") for k, P in (("xy", Pxy), ("yz", Pyz), ("xz", Pxz))}
        det = np.linalg.det(Pxy)
        cert1 = det ** 2 * ((1 - py[1]) * c * (1 - c) + py[1] * e * (1 - e)) / (p * (1 - p) * py.prod() * pz.prod())
        cert2 = lam2 ** 2 * ((1 - p) * a * (1 - a) + p * b * (1 - b)) / pz.prod()
        assert I["xy"] - I["xz"] == pytest.approx(cert1, rel=1e-8, abs=1e-14)
        assert I["yz"] - I["xz"] == pytest.approx(cert2, rel=1e-8, abs=1e-14)
        assert I["xz"] == pytest.approx(lam2 ** 2 * py.prod() / pz.prod() * I["xy"], rel=1e-8, abs=1e-15)
        tv = {k: mutual_information(P, "tv") for k, P in (("xy", Pxy), ("xz", Pxz))}
        assert tv["xz"] == pytest.approx(abs(lam2) * tv["xy"], rel=1e-9, abs=1e-15)


def test_dpi_wrong_variant_contraction_by_lambda_squared_is_caught():
    # "I_chi2(x;z) <= (1 - c - e)^2 I_chi2(x;y)" (input-independent contraction) is false.
    def violates(args):
        Pxy, _, Pxz, _, _ = _binary_joints(*args)
        lam2 = 1 - args[3] - args[4]
        return mutual_information(Pxz, "chi2") > lam2 ** 2 * mutual_information(Pxy, "chi2") * (1 + 1e-6) + 1e-9

    params = st.tuples(*[st.floats(0.05, 0.95)] * 5)
    example = find(params, violates, settings=settings(database=None, max_examples=5000))
    assert violates(example)


def test_dpi_bad_kind():
    with pytest.raises(TheoryError, match="unknown kind 'js'"):
        derive_dpi_binary("js")


@pytest.mark.parametrize("kind", ["chi2", "tv", "kl", "hellinger"])
def test_dpi_binary_with_a_factor_below_one_is_refuted_exactly(kind):
    """A DPI claimed with a factor below 1 is false for every f: with both channels noiseless x = y = z, the
    three MIs are equal and positive. The residual is (1 - factor) I exactly, I as theory.information computes it."""
    res = derive_dpi_binary(kind, factor=sp.Rational(1, 2))
    I = mutual_information(np.array([[0.5, 0.0], [0.0, 0.5]]), kind)
    assert res.holds is False and I > 0
    assert float(sp.sympify(res.residual)) == pytest.approx(I / 2, rel=1e-14)
    assert res.constants["claimed_factor"] == "1/2" and "a = b = c = e = 0" in res.constants["counterexample"]
    # a factor short of 1 by round-off is still below 1: read exactly, not rounded
    assert derive_dpi_binary(kind, factor=1 - 3e-10).holds is False


@pytest.mark.parametrize("kind", ["chi2", "tv"])
def test_dpi_binary_with_a_factor_above_one_follows_from_the_proof(kind):
    res = derive_dpi_binary(kind, factor=2)
    assert res.holds is True and res.residual == "0"


@pytest.mark.parametrize("factor", [0, -1, float("nan"), float("inf"), True, "1/2", None])
def test_dpi_binary_refuses_a_factor_that_is_not_a_positive_number(factor):
    with pytest.raises(TheoryError, match=r"^factor must be a finite number > 0, got "):
        derive_dpi_binary("chi2", factor=factor)
