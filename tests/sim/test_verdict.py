import math

import numpy as np
import pytest

from sim.verdict import (Assumption, Number, Outcome, Verdict, combine_verdicts, compare, tier_verdict,
                         to_jsonable)



def test_compare_margin_is_strict_and_two_sided():
    assert compare(0.31, 0.0, stderr=0.1, z=3) is Outcome.HELD
    assert compare(0.29, 0.0, stderr=0.1, z=3) is Outcome.UNDECIDED
    assert compare(-0.29, 0.0, stderr=0.1, z=3) is Outcome.UNDECIDED
    assert compare(-0.31, 0.0, stderr=0.1, z=3) is Outcome.VIOLATED
    assert compare(0.31, 0.0, stderr=0.1, z=3, direction="<=") is Outcome.VIOLATED
    # exact numbers: a round-off tolerance, nothing else
    assert compare(1e-13, 0.0, tol=1e-12) is Outcome.UNDECIDED
    assert compare(2e-12, 0.0, tol=1e-12) is Outcome.HELD


def test_compare_measures_the_difference_to_a_nonzero_threshold():
    assert compare(1.0, 3.0) is Outcome.VIOLATED and compare(4.0, 3.0) is Outcome.HELD
    assert compare(4.0, 3.0, direction="<=") is Outcome.VIOLATED and compare(1.0, 3.0, direction="<=") is Outcome.HELD


def test_compare_a_difference_exactly_at_the_margin_is_undecided():
    # margin = z * stderr = 2 * 0.5 = 1.0 exactly in binary: "beyond the margin" is strict on both sides
    assert compare(1.0, 0.0, stderr=0.5, z=2.0) is Outcome.UNDECIDED
    assert compare(-1.0, 0.0, stderr=0.5, z=2.0) is Outcome.UNDECIDED
    assert compare(1.0, 0.0, tol=1.0) is Outcome.UNDECIDED


def test_compare_uses_the_student_t_margin_with_few_degrees_of_freedom():
    # z = 3 alone: margin 0.9 < 1 (HELD); with 2 degrees of freedom the t quantile is ~19.2: margin ~5.8
    assert compare(1.0, 0.0, stderr=0.3, z=3.0) is Outcome.HELD
    assert compare(1.0, 0.0, stderr=0.3, z=3.0, df=2) is Outcome.UNDECIDED
    assert compare(1.0, 0.0, stderr=0.3, z=3.0, df=0) is Outcome.UNDECIDED  # one sample: spread unknown


def test_compare_rejects_an_unknown_direction_by_name():
    with pytest.raises(ValueError, match="direction must be '>=' or '<=', got '>'"):
        compare(1.0, 0.0, direction=">")


def test_compare_rejects_nan():
    with pytest.raises(ValueError, match="NaN"):
        compare(float("nan"), 0.0)


def test_tier_verdict_semantics():
    ok = Assumption("a", True)
    bad = Assumption("b", False)
    unknown = Assumption("c", None)
    assert tier_verdict([ok], Outcome.HELD) is Verdict.PASS
    assert tier_verdict([ok], Outcome.VIOLATED) is Verdict.FAIL
    assert tier_verdict([ok], Outcome.UNDECIDED) is Verdict.INCONCLUSIVE
    # a failed assumption wins over whatever the conclusion did
    assert tier_verdict([ok, bad], Outcome.HELD) is Verdict.ASSUMPTION_UNMET
    assert tier_verdict([ok, bad], Outcome.VIOLATED) is Verdict.ASSUMPTION_UNMET
    assert tier_verdict([unknown], Outcome.HELD) is Verdict.INCONCLUSIVE


def test_combine_verdicts_most_severe_wins():
    V = Verdict
    assert combine_verdicts([V.PASS, V.PASS]) is V.PASS
    assert combine_verdicts([V.PASS, V.INCONCLUSIVE]) is V.INCONCLUSIVE
    assert combine_verdicts([V.INCONCLUSIVE, V.ASSUMPTION_UNMET]) is V.ASSUMPTION_UNMET
    assert combine_verdicts([V.ASSUMPTION_UNMET, V.FAIL, V.PASS]) is V.FAIL
    assert combine_verdicts([V.FAIL, V.ERROR]) is V.ERROR
    assert combine_verdicts([]) is V.NOT_RUN


def test_number_requires_honest_error():
    with pytest.raises(ValueError):
        Number("x", 1.0, stderr=-1.0)
    with pytest.raises(ValueError):
        Number("x", 1.0, kind="guess")
    n = Number("p", 0.25, stderr=0.01, n=400, seed=7, tolerance=0.05, kind="montecarlo")
    text = n.format()
    assert "±" in text and "n=400" in text and "seed=7" in text


def test_to_jsonable_handles_numpy_inf_and_enums():
    out = to_jsonable({"a": np.float64(math.inf), "b": np.arange(3), "v": Verdict.PASS, "t": (1, 2)})
    assert out == {"a": "inf", "b": [0, 1, 2], "v": "PASS", "t": [1, 2]}


def test_guard_with_controls_names_every_standing_control_and_keeps_the_budget():
    from sim.verdict import Control, TierResult, guard_with_controls

    controls = [Control("a", "wrong", Verdict.PASS, "gap 0.1"), Control("b", "wrong", Verdict.FAIL, "gap -3"),
                Control("c", "wrong", Verdict.INCONCLUSIVE, "gap 0")]
    res = guard_with_controls(TierResult("montecarlo", Verdict.PASS, Outcome.HELD, "held", controls=controls,
                                         budget="more seeds"))
    assert (res.verdict, res.conclusion) == (Verdict.INCONCLUSIVE, Outcome.UNDECIDED)
    assert res.summary == ("the check cannot tell this mechanism from a wrong one: a -> PASS (gap 0.1); "
                           "c -> INCONCLUSIVE (gap 0). Before the controls: PASS (held)")
    assert res.budget == "more seeds; a criterion (or a budget) under which every control FAILs"


def test_headline_lists_every_finding_that_does_not_pass():
    from sim.verdict import Finding, FindingKind, headline

    found = [Finding(FindingKind.UNSTATED, "r1", Verdict.FAIL, "x fails"),
             Finding(FindingKind.UNSTATED, "r2", Verdict.PASS, "y holds"),
             Finding(FindingKind.UNSTATED, "r3", Verdict.INCONCLUSIVE, "z unclear")]
    assert headline(Verdict.PASS, found) == "PASS (findings: x fails; z unclear)"
    assert headline(Verdict.PASS, found[:2]) == "PASS (finding: x fails)"
    assert headline(Verdict.FAIL, found[1:2]) == "FAIL"


def test_welch_df_with_spreadless_estimated_parts_falls_back_to_the_normal_quantile():
    from sim.verdict import welch_df

    # the estimated part has variance 0: the known-well variance (0.5) carries all: None (normal quantile)
    assert welch_df([(0.5, None), (0.0, 3)]) is None
    assert welch_df([(0.0, None), (0.0, 3), (0.0, 5)]) == 3.0  # nothing varies: the fewest degrees of freedom
