"""theory.certified: the branch-and-bound proves true inequalities on their whole domain, returns a box
on which a false one fails everywhere, says UNDECIDED with the largest open box when the budget runs
out, refuses (or leaves undecided, never proves) a domain that meets a singular set it does not handle,
and brackets an extreme when asked; boxes and domains are rounded outward."""
import math
from fractions import Fraction

import mpmath
import pytest
from flint import arb

from theory import intervals as iv
from theory.certified import (Box, Domain, Inequality, Region, certify, round_down, round_up, two_state_domain)
from theory.errors import TheoryError


def _line(names=("x",), lo=(0,), hi=(1,), **kw):
    return Domain(names, lo, hi, {"what": "a test domain"}, **kw)


def test_round_down_and_up_bracket_exact_numbers():
    for x in (Fraction(1, 20), Fraction(1, 3), Fraction(-7, 10), 0.1, 3):
        lo, hi = round_down(x), round_up(x)
        assert Fraction(lo) <= Fraction(x) <= Fraction(hi)
        assert math.nextafter(lo, math.inf) >= hi or lo == hi
    assert round_down(0.5) == round_up(0.5) == 0.5


def test_a_dropped_rounding_mode_leaves_the_domain_uncovered(monkeypatch):
    """The domain's float box must cover its exact ends: rounding 1/20 to nearest (a float above 1/20)
    would leave the pi with entries in [1/20, float(1/20)) out of the proof."""
    import theory.certified as c

    dom = two_state_domain(Fraction(1, 20), {})
    assert Fraction(dom.box().lo[0]) <= Fraction(1, 20) and Fraction(dom.box().hi[0]) >= Fraction(19, 20)
    monkeypatch.setattr(c, "round_down", lambda x: float(Fraction(x)))
    assert Fraction(dom.box().lo[0]) > Fraction(1, 20)


def test_boxes_split_into_halves_that_cover_them():
    box = Box((0.0, 0.1), (1.0, 0.2))
    a, b = box.split((1.0, 1.0))
    assert a.hi[0] == b.lo[0] and a.lo == box.lo and b.hi == box.hi  # split along the widest side
    c, d = Box((0.001, 0.5), (0.9, 0.6)).split((1.0, 1.0), logit=(True, False))
    assert c.hi[0] == d.lo[0] == pytest.approx(1 / (1 + math.sqrt((1 - 0.001) / 0.001 * 0.1 / 0.9)), rel=1e-9)
    e, f = box.split((1.0, 1.0), smear=(0.0, 5.0))  # the side with the largest smear goes first
    assert e.hi[1] == f.lo[1] == pytest.approx(0.15)
    assert Box((0.5,), (math.nextafter(0.5, 1),)).split((1.0,)) is None
    with pytest.raises(TheoryError):
        Box((1.0,), (0.0,))


def test_a_true_inequality_is_proved_on_the_whole_domain():
    dom = _line(("x", "y"), (0, 0), (1, 1))
    q = Inequality("x^2 + y^2 + 0.1 >= x y", "", dom, lambda x, y: x * x + y * y + 0.1 - x * y, limit=0, sense=">=",
                   strict=True)
    cert = certify(q, max_boxes=5000)
    assert cert.status == "PROVED" and cert.open == 0 and cert.certified >= 1
    assert cert.precision == 53 and cert.seconds >= 0
    rec = cert.record()
    assert rec["status"] == "PROVED" and "x in [0, 1]" in rec["domain in words"]
    assert 0 < cert.bracket[0] <= 0.1  # the certified boxes' smallest lower end: a proved bound on the infimum


def test_a_false_inequality_gets_a_box_on_which_it_fails_everywhere():
    dom = _line(("x",), (0,), (2,))
    q = Inequality("x^2 <= 3", "x^2 <= 3 on [0, 2]", dom, lambda x: x * x, limit=3, sense="<=",
                   describe=lambda p: {"x^2": p[0] ** 2})
    cert = certify(q, max_boxes=5000)
    assert cert.status == "COUNTEREXAMPLE"
    lo, hi = cert.counterexample["box"]["x"]
    with mpmath.workdps(50):  # fails at every point of the box: check its ends and its centre
        for x in (lo, hi, (lo + hi) / 2):
            assert mpmath.mpf(x) ** 2 > 3
    assert cert.counterexample["x^2"] > 3 and dom.contains((cert.counterexample["centre"]["x"],))


def test_the_budget_running_out_is_undecided_with_the_largest_open_box():
    dom = _line()
    q = Inequality("x <= 1 (tight at 1)", "", dom, lambda x: x, limit=1, sense="<=", strict=True)
    cert = certify(q, max_boxes=50)
    assert cert.status == "UNDECIDED" and cert.open >= 1
    assert cert.largest_open["box"]["x"][1] == 1.0 and "budget" in cert.reason


def test_excluded_neighbourhoods_are_skipped_and_named():
    eps = Fraction(1, 100)
    excl = Region("|x - 1/2| < 1/100", meets=lambda b: b.lo[0] < 0.51 and b.hi[0] > 0.49,
                  covers=lambda b: 0.49 < b.lo[0] and b.hi[0] < 0.51, across=0)
    dom = _line(excluded=(excl,))
    q = Inequality("|x - 1/2| > 1/200", "", dom, lambda x: abs(x - 0.5), limit=eps / 2, sense=">=", strict=True)
    cert = certify(q, max_boxes=5000)
    assert cert.status == "PROVED" and cert.excluded >= 1
    assert "excluded: |x - 1/2| < 1/100" in dom.text()


def _raw_sdpi_margin(a, b):
    """W Lemma 3 at d = 2 in its plain form: alpha I(x_h; x_pa) - I(x_h; x_h') from the entropy form of
    the mutual information (both vanish at lam = 0, so no enclosure of the difference closes there)."""
    P1, P2 = iv.two_state_joint(a, b, 1), iv.two_state_joint(a, b, 2)
    _, m0, m1 = iv.two_state(a, b)
    alpha = 1 - iv.imin(m0, m1) * 2 * iv.imin(a, b, 1 - a, 1 - b)
    return alpha * iv.mutual_information(P1) - iv.mutual_information(P2)


def test_a_singular_set_without_handling_is_refused_never_proved():
    """The acceptance test of issue 45: a domain that includes the singular set lam = 0 (pi of rank one,
    where both sides vanish), bounded without handling it, is REFUSED; declared away (a domain that says
    nothing of it), the search cannot close the boxes on it and is UNDECIDED, never PROVED."""
    unhandled = two_state_domain(Fraction(1, 20), {})
    q = Inequality("W Lemma 3, plain form", "", unhandled, _raw_sdpi_margin, limit=0, sense=">=")
    refused = certify(q, max_boxes=2000)
    assert refused.status == "REFUSED" and "singular set" in refused.reason and refused.boxes == 0
    silent = Domain(unhandled.names, unhandled.lower, unhandled.upper, {"d": "2"}, logit=(True, True))
    cert = certify(Inequality("same, singular set not declared", "", silent, _raw_sdpi_margin, limit=0, sense=">="),
                   max_boxes=3000)
    assert cert.status == "UNDECIDED" and cert.open > 0


def test_a_handled_singular_set_is_proved_through_the_reduced_form():
    """The same lemma with the vanishing factor divided out (theory.intervals.sdpi_ratio_at): PROVED, with its
    supremum bracketed."""
    dom = two_state_domain(Fraction(1, 20), {}, handling="divided by lam^2", coordinates="lam, m")

    def ratio(lam, m):
        a, b = (1 - lam) * (1 - m), (1 - lam) * m
        alpha = 1 - iv.imin(m, 1 - m) * 2 * iv.imin(a, b, 1 - a, 1 - b)
        return iv.sdpi_ratio_at(lam, (1 - m) / m, 2, alpha)

    cert = certify(Inequality("W Lemma 3, reduced", "", dom, ratio, limit=1, centred=True), max_boxes=20000, tight=True)
    assert cert.status == "PROVED"
    lo, hi = cert.bracket
    assert lo <= 0.807 <= hi and hi - lo <= 1e-3 * max(1, lo) + 1e-12  # sup at the BSC corner, 0.80696


def test_tight_mode_brackets_an_interior_maximum():
    q = Inequality("x (1 - x) <= 1/4 + 1/100", "", _line(), lambda x: x * (1 - x), limit=Fraction(26, 100),
                   centred=True)
    cert = certify(q, max_boxes=5000, tight=True, rel_gap=1e-6)
    lo, hi = cert.bracket
    assert cert.status == "PROVED" and lo <= 0.25 <= hi and hi - lo <= 1e-6
    assert cert.extras["best point"]["x"] == pytest.approx(0.5, abs=1e-3)


def test_the_mean_value_form_needs_fewer_boxes_than_the_plain_one():
    def f(x, y):
        return (x - y) * (x - y) + x * y - x * y * x  # dependency-heavy

    dom = _line(("x", "y"), (0, 0), (1, 1))
    plain = certify(Inequality("plain", "", dom, f, limit=Fraction(11, 10)), max_boxes=20000)
    centred = certify(Inequality("centred", "", dom, f, limit=Fraction(11, 10), centred=True), max_boxes=20000)
    assert plain.status == centred.status == "PROVED" and centred.boxes < plain.boxes


def test_lam_m_coordinates_drop_what_lies_outside_the_floor():
    dom = two_state_domain(Fraction(1, 10), {}, handling="h", coordinates="lam, m")
    assert dom.contains((0.0, 0.5)) and not dom.contains((0.79, 0.05))  # b = 0.21 * 0.05 < 1/10
    (outside,) = dom.outside
    assert outside.covers(Box((0.78, 0.1), (0.79, 0.101))) and not outside.covers(Box((0.0, 0.4), (0.1, 0.5)))
    cert = certify(Inequality("entries >= 1/10", "", dom, lambda lam, m: iv.imin((1 - lam) * m, (1 - lam) * (1 - m)),
                              limit=Fraction(1, 20), sense=">=", centred=True), max_boxes=20000)
    assert cert.status == "PROVED" and cert.extras["boxes outside the domain"] > 0


def test_the_search_is_deterministic():
    q = Inequality("x^2 <= 3", "", _line(("x",), (0,), (2,)), lambda x: x * x, limit=3)
    a, b = certify(q, max_boxes=500), certify(q, max_boxes=500)
    assert (a.status, a.boxes, a.counterexample) == (b.status, b.boxes, b.counterexample)


def test_bad_definitions_are_refused():
    with pytest.raises(TheoryError):
        Domain(("x",), (1,), (0,), {})
    with pytest.raises(TheoryError):
        Inequality("q", "", _line(), lambda x: x, sense="<")
    with pytest.raises(TheoryError):
        certify(Inequality("q", "", _line(), lambda x: x), max_boxes=0)
    with pytest.raises(TheoryError):
        two_state_domain(Fraction(1, 2), {})
    with pytest.raises(TheoryError):
        Domain(("p",), (0,), (1,), {}, logit=(True,))  # a logit side must lie inside (0, 1)


def test_a_formula_that_breaks_down_on_a_box_leaves_it_open():
    """log x <= 1 holds on [0, 1], but arb's log of a ball reaching 0 is not finite: the boxes at 0 stay
    open (never certified), however small."""
    q = Inequality("log x <= 1", "", _line(), lambda x: x.log(), limit=1)
    assert q.enclose(Box((0.0,), (0.5,))) == (-math.inf, math.inf)
    cert = certify(q, max_boxes=300)
    assert cert.status == "UNDECIDED" and cert.largest_open["box"]["x"][0] == 0.0
    assert q.enclose(Box((0.5,), (0.5,)))[0] == pytest.approx(math.log(0.5))
    assert arb(0.5).log().contains(arb(math.log(0.5)))
