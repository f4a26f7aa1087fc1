"""Symbolic (sympy) derivations for the claims of W, each returning its residual.

Every derivation returns a :class:`SymbolicResult`: whether the identity holds, the residual
(``"0"`` when it does; otherwise the first nonzero residual found, as sympy prints it), the
constants it derived, and a sentence on what was checked. Closed forms that the claims
compare against can be injected (``closed_form=``, ``claimed_c1=``/``claimed_c2=``,
``claim=``), so a perturbed formula can be shown to fail.

- :func:`derive_w_l1`: W Lemma 1 (BMA = softmax of summed log-likelihoods), by exact Bayes
  over all recursive trees with symbolic ``pi`` and root law;
- :func:`derive_w_p1`: W Proposition 1 (column-shift invariance; a row shift is not);
- :func:`derive_w_p2`: W Proposition 2 (the Gaussian BMA constants ``c1, c2`` and the
  Hessian argument that no bilinear score reproduces them);
- :func:`derive_dpi_binary`: W Lemma 2 (DPI) for binary ``x -> y -> z``, chi-square and TV.

sympy only; each derivation runs in seconds at the default sizes.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Callable

import sympy as sp

from .errors import TheoryError

__all__ = ["SymbolicResult", "derive_w_l1", "derive_w_p1", "derive_w_p2", "derive_dpi_binary"]


@dataclass(frozen=True)
class SymbolicResult:
    """Outcome of a symbolic derivation.

    Attributes
    ----------
    name : str
        Claim id and what was derived.
    holds : bool or None
        ``True``: the identity was verified (residual simplified to 0); ``False``: a
        nonzero residual was found; ``None``: no symbolic verdict (``detail`` says why).
    residual : str
        ``"0"`` when it holds, else the first nonzero residual (sympy ``str``).
    constants : dict[str, str]
        Derived constants and counts, as strings.
    detail : str
        What was checked, on which inputs, and any counterexample.
    """

    name: str
    holds: bool | None
    residual: str
    constants: dict = field(default_factory=dict)
    detail: str = ""


def _check_small_int(value, name: str, lo: int, hi: int) -> int:
    if isinstance(value, (bool,)) or not isinstance(value, int) or not lo <= value <= hi:
        raise TheoryError(f"{name} must be an integer in [{lo}, {hi}] (kept small so sympy stays fast), got {value!r}")
    return value


# ----------------------------------------------------------------------------- W Lemma 1
def _symbolic_pi(d: int):
    """``pi[s][t]`` with symbols ``p_s_t`` for ``t < d-1`` and the last entry ``1 - sum``; root law ``r_s``."""
    pi_syms = [[sp.Symbol(f"p_{s}_{t}") for t in range(d - 1)] for s in range(d)]
    pi = [row + [1 - sum(row)] for row in pi_syms]
    r_syms = [sp.Symbol(f"r_{s}") for s in range(d - 1)]
    nu = r_syms + [1 - sum(r_syms)]
    gens = [s for row in pi_syms for s in row] + r_syms
    return pi, nu, gens


def _default_w_l1_closed_form(pi, context, h):
    """W Lemma 1: weight of ``h'`` is ``exp(sum_l log pi(x_h^l | x_h'^l)) = prod_l pi[x_h'^l][x_h^l]``."""
    return [sp.Mul(*[pi[row[k]][row[h]] for row in context]) for k in range(h)]


def derive_w_l1(d: int = 2, H: int = 3, L: int = 2, contexts=None, *,
                closed_form: Callable | None = None, check_prefix: bool = True) -> SymbolicResult:
    """W Lemma 1 by exact Bayes: ``P(pa(h) = h' | x^{1:L}) = softmax_{h'<h} sum_l log pi(x_h^l | x_h'^l)``.

    Symbolic ``pi`` (entries ``p_s_t``, each row's last entry ``1 - sum`` of the others) and
    symbolic root law ``r``. The posterior is computed by brute force over **all**
    ``(H-1)!`` recursive trees (parent arrays with ``parents[h] in 0..h-1``, uniform prior):
    ``P(pa(h) = h' | x) = sum_{T: pa_T(h) = h'} P(x | T) / sum_T P(x | T)`` with
    ``P(x | T) = prod_l nu(x_0^l) prod_{j >= 1} pi[x_{pa_T(j)}^l][x_j^l]``; it is compared with
    the closed form for every context and every ``h >= 1`` (positions 0-indexed, root 0), by
    clearing denominators and expanding the difference. With ``check_prefix`` it also
    checks that conditioning on a target prefix ``x^{L+1}_{<h}`` (every one of the ``d^h``)
    leaves the posterior unchanged (the prefix's likelihood depends only on
    ``pa(1..h-1)``, which are independent of ``pa(h)`` a priori).

    Parameters
    ----------
    d, H, L : int
        Alphabet size, positions, context examples (kept small: ``d^(L H)`` contexts).
    contexts : None or sequence of (L, H) integer arrays
        Contexts to check; ``None`` = all of ``{0..d-1}^{L x H}``.
    closed_form : callable ``(pi, context, h) -> list of h sympy expressions``, optional
        Unnormalised posterior weights of candidates ``0..h-1`` (``pi`` a nested list of
        sympy expressions, ``context`` a tuple of ``L`` tuples of ``H`` ints). Default: W
        Lemma 1's ``prod_l pi[x_h'^l][x_h^l]``. Inject a perturbed formula to see it fail.
    check_prefix : bool

    Returns
    -------
    SymbolicResult
        ``holds`` is ``True`` iff every residual is 0; ``constants`` has the counts.
    """
    d = _check_small_int(d, "d", 2, 4)
    H = _check_small_int(H, "H", 2, 5)
    L = _check_small_int(L, "L", 1, 4)
    closed_form = closed_form or _default_w_l1_closed_form
    if contexts is None:
        contexts = [tuple(tuple(flat[l * H:(l + 1) * H]) for l in range(L))
                    for flat in itertools.product(range(d), repeat=L * H)]
    else:
        checked = []
        for i, ctx in enumerate(contexts):
            rows = [list(r) for r in ctx]
            if len(rows) != L or any(len(r) != H for r in rows):
                raise TheoryError(f"contexts[{i}] must have shape (L, H) = ({L}, {H})")
            for r in rows:
                for tok in r:
                    if isinstance(tok, bool) or not isinstance(tok, int) or not 0 <= tok < d:
                        raise TheoryError(f"contexts[{i}] has token {tok!r}; tokens must be integers in 0..{d - 1}")
            checked.append(tuple(tuple(r) for r in rows))
        contexts = checked
    pi, nu, gens = _symbolic_pi(d)
    pi_poly = [[sp.Poly(e, *gens) for e in row] for row in pi]
    nu_poly = [sp.Poly(e, *gens) for e in nu]
    one = sp.Poly(1, *gens)
    trees = [(-1,) + t for t in itertools.product(*[range(j) for j in range(1, H)])]

    def seq_lik(tree, seqs):
        """``prod over sequences of nu(x_0) prod_{j >= 1} pi[x_pa(j)][x_j]`` (sequences may be prefixes)."""
        out = one
        for seq in seqs:
            out = out * nu_poly[seq[0]]
            for j in range(1, len(seq)):
                out = out * pi_poly[seq[tree[j]]][seq[j]]
        return out

    n_checks = n_prefix = 0
    for ctx in contexts:
        liks = [seq_lik(t, ctx) for t in trees]
        total = sum(liks[1:], liks[0])
        for h in range(1, H):
            weights = closed_form(pi, ctx, h)
            if len(weights) != h:
                raise TheoryError(f"closed_form returned {len(weights)} weights for h = {h}; expected {h}")
            nums = [sum((lk for t, lk in zip(trees, liks) if t[h] == k), 0 * one) for k in range(h)]
            try:  # polynomial weights (the default): exact Poly arithmetic, fast
                w_polys = [sp.Poly(w, *gens) for w in weights]
            except sp.PolynomialError:
                w_polys = None
            for k in range(h):
                n_checks += 1
                if w_polys is not None:
                    w_sum = sum(w_polys[1:], w_polys[0])
                    resid_poly = nums[k] * w_sum - w_polys[k] * total
                    resid = resid_poly.as_expr()
                    nonzero = not resid_poly.is_zero
                else:
                    resid = sp.together(nums[k].as_expr() * sp.Add(*weights) - weights[k] * total.as_expr())
                    nonzero = sp.cancel(resid) != 0
                if nonzero:
                    return SymbolicResult(
                        "W.L1 (BMA closed form)", False, str(sp.factor(resid)),
                        {"trees": str(len(trees)), "checks": str(n_checks)},
                        f"posterior of pa({h}) = {k} differs from the closed form for context {ctx} "
                        f"(rows = examples, columns = positions 0..{H - 1}); residual = "
                        f"numerator*sum(weights) - weight*evidence")
            if check_prefix:
                for prefix in itertools.product(range(d), repeat=h):
                    n_prefix += 1
                    extra = [seq_lik(t, [prefix]) for t in trees]
                    total_p = sum((a * b for a, b in zip(liks, extra)), 0 * one)
                    for k in range(h):
                        num_p = sum((a * b for t, a, b in zip(trees, liks, extra) if t[h] == k), 0 * one)
                        resid = (num_p * total - nums[k] * total_p)
                        if not resid.is_zero:
                            return SymbolicResult(
                                "W.L1 (BMA closed form)", False, str(sp.factor(resid.as_expr())),
                                {"trees": str(len(trees)), "checks": str(n_checks)},
                                f"conditioning on the target prefix {prefix} changes the posterior of pa({h}) = {k} "
                                f"for context {ctx}")
    return SymbolicResult(
        "W.L1 (BMA closed form)", True, "0",
        {"d": str(d), "H": str(H), "L": str(L), "trees": str(len(trees)), "contexts": str(len(contexts)),
         "checks": str(n_checks), "prefix_checks": str(n_prefix)},
        f"exact Bayes over all {len(trees)} recursive trees on {H} nodes with symbolic pi and root law equals "
        f"the closed form for {len(contexts)} contexts and every h in 1..{H - 1} ({n_checks} identities)"
        + (f"; conditioning on each of the target prefixes leaves it unchanged ({n_prefix} prefixes)"
           if check_prefix else ""))


# ----------------------------------------------------------------------------- W Proposition 1
def derive_w_p1(d: int = 3, L: int = 2, n_candidates: int = 3, *, claim: str = "column") -> SymbolicResult:
    """W Proposition 1: ``W + 1 a^T`` gives the same layer-2 softmax as ``W``; ``W + b 1^T`` does not.

    Scores ``s_h' = sum_l x_h'^lT M x_h^l`` for candidates ``h' = 0..n_candidates-1`` with
    symbolic ``W`` (``d x d``), ``a``, ``b`` and symbolic token vectors: each candidate
    vector ``x_h'^l`` has entries summing to 1 (one-hot tokens are the special case; the
    last entry is ``1 - sum`` of the others), the target ``x_h^l`` is generic. The softmax
    over ``h'`` is unchanged iff every difference ``s_h' - s_0`` is unchanged:

    - column shift ``M = W + 1 a^T``: ``s_h'`` gains ``sum_l (1^T x_h'^l)(a^T x_h^l) = sum_l a^T x_h^l``,
      the same for every ``h'`` (residual 0), and ``softmax(s + C) = softmax(s)`` (checked);
    - row shift ``M = W + b 1^T``: ``s_h'`` gains ``sum_l (b^T x_h'^l)(1^T x_h^l)``, which depends
      on ``h'``; a concrete one-hot context with a nonzero residual is reported.

    Parameters
    ----------
    d, L, n_candidates : int
    claim : {"column", "row"}
        The shift claimed to leave the attention invariant. ``"column"`` is W Prop. 1
        (``holds=True``); ``"row"`` is the wrong variant (``holds=False``).

    Returns
    -------
    SymbolicResult
        ``constants`` holds both verdicts (``column_shift_invariant``, ``row_shift_invariant``),
        the row-shift residual and its concrete counterexample.
    """
    d = _check_small_int(d, "d", 2, 6)
    L = _check_small_int(L, "L", 1, 4)
    n_candidates = _check_small_int(n_candidates, "n_candidates", 2, 5)
    if claim not in ("column", "row"):
        raise TheoryError(f"claim must be 'column' (W Prop. 1) or 'row', got {claim!r}")
    W = sp.Matrix(d, d, lambda i, j: sp.Symbol(f"w_{i}_{j}"))
    a = sp.Matrix(d, 1, lambda i, _: sp.Symbol(f"a_{i}"))
    b = sp.Matrix(d, 1, lambda i, _: sp.Symbol(f"b_{i}"))
    ones = sp.ones(d, 1)

    def cand(k, l):
        free = [sp.Symbol(f"u_{k}_{l}_{s}") for s in range(d - 1)]
        return sp.Matrix(free + [1 - sum(free)])

    U = [[cand(k, l) for l in range(L)] for k in range(n_candidates)]
    V = [sp.Matrix(d, 1, lambda i, _, l=l: sp.Symbol(f"v_{l}_{i}")) for l in range(L)]

    def scores(M):
        return [sp.expand(sum(((U[k][l].T * M * V[l])[0, 0] for l in range(L)), sp.Integer(0)))
                for k in range(n_candidates)]

    s0 = scores(W)
    s_col = scores(W + ones * a.T)
    s_row = scores(W + b * ones.T)

    def diff_residuals(s_new):
        return [sp.expand((s_new[k] - s_new[0]) - (s0[k] - s0[0])) for k in range(1, n_candidates)]

    col_res = diff_residuals(s_col)
    row_res = diff_residuals(s_row)
    col_ok = all(r == 0 for r in col_res)
    row_ok = all(r == 0 for r in row_res)
    # The common shift and the softmax identity softmax(s + C) = softmax(s).
    shift = sp.expand(s_col[0] - s0[0])
    sig = sp.symbols(f"sigma_0:{n_candidates}")
    C = sp.Symbol("C")
    soft = lambda xs: [sp.exp(x) / sum(sp.exp(y) for y in xs) for x in xs]  # noqa: E731
    soft_res = [sp.simplify(p - q) for p, q in zip(soft([x + C for x in sig]), soft(list(sig)))]
    soft_ok = all(r == 0 for r in soft_res)
    # Concrete one-hot counterexample for the row shift, by substitution into the residual:
    # candidate 0 is token 0 and candidate 1 is token 1 in every example, the target is token 0.
    def onehot_subs(k, l, tok):
        return {sp.Symbol(f"u_{k}_{l}_{s}"): int(s == tok) for s in range(d - 1)}

    subs = {}
    for l in range(L):
        subs.update(onehot_subs(0, l, 0))
        subs.update(onehot_subs(1, l, 1))
        subs.update({sp.Symbol(f"v_{l}_{i}"): int(i == 0) for i in range(d)})
    concrete = sp.expand(row_res[0].subs(subs))
    # Numeric instance: W = 0, b = e_1: the two candidates' softmax moves away from (1/2, 1/2).
    num_shift = concrete.subs({sp.Symbol(f"b_{i}"): int(i == 1) for i in range(d)})
    num_soft = [sp.Integer(1) / (1 + sp.exp(num_shift)), sp.exp(num_shift) / (1 + sp.exp(num_shift))]
    constants = {
        "column_shift_invariant": str(col_ok and soft_ok),
        "column_shift_common_gain": str(shift),
        "row_shift_invariant": str(row_ok),
        "row_shift_residual": str(row_res[0]),
        "row_shift_counterexample": (f"L={L} examples, candidate 0 = token 0, candidate 1 = token 1, target = token 0: "
                                     f"score difference changes by {concrete}"),
        "row_shift_numeric": (f"W = 0, b = e_1: softmax over the two candidates goes from (1/2, 1/2) to "
                              f"({sp.N(num_soft[0], 6)}, {sp.N(num_soft[1], 6)})"),
    }
    if claim == "column":
        holds = col_ok and soft_ok
        residual = "0" if holds else str(next((r for r in col_res if r != 0), soft_res[0]))
    else:
        holds = row_ok
        residual = "0" if holds else str(row_res[0])
    detail = (f"d={d}, L={L}, {n_candidates} candidates with symbolic W, a, b and symbolic tokens "
              f"(candidate vectors sum to 1). Column shift 1 a^T: every candidate's score gains the same "
              f"{constants['column_shift_common_gain']}, so the softmax is unchanged "
              f"(residual {'0' if col_ok and soft_ok else 'nonzero'}). Row shift b 1^T: the score "
              f"differences change by a nonzero amount (constant row_shift_residual), e.g. "
              f"{constants['row_shift_counterexample']}; so attention is NOT invariant under row shifts "
              f"(compare learned W by column softmax). Claim checked: '{claim}' shift is invariant.")
    return SymbolicResult(f"W.P1 ({claim}-shift invariance)", bool(holds), residual, constants, detail)


# ----------------------------------------------------------------------------- W Proposition 2
def derive_w_p2(*, claimed_c1: Callable | None = None, claimed_c2: Callable | None = None) -> SymbolicResult:
    """W Proposition 2: derive ``c1``, ``c2`` from the Gaussian log density; no bilinear ``W`` fits.

    With ``d = 2``, ``A`` the rotation by a symbolic angle ``theta``, symbolic ``rho`` and
    vectors ``x_h = (y1, y2)``, ``x_h' = (z1, z2)``: expand
    ``f = log N(x_h; rho A^T x_h', (1 - rho^2) I)`` and keep the part that depends on ``x_h'``,
    ``g = f - f|_{x_h' = 0}``. Then ``c2`` is read off the Hessian
    ``d^2 g / d x_h'^2 = 2 c2 I`` (its off-diagonal and the two diagonal entries are checked)
    and ``c1`` off the gradient ``dg/dx_h'|_0 = c1 A x_h``; the residual
    ``g - c1 x_h'^T A x_h - c2 ||x_h'||^2`` must simplify to 0. The constants are derived, not
    typed in; they are then compared with the claimed ones (default: W's
    ``rho/(1 - rho^2)`` and ``-rho^2/(2(1 - rho^2))``). Finally, any bilinear score
    ``x_h'^T W x_h`` (symbolic ``W``) has Hessian 0 in ``x_h'``, while the BMA logit has
    ``2 c2 I != 0`` for ``rho != 0``; softmax over ``h'`` ignores only terms constant in
    ``h'``, whose Hessian in ``x_h'`` is also 0, so no ``W`` reproduces the BMA logits.

    Parameters
    ----------
    claimed_c1, claimed_c2 : callable ``rho -> sympy expression``, optional
        The constants to compare with (inject a perturbed one to see ``holds=False``).

    Returns
    -------
    SymbolicResult
        ``constants``: ``c1``, ``c2`` (derived), ``hessian_bma``, ``hessian_bilinear``,
        ``c2_zeros`` (the values of ``rho`` where ``c2 = 0``).
    """
    rho, theta = sp.symbols("rho theta", real=True)
    y1, y2, z1, z2 = sp.symbols("y1 y2 z1 z2", real=True)
    d = 2
    A = sp.Matrix([[sp.cos(theta), -sp.sin(theta)], [sp.sin(theta), sp.cos(theta)]])
    xh = sp.Matrix([y1, y2])
    xp = sp.Matrix([z1, z2])
    var = 1 - rho ** 2
    resid_vec = xh - rho * A.T * xp
    logdens = -sp.Rational(d, 2) * sp.log(2 * sp.pi * var) - (resid_vec.T * resid_vec)[0, 0] / (2 * var)
    g = sp.expand(logdens - logdens.subs({z1: 0, z2: 0}))
    hess = sp.hessian(g, (z1, z2)).applyfunc(lambda e: sp.simplify(sp.trigsimp(e)))
    c2 = sp.simplify(hess[0, 0] / 2)
    hess_res = hess - hess[0, 0] * sp.eye(2)  # the Hessian must be 2 c2 I
    grad0 = sp.Matrix([sp.diff(g, z).subs({z1: 0, z2: 0}) for z in (z1, z2)])
    Axh = A * xh
    # c1 from one component where (A x_h) is a generic nonzero expression; check both components.
    c1 = sp.simplify(sp.trigsimp(grad0[0] / Axh[0]))
    grad_res = (grad0 - c1 * Axh).applyfunc(lambda e: sp.simplify(sp.trigsimp(e)))
    total_res = sp.simplify(sp.trigsimp(sp.expand(g - c1 * (xp.T * A * xh)[0, 0] - c2 * (xp.T * xp)[0, 0])))
    failing = _nonzero([total_res, grad_res, hess_res])
    derived_ok = not failing
    claim1 = claimed_c1(rho) if claimed_c1 else rho / (1 - rho ** 2)
    claim2 = claimed_c2(rho) if claimed_c2 else -rho ** 2 / (2 * (1 - rho ** 2))
    diff1 = sp.simplify(c1 - claim1)
    diff2 = sp.simplify(c2 - claim2)
    zeros = sp.solve(sp.numer(sp.together(c2)), rho)
    c2_nonzero = zeros == [0]
    Wm = sp.Matrix(2, 2, lambda i, j: sp.Symbol(f"w_{i}_{j}"))
    hess_bilinear = sp.hessian((xp.T * Wm * xh)[0, 0], (z1, z2))
    bilinear_zero = hess_bilinear == sp.zeros(2, 2)
    holds = bool(derived_ok and diff1 == 0 and diff2 == 0 and c2_nonzero and bilinear_zero)
    if not derived_ok:
        residual = str(failing[0])
    elif diff1 != 0 or diff2 != 0:
        residual = f"c1 - claimed_c1 = {diff1}; c2 - claimed_c2 = {diff2}"
    else:
        residual = "0"
    constants = {
        "c1": str(c1),
        "c2": str(c2),
        "claimed_c1": str(claim1),
        "claimed_c2": str(claim2),
        "hessian_bma": str(hess),
        "hessian_bilinear": str(hess_bilinear),
        "c2_zeros": str(zeros),
    }
    detail = (f"from log N(x_h; rho A^T x_h', (1-rho^2) I) with A = rotation(theta), d = 2: the x_h'-dependent part is "
              f"c1 x_h'^T A x_h + c2 ||x_h'||^2 with c1 = {c1}, c2 = {c2} (derived; residual "
              f"{'0' if derived_ok else 'nonzero'}); match with the claimed constants: "
              f"c1 {'yes' if diff1 == 0 else 'NO'}, c2 {'yes' if diff2 == 0 else 'NO'}. "
              f"Hessian in x_h' of the BMA logit = 2 c2 I = {hess.tolist()}, zero only at rho in {zeros}; "
              f"of any bilinear x_h'^T W x_h it is 0, so no W reproduces the BMA logits when rho != 0.")
    return SymbolicResult("W.P2 (Gaussian BMA constants; no bilinear W)", holds, residual, constants, detail)


# ----------------------------------------------------------------------------- W Lemma 2 (binary)
def _nonzero(parts) -> list:
    """The residuals of a proof's steps (Polys, expressions or matrices) that are not 0, in the proof's order,
    as expressions: the proof holds iff this is empty, and a failure reports the first one."""
    out = []
    for r in parts:
        if isinstance(r, sp.Poly):  # exact: a Poly is zero iff it has no terms, no simplify needed
            if not r.is_zero:
                out.append(r.as_expr())
            continue
        entries = list(r) if isinstance(r, sp.MatrixBase) else [r]
        if any(sp.simplify(e) != 0 for e in entries):
            out.append(r)
    return out


def _failed_proof(failing: list, kind: str) -> str:
    """The detail of a binary DPI proof that failed ("" when it holds)."""
    if not failing:
        return ""
    return (f"{kind} DPI for binary x -> y -> z NOT proved: {len(failing)} step(s) of the proof have a nonzero "
            "residual; the first is the residual reported.")


def _chi2_mi(P):
    """``I_chi2 = sum P^2/(Px Py) - 1`` of a 2x2 joint (nested lists), as ``(numerator, denominator)``.

    ``denominator = px0 px1 py0 py1``; ``numerator = sum_ij P_ij^2 px_(1-i) py_(1-j) - denominator``
    (the definition with denominators cleared), so identities reduce to polynomial expansion.
    """
    r = [P[i][0] + P[i][1] for i in range(2)]
    q = [P[0][j] + P[1][j] for j in range(2)]
    den = r[0] * r[1] * q[0] * q[1]
    num = sum((P[i][j] ** 2 * r[1 - i] * q[1 - j] for i in range(2) for j in range(2)), 0 * den) - den
    return num, den


def _det2(P):
    return P[0][0] * P[1][1] - P[0][1] * P[1][0]


def _as_exprs(P):
    return [[P[i][j].as_expr() for j in range(2)] for i in range(2)]


def _binary_mi(P, kind: str):
    """``I_f = D_f(P || Px Py)`` of a 2x2 joint (nested lists of sympy expressions), in
    :mod:`theory.information`'s conventions (TV with its 1/2, squared Hellinger without one);
    KL terms with ``P_ij = 0`` follow ``0 log 0 = 0``."""
    r = [P[i][0] + P[i][1] for i in range(2)]
    q = [P[0][j] + P[1][j] for j in range(2)]
    cells = [(P[i][j], r[i] * q[j]) for i in range(2) for j in range(2)]
    if kind == "chi2":
        return sum(pij ** 2 / rq for pij, rq in cells) - 1
    if kind == "tv":
        return sum(sp.Abs(pij - rq) for pij, rq in cells) / 2
    if kind == "kl":
        return sum(pij * sp.log(pij / rq) for pij, rq in cells if pij != 0)
    return sum((sp.sqrt(pij) - sp.sqrt(rq)) ** 2 for pij, rq in cells)


def _dpi_refuted_below_one(kind: str, factor) -> SymbolicResult:
    """``I(x;z) <= factor I(y;z)`` with ``factor < 1`` fails where both channels are noiseless."""
    half = sp.Rational(1, 2)
    P = [[half, sp.Integer(0)], [sp.Integer(0), half]]  # x = y = z, fair: P_xy = P_yz = P_xz
    value = sp.nsimplify(_binary_mi(P, kind))
    excess = sp.simplify((1 - factor) * value)
    point = "p = 1/2, a = b = c = e = 0 (x = y = z)"
    return SymbolicResult(
        f"W.L2 (binary DPI, {kind})", False, str(excess),
        {"counterexample": point, f"I_{kind}(x;y) = I_{kind}(y;z) = I_{kind}(x;z)": str(value),
         "claimed_factor": str(factor)},
        f"refuted: with both channels noiseless ({point}) the three {kind} mutual informations are equal to "
        f"{value} > 0, so I(x;z) - {factor} I(y;z) = {excess} > 0; a DPI with a factor below 1 fails for every f")


def derive_dpi_binary(kind: str = "chi2", *, factor=1) -> SymbolicResult:
    """W Lemma 2 (DPI) for binary ``x -> y -> z``: ``I_f(x; z) <= factor I_f(x; y)`` and
    ``I_f(x; z) <= factor I_f(y; z)``, with W's ``factor = 1``.

    Input law ``(1 - p, p)``, channels ``K1 = [[1-a, a], [b, 1-b]]`` (``x -> y``) and
    ``K2 = [[1-c, c], [e, 1-e]]`` (``y -> z``), all parameters in ``[0, 1]``. Write
    ``lambda1 = 1 - a - b``, ``lambda2 = 1 - c - e`` and ``(y0, y1)``, ``(z0, z1)`` for the laws of
    ``y`` and ``z``. The proofs rest on two identities, each verified by expansion:

    - for a 2x2 joint ``P``: ``P[i, j] - Px[i] Py[j] = (-1)^(i+j) det P``, hence
      ``I_chi2 = det(P)^2 / (px0 px1 py0 py1)`` and ``I_TV = 2 |det P|``;
    - for a binary channel with flips ``(alpha, beta)``, ``lambda = 1 - alpha - beta`` and input
      ``P(1) = s``, output ``P(1) = t = alpha + lambda s``:
      ``t (1 - t) - lambda^2 s (1 - s) = (1 - s) alpha (1 - alpha) + s beta (1 - beta) >= 0``.

    ``kind="chi2"``: the certificates
    ``I(x;y) - I(x;z) = det(P_xy)^2 [(1 - y1) c (1-c) + y1 e (1-e)] / (px0 px1 y0 y1 z0 z1)`` and
    ``I(y;z) - I(x;z) = lambda2^2 [(1 - p) a (1-a) + p b (1-b)] / (z0 z1)`` are verified with the
    MIs computed from their definitions ``sum P^2/(Px Py) - 1`` (denominators cleared, then
    expanded); every factor is
    non-negative on the parameter box (marginals interior; a degenerate marginal makes
    the MI 0 and the claim trivial). ``kind="tv"``: ``I_TV(x;z) = |lambda2| I_TV(x;y)`` with
    ``1 - lambda2^2 = (c + e)(2 - c - e) >= 0``, and
    ``I_TV(y;z) - I_TV(x;z) = 2 |lambda2| (y0 y1 - |lambda1| px0 px1)`` with
    ``y0 y1 - lambda1 px0 px1 = a b + lambda1 (b p^2 + a (1-p)^2)`` (used when ``lambda1 >= 0``) and
    ``y0 y1 + lambda1 px0 px1 = (1-a)(1-b) - lambda1 ((1-b) p^2 + (1-a)(1-p)^2)`` (when ``lambda1 < 0``).
    ``kind="kl"`` and ``"hellinger"``: no symbolic proof is attempted (the difference is
    transcendental in the parameters); ``holds=None`` and the difference is returned as the
    residual. Those two kinds are checked numerically (exact enumeration and hypothesis
    search) by the W.L2 claim and the information tests, not here.

    Every step is a theorem, so only an injected fault makes the proof fail; then ``holds=False``,
    the residual is the first step (identities, denominators, certificates, in that order) whose
    residual is not 0, and the detail says it was NOT proved.

    ``factor`` other than 1 (inject one to see a wrong DPI fail): for ``factor > 1`` the claim follows
    from the proof at 1 (the MIs are >= 0). For ``factor < 1`` it is false for every kind:
    at ``a = b = c = e = 0`` (both channels noiseless) and ``p = 1/2``, ``x = y = z`` and the
    three MIs are equal and positive, so ``I(x;z) - factor I(y;z) = (1 - factor) I > 0``;
    ``holds=False`` with that exact value as the residual and the point in ``constants``.

    Parameters
    ----------
    kind : {"chi2", "tv", "kl", "hellinger"}
    factor : number > 0, default 1
        The claimed constant (exact: a float is read as the binary fraction it holds).
    """
    if kind not in ("chi2", "tv", "kl", "hellinger"):
        raise TheoryError(f"unknown kind {kind!r}; expected 'chi2', 'tv', 'kl' or 'hellinger'")
    try:
        finite = not isinstance(factor, (bool, str)) and math.isfinite(float(factor))
    except (TypeError, ValueError):
        finite = False
    if not finite or not float(factor) > 0:
        raise TheoryError(f"factor must be a finite number > 0, got {factor!r}")
    factor = sp.Rational(factor)
    if factor < 1:
        return _dpi_refuted_below_one(kind, factor)
    p, a, b, c, e = sp.symbols("p a b c e", real=True)
    gens = (p, a, b, c, e)
    P_ = lambda expr: sp.Poly(expr, *gens)  # noqa: E731  (exact polynomial arithmetic: fast expansion)
    px = [P_(1 - p), P_(p)]
    K1 = [[P_(1 - a), P_(a)], [P_(b), P_(1 - b)]]
    K2 = [[P_(1 - c), P_(c)], [P_(e), P_(1 - e)]]
    zero = P_(0)
    P_xy = [[px[i] * K1[i][j] for j in range(2)] for i in range(2)]
    py = [P_xy[0][j] + P_xy[1][j] for j in range(2)]
    P_yz = [[py[i] * K2[i][j] for j in range(2)] for i in range(2)]
    P_xz = [[sum((P_xy[i][k] * K2[k][j] for k in range(2)), zero) for j in range(2)] for i in range(2)]
    lam1, lam2 = P_(1 - a - b), P_(1 - c - e)
    y0, y1 = py
    z0, z1 = [P_xz[0][j] + P_xz[1][j] for j in range(2)]
    # Identity 1 on a generic 2x2 joint.
    q00, q01, q10 = sp.symbols("q00 q01 q10")
    Q_ = lambda expr: sp.Poly(expr, q00, q01, q10)  # noqa: E731
    G = [[Q_(q00), Q_(q01)], [Q_(q10), Q_(1 - q00 - q01 - q10)]]
    gr = [G[i][0] + G[i][1] for i in range(2)]
    gc = [G[0][j] + G[1][j] for j in range(2)]
    id1 = [G[i][j] - gr[i] * gc[j] - (-1) ** (i + j) * _det2(G) for i in range(2) for j in range(2)]
    num_g, _ = _chi2_mi(G)
    id1_chi2 = num_g - _det2(G) ** 2  # I_chi2 = det^2 / (px0 px1 py0 py1)
    # Identity 2: the binary-channel lemma.
    s, al, be = sp.symbols("s alpha beta")
    lam = 1 - al - be
    t = al + lam * s
    id2 = sp.expand(t * (1 - t) - lam ** 2 * s * (1 - s) - ((1 - s) * al * (1 - al) + s * be * (1 - be)))
    identities = id1 + [id1_chi2, id2]
    base = {"identity_2x2": "P[i,j] - Px[i] Py[j] = (-1)^(i+j) det P",
            "identity_channel": "t(1-t) - lambda^2 s(1-s) = (1-s) alpha(1-alpha) + s beta(1-beta)"}

    if kind == "chi2":
        (n_xy, d_xy), (n_yz, d_yz), (n_xz, d_xz) = _chi2_mi(P_xy), _chi2_mi(P_yz), _chi2_mi(P_xz)
        # Denominators: d_xy = px0 px1 y0 y1, d_yz = y0 y1 z0 z1, d_xz = px0 px1 z0 z1; each
        # certificate identity is multiplied by px0 px1 y0 y1 z0 z1 and expanded.
        denoms = [d_xy - px[0] * px[1] * y0 * y1, d_yz - y0 * y1 * z0 * z1, d_xz - px[0] * px[1] * z0 * z1]
        cert1 = _det2(P_xy) ** 2 * ((1 - y1) * P_(c * (1 - c)) + y1 * P_(e * (1 - e)))
        cert2 = lam2 ** 2 * P_((1 - p) * a * (1 - a) + p * b * (1 - b)) * px[0] * px[1] * y0 * y1
        r1 = n_xy * (z0 * z1) - n_xz * (y0 * y1) - cert1
        r2 = n_yz * (px[0] * px[1]) - n_xz * (y0 * y1) - cert2
        failing = _nonzero(identities + denoms + [r1, r2])
        holds = not failing
        consts = dict(base, **{
            "I_xy_minus_I_xz": "det(P_xy)^2 [(1-y1) c(1-c) + y1 e(1-e)] / (px0 px1 y0 y1 z0 z1)",
            "I_yz_minus_I_xz": "lambda2^2 [(1-p) a(1-a) + p b(1-b)] / (z0 z1)",
            "ratio_xz_over_xy": "lambda2^2 y0 y1 / (z0 z1)",
            "ratio_xz_over_yz": "lambda1^2 px0 px1 / (y0 y1)",
        })
        residual = "0" if holds else str(failing[0])
        detail = _failed_proof(failing, "chi-square") or (
                  "chi-square DPI for binary x -> y -> z proved symbolically: both differences equal the stated "
                  "certificates (residuals 0), whose factors are squares or products of parameters in [0, 1] "
                  "over positive marginals; hence I_chi2(x;z) <= min(I_chi2(x;y), I_chi2(y;z)) (W Lemma 2). "
                  "Assumes interior marginals (px, y, z not point masses); otherwise the MI is 0.")
        return SymbolicResult("W.L2 (binary DPI, chi2)", bool(holds), residual, consts, detail)

    if kind == "tv":
        det_xy, det_yz, det_xz = _det2(P_xy), _det2(P_yz), _det2(P_xz)
        r_det = [det_xz - lam2 * det_xy, det_yz - y0 * y1 * lam2, det_xz - px[0] * px[1] * lam1 * lam2]
        r_lam = 1 - lam2 ** 2 - P_((c + e) * (2 - c - e))
        r_pos = y0 * y1 - lam1 * px[0] * px[1] - P_(a * b) - lam1 * P_(b * p ** 2 + a * (1 - p) ** 2)
        r_neg = (y0 * y1 + lam1 * px[0] * px[1]
                 - P_((1 - a) * (1 - b)) + lam1 * P_((1 - b) * p ** 2 + (1 - a) * (1 - p) ** 2))
        residuals = r_det + [r_lam, r_pos, r_neg]
        failing = _nonzero(identities + residuals)
        holds = not failing
        consts = dict(base, **{
            "I_TV": "2 |det P| for a 2x2 joint",
            "det_P_xz": "lambda2 det(P_xy) = px0 px1 lambda1 lambda2",
            "det_P_yz": "y0 y1 lambda2",
            "one_minus_lambda2_sq": "(c + e)(2 - c - e)",
            "y0y1_minus_lambda1_px0px1": "a b + lambda1 (b p^2 + a (1-p)^2)",
            "y0y1_plus_lambda1_px0px1": "(1-a)(1-b) - lambda1 ((1-b) p^2 + (1-a)(1-p)^2)",
        })
        residual = "0" if holds else str(failing[0])
        detail = _failed_proof(failing, "TV") or (
                  "TV DPI for binary x -> y -> z proved symbolically: I_TV(x;z) = |lambda2| I_TV(x;y) <= I_TV(x;y) "
                  "since 1 - lambda2^2 = (c+e)(2-c-e) >= 0; "
                  "I_TV(y;z) - I_TV(x;z) = 2|lambda2|(y0 y1 - |lambda1| px0 px1) "
                  ">= 0 by the two sign-case certificates (every term non-negative on [0,1]^5 in its case).")
        return SymbolicResult("W.L2 (binary DPI, tv)", bool(holds), residual, consts, detail)

    # kl / hellinger: no symbolic proof.
    diff = _binary_mi(_as_exprs(P_xy), kind) - _binary_mi(_as_exprs(P_xz), kind)
    return SymbolicResult(
        f"W.L2 (binary DPI, {kind})", None, str(diff), dict(base),
        f"no symbolic proof for {kind}: I(x;y) - I(x;z) is transcendental in (p, a, b, c, e) and sympy cannot "
        f"certify its sign; the residual returned is that difference, unsimplified. The {kind} DPI is checked "
        f"numerically elsewhere (exact enumeration and hypothesis search in the W.L2 claim and the information tests).")
