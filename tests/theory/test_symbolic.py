"""Tests for theory.symbolic: sympy derivations of W Lemma 1, Props 1-2 and binary DPI (Lemma 2)."""
import itertools
import math
import types

import numpy as np
import pytest
import sympy as sp
from hypothesis import find, settings
from hypothesis import strategies as st

from theory.continuous import gaussian_bma_constants
from theory.errors import TheoryError
from theory import symbolic
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
    assert res.detail.startswith("d=3, L=2, 3 candidates")  # the documented default sizes


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
    point, value = "p = 1/2, a = b = c = e = 0 (x = y = z)", res.constants[f"I_{kind}(x;y) = I_{kind}(y;z) = I_{kind}(x;z)"]
    assert float(sp.sympify(value)) == pytest.approx(I, rel=1e-14)
    assert res.constants == {"counterexample": point, f"I_{kind}(x;y) = I_{kind}(y;z) = I_{kind}(x;z)": value,
                             "claimed_factor": "1/2"}
    assert res.name == f"W.L2 (binary DPI, {kind})"
    assert res.detail == (f"refuted: with both channels noiseless ({point}) the three {kind} mutual informations are "
                          f"equal to {value} > 0, so I(x;z) - 1/2 I(y;z) = {res.residual} > 0; a DPI with a factor "
                          "below 1 fails for every f")
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


# The certificates derive_dpi_binary reports are formulas a researcher reads and reuses: each is read back
# (a small parser for their notation) and evaluated against the quantity its key names, computed numerically.
def _read_formula(text, values):
    from sympy.parsing.sympy_parser import (convert_xor, implicit_application, implicit_multiplication,
                                            parse_expr, standard_transformations)

    text = (text.replace("lambda", "lam").replace("[", "(").replace("]", ")").replace("P(i,j)", "Pij(i, j)")
            .replace("Px(i)", "Pxi(i)").replace("Py(j)", "Pyj(j)"))
    if text.count("|") == 2:  # |u| -> Abs(u)
        left, inner, right = text.split("|")
        text = f"{left}Abs({inner}){right}"
    transformations = standard_transformations + (implicit_multiplication, implicit_application, convert_xor)
    return float(parse_expr(text, local_dict=values, transformations=transformations))


def _dpi_values(p, a, b, c, e):
    Pxy, Pyz, Pxz, py, pz = _binary_joints(p, a, b, c, e)
    return {"p": p, "a": a, "b": b, "c": c, "e": e, "px0": 1 - p, "px1": p, "y0": py[0], "y1": py[1],
            "z0": pz[0], "z1": pz[1], "lam1": 1 - a - b, "lam2": 1 - c - e, "det": np.linalg.det,
            "P_xy": Pxy, "P_yz": Pyz, "P_xz": Pxz}


def test_dpi_binary_reported_certificates_equal_the_quantities_they_name():
    chi2 = derive_dpi_binary("chi2").constants
    tv = derive_dpi_binary("tv").constants
    rng = np.random.default_rng(3)
    for _ in range(20):
        args = rng.uniform(0.02, 0.98, size=5)
        v = _dpi_values(*args)
        Pxy, Pyz, Pxz = v["P_xy"], v["P_yz"], v["P_xz"]
        I = {k: mutual_information(P, "chi2") for k, P in (("xy", Pxy), ("yz", Pyz), ("xz", Pxz))}
        expected = {"I_xy_minus_I_xz": I["xy"] - I["xz"], "I_yz_minus_I_xz": I["yz"] - I["xz"],
                    "ratio_xz_over_xy": I["xz"] / I["xy"], "ratio_xz_over_yz": I["xz"] / I["yz"]}
        for key, want in expected.items():
            assert _read_formula(chi2[key], v) == pytest.approx(want, rel=1e-8, abs=1e-14), key
        lhs, rhs = tv["det_P_xz"].split(" = ")
        assert _read_formula(lhs, v) == pytest.approx(np.linalg.det(Pxz), abs=1e-14)
        assert _read_formula(rhs, v) == pytest.approx(np.linalg.det(Pxz), abs=1e-14)
        assert _read_formula(tv["det_P_yz"], v) == pytest.approx(np.linalg.det(Pyz), abs=1e-14)
        assert _read_formula(tv["one_minus_lambda2_sq"], v) == pytest.approx(1 - v["lam2"] ** 2, abs=1e-14)
        y0y1, pxpx = v["y0"] * v["y1"], v["px0"] * v["px1"]
        assert _read_formula(tv["y0y1_minus_lambda1_px0px1"], v) == pytest.approx(y0y1 - v["lam1"] * pxpx, abs=1e-14)
        assert _read_formula(tv["y0y1_plus_lambda1_px0px1"], v) == pytest.approx(y0y1 + v["lam1"] * pxpx, abs=1e-14)
        joint = Pxy
        formula = tv["I_TV"].removesuffix(" for a 2x2 joint").replace("det P", "det(P)")
        assert _read_formula(formula, {"det": np.linalg.det, "P": joint}) == pytest.approx(
            mutual_information(joint, "tv"), rel=1e-12)
        # the two identities the proofs rest on, at random values
        q = rng.dirichlet(np.ones(4)).reshape(2, 2)
        for i in range(2):
            for j in range(2):
                vals = {"Pij": lambda i, j: q[i, j], "Pxi": lambda i: q[i].sum(), "Pyj": lambda j: q[:, j].sum(),
                        "det": np.linalg.det, "P": q, "i": i, "j": j}
                lhs, rhs = chi2["identity_2x2"].replace("det P", "det(P)").split(" = ")
                assert _read_formula(lhs, vals) == pytest.approx(_read_formula(rhs, vals), abs=1e-15)
        s, al, be = rng.uniform(0, 1, size=3)
        lam = 1 - al - be
        vals = {"s": s, "alpha": al, "beta": be, "lam": lam, "t": al + lam * s}
        lhs, rhs = chi2["identity_channel"].split(" = ")
        assert _read_formula(lhs, vals) == pytest.approx(_read_formula(rhs, vals), abs=1e-15)
    assert tv["identity_2x2"] == chi2["identity_2x2"] and tv["identity_channel"] == chi2["identity_channel"]


@pytest.mark.parametrize("kind", ["kl", "hellinger"])
def test_dpi_binary_unproved_residual_is_the_mi_difference_it_names(kind):
    """For KL and Hellinger the residual is I(x;y) - I(x;z) as an expression in (p, a, b, c, e): read back with
    sympy and evaluated, it equals the difference of theory.information's MIs."""
    res = derive_dpi_binary(kind)
    expr = sp.sympify(res.residual)
    syms = {str(s): s for s in expr.free_symbols}
    assert set(syms) == {"p", "a", "b", "c", "e"}
    rng = np.random.default_rng(5)
    for _ in range(10):
        args = rng.uniform(0.05, 0.95, size=5)
        Pxy, _, Pxz, _, _ = _binary_joints(*args)
        got = float(expr.subs({syms[k]: float(x) for k, x in zip("pabce", args)}))
        want = mutual_information(Pxy, kind) - mutual_information(Pxz, kind)
        assert got == pytest.approx(want, rel=1e-9, abs=1e-13)
    assert res.name == f"W.L2 (binary DPI, {kind})" and set(res.constants) == {"identity_2x2", "identity_channel"}


def _w_l1_weights(pi, context, h):
    return [sp.Mul(*[pi[row[k]][row[h]] for row in context]) for k in range(h)]


def test_w_l1_pi_is_row_stochastic_in_the_derivation():
    """Lemma 1 is about a transition matrix: a closed form that differs from W's by powers of a row sum of pi
    (exactly 1) is still proved, so the symbolic pi's rows sum to 1 identically."""
    def times_row_sums(pi, context, h):
        return [w * sp.Add(*pi[context[0][k]]) ** (k + 1) for k, w in enumerate(_w_l1_weights(pi, context, h))]

    assert derive_w_l1(closed_form=times_row_sums, check_prefix=False).holds is True
    ctx = [[[0, 2, 1]]]
    assert derive_w_l1(d=3, H=3, L=1, contexts=ctx, closed_form=times_row_sums, check_prefix=False).holds is True


def test_w_l1_rational_closed_forms_take_the_cancelling_path():
    """A closed form that is not a polynomial in pi's entries is compared by cancelling the rational residual:
    W's weights over a common factor still hold; over a factor that depends on the candidate they do not,
    and the result says where and what the residual is."""
    common = lambda pi, context, h: [w / (1 + pi[0][0]) for w in _w_l1_weights(pi, context, h)]  # noqa: E731
    assert derive_w_l1(closed_form=common).holds is True
    skewed = lambda pi, context, h: [w / (1 + pi[0][0]) ** k for k, w in enumerate(_w_l1_weights(pi, context, h))]  # noqa: E731
    res = derive_w_l1(closed_form=skewed, check_prefix=False)
    assert res.holds is False and res.name == "W.L1 (BMA closed form)"
    assert res.constants == {"trees": "2", "checks": "2"}  # h = 1 holds (one candidate); h = 2, k = 0 fails
    resid = sp.sympify(res.residual)
    assert resid.free_symbols and sp.cancel(resid) != 0
    assert res.detail == ("posterior of pa(2) = 0 differs from the closed form for context ((0, 0, 0), (0, 0, 0)) "
                          "(rows = examples, columns = positions 0..2); residual = numerator*sum(weights) - "
                          "weight*evidence")


def test_w_l1_failure_reports_its_place_counts_and_residual():
    def transposed(pi, context, h):
        return [sp.Mul(*[pi[row[h]][row[k]] for row in context]) for k in range(h)]

    res = derive_w_l1(closed_form=transposed)
    # contexts in lexicographic order, 3 identities each (h = 1; h = 2, k = 0, 1): the third context fails first
    assert res.constants == {"trees": "2", "checks": "8"}
    assert res.detail.startswith("posterior of pa(2) = 0 differs from the closed form for context ((0, 0, 0), (0, 1, 0))")
    p00, p10, r0 = sp.symbols("p_0_0 p_1_0 r_0")
    assert sp.expand(sp.sympify(res.residual) - p00 ** 4 * r0 ** 2 * (p00 - 1) * (p00 + p10 - 1)) == 0
    ok = derive_w_l1(d=2, H=2, L=1)
    assert (ok.name, ok.holds, ok.residual) == ("W.L1 (BMA closed form)", True, "0")
    assert ok.constants == {"d": "2", "H": "2", "L": "1", "trees": "1", "contexts": "4", "checks": "4",
                            "prefix_checks": "8"}
    assert ok.detail == ("exact Bayes over all 1 recursive trees on 2 nodes with symbolic pi and root law equals the "
                         "closed form for 4 contexts and every h in 1..1 (4 identities); conditioning on each of the "
                         "target prefixes leaves it unchanged (8 prefixes)")
    assert derive_w_l1(d=2, H=2, L=1, check_prefix=False).detail.endswith("(4 identities)")


def test_w_l1_size_limits_and_token_types():
    one = {"contexts": None, "check_prefix": False}
    assert derive_w_l1(d=2, H=2, L=1, **one).holds is True  # smallest sizes accepted
    for d, H, L in ((4, 2, 1), (2, 5, 1), (2, 2, 4)):  # each largest size accepted
        assert derive_w_l1(d=d, H=H, L=L, contexts=[[[d - 1] * H] * L], check_prefix=False).holds is True
    for kwargs, msg in [({"d": 5}, "d must be an integer in [2, 4]"), ({"d": 1}, "d must be an integer in [2, 4]"),
                        ({"H": 6}, "H must be an integer in [2, 5]"), ({"H": 1}, "H must be an integer in [2, 5]"),
                        ({"L": 5}, "L must be an integer in [1, 4]"), ({"L": 0}, "L must be an integer in [1, 4]")]:
        with pytest.raises(TheoryError) as err:
            derive_w_l1(**kwargs)
        bad = next(iter(kwargs.values()))
        assert str(err.value) == f"{msg} (kept small so sympy stays fast), got {bad!r}"
    for bad in (True, 2.0, 9.5):  # not an int, whatever its value
        with pytest.raises(TheoryError, match=rf"^d must be an integer in \[2, 4\] .*, got {bad!r}$"):
            derive_w_l1(d=bad)
    for tok in (True, 1.0):
        with pytest.raises(TheoryError, match=rf"^contexts\[0\] has token {tok!r}; tokens must be integers in 0\.\.1$"):
            derive_w_l1(contexts=[[[0, tok, 0], [0, 0, 0]]])


def _w_p1_symbols(d, L, n):
    """W.P1's symbols by their names: candidate vectors u (last entry 1 - sum), targets v, shifts a and b."""
    u = [[[sp.Symbol(f"u_{k}_{l}_{s}") for s in range(d - 1)] for l in range(L)] for k in range(n)]
    u = [[row + [1 - sum(row)] for row in per_k] for per_k in u]
    v = [[sp.Symbol(f"v_{l}_{i}") for i in range(d)] for l in range(L)]
    a = [sp.Symbol(f"a_{i}") for i in range(d)]
    b = [sp.Symbol(f"b_{i}") for i in range(d)]
    return u, v, a, b


@pytest.mark.parametrize("d, L, n", [(2, 1, 2), (3, 2, 3)])
def test_w_p1_reported_shifts_are_the_closed_forms(d, L, n):
    """The column shift adds sum_l a^T v_l to every score; the row shift changes s_1 - s_0 by
    sum_l (b^T (u_1l - u_0l)) (1^T v_l); the one-hot instance changes it by L (b_1 - b_0), and with W = 0,
    b = e_1 the two candidates' softmax is (1/(1 + e^L), e^L/(1 + e^L))."""
    res = derive_w_p1(d=d, L=L, n_candidates=n)
    u, v, a, b = _w_p1_symbols(d, L, n)
    dot = lambda x, y: sum(xi * yi for xi, yi in zip(x, y))  # noqa: E731
    gain = sum(dot(a, v[l]) for l in range(L))
    row = sum((dot(b, u[1][l]) - dot(b, u[0][l])) * sum(v[l]) for l in range(L))
    assert sp.expand(sp.sympify(res.constants["column_shift_common_gain"]) - gain) == 0
    assert sp.expand(sp.sympify(res.constants["row_shift_residual"]) - row) == 0
    prefix = f"L={L} examples, candidate 0 = token 0, candidate 1 = token 1, target = token 0: score difference changes by "
    cex = res.constants["row_shift_counterexample"]
    assert cex.startswith(prefix) and sp.expand(sp.sympify(cex[len(prefix):]) - L * (b[1] - b[0])) == 0
    lo, hi = 1 / (1 + math.exp(L)), math.exp(L) / (1 + math.exp(L))
    assert res.constants["row_shift_numeric"] == (f"W = 0, b = e_1: softmax over the two candidates goes from (1/2, 1/2) "
                                                  f"to ({sp.N(lo, 6)}, {sp.N(hi, 6)})")
    assert (res.constants["column_shift_invariant"], res.constants["row_shift_invariant"]) == ("True", "False")
    assert res.name == "W.P1 (column-shift invariance)" and res.holds is True and res.residual == "0"
    assert res.detail == (
        f"d={d}, L={L}, {n} candidates with symbolic W, a, b and symbolic tokens (candidate vectors sum to 1). "
        f"Column shift 1 a^T: every candidate's score gains the same {res.constants['column_shift_common_gain']}, so "
        "the softmax is unchanged (residual 0). Row shift b 1^T: the score differences change by a nonzero amount "
        f"(constant row_shift_residual), e.g. {cex}; so attention is NOT invariant under row shifts (compare learned "
        "W by column softmax). Claim checked: 'column' shift is invariant.")
    row_claim = derive_w_p1(d=d, L=L, n_candidates=n, claim="row")
    assert row_claim.name == "W.P1 (row-shift invariance)" and row_claim.holds is False
    assert row_claim.residual == res.constants["row_shift_residual"]
    assert row_claim.detail.endswith("Claim checked: 'row' shift is invariant.")


def test_w_p1_size_limits():
    for kwargs in ({"d": 6, "L": 1, "n_candidates": 2}, {"d": 2, "L": 4, "n_candidates": 2},
                   {"d": 2, "L": 1, "n_candidates": 5}):
        assert derive_w_p1(**kwargs).holds is True  # each largest size accepted
    for name, bad, lo, hi in (("d", 7, 2, 6), ("d", 1, 2, 6), ("L", 5, 1, 4), ("L", 0, 1, 4),
                              ("n_candidates", 6, 2, 5), ("n_candidates", 1, 2, 5)):
        with pytest.raises(TheoryError) as err:
            derive_w_p1(**{name: bad})
        assert str(err.value) == f"{name} must be an integer in [{lo}, {hi}] (kept small so sympy stays fast), got {bad}"
    with pytest.raises(TheoryError, match=r"^claim must be 'column' \(W Prop\. 1\) or 'row', got 'both'$"):
        derive_w_p1(claim="both")


def test_w_p2_report_says_what_was_derived_and_what_matched(w_p2):
    """The constants W.P2's report prints (claimed c1, c2 and the BMA Hessian 2 c2 I) are read back and checked,
    and its sentence says which claimed constant matched: yes/yes for W's, NO where a constant is perturbed."""
    rho = sp.Symbol("rho", real=True)
    read = lambda key, res=w_p2: sp.sympify(res.constants[key], locals={"rho": rho})  # noqa: E731
    assert w_p2.name == "W.P2 (Gaussian BMA constants; no bilinear W)"
    assert sp.simplify(read("claimed_c1") - rho / (1 - rho ** 2)) == 0
    assert sp.simplify(read("claimed_c2") + rho ** 2 / (2 * (1 - rho ** 2))) == 0
    hess = sp.Matrix(read("hessian_bma"))
    assert sp.simplify(hess - 2 * read("c2") * sp.eye(2)) == sp.zeros(2, 2)
    c1, c2 = w_p2.constants["c1"], w_p2.constants["c2"]
    head = ("from log N(x_h; rho A^T x_h', (1-rho^2) I) with A = rotation(theta), d = 2: the x_h'-dependent part is "
            f"c1 x_h'^T A x_h + c2 ||x_h'||^2 with c1 = {c1}, c2 = {c2} (derived; residual 0); match with the claimed "
            "constants: c1 {}, c2 {}. Hessian in x_h' of the BMA logit = 2 c2 I = ")
    tail = ", zero only at rho in [0]; of any bilinear x_h'^T W x_h it is 0, so no W reproduces the BMA logits when rho != 0."
    for res, (m1, m2) in ((w_p2, ("yes", "yes")),
                          (derive_w_p2(claimed_c2=lambda r: -r ** 2 / (1 - r ** 2)), ("yes", "NO")),
                          (derive_w_p2(claimed_c1=lambda r: r / (1 + r ** 2)), ("NO", "yes"))):
        assert res.detail.startswith(head.format(m1, m2)) and res.detail.endswith(tail), res.detail


def test_dpi_binary_proofs_say_what_they_proved():
    chi2, tv = derive_dpi_binary("chi2"), derive_dpi_binary("tv")
    assert (chi2.name, tv.name) == ("W.L2 (binary DPI, chi2)", "W.L2 (binary DPI, tv)")
    assert chi2.detail == (
        "chi-square DPI for binary x -> y -> z proved symbolically: both differences equal the stated certificates "
        "(residuals 0), whose factors are squares or products of parameters in [0, 1] over positive marginals; hence "
        "I_chi2(x;z) <= min(I_chi2(x;y), I_chi2(y;z)) (W Lemma 2). Assumes interior marginals (px, y, z not point "
        "masses); otherwise the MI is 0.")
    assert tv.detail == (
        "TV DPI for binary x -> y -> z proved symbolically: I_TV(x;z) = |lambda2| I_TV(x;y) <= I_TV(x;y) since "
        "1 - lambda2^2 = (c+e)(2-c-e) >= 0; I_TV(y;z) - I_TV(x;z) = 2|lambda2|(y0 y1 - |lambda1| px0 px1) >= 0 by the "
        "two sign-case certificates (every term non-negative on [0,1]^5 in its case).")


# ----------------------------------------------------------------------------- failure branches, by fault injection
# Each identity here is a theorem, so no honest input reaches the code that reports a failure. A verifier's check
# must still be able to fail, and then say which part failed and with what residual: each test below breaks ONE
# step of one derivation (the sympy call or helper that establishes one part) and reads the report.
class _SympyWith:
    """sympy as theory.symbolic sees it (its module global ``sp``), with the named functions replaced."""

    def __init__(self, **replaced):
        self._replaced = replaced

    def __getattr__(self, name):
        return self._replaced[name] if name in self._replaced else getattr(sp, name)


def test_w_l1_symbolic_pi_rows_and_root_law_are_distributions():
    for d in (2, 3):
        pi, nu, gens = symbolic._symbolic_pi(d)
        assert len(pi) == d and all(len(row) == d for row in pi) and len(nu) == d
        assert all(sp.expand(sum(row) - 1) == 0 for row in pi) and sp.expand(sum(nu) - 1) == 0
        assert len(gens) == d * (d - 1) + (d - 1)  # the free parameters: d - 1 per row of pi, d - 1 for the root
        assert set().union(*(sp.sympify(x).free_symbols for x in nu)) == {g for g in gens if g.name.startswith("r_")}


def test_w_l1_prefix_check_reports_the_prefix_that_moves_the_posterior(monkeypatch):
    # Fault: target prefixes one token too long, so they include x_h itself, whose likelihood depends on pa(h).
    real_product = itertools.product

    def product(*iterables, **kw):
        if "repeat" in kw:  # the prefixes (contexts are given, so the only call with repeat=)
            kw["repeat"] += 1
        return real_product(*iterables, **kw)

    monkeypatch.setattr(symbolic, "itertools", types.SimpleNamespace(product=product))
    res = derive_w_l1(d=2, H=3, L=1, contexts=[[[0, 0, 0]]])
    assert (res.name, res.holds) == ("W.L1 (BMA closed form)", False)
    # the closed form itself held: all 3 of its identities (h = 1; h = 2, k = 0, 1) ran before the prefix failed
    assert res.constants == {"trees": "2", "checks": "3"}
    assert res.detail == ("conditioning on the target prefix (0, 1, 0) changes the posterior of pa(2) = 0 "
                          "for context ((0, 0, 0),)")
    # by hand: both trees give the context r0 p00^2; the prefix adds r0 pi[0][1] pi[x_pa(2)][0]
    p00, p10, r0 = sp.symbols("p_0_0 p_1_0 r_0")
    assert sp.expand(sp.sympify(res.residual) - r0 ** 3 * p00 ** 4 * (1 - p00) * (p00 - p10)) == 0


def test_w_l1_polynomial_closed_forms_are_compared_without_cancelling(monkeypatch):
    # W's weights are polynomials in pi: compared by exact Poly arithmetic (fast); cancelling is for rational ones
    def refuse(*args, **kwargs):
        raise AssertionError("a polynomial closed form went down the rational path")

    monkeypatch.setattr(symbolic, "sp", _SympyWith(cancel=refuse, together=refuse))
    assert derive_w_l1(d=2, H=3, L=1).holds is True


def test_w_p1_column_claim_fails_when_the_softmax_step_fails(monkeypatch):
    # Fault: softmax(s + C) - softmax(s) no longer simplifies to 0 (a distinct term per candidate)
    faults = iter(sp.symbols("fault_0:9"))
    monkeypatch.setattr(symbolic, "sp", _SympyWith(simplify=lambda e: sp.simplify(e) + next(faults)))
    res = derive_w_p1(d=2, L=1, n_candidates=2)
    assert res.holds is False and res.residual == "fault_0"  # the score residuals are 0: the softmax one is shown
    assert res.constants["column_shift_invariant"] == "False" and res.constants["row_shift_invariant"] == "False"
    assert "so the softmax is unchanged (residual nonzero)." in res.detail


def test_w_p1_column_claim_fails_when_the_scores_move(monkeypatch):
    # Fault: "1" in the column shift 1 a^T gets an extra eps in its last entry, so 1^T x_h' is no longer 1
    eps = sp.Symbol("eps")

    def ones(n, m):
        out = sp.ones(n, m)
        out[n - 1, 0] += eps
        return out

    monkeypatch.setattr(symbolic, "sp", _SympyWith(ones=ones))
    res = derive_w_p1(d=2, L=1, n_candidates=2)
    u0, u1, a0, a1, v0, v1 = sp.symbols("u_0_0_0 u_1_0_0 a_0 a_1 v_0_0 v_0_1")
    assert res.holds is False and res.constants["column_shift_invariant"] == "False"
    # the score residual is shown (the softmax step still holds): s_1 - s_0 moves by eps (u0 - u1) a^T v
    assert sp.expand(sp.sympify(res.residual) - eps * (u0 - u1) * (a0 * v0 + a1 * v1)) == 0
    assert "so the softmax is unchanged (residual nonzero)." in res.detail


def test_w_p1_row_claim_holds_for_a_constant_row_shift(monkeypatch):
    # b = beta 1 makes b 1^T = beta 1 1^T, also a column shift: the row claim then holds, residual 0
    beta = sp.Symbol("beta")
    monkeypatch.setattr(symbolic, "sp", _SympyWith(
        Symbol=lambda name, **kw: beta if name.startswith("b_") else sp.Symbol(name, **kw)))
    res = derive_w_p1(d=2, L=1, n_candidates=2, claim="row")
    assert (res.holds, res.residual) == (True, "0")
    assert res.constants["row_shift_invariant"] == "True" and res.constants["row_shift_residual"] == "0"


def _w_p2_with_fault(monkeypatch, hessian_entry=None, gradient_component=None):
    """derive_w_p2 with ``eps`` added to one entry of the BMA logit's Hessian, or to one gradient component."""
    eps = sp.Symbol("eps")
    diff_calls = []

    def hessian(f, xs):
        out = sp.hessian(f, xs)
        if hessian_entry and any(s.name == "rho" for s in f.free_symbols):  # the BMA logit, not the bilinear score
            out[hessian_entry] += eps
        return out

    def diff(f, z):  # the gradient is taken component by component, d/dz1 then d/dz2
        diff_calls.append(z)
        return sp.diff(f, z) + (eps if len(diff_calls) - 1 == gradient_component else 0)

    monkeypatch.setattr(symbolic, "sp", _SympyWith(hessian=hessian, diff=diff))
    return derive_w_p2()


@pytest.mark.parametrize("entry", [(0, 1), (1, 1)])
def test_w_p2_fails_when_a_hessian_check_fails(monkeypatch, entry):
    # one off-diagonal entry, or the diagonal entry that c2 is not read from: c1 and c2 are still derived right
    res = _w_p2_with_fault(monkeypatch, hessian_entry=entry)
    eps = sp.Symbol("eps")
    expected = sp.zeros(2, 2)
    expected[entry] = eps
    assert res.holds is False and sp.simplify(sp.sympify(res.residual) - expected) == sp.zeros(2, 2)  # H - 2 c2 I
    assert "(derived; residual nonzero); match with the claimed constants: c1 yes, c2 yes." in res.detail


def test_w_p2_a_wrong_c2_shows_the_total_residual_and_its_own_zeros(monkeypatch):
    # Fault on the entry c2 is read from: c2 gains eps/2, so g - c1 x'^T A x - c2 |x'|^2 = -eps/2 |x'|^2
    res = _w_p2_with_fault(monkeypatch, hessian_entry=(0, 0))
    eps, z1, z2, rho = sp.symbols("eps z1 z2 rho")
    assert res.holds is False
    assert sp.simplify(sp.sympify(res.residual) + eps / 2 * (z1 ** 2 + z2 ** 2)) == 0
    assert "(derived; residual nonzero); match with the claimed constants: c1 yes, c2 NO." in res.detail
    # c2_zeros are the zeros of the c2 reported, here +-sqrt(eps/(1 + eps)), not W's single 0
    c2, zeros = sp.sympify(res.constants["c2"]), sp.sympify(res.constants["c2_zeros"])
    assert len(zeros) == 2 and all(sp.simplify(c2.subs(rho, z)) == 0 for z in zeros)


def test_w_p2_a_wrong_gradient_shows_the_gradient_residual(monkeypatch):
    # c1 is read off the first component; a fault in the second leaves the total residual 0, so the gradient's is shown
    res = _w_p2_with_fault(monkeypatch, gradient_component=1)
    assert res.holds is False and res.residual == "Matrix([[0], [eps]])"
    assert "(derived; residual nonzero); match with the claimed constants: c1 yes, c2 yes." in res.detail


def _which_joint(P):
    """Name a 2x2 joint of derive_dpi_binary by its entries: the generic one of identity 1, or P_xy, P_yz, P_xz."""
    names = {s.name for s in P[0][0].free_symbols}
    if "p" not in names:  # every entry of P_xy, P_yz, P_xz carries the input law (1 - p, p)
        return "generic"
    if "c" not in names:
        return "xy"
    return "yz" if "a" in {s.name for s in (P[0][0] + P[0][1]).free_symbols} else "xz"  # P_xz's rows sum to px


def _dpi_plain_laws():
    p, a, b, c, e = sp.symbols("p a b c e")
    y0 = (1 - p) * (1 - a) + p * b
    z0 = y0 * (1 - c) + (1 - y0) * e
    return p, a, b, c, e, y0, z0


@pytest.mark.parametrize("kind", ["chi2", "tv"])
def test_dpi_binary_fails_when_the_2x2_identity_fails(monkeypatch, kind):
    # Fault: I_chi2's cleared numerator of the generic joint gains 1, so identity 1 fails while both certificates hold
    real = symbolic._chi2_mi

    def chi2_mi(P):
        num, den = real(P)
        return (num + 1 if _which_joint(P) == "generic" else num), den

    monkeypatch.setattr(symbolic, "_chi2_mi", chi2_mi)
    res = derive_dpi_binary(kind)
    assert (res.name, res.holds) == (f"W.L2 (binary DPI, {kind})", False)
    # the failing step's own residual, not "0" (every certificate still holds; tv used to raise StopIteration)
    assert res.residual == "1"
    assert res.detail == (f"{'chi-square' if kind == 'chi2' else 'TV'} DPI for binary x -> y -> z NOT proved: 1 step(s) "
                          "of the proof have a nonzero residual; the first is the residual reported.")


@pytest.mark.parametrize("joint", ["xy", "yz"])
def test_dpi_binary_chi2_reports_the_certificate_that_fails(monkeypatch, joint):
    # Fault: one MI's cleared numerator gains 1; only the certificate using that MI fails, and its residual is shown
    real = symbolic._chi2_mi

    def chi2_mi(P):
        num, den = real(P)
        return (num + 1 if _which_joint(P) == joint else num), den

    monkeypatch.setattr(symbolic, "_chi2_mi", chi2_mi)
    res = derive_dpi_binary("chi2")
    p, a, b, c, e, y0, z0 = _dpi_plain_laws()
    # r1 = n_xy z0 z1 - n_xz y0 y1 - cert1 gains z0 z1; r2 = n_yz px0 px1 - n_xz y0 y1 - cert2 gains px0 px1
    expected = z0 * (1 - z0) if joint == "xy" else (1 - p) * p
    assert res.holds is False and sp.expand(sp.sympify(res.residual) - expected) == 0


def test_dpi_binary_tv_reports_the_first_identity_that_fails(monkeypatch):
    # Fault: det(P_yz) doubled, so det_yz = y0 y1 lambda2 (the second determinant identity) fails by det_yz itself
    real = symbolic._det2
    monkeypatch.setattr(symbolic, "_det2", lambda P: 2 * real(P) if _which_joint(P) == "yz" else real(P))
    res = derive_dpi_binary("tv")
    p, a, b, c, e, y0, z0 = _dpi_plain_laws()
    assert res.holds is False and sp.expand(sp.sympify(res.residual) - y0 * (1 - y0) * (1 - c - e)) == 0


def test_dpi_binary_defaults_to_the_chi2_proof():
    res = derive_dpi_binary()
    assert (res.name, res.holds, res.residual) == ("W.L2 (binary DPI, chi2)", True, "0")
