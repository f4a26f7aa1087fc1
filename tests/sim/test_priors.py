"""Priors over transition matrices and their spec language: round trips, draws, closed-form
facts checked against draws, users' samplers, and error messages that say what was expected."""
import itertools
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.priors import (
    PRIORS,
    Banded,
    Dirichlet,
    DoublyStochastic,
    Floor,
    Mixture,
    Point,
    PriorError,
    PriorSpecError,
    Sinkhorn,
    Sparse,
    Sticky,
    Symmetrize,
    UserSampler,
    parse_prior,
)

DATA = Path(__file__).parent / "data"
SAMPLERS = DATA / "user_priors.py"

SPECS = [
    "dirichlet(alpha=0.1)",
    "dirichlet(alpha=2, d=4)",
    "floor(dirichlet(alpha=1), gamma=0.3)",
    "point([[0.9, 0.1], [0.2, 0.8]])",
    "symmetrize(point([[0.9, 0.1], [0.2, 0.8]]))",
    "mixture(dirichlet(alpha=1), point([[0.9, 0.1], [0.2, 0.8]]), weights=[0.5, 0.5])",
    "mixture(dirichlet(alpha=1), floor(dirichlet(alpha=0.5), gamma=0.1), weights=[1, 3])",
    "sticky(dirichlet(alpha=1), stay=0.8)",
    "sparse(dirichlet(alpha=0.5), threshold=0.1)",
    "banded(dirichlet(alpha=1), width=1)",
    "banded(dirichlet(alpha=1, d=5), width=1, cyclic=True)",
    "doubly_stochastic(k=2, alpha=0.5, d=4)",
    "sinkhorn(dirichlet(alpha=1))",
    "floor(sparse(dirichlet(alpha=0.5), threshold=0.1), gamma=1e-08)",
    "symmetrize(sticky(floor(dirichlet(alpha=1), gamma=0.2), stay=0.25))",
]


def _bound(p, d=3):
    return p if p.d is not None else p.bind(d)


# -- the spec language ------------------------------------------------------------------------
@pytest.mark.parametrize("spec", SPECS)
def test_spec_round_trips_and_draws_the_same_matrices(spec):
    p = parse_prior(spec)
    q = parse_prior(p.spec())
    assert q.spec() == p.spec()
    a = _bound(p).sample(np.random.default_rng(7), 20)
    b = _bound(q).sample(np.random.default_rng(7), 20)
    assert np.array_equal(a, b)
    assert np.allclose(a.sum(axis=2), 1.0) and a.min() >= 0


def test_issue_examples_parse_as_written():
    assert parse_prior("dirichlet(alpha=0.1)") == Dirichlet(0.1)
    assert parse_prior("floor(dirichlet(alpha=1), gamma=0.3)") == Floor(Dirichlet(1.0), 0.3)
    assert parse_prior("point([[0.9, 0.1], [0.2, 0.8]])") == Point([[0.9, 0.1], [0.2, 0.8]])
    assert parse_prior("symmetrize(point([[0.9, 0.1], [0.2, 0.8]]))") == Symmetrize(Point([[0.9, 0.1], [0.2, 0.8]]))
    lazy = parse_prior("lazy(dirichlet(alpha=1))")
    assert isinstance(lazy, Sticky) and lazy.stay == 0.5


def test_positional_arguments_and_arithmetic_literals():
    assert parse_prior("floor(dirichlet(1), 0.3)") == Floor(Dirichlet(1.0), 0.3)
    p = parse_prior("point([[1/3, 2/3], [0.5, 0.5]])")
    assert p.matrix[0, 0] == 1 / 3 and p.matrix[0, 1] == 2 / 3
    assert parse_prior("  sparse( dirichlet(alpha=0.5) , threshold=1e-1 ) ") == Sparse(Dirichlet(0.5), 0.1)


def test_help_lists_every_prior():
    from sim.priors import spec_help

    text = spec_help()
    for name in PRIORS:
        assert name + "(" in text


@pytest.mark.parametrize("spec, pattern", [
    ("dirichelt(alpha=1)", r"unknown prior 'dirichelt' \(did you mean 'dirichlet'\?\); known priors: banded, dirichlet"),
    ("gaussian(sigma=1)", r"unknown prior 'gaussian'; known priors: .*sampler.*module:function"),
    ("floor(dirichlet(alpha=1), gama=0.3)", r"column 32: floor\(\) got an unknown keyword 'gama'; did you mean 'gamma'\?"),
    ("floor(dirichlet(alpha=1))", r"floor\(\) is missing gamma \(a number in \[0, 1\]\) \(usage: floor\(BASE, gamma=\.\.\.\)\)"),
    ("dirichlet(d=3)", r"dirichlet\(\) is missing alpha \(a positive number\)"),
    ("floor(dirichlet(alpha=1), gamma=[1])", r"column 33: floor\(\): gamma must be a number, got a list"),
    ("floor(dirichlet(alpha=1), gamma='x')", r"gamma must be a number, got the str 'x'"),
    ("floor(dirichlet, gamma=0.3)", r"base must be a prior such as dirichlet\(alpha=1\), got the bare name 'dirichlet' "
                                    r"\(a prior needs parentheses"),
    ("floor(dirichlet(alpha=1), gamma=0.3", r"malformed prior spec .* at column 6: '\(' was never closed"),
    ("floor(dirichlet(alpha=1),, gamma=0.3)", r"malformed prior spec .* at column \d+"),
    ("dirichlet(alpha=-1)", r"alpha must be a positive number, got -1"),
    ("dirichlet(alpha=1, d=2.5)", r"d must be a positive integer, got 2.5"),
    ("sparse(dirichlet(alpha=1), threshold=1.5)", r"threshold must be a number in \[0, 1\], got 1.5"),
    ("point([[0.9, 0.2], [0.2, 0.8]])", r"point\(\.\.\.\) matrix row 0 sums to 1.1"),
    ("point([[0.9, 0.1]])", r"must be square"),
    ("mixture(weights=[1])", r"mixture\(\) needs at least one prior"),
    ("mixture(dirichlet(alpha=1), dirichlet(alpha=2), weights=[1])", r"2 priors but 1 weights"),
    ("mixture(point([[1]]), point([[0.5, 0.5], [0.5, 0.5]]))", r"different sizes d = \[1, 2\]"),
    ("banded(dirichlet(alpha=1), width=1, cyclic=maybe)", r"cyclic must be True or False"),
    ("floor(dirichlet(alpha=1), 0.3, 0.4)", r"takes at most 2 positional argument"),
    ("floor(dirichlet(alpha=1), 0.3, gamma=0.4)", r"got 'gamma' twice"),
    ("floor(*xs)", r"\*arguments are not part of the spec language"),
    ("np.eye(3)", r"expected a prior name such as dirichlet\(\.\.\.\)"),
    ("3", r"expected a prior such as dirichlet\(alpha=0.1\), got the int 3"),
    ("", r"empty prior spec"),
])
def test_malformed_specs_say_what_was_expected(spec, pattern):
    with pytest.raises(PriorSpecError, match=pattern):
        parse_prior(spec)


def test_errors_point_at_the_column_with_a_caret():
    with pytest.raises(PriorSpecError) as e:
        parse_prior("floor(dirichlet(alpha=1), gamma=2)")
    lines = str(e.value).splitlines()
    assert lines[-2].strip() == "floor(dirichlet(alpha=1), gamma=2)"
    assert lines[-1].index("^") - lines[-2].index("f") == len("floor(dirichlet(alpha=1), gamma=")


def test_the_spec_is_never_evaluated(tmp_path):
    marker = tmp_path / "pwned"
    for spec in (f"__import__('pathlib').Path({str(marker)!r}).touch()",
                 f"floor(__import__('os').system('touch {marker}'), gamma=0.1)",
                 "dirichlet(alpha=(lambda: 1)())"):
        with pytest.raises(PriorSpecError):
            parse_prior(spec)
    assert not marker.exists()


# -- draws and closed-form facts ----------------------------------------------------------------
def test_existing_priors_draw_exactly_as_before():
    """Claims' numbers must not move: Floor/Dirichlet/Sparse/Mixture draws are the documented formulas."""
    rng = np.random.default_rng(3)
    rows = rng.dirichlet(np.ones(3), size=(4, 3))
    assert np.array_equal(Floor(Dirichlet(1.0), 0.2).bind(3).sample(np.random.default_rng(3), 4),
                          0.2 / 3 + 0.8 * (rows / rows.sum(axis=-1, keepdims=True)))
    rng = np.random.default_rng(5)
    rows = rng.dirichlet(np.full(3, 0.5), size=(4, 3))
    rows = rows / rows.sum(axis=-1, keepdims=True)
    rows[rows < 0.1] = 0.0
    assert np.array_equal(Sparse(Dirichlet(0.5), 0.1).bind(3).sample(np.random.default_rng(5), 4),
                          rows / rows.sum(axis=-1, keepdims=True))


def test_sticky_lazy_banded_doubly_stochastic_sinkhorn_draws():
    rng = np.random.default_rng(0)
    s = Sticky(Dirichlet(1.0), 0.6).bind(4).sample(rng, 200)
    assert np.all(np.einsum("kii->ki", s) >= 0.6)
    b = Banded(Dirichlet(1.0), 1).bind(5).sample(rng, 200)
    far = np.abs(np.subtract.outer(np.arange(5), np.arange(5))) > 1
    assert np.all(b[:, far] == 0) and np.all(b[:, ~far] > 0)
    c = Banded(Dirichlet(1.0), 1, cyclic=True).bind(5).sample(rng, 200)
    assert np.all(c[:, 0, 4] > 0) and np.all(c[:, 0, 2] == 0)
    for prior in (DoublyStochastic(2, 1.0, 4), DoublyStochastic(5, 0.3, 3), Sinkhorn(Dirichlet(1.0)).bind(4)):
        x = prior.sample(rng, 200)
        assert np.allclose(x.sum(axis=1), 1.0, atol=1e-9), prior.spec()  # columns
    one = DoublyStochastic(1, 1.0, 4).sample(rng, 50)
    assert set(np.unique(one)) == {0.0, 1.0}  # k = 1: permutation matrices


def test_banded_row_with_no_mass_in_band_is_named():
    p = Banded(Point([[0.0, 0.0, 1.0], [0.5, 0.5, 0.0], [0.0, 0.5, 0.5]]), width=1)
    with pytest.raises(PriorError, match=r"banded: draw 0 row 0 has no mass within width 1"):
        p.sample(np.random.default_rng(0), 2)


def test_sparse_with_a_large_threshold_keeps_each_rows_largest_entry():
    base = Dirichlet(1.0, 4).sample(np.random.default_rng(0), 300)
    x = Sparse(Dirichlet(1.0), 0.3).bind(4).sample(np.random.default_rng(0), 300)
    assert np.allclose(x.sum(axis=2), 1) and np.all(x.max(axis=2) > 0)
    one_hot = np.all(base < 0.3, axis=2)
    assert one_hot.any()
    assert np.all(x[one_hot].max(axis=-1) == 1.0)
    assert np.array_equal(x[one_hot].argmax(axis=-1), base[one_hot].argmax(axis=-1))


@pytest.mark.parametrize("spec, d", [
    ("sticky(dirichlet(alpha=1), stay=0.6)", 3),
    ("floor(dirichlet(alpha=0.5), gamma=0.4)", 4),
    ("symmetrize(point([[0.9, 0.1], [0.2, 0.8]]))", 2),
    ("doubly_stochastic(k=2)", 4),
    ("mixture(sticky(dirichlet(alpha=1), stay=0.5), floor(dirichlet(alpha=1), gamma=0.5), weights=[1, 3])", 3),
    ("symmetrize(sticky(dirichlet(alpha=2), stay=0.3))", 3),
])
def test_closed_form_mean_agrees_with_draws(spec, d):
    p = parse_prior(spec)
    p = p if p.d is not None else p.bind(d)
    exact = p.mean_matrix()
    assert exact is not None
    x = p.sample(np.random.default_rng(11), 4000)
    se = x.std(axis=0, ddof=1) / np.sqrt(len(x))
    assert np.all(np.abs(x.mean(axis=0) - exact) <= 5 * se + 1e-12)
    # a deliberately wrong mean is caught by the same comparison
    assert not np.all(np.abs(x.mean(axis=0) - (exact + 0.06 * (np.eye(d) - 1 / d))) <= 5 * se + 1e-12)


def test_entry_floor_and_infimum():
    f = parse_prior("floor(dirichlet(alpha=1), gamma=0.3)").bind(3)
    assert f.entry_floor() == pytest.approx(0.1) and f.entry_infimum() == pytest.approx(0.1)
    x = f.sample(np.random.default_rng(0), 2000)
    assert x.min() >= 0.1 - 1e-15 and x.min() < 0.1 + 0.01  # the infimum is tight
    assert Dirichlet(1.0, 3).entry_infimum() == 0.0
    assert Sticky(Dirichlet(1.0), 0.8).bind(3).entry_infimum() == 0.0
    assert Sticky(Floor(Dirichlet(1.0), 0.5), 0.3).bind(3).entry_infimum() == pytest.approx(0.7 * 0.5 / 3)
    assert Sparse(Dirichlet(1.0), 0.1).bind(3).entry_infimum() == 0.0
    assert Banded(Floor(Dirichlet(1.0), 0.5), 1).bind(4).entry_infimum() == 0.0
    assert Banded(Floor(Dirichlet(1.0), 0.5), 3).bind(4).entry_infimum() == pytest.approx(0.5 / 4)  # covers all
    assert Symmetrize(Point([[0.9, 0.1], [0.2, 0.8]])).entry_infimum() == pytest.approx(0.1)
    assert UserSampler(f"{SAMPLERS}:floored").entry_infimum() is None  # unknown: estimated by the audit


def test_symmetry_known_in_closed_form_or_exactly():
    assert Dirichlet(1.0, 3).symmetric() is True
    assert Symmetrize(Point([[0.9, 0.1], [0.2, 0.8]])).symmetric() is True
    assert Point([[0.9, 0.1], [0.2, 0.8]]).symmetric() is False
    assert Point([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]]).symmetric() is True
    eps = np.zeros((3, 3))
    eps[0, :2] = [0.2, -0.2]
    A, B = np.full((3, 3), 1 / 3) + eps, np.full((3, 3), 1 / 3) - eps
    assert Mixture([(1, Point(A)), (1, Point(B))]).symmetric() is False
    # the orbit of an atom, with equal weights, is symmetric
    orbit = Symmetrize(Point(A)).atoms()
    assert Mixture([(w, Point(m)) for w, m in zip(*orbit)]).symmetric() is True
    assert Sticky(Dirichlet(1.0), 0.5).bind(3).symmetric() is True
    assert UserSampler(f"{SAMPLERS}:floored").symmetric() is None


def test_symmetrize_atoms_are_the_relabelling_orbit():
    M = np.array([[0.5, 0.3, 0.2], [0.1, 0.6, 0.3], [0.2, 0.2, 0.6]])
    w, mats = Symmetrize(Point(M)).atoms()
    assert len(w) == 6 and np.isclose(w.sum(), 1)
    expect = {np.round(M[np.ix_(p, p)], 12).tobytes() for p in itertools.permutations(range(3))}
    assert {np.round(m, 12).tobytes() for m in mats} == expect


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 4), st.floats(0.05, 3.0), st.floats(0.0, 1.0))
def test_every_constructor_draws_row_stochastic_matrices(d, alpha, weight):
    for prior in (Dirichlet(alpha, d), Floor(Dirichlet(alpha), weight).bind(d), Sticky(Dirichlet(alpha), weight).bind(d),
                  Banded(Dirichlet(alpha), 1).bind(d), DoublyStochastic(2, alpha, d), Symmetrize(Dirichlet(alpha, d))):
        x = prior.sample(np.random.default_rng(0), 5)
        assert x.shape == (5, d, d) and np.allclose(x.sum(axis=2), 1) and x.min() >= 0


def test_strategy_draws_from_the_prior():
    from hypothesis import find

    p = Floor(Dirichlet(1.0), 0.3).bind(3)
    pi = find(p.strategy(), lambda m: m[0, 0] > 0.5)
    assert pi.min() >= 0.1 - 1e-12
    point = Point([[0.9, 0.1], [0.2, 0.8]])
    assert np.array_equal(find(point.strategy(), lambda m: True), point.matrix)


# -- users' samplers ---------------------------------------------------------------------------
def test_user_sampler_from_a_file_and_from_a_module(monkeypatch):
    p = parse_prior(f"{SAMPLERS}:floored")
    assert isinstance(p, UserSampler) and p.d == 3
    assert parse_prior(p.spec()).spec() == p.spec()  # sampler('...') round-trips
    x = p.sample(np.random.default_rng(0), 50)
    assert x.min() >= 0.1
    monkeypatch.syspath_prepend(str(DATA))
    q = parse_prior("user_priors:floored")
    assert np.array_equal(q.sample(np.random.default_rng(1), 3), p.sample(np.random.default_rng(1), 3))
    with pytest.raises(PriorError, match=r"draws 3 x 3 matrices; cannot use it with d = 4"):
        p.bind(4)


@pytest.mark.parametrize("fn, pattern", [
    ("raises", r"sampler .*user_priors.py:raises raised RuntimeError: my sampler is broken \(when asked for n = 1 draws\)"),
    ("not_stochastic", r"draw 0 of sampler .*:not_stochastic row 1 sums to 1.2"),
    ("wrong_shape", r"returned shape \(1, 3, 2, 3\) when asked for n = 1 draw; expected \(n, d, d\)"),
    ("not_an_array", r"returned str, not an array of numbers"),
    ("no_such_function", r"has no function 'no_such_function'"),
    ("florred", r"did you mean 'floored'\?"),
])
def test_broken_user_samplers_name_the_problem(fn, pattern):
    with pytest.raises(PriorError, match=pattern):
        parse_prior(f"{SAMPLERS}:{fn}")


def test_user_sampler_that_breaks_on_a_later_draw_names_the_draw_and_row():
    p = parse_prior(f"{SAMPLERS}:breaks_later")
    with pytest.raises(PriorError, match=re.escape("draw 7 of sampler(") + r".*\[2, 1\] = -0.25 is negative \(row 2\)"):
        p.sample(np.random.default_rng(0), 10)


def test_missing_sampler_file_and_module():
    with pytest.raises(PriorError, match=r"sampler file nope/none.py does not exist"):
        parse_prior("nope/none.py:f")
    with pytest.raises(PriorError, match=r"sampler module 'no_such_module_xyz' cannot be imported"):
        parse_prior("no_such_module_xyz:f")


def test_sparse_keeps_an_entry_whose_infimum_is_exactly_the_threshold():
    """Sparse zeroes entries strictly below the threshold. floor(dirichlet(1), gamma=0.5) on 2 states has every
    entry >= 0.25 = its essential infimum, so a threshold of 0.25 zeroes nothing and no entry's infimum is 0;
    a threshold just above 0.25 zeroes entries that come near 0.25 with positive probability."""
    base = Floor(Dirichlet(1.0, 2), 0.5)
    assert np.all(base.entry_infima() == 0.25)
    at = Sparse(base, 0.25)
    assert at.sample(np.random.default_rng(0), 500).min() >= 0.25
    assert not np.any(at.entry_infima() == 0) and at.entry_infimum() != 0.0
    assert at.entry_floor() == 0.25
    above = Sparse(base, 0.26)
    assert np.all(above.entry_infima() == 0) and above.entry_infimum() == 0.0


def test_symmetrizing_a_band_keeps_its_zeros_off_the_diagonal():
    """A width-1 band on 3 states zeroes pi[0, 2] and pi[2, 0] in every draw; relabelling moves those zeros to
    other off-diagonal places, so the symmetrised prior has off-diagonal infima 0 (and no gamma > 0), even
    though the band's other infima are unknown."""
    prior = Symmetrize(Banded(Dirichlet(1.0, 3), 1))
    draws = prior.sample(np.random.default_rng(0), 200)
    off = ~np.eye(3, dtype=bool)
    assert np.all((draws[:, off] == 0).sum(axis=1) == 2)  # two zeros per draw, always off the diagonal
    e = prior.entry_infima()
    assert np.all(e[off] == 0)
    assert prior.entry_infimum() == 0.0
